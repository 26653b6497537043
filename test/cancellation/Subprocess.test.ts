import * as fs from "node:fs"
import * as path from "node:path"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Exit, Fiber, Layer, Redacted, Schema, Stream } from "effect"
import * as Subprocess from "../../src/cancellation/Subprocess.ts"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { childPids, fixtures, isGone, isGroupGone, nap, tempDir, waitReady } from "../support/processes.ts"

const child = path.join(fixtures, "child.mjs")

/** The node fixture in one of its modes (see test/fixtures/child.mjs). */
const node = (mode: string, ...args: ReadonlyArray<string>): Subprocess.Spec => ({
  command: process.execPath,
  args: [child, mode, ...args]
})

/**
 * The node fixture with SIGTERM ignored from before node starts (an ignored signal stays
 * ignored across exec): on a loaded machine node can take longer to set its own handler
 * than a short timeout gives it, and the child would then die of the SIGTERM.
 */
const ignoringFromStart = (mode: string, ...args: ReadonlyArray<string>): Subprocess.Spec => ({
  command: "/bin/sh",
  args: ["-c", `trap '' TERM; exec "$0" "$@"`, process.execPath, child, mode, ...args]
})

const GRACE = 200

const cgroupsHere = (await Effect.runPromise(Subprocess.cgroupSupport)).available

const failureOf = <A>(exit: Exit.Exit<A, Failure.Failure>): Failure.Failure => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
  assert.strictEqual(error?._tag, "Some")
  if (error?._tag !== "Some") throw new Error("no typed failure")
  return error.value
}

/** Runs `spec` in the background, waits until it is ready, interrupts it and reports what happened. */
const interruptWhenReady = (mode: string, extra: Subprocess.Options = {}) =>
  Effect.gen(function* () {
    const ready = path.join(tempDir(), "ready")
    const settled: Array<Subprocess.Settled> = []
    const fiber = yield* Effect.forkChild(
      Subprocess.run(node(mode, "--ready", ready), {
        graceMillis: GRACE,
        onSettled: (s) => settled.push(s),
        ...extra
      })
    )
    const pid = yield* waitReady(ready)
    const start = performance.now()
    yield* Fiber.interrupt(fiber)
    const millis = performance.now() - start
    return { pid, settled, millis, exit: fiber.pollUnsafe() }
  })

/**
 * Runs `script` under `sh -c`, blocks the event loop while it ends (the kernel knows, Node
 * has not run the exit's handler yet), then interrupts the call: what the stop recorded.
 */
const endsWhileBusy = (script: string, cgroup: boolean) =>
  Effect.gen(function* () {
    const settled: Array<Subprocess.Settled> = []
    let pid = 0
    const options: Subprocess.Options = {
      graceMillis: 2000,
      cgroup,
      onSpawn: (p) => {
        pid = p
      },
      onSettled: (s) => settled.push(s)
    }
    const fiber = yield* Effect.forkChild(Subprocess.run({ command: "/bin/sh", args: ["-c", script] }, options))
    while (pid === 0) yield* nap(2)
    yield* Effect.sync(() => {
      const end = performance.now() + 1_500
      while (performance.now() < end) {}
    })
    yield* Fiber.interrupt(fiber)
    return { pid, settled }
  })

describe("Subprocess.run", () => {
  it.live("R5.2 a child that ignores SIGTERM is SIGKILLed after the grace period and reaped", () =>
    Effect.gen(function* () {
      const { pid, settled, millis } = yield* interruptWhenReady("ignore-term")
      assert.strictEqual(settled.length, 1)
      const s = settled[0]
      assert.strictEqual(s?.settlement, "outcome_unknown")
      assert.deepStrictEqual(s?.signals, ["SIGTERM", "SIGKILL"])
      assert.strictEqual(s?.reaped, true)
      assert.strictEqual(s?.pid, pid)
      assert.match(s?.detail ?? "", /SIGKILLed and reaped/)
      // Reaped before the interruption completed: no process, not even a zombie, is left.
      assert.isTrue(isGone(pid), `pid ${pid} is still in the process table`)
      assert.isTrue(isGroupGone(pid))
      // It took the grace period, and not much more.
      assert.isAtLeast(millis, GRACE)
      assert.isBelow(millis, GRACE + 150)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live(
    "R5.2 R4.1 a wall clock set back during the grace holds no SIGKILL off: the child is killed and reaped (review 149)",
    () =>
      Effect.gen(function* () {
        const ready = path.join(tempDir(), "ready")
        const settled: Array<Subprocess.Settled> = []
        const fiber = yield* Effect.forkChild(
          Subprocess.run(ignoringFromStart("ignore-term", "--ready", ready), {
            graceMillis: GRACE,
            cgroup: false,
            onSettled: (s) => settled.push(s)
          })
        )
        const pid = yield* waitReady(ready)
        const now = Date.now
        const start = performance.now()
        const stopping = yield* Effect.forkChild(Fiber.interrupt(fiber))
        yield* nap(20)
        // An NTP step, a VM resumed: the system clock goes back an hour while the grace runs.
        yield* Effect.acquireUseRelease(
          Effect.sync(() => {
            Date.now = () => now() - 3_600_000
          }),
          () => Fiber.join(stopping),
          () =>
            Effect.sync(() => {
              Date.now = now
            })
        )
        // Before, effect's kill waited for the wall clock to pass the grace (an hour): no SIGKILL, the child left running.
        assert.isTrue(isGone(pid), `pid ${pid} is still running`)
        assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM", "SIGKILL"])
        assert.strictEqual(settled[0]?.reaped, true)
        assert.isBelow(performance.now() - start, GRACE + 1_000)
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live(
    "R5.2 R4.1 a wall clock set forward during the grace sends no early SIGKILL recorded as a SIGTERM stop (review 149)",
    () =>
      Effect.gen(function* () {
        const settled: Array<Subprocess.Settled> = []
        let pid = 0
        // The leader exits on SIGTERM; what it started ignores it, and has to be killed.
        const script = `sh -c "trap '' TERM; while :; do sleep 0.05; done" & trap 'exit 0' TERM; while :; do sleep 0.05; done`
        const fiber = yield* Effect.forkChild(
          Subprocess.run(
            { command: "/bin/sh", args: ["-c", script] },
            {
              graceMillis: 600,
              cgroup: false,
              onSpawn: (p) => {
                pid = p
              },
              onSettled: (s) => settled.push(s)
            }
          )
        )
        while (pid === 0) yield* nap(5)
        yield* nap(150)
        const now = Date.now
        const stopping = yield* Effect.forkChild(Fiber.interrupt(fiber))
        yield* nap(20)
        yield* Effect.acquireUseRelease(
          Effect.sync(() => {
            Date.now = () => now() + 3_600_000
          }),
          () => Fiber.join(stopping),
          () =>
            Effect.sync(() => {
              Date.now = now
            })
        )
        // Before: SIGKILL at once by the wall clock, recorded `cancelled`, "stopped on SIGTERM".
        assert.strictEqual(settled[0]?.settlement, "outcome_unknown", settled[0]?.detail)
        assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM", "SIGKILL"])
        assert.isTrue(isGroupGone(pid))
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 a child that exits on SIGTERM is recorded cancelled, before the grace period ends", () =>
    Effect.gen(function* () {
      const { pid, settled, millis } = yield* interruptWhenReady("exit-on-term")
      assert.strictEqual(settled[0]?.settlement, "cancelled")
      assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM"])
      assert.isTrue(isGone(pid))
      assert.isBelow(millis, GRACE)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R5.2 the grace period runs in real time: a TestClock that never moves cannot stall the reclamation", () =>
    Effect.gen(function* () {
      // it.effect provides a TestClock; the child still gets exactly its real grace period.
      const { pid, settled, millis } = yield* interruptWhenReady("ignore-term")
      assert.strictEqual(settled[0]?.settlement, "outcome_unknown")
      assert.isTrue(isGone(pid))
      assert.isAtLeast(millis, GRACE)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 interruption is only an interruption: the effect ends interrupted, not failed", () =>
    Effect.gen(function* () {
      const { exit } = yield* interruptWhenReady("exit-on-term")
      assert.isTrue(exit !== undefined && Exit.isFailure(exit) && Exit.hasInterrupts(exit))
      assert.isFalse(exit !== undefined && Exit.isFailure(exit) && Exit.hasFails(exit))
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 a child that had already exited is recorded completed; nothing is signalled", () =>
    Effect.gen(function* () {
      // The shell exits at once; a `sleep` it moved to a session of its own keeps stdout
      // open, so the call waits (up to 250 ms) for the rest of the output and is
      // interrupted meanwhile. The child's group is empty by then. (Kept to its process
      // group: a cgroup would hold the sleep, see SubprocessContainment.test.ts.)
      const escaped = path.join(tempDir(), "escaped")
      const settled: Array<Subprocess.Settled> = []
      let pid = 0
      const fiber = yield* Effect.forkChild(
        Subprocess.run(
          { command: "/bin/sh", args: ["-c", `setsid sleep 2 & echo $! > ${escaped}`] },
          {
            graceMillis: GRACE,
            cgroup: false,
            onSpawn: (p) => {
              pid = p
            },
            onSettled: (s) => settled.push(s)
          }
        )
      )
      const sleeper = yield* waitReady(escaped)
      // Until the sleep has left (setsid), it is still in the shell's group.
      while (pid === 0 || !isGroupGone(pid)) yield* nap(2)
      yield* Fiber.interrupt(fiber)
      process.kill(sleeper, "SIGKILL") // it left the group on purpose: not ours to supervise
      assert.strictEqual(settled[0]?.settlement, "completed")
      assert.deepStrictEqual(settled[0]?.signals, [])
      assert.isTrue(isGroupGone(pid))
    }).pipe(Effect.provide(NodeServices.layer))
  )

  for (const cgroup of [true, false]) {
    it.live(
      `R5.2 R3.8 a leader that SIGKILL ended before the stop died mid-action: outcome_unknown, what it left stopped on SIGTERM (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          // The shell SIGKILLs itself (as the OOM killer would); the sleep it started keeps
          // stdout open, so the call is still reading when it is interrupted.
          const ready = path.join(tempDir(), "ready")
          const settled: Array<Subprocess.Settled> = []
          let pid = 0
          const fiber = yield* Effect.forkChild(
            Subprocess.run(
              { command: "/bin/sh", args: ["-c", `sleep 5 & echo $! > ${ready}; kill -KILL $$`] },
              {
                graceMillis: 2000,
                cgroup,
                onSpawn: (p) => {
                  pid = p
                },
                onSettled: (s) => settled.push(s)
              }
            )
          )
          yield* waitReady(ready)
          yield* nap(100)
          yield* Fiber.interrupt(fiber)
          assert.isTrue(isGroupGone(pid))
          // Its own death says nothing was undone: never `cancelled`.
          assert.strictEqual(settled[0]?.settlement, "outcome_unknown", settled[0]?.detail)
          assert.include(settled[0]?.detail, "had died of SIGKILL before the stop")
          assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM"])
        }).pipe(Effect.provide(NodeServices.layer))
    )

    it.live(
      `R5.2 R3.8 a child that exited but left a process running in its group: that process is stopped, the child's action completed (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          // The shell exits at once, but the `sleep` it started keeps stdout open; the call
          // is interrupted while it waits for the rest of the output. The sleep is orphaned:
          // once it dies on SIGTERM only PID 1 can reap it, which some containers do late or
          // never (here too, possibly). It has stopped all the same, in its cgroup or kept to
          // its process group, well before the grace period ends. The shell had exited 0: its
          // action completed (review 86: it was recorded cancelled, which invites a repeat).
          const grace = 2_000
          const settled: Array<Subprocess.Settled> = []
          let pid = 0
          const fiber = yield* Effect.forkChild(
            Subprocess.run(
              { command: "/bin/sh", args: ["-c", "sleep 5 & echo started"] },
              {
                graceMillis: grace,
                cgroup,
                onSpawn: (p) => {
                  pid = p
                },
                onSettled: (s) => settled.push(s)
              }
            )
          )
          while (pid === 0 || !isGone(pid)) yield* nap(2)
          assert.isFalse(isGroupGone(pid), "its sleep still runs")
          const start = performance.now()
          yield* Fiber.interrupt(fiber)
          const millis = performance.now() - start
          // Something was still running and stopped on the signal; the command itself had finished.
          assert.strictEqual(settled[0]?.settlement, "completed")
          assert.include(settled[0]?.detail, "had already exited; what it left running stopped on SIGTERM")
          assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM"])
          assert.strictEqual(settled[0]?.containment, cgroup && cgroupsHere ? "cgroup" : "process_group")
          assert.isTrue(isGroupGone(pid), "the sleep it left behind was stopped with its group")
          assert.isBelow(millis, grace / 2)
        }).pipe(Effect.provide(NodeServices.layer))
    )

    it.live(
      `R5.2 R3.8 a shell that exited 137 (its command SIGKILLed) before the stop is an unknown outcome, never completed (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          // The shell's command dies of SIGKILL (as the OOM killer would): the shell says so, 137.
          // The sleep it started is still running when the call is interrupted.
          const { pid, settled } = yield* endsWhileBusy("sleep 5 & sleep 0.2; sh -c 'kill -KILL $$'; exit $?", cgroup)
          assert.isTrue(isGroupGone(pid))
          // Review 89: it was `completed`, "had already exited".
          assert.strictEqual(settled[0]?.settlement, "outcome_unknown", settled[0]?.detail)
          assert.include(settled[0]?.detail, "had died of SIGKILL before the stop")
        }).pipe(Effect.provide(NodeServices.layer))
    )

    it.live(
      `R5.2 R3.8 a command that exited 0 while the event loop was busy is completed, not stopped by the SIGTERM after (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          const { pid, settled } = yield* endsWhileBusy("sleep 0.2; exit 0", cgroup)
          assert.isTrue(isGroupGone(pid))
          // Review 89: it was `cancelled`, "stopped on SIGTERM".
          assert.strictEqual(settled[0]?.settlement, "completed", settled[0]?.detail)
        }).pipe(Effect.provide(NodeServices.layer))
    )
  }

  it.live("R5.2 a grandchild holding the pipes delays the result by at most the output drain time", () =>
    Effect.gen(function* () {
      let pid = 0
      const start = performance.now()
      const result = yield* Subprocess.run(
        { command: "/bin/sh", args: ["-c", "sleep 5 & echo started"] },
        {
          graceMillis: GRACE,
          onSpawn: (p) => {
            pid = p
          }
        }
      )
      assert.strictEqual(result.stdout, "started\n")
      assert.isBelow(performance.now() - start, 2000)
      assert.isTrue(isGroupGone(pid))
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 a child that exits 0 returns its output, exit code and elapsed time", () =>
    Effect.gen(function* () {
      const settled: Array<Subprocess.Settled> = []
      const result = yield* Subprocess.run(node("finish", "100"), { onSettled: (s) => settled.push(s) })
      assert.deepStrictEqual(settled, [], "onSettled is only for interruptions")
      assert.strictEqual(result.exitCode, 0)
      assert.strictEqual(result.stdout, "done\n")
      assert.strictEqual(result.stderr, "")
      assert.isAtLeast(result.elapsedMillis, 100)
      assert.isTrue(isGone(result.pid))
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 stdin is written and closed; env extends the parent's environment", () =>
    Effect.gen(function* () {
      const echoed = yield* Subprocess.run({ ...node("cat"), stdin: "hello\nworld" })
      assert.strictEqual(echoed.stdout, "hello\nworld")
      const env = yield* Subprocess.run({ ...node("env", "SUBPROCESS_TEST_VAR"), env: { SUBPROCESS_TEST_VAR: "x1" } })
      assert.strictEqual(env.stdout, "x1")
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 output over the limit stops the child and fails with output_too_large", () =>
    Effect.gen(function* () {
      let pid = 0
      const exit = yield* Effect.exit(
        Subprocess.run(node("flood"), {
          maxOutputBytes: 64 * 1024,
          graceMillis: GRACE,
          onSpawn: (p) => {
            pid = p
          }
        })
      )
      const failure = failureOf(exit)
      assert.instanceOf(failure, Failure.Permanent)
      assert.strictEqual(failure.code, "output_too_large")
      assert.strictEqual(failure.source, "subprocess")
      assert.isTrue(isGone(pid))
      // Exactly at the limit is fine.
      const atLimit = yield* Subprocess.run(node("flood", String(64 * 1024)), { maxOutputBytes: 64 * 1024 })
      assert.strictEqual(atLimit.stdout.length, 64 * 1024)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 a non-zero exit is a Permanent failure with the exit code; stderr stays in the diagnostic", () =>
    Effect.gen(function* () {
      const failure = failureOf(yield* Effect.exit(Subprocess.run(node("exit", "3"))))
      assert.instanceOf(failure, Failure.Permanent)
      assert.strictEqual(failure.code, "exit_3")
      assert.strictEqual(failure.category, "exit")
      assert.match(failure.diagnostic ?? "", /failing on purpose with code 3/)
      assert.notMatch(failure.hint, /failing on purpose/)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 a crash of the child is a typed failure: killed by SIGSEGV, or an uncaught exception", () =>
    Effect.gen(function* () {
      const segv = failureOf(yield* Effect.exit(Subprocess.run(node("segv"))))
      assert.instanceOf(segv, Failure.Permanent)
      assert.strictEqual(segv.code, "killed_SIGSEGV")
      assert.strictEqual(segv.category, "crash")
      const thrown = failureOf(yield* Effect.exit(Subprocess.run(node("throw"))))
      assert.strictEqual(thrown.code, "exit_1")
      assert.match(thrown.diagnostic ?? "", /the child crashed on purpose/)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  for (const cgroup of [true, false]) {
    it.live(
      `R5.2 a command (or a script's interpreter) that is not found or not executable is a typed spawn_failed failure (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          const dir = tempDir()
          const plain = path.join(dir, "not-executable.sh")
          fs.writeFileSync(plain, "#!/bin/sh\necho hi\n", { mode: 0o644 })
          // Scripts whose interpreter is missing or not executable: the same in both containments (review 86).
          const noInterpreter = path.join(dir, "no-interpreter.sh")
          fs.writeFileSync(noInterpreter, "#!/nonexistent/interpreter -x\necho hi\n", { mode: 0o755 })
          const plainInterpreter = path.join(dir, "plain-interpreter.sh")
          fs.writeFileSync(plainInterpreter, `#! ${plain}\necho hi\n`, { mode: 0o755 })
          const cases: ReadonlyArray<readonly [Subprocess.Spec, string]> = [
            [{ command: "/nonexistent/no-such-tool" }, "NotFound"],
            [{ command: "no-such-tool-on-path-7f3a" }, "NotFound"],
            [{ command: plain }, "PermissionDenied"],
            [{ command: dir }, "PermissionDenied"],
            [{ command: noInterpreter }, "NotFound"],
            [{ command: plainInterpreter }, "PermissionDenied"],
            // What Node's spawn throws instead of failing, and a working directory that is not there.
            [{ command: "" }, "NotFound"],
            [{ command: "true", cwd: plain }, "NotADirectory"],
            [{ command: "./rel.sh", cwd: path.join(dir, "missing") }, "NotFound"]
          ]
          for (const [spec, reason] of cases) {
            const failure = failureOf(yield* Effect.exit(Subprocess.run(spec, { cgroup })))
            assert.instanceOf(failure, Failure.Permanent, spec.command)
            assert.strictEqual(failure.code, "spawn_failed", spec.command)
            assert.strictEqual(failure.category, "spawn")
            assert.include(failure.hint, `(${reason})`, spec.command)
            // The hint names the command, never the directory it was looked up in.
            assert.notInclude(failure.hint, dir)
            if (spec.cwd?.endsWith("missing")) assert.include(failure.diagnostic, "working directory", spec.command)
          }
          // A command without a slash is looked up on the child's own PATH, and keeps its name as argv[0].
          const onPath = yield* Subprocess.run({ command: "cat", args: ["/proc/self/cmdline"] }, { cgroup })
          assert.strictEqual(onPath.stdout, "cat\0/proc/self/cmdline\0")
          const noPath = failureOf(
            yield* Effect.exit(Subprocess.run({ command: "sh", args: ["-c", "true"], env: { PATH: dir } }, { cgroup }))
          )
          assert.strictEqual(noPath.code, "spawn_failed")
        }).pipe(Effect.provide(NodeServices.layer))
    )
  }

  it.live("R5.2 a command that closes its stdin or its stdout early still ends by its exit", () =>
    Effect.gen(function* () {
      const big = "x".repeat(4 * 1024 * 1024)
      for (let i = 0; i < 5; i++) {
        // It reads one byte of 4 MiB and exits: the rest of the write fails, which is not the child's failure.
        const head = yield* Subprocess.run({ command: "head", args: ["-c", "1"], stdin: big })
        assert.strictEqual(head.stdout, "x")
        const ignoring = yield* Subprocess.run({ command: "/bin/sh", args: ["-c", "exec 0<&-; echo ok"], stdin: big })
        assert.strictEqual(ignoring.stdout, "ok\n")
      }
      // It closes stdout and goes on: the call waits for its exit, and keeps its stderr.
      const closed = yield* Subprocess.run({
        command: "/bin/sh",
        args: ["-c", "exec 1>&-; sleep 0.2; echo late >&2; exit 4"]
      }).pipe(Effect.exit)
      const failure = failureOf(closed)
      assert.strictEqual(failure.code, "exit_4")
      assert.match(failure.diagnostic ?? "", /late/)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live(
    "R3.1 R5.2 Redacted arguments and environment values reach the child, but not its output (in any form: review 188) or failures",
    () =>
      Effect.gen(function* () {
        const token = "sk-live-0123456789abcdef"
        const arg = "sk-arg-fedcba9876543210"
        const spec: Subprocess.Spec = {
          command: "/bin/sh",
          args: ["-c", 'printf "%s %s" "$TOKEN" "$1"; printf "%s" "$TOKEN" >&2; exit "$2"', "sh", Redacted.make(arg)],
          env: { TOKEN: Redacted.make(token) }
        }
        // The child got both values (it compares them itself), and the output shows neither.
        const check = yield* Subprocess.run({
          ...spec,
          args: ["-c", `[ "$TOKEN" = ${token} ] && [ "$1" = ${arg} ] && echo same`, "sh", Redacted.make(arg)]
        })
        assert.strictEqual(check.stdout, "same\n")
        const ok = yield* Subprocess.run({ ...spec, args: [...(spec.args ?? []), "0"] })
        assert.strictEqual(ok.stdout, "<redacted> <redacted>")
        assert.strictEqual(ok.stderr, "<redacted>")
        // Nor as a command writes it: URL-encoded, or in base64 after `user:` (review 188).
        const encoded = yield* Subprocess.run({
          ...spec,
          args: [
            "-c",
            `printf '%s\n' "$1" "$2"`,
            "sh",
            `https://x.test/?k=${encodeURIComponent(`${token}/+`)}`,
            `Basic ${Buffer.from(`me:${token}/+`).toString("base64")}`
          ],
          env: { TOKEN: Redacted.make(`${token}/+`) }
        })
        assert.strictEqual(encoded.stdout, "https://x.test/?k=<redacted>\nBasic <redacted>\n")
        // A long secret (a service account's JSON) beside a long ordinary output: the output stays,
        // the secret goes (review 191: the whole output came back as `<redacted>`).
        const account = JSON.stringify({
          type: "service_account",
          private_key: `-----BEGIN-----\n${"k".repeat(1_800)}\n`
        })
        const log = yield* Subprocess.run({
          command: "/bin/sh",
          args: [
            "-c",
            'i=0; while [ $i -lt 4000 ]; do echo "compiling module $i of the build"; i=$((i+1)); done; printf "%s" "$ACCOUNT"'
          ],
          env: { ACCOUNT: Redacted.make(account) }
        })
        assert.isAbove(log.stdout.length, 100_000)
        assert.include(log.stdout, "compiling module 3999 of the build")
        assert.isTrue(log.stdout.endsWith("<redacted>"))
        assert.notInclude(log.stdout, "service_account")
        const failed = failureOf(yield* Effect.exit(Subprocess.run({ ...spec, args: [...(spec.args ?? []), "3"] })))
        assert.strictEqual(failed.code, "exit_3")
        assert.notInclude(`${failed.hint} ${failed.diagnostic}`, token)
        // A spawn error names the command line with the argument redacted.
        const unstartable = failureOf(
          yield* Effect.exit(
            Subprocess.run({ command: "/bin/sh", args: [Redacted.make(arg)], cwd: "/nonexistent" }, { cgroup: false })
          )
        )
        assert.strictEqual(unstartable.code, "spawn_failed")
        assert.notInclude(`${unstartable.hint} ${unstartable.diagnostic}`, arg)
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 invalid options are refused", () =>
    Effect.gen(function* () {
      const failure = failureOf(yield* Effect.exit(Subprocess.run(node("finish", "0"), { maxOutputBytes: 0 })))
      assert.strictEqual(failure.code, "invalid_options")
      assert.throws(
        () =>
          Subprocess.tool({
            name: "bad",
            description: "x",
            input: Schema.Struct({}),
            output: Schema.String,
            command: () => node("finish", "0"),
            parse: (r) => r.stdout,
            graceMillis: -1
          }),
        Tool.InvalidToolDefinition
      )
      // Longer than a timer can wait (2^31 - 1 ms), a grace would be none: refused, as is one over a day.
      for (const graceMillis of [2 ** 31, 86_400_001, Number.NaN]) {
        const refused = failureOf(yield* Effect.exit(Subprocess.run(node("finish", "0"), { graceMillis })))
        assert.strictEqual(refused.code, "invalid_options")
        assert.include(refused.hint, "graceMillis must be a number from 0 to 86400000")
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )

  for (const cgroup of [true, false]) {
    it.live(
      `R5.2 seeds exercise, subprocess level: finished, stopped on the signal, ignored it (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          // 1. A child that finishes in 100 ms: the call completes with its output.
          const finished = yield* Subprocess.run(node("finish", "100"), { graceMillis: GRACE, cgroup })
          assert.strictEqual(finished.stdout, "done\n")
          // 2. One that stops on the signal: cancelled.
          const stopped = yield* interruptWhenReady("exit-on-term", { cgroup })
          // 3. One that ignores it: outcome unknown, killed and reaped, after the grace period.
          const ignored = yield* interruptWhenReady("ignore-term", { cgroup })
          assert.deepStrictEqual(
            [stopped.settled[0]?.settlement, ignored.settled[0]?.settlement],
            ["cancelled", "outcome_unknown"]
          )
          assert.isAtLeast(ignored.millis, GRACE)
          assert.isTrue(isGone(finished.pid) && isGone(stopped.pid) && isGone(ignored.pid))
          const expected = cgroup && cgroupsHere ? "cgroup" : "process_group"
          assert.deepStrictEqual(
            [finished.containment, stopped.settled[0]?.containment, ignored.settled[0]?.containment],
            [expected, expected, expected]
          )
        }).pipe(Effect.provide(NodeServices.layer))
    )
  }
})

// ---------------------------------------------------------------------------------
// In a run
// ---------------------------------------------------------------------------------

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const Input = Schema.Struct({ mode: Schema.String, ready: Schema.String })

const childTool = (
  options: {
    readonly timeout?: Duration.Input
    readonly pids?: Array<number>
    readonly sideEffect?: Tool.SideEffect
  } = {}
) =>
  Subprocess.tool({
    name: "child",
    description: "runs the test child",
    input: Input,
    output: Schema.String,
    command: ({ mode, ready }) => (mode === "ignore-term" ? ignoringFromStart : node)(mode, "--ready", ready),
    parse: (result) => result.stdout,
    sideEffect: options.sideEffect ?? "external",
    graceMillis: GRACE,
    timeout: options.timeout,
    onSpawn: (pid) => options.pids?.push(pid)
  })

const interruptedEvents = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.flatMap((e) => (e._tag === "tool.interrupted" ? [e] : []))

describe("Subprocess.tool in a run", () => {
  it.live(
    "R3.8 R5.2 a command that exited 0 and may change the world, whose parse breaks, is in doubt, not a failure (review 149)",
    () =>
      Effect.gen(function* () {
        const paid = path.join(tempDir(), "paid")
        const tool = (sideEffect: Tool.SideEffect) =>
          Subprocess.tool({
            name: "pay",
            description: "Pays.",
            input: Schema.Struct({}),
            output: Schema.String,
            command: () => ({ command: "/bin/sh", args: ["-c", `echo paid > ${paid}; echo '{not json'`] }),
            parse: (result) => JSON.parse(result.stdout) as string,
            sideEffect
          })
        const run = (sideEffect: Tool.SideEffect) =>
          Run.run({ goal: "pay", tools: [tool(sideEffect)] }).pipe(
            Effect.provide(withScript([ScriptedModel.toolCall("pay", {}, "p1"), ScriptedModel.finalAnswer("paid")]))
          )
        const external = yield* run("external")
        assert.isTrue(fs.existsSync(paid))
        // Before: failed tool_error, a permanent tool_defect, no side effect and nothing pending.
        assert.deepStrictEqual([external.status, external.stopReason], ["unknown_outcome", "unknown_outcome"])
        assert.deepStrictEqual(
          external.pendingActions.map((p) => p.callId),
          ["p1"]
        )
        assert.include(external.pendingActions[0]?.detail, "exited with code 0, so its action took place")
        // A command that changes nothing did nothing to doubt: its broken parse is the tool's own failure.
        const read = yield* run("read")
        assert.deepStrictEqual(read.pendingActions, [])
        const failed = read.timeline.find((e) => e._tag === "tool.failed")
        assert.strictEqual(
          failed?._tag === "tool.failed" ? failed.error.failure?.classification : undefined,
          "permanent"
        )
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 cancelling a run kills a child that ignores SIGTERM, and tool.interrupted says outcome_unknown", () => {
    const dir = tempDir()
    const ready = path.join(dir, "ready")
    return Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [childTool()] })
      const pid = yield* waitReady(ready)
      const result = yield* handle.cancel
      assert.strictEqual(result.status, "cancelled")
      assert.strictEqual(result.stopReason, "cancelled")
      const interrupted = interruptedEvents(result.timeline)
      assert.strictEqual(interrupted.length, 1)
      assert.strictEqual(interrupted[0]?.settlement, "outcome_unknown")
      assert.match(interrupted[0]?.detail ?? "", new RegExp(`pid ${pid} .*SIGKILLed`))
      assert.isTrue(isGone(pid), "the child is gone when the result is available")
    }).pipe(
      Effect.scoped,
      Effect.provide(withScript([ScriptedModel.toolCall("child", { mode: "ignore-term", ready })]))
    )
  })

  it.live("R5.2 cancelling a run stops a child that exits on SIGTERM, and tool.interrupted says cancelled", () => {
    const ready = path.join(tempDir(), "ready")
    return Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [childTool({ sideEffect: "read" })] })
      const pid = yield* waitReady(ready)
      const result = yield* handle.cancel
      assert.strictEqual(result.status, "cancelled")
      assert.strictEqual(interruptedEvents(result.timeline)[0]?.settlement, "cancelled")
      assert.deepStrictEqual(result.pendingActions, [])
      assert.isTrue(isGone(pid))
    }).pipe(
      Effect.scoped,
      Effect.provide(withScript([ScriptedModel.toolCall("child", { mode: "exit-on-term", ready })]))
    )
  })

  it.live("R5.2 R3.8 an external command that exits on SIGTERM may have acted: outcome_unknown, pending", () => {
    const ready = path.join(tempDir(), "ready")
    const told: Array<Tool.Settlement> = []
    return Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [childTool()] })
      const pid = yield* waitReady(ready)
      const result = yield* handle.cancel
      assert.strictEqual(result.status, "cancelled")
      const [interrupted] = interruptedEvents(result.timeline)
      assert.strictEqual(interrupted?.settlement, "outcome_unknown")
      assert.match(interrupted?.detail ?? "", /nothing is left running, but the external action .* may or may not/)
      assert.deepStrictEqual(
        result.pendingActions.map((a) => a.callId),
        ["pays"]
      )
      assert.isTrue(isGone(pid))
      // Its own `onSettled` gets the child's record as it is, and may say better.
      const knowing = Subprocess.tool({
        name: "child",
        description: "runs the test child",
        input: Input,
        output: Schema.String,
        command: ({ mode, ready }) => node(mode, "--ready", ready),
        parse: (result) => result.stdout,
        graceMillis: GRACE,
        onSettled: (settled, context) => {
          told.push(settled.settlement)
          context.settle("cancelled", "the service says nothing was taken")
        }
      })
      const again = path.join(tempDir(), "ready")
      const second = yield* Effect.gen(function* () {
        const handle = yield* Run.start({ goal: "x", tools: [knowing] })
        yield* waitReady(again)
        return yield* handle.cancel
      }).pipe(
        Effect.scoped,
        Effect.provide(withScript([ScriptedModel.toolCall("child", { mode: "exit-on-term", ready: again })]))
      )
      assert.deepStrictEqual(told, ["cancelled"])
      assert.strictEqual(interruptedEvents(second.timeline)[0]?.detail, "the service says nothing was taken")
      assert.deepStrictEqual(second.pendingActions, [])
    }).pipe(
      Effect.scoped,
      Effect.provide(withScript([ScriptedModel.toolCall("child", { mode: "exit-on-term", ready }, "pays")]))
    )
  })

  it.live("R5.2 a call interrupted after its process exited is recorded completed", () => {
    const ready = path.join(tempDir(), "ready")
    let parsing = false
    const slowParse = Subprocess.tool({
      name: "child",
      description: "runs the test child, then parses forever",
      input: Input,
      output: Schema.String,
      command: ({ mode, ready }) => node(mode, "--ready", ready),
      parse: () =>
        Effect.sync(() => {
          parsing = true
        }).pipe(Effect.andThen(Effect.never)),
      graceMillis: GRACE
    })
    return Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [slowParse] })
      const pid = yield* waitReady(ready)
      while (!parsing) yield* nap(5)
      const result = yield* handle.cancel
      const interrupted = interruptedEvents(result.timeline)
      assert.strictEqual(interrupted[0]?.settlement, "completed")
      assert.isTrue(isGone(pid))
    }).pipe(Effect.scoped, Effect.provide(withScript([ScriptedModel.toolCall("child", { mode: "finish", ready })])))
  })

  it.live("R5.2 seeds exercise in a run: one call completed, one cancelled, one outcome unknown", () => {
    const dir = tempDir()
    const file = (name: string) => path.join(dir, name)
    const pids: Array<number> = []
    return Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [childTool({ pids, sideEffect: "read" })], concurrency: 3 })
      yield* waitReady(file("stops"))
      yield* waitReady(file("ignores"))
      // The first call finishes on its own (100 ms); then the run is cancelled.
      yield* handle.events.pipe(
        Stream.filter((e) => e._tag === "tool.succeeded"),
        Stream.take(1),
        Stream.runDrain
      )
      const result = yield* handle.cancel
      assert.strictEqual(result.status, "cancelled")
      const succeeded = result.timeline.flatMap((e) => (e._tag === "tool.succeeded" ? [e.callId] : []))
      assert.deepStrictEqual(succeeded, ["finishes"])
      const settled = Object.fromEntries(interruptedEvents(result.timeline).map((e) => [e.callId, e.settlement]))
      assert.deepStrictEqual(settled, { stops: "cancelled", ignores: "outcome_unknown" })
      assert.strictEqual(pids.length, 3)
      for (const pid of pids) assert.isTrue(isGroupGone(pid), `pid ${pid} outlived the run`)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        withScript([
          ScriptedModel.toolCalls(
            ["child", { mode: "finish", ready: file("finishes") }, "finishes"],
            ["child", { mode: "exit-on-term", ready: file("stops") }, "stops"],
            ["child", { mode: "ignore-term", ready: file("ignores") }, "ignores"]
          )
        ])
      )
    )
  })

  it.live("R4 R5.2 at the run deadline the result appears only after the child is reaped", () => {
    const ready = path.join(tempDir(), "ready")
    const pids: Array<number> = []
    return Effect.gen(function* () {
      const start = performance.now()
      const result = yield* Run.run({ goal: "x", tools: [childTool({ pids })], time: { run: "400 millis" } })
      const millis = performance.now() - start
      // An external call cut off by the deadline is an unknown outcome (R3.8); either way
      // the run stopped at its deadline.
      assert.include(["run_timeout", "unknown_outcome"], result.stopReason)
      assert.strictEqual(interruptedEvents(result.timeline)[0]?.settlement, "outcome_unknown")
      assert.isTrue(pids[0] !== undefined && isGone(pids[0]))
      // The deadline, then the grace period, then the kill: not much more.
      assert.isAtLeast(millis, 400 + GRACE)
      assert.isBelow(millis, 400 + GRACE + 300)
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("child", { mode: "ignore-term", ready })])))
  })

  it.live("R4 R5.2 a tool timeout stops the child; the call is an unknown outcome, not a retry", () => {
    const ready = path.join(tempDir(), "ready")
    const pids: Array<number> = []
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [childTool({ timeout: "300 millis", pids })] })
      const interrupted = interruptedEvents(result.timeline)
      assert.strictEqual(interrupted[0]?.settlement, "outcome_unknown")
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.failure?.classification : undefined, "unknown")
      assert.strictEqual(pids.length, 1)
      assert.isTrue(pids[0] !== undefined && isGone(pids[0]))
    }).pipe(
      Effect.provide(
        withScript([ScriptedModel.toolCall("child", { mode: "ignore-term", ready }), ScriptedModel.finalAnswer("x")])
      )
    )
  })

  it.live(
    "R5.2 zero orphan processes after 100 cancelled runs",
    () => {
      const dir = tempDir()
      const shellTool = Subprocess.tool({
        name: "shell",
        description: "runs a shell child that starts a sleep",
        input: Schema.Struct({ script: Schema.String, ready: Schema.String }),
        output: Schema.String,
        command: ({ script, ready }) => ({ command: "/bin/sh", args: [path.join(fixtures, script), ready] }),
        parse: (result) => result.stdout,
        sideEffect: "read",
        // Long enough for a child that exits on SIGTERM to do so on a loaded machine.
        graceMillis: 500
      })
      const before = childPids()
      const one = (i: number) => {
        const script = i % 2 === 0 ? "ignore-term.sh" : "exit-on-term.sh"
        const ready = path.join(dir, `ready-${i}`)
        return Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "x", tools: [shellTool] })
          const pid = yield* waitReady(ready)
          const result = yield* handle.cancel
          return { pid, script, result }
        }).pipe(
          Effect.scoped,
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("shell", { script, ready })]))
        )
      }
      return Effect.gen(function* () {
        const runs = yield* Effect.forEach(
          Array.from({ length: 100 }, (_, i) => i),
          one,
          { concurrency: 10 }
        )
        assert.strictEqual(runs.length, 100)
        for (const { pid, script, result } of runs) {
          assert.strictEqual(result.status, "cancelled")
          const settlement = interruptedEvents(result.timeline)[0]?.settlement
          assert.strictEqual(settlement, script === "ignore-term.sh" ? "outcome_unknown" : "cancelled")
          // Neither the shell nor the sleep it started is left.
          assert.isTrue(isGroupGone(pid), `the process group of pid ${pid} outlived its run`)
        }
        const after = childPids()
        const left = [...after].filter((pid) => !before.has(pid))
        assert.deepStrictEqual(left, [])
      }).pipe(Effect.provide(NodeServices.layer))
    },
    60_000
  )

  it.live(
    "R5.2 R3.8 calls cut off before their command was started never ran: the batch's stop is the other call's tool error",
    () =>
      Effect.gen(function* () {
        const spawned = new Set<string>()
        const commands = Array.from({ length: 4 }, (_, k) =>
          Subprocess.tool({
            name: `sp${k}`,
            description: "Sleeps",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "external",
            graceMillis: 200,
            command: () => ({ command: "/bin/sh", args: ["-c", "sleep 5"] }),
            parse: (r) => r.stdout,
            onSpawn: (_pid, context) => {
              spawned.add(context.callId)
            }
          })
        )
        // Fails for good at once: the batch stops while the others have not started their commands.
        const broken = Tool.make({
          name: "broken",
          description: "Fails",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          handler: () =>
            Effect.fail(
              new Failure.Permanent({ source: "tool", category: "other", code: "broken", attempts: 1, hint: "broken" })
            )
        })
        const tools = [...commands, broken]
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(...tools.map((t) => [t.name, {}] as const))
            : ScriptedModel.finalAnswer("x")
        )
        const result = yield* Run.run({ goal: "x", tools, concurrency: 5 }).pipe(
          Effect.provide(Layer.mergeAll(model, NodeServices.layer))
        )
        const neverStarted = result.timeline.filter(
          (e): e is Event.Of<"tool.interrupted"> => e._tag === "tool.interrupted" && !spawned.has(e.callId)
        )
        // Before, each was outcome_unknown ("may or may not have taken effect"), and the run ended unknown_outcome.
        for (const e of neverStarted) assert.strictEqual(e.settlement, "cancelled", e.detail)
        if (spawned.size === 0) assert.strictEqual(result.stopReason, "tool_error", result.detail)
        assert.isTrue(result.pendingActions.every((p) => spawned.has(p.callId)))
      })
  )
})
