/**
 * What holds a supervised subprocess and everything it starts (R5.2): a cgroup of its
 * own where the machine allows it, its process group elsewhere, and in both cases a
 * supervisor that stops it when its host dies. Real processes, real cgroups (the cgroup
 * tests run only where `Subprocess.cgroupSupport` finds them available, and say so).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema } from "effect"
import * as SubprocessCgroup from "../../src/cancellation/internal/SubprocessCgroup.ts"
import * as SubprocessSpawn from "../../src/cancellation/internal/SubprocessSpawn.ts"
import * as Subprocess from "../../src/cancellation/Subprocess.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import {
  eventually,
  fixtures,
  isGroupGone,
  killMarked,
  markedPids,
  nap,
  sessionLeaders,
  tempDir,
  waitReady
} from "../support/processes.ts"

const support = await Effect.runPromise(Subprocess.cgroupSupport)
const cgroups = support.available
if (!support.available) console.log(`cgroup tests skipped: ${support.reason}`)

/** The cgroups this process made that still exist. */
const leftCgroups = (): ReadonlyArray<string> =>
  support.available
    ? fs.readdirSync(support.parent).filter((name) => name.startsWith(`effect-agent-runtime-${process.pid}-`))
    : []

const withMarker = (script: string, marker: string): Subprocess.Spec => ({
  command: "/bin/sh",
  args: ["-c", script],
  env: { EAR_TEST_MARKER: marker }
})

// ---------------------------------------------------------------------------------
// Finding the cgroup tree
// ---------------------------------------------------------------------------------

describe("Subprocess.cgroupSupport", () => {
  const unified = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate"
  const hybrid = [
    "30 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755",
    "31 30 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw",
    "32 30 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory"
  ].join("\n")

  it("R5.2 locates this process's cgroup in a unified, a hybrid or a container's cgroup2 mount", () => {
    assert.deepStrictEqual(SubprocessCgroup.locate("0::/system.slice/app.service\n", unified), {
      dir: "/sys/fs/cgroup/system.slice/app.service"
    })
    assert.deepStrictEqual(SubprocessCgroup.locate("4:memory:/x\n0::/\n", hybrid), { dir: "/sys/fs/cgroup/unified" })
    // A container whose mount shows only its own subtree (the root field is not "/").
    const container = "40 35 0:30 /docker/abc /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw"
    assert.deepStrictEqual(SubprocessCgroup.locate("0::/docker/abc/app\n", container), {
      dir: "/sys/fs/cgroup/app"
    })
    // Escaped spaces in the mount point.
    const spaced = "29 23 0:26 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw"
    assert.deepStrictEqual(SubprocessCgroup.locate("0::/a\n", spaced), { dir: "/mnt/my cgroups/a" })
  })

  it("R5.2 says why there is no cgroup tree: cgroup v1 only, none mounted, outside the mount", () => {
    const v1 = "32 30 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory"
    assert.match(reasonOf(SubprocessCgroup.locate("4:memory:/x\n", v1)), /no cgroup v2 hierarchy/)
    assert.match(reasonOf(SubprocessCgroup.locate("0::/x\n", v1)), /no cgroup2 file system is mounted/)
    const other = "40 35 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw"
    assert.match(reasonOf(SubprocessCgroup.locate("0::/docker/other\n", other)), /outside every mounted cgroup2/)
  })

  it.effect("R5.2 on this machine: available with a parent directory and a kill method, or a reason", () =>
    Effect.gen(function* () {
      const found = yield* Subprocess.cgroupSupport
      if (found.available) {
        assert.isTrue(fs.existsSync(path.join(found.parent, "cgroup.procs")))
        assert.include(["cgroup.kill", "freeze"], found.kill)
      } else {
        assert.isAbove(found.reason.length, 0)
      }
      // Probed once: the same answer, and the probe left no cgroup behind.
      assert.deepStrictEqual(yield* Subprocess.cgroupSupport, found)
      assert.deepStrictEqual(leftCgroups(), [])
    })
  )
})

const reasonOf = (located: ReturnType<typeof SubprocessCgroup.locate>): string =>
  "reason" in located ? located.reason : `located at ${located.dir}`

// ---------------------------------------------------------------------------------
// The host dies
// ---------------------------------------------------------------------------------

const startHost = (fixture: string, args: ReadonlyArray<string>, env?: NodeJS.ProcessEnv): ChildProcess =>
  spawn(process.execPath, [path.join(fixtures, fixture), ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    ...(env === undefined ? {} : { env })
  })

/**
 * A `PATH` whose `sleep` takes a second for any wait under one (the polls of a supervisor),
 * and the real time otherwise: a machine so busy that every poll takes a second.
 */
const slowPollsPath = (): string => {
  const dir = tempDir()
  const real = ["/bin/sleep", "/usr/bin/sleep"].find((file) => fs.existsSync(file)) ?? "sleep"
  fs.writeFileSync(
    path.join(dir, "sleep"),
    `#!/bin/sh\ncase "$1" in 0.*) exec ${real} 1 ;; *) exec ${real} "$@" ;; esac\n`,
    {
      mode: 0o755
    }
  )
  return `${dir}:${process.env.PATH ?? "/usr/bin:/bin"}`
}

/**
 * Starts a host process running `script` as a subprocess tool, waits until the script
 * and `processes` of its processes run, SIGKILLs the host and says whether, within
 * `millis`, nothing carrying the script's marker is left.
 */
const killHostDuring = (options: {
  readonly fixture: "host.ts" | "supervised-host.ts"
  readonly cgroup: boolean
  readonly script: (ready: string) => string
  readonly processes: number
  /** How many of them lead a session of their own once running (the command and each setsid). */
  readonly sessions: number
  /** The host's environment (default: this process's). */
  readonly env?: NodeJS.ProcessEnv
}) => {
  const marker = randomUUID()
  const ready = path.join(tempDir(), "ready")
  const script = options.script(ready)
  const host = startHost(
    options.fixture,
    options.fixture === "host.ts" ? [marker, options.cgroup ? "on" : "off", script] : [marker, script],
    options.env
  )
  let stderr = ""
  let stdout = ""
  host.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  host.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  return Effect.gen(function* () {
    // The host's first line comes once its supervisor knows the process (without a
    // cgroup, a host killed before that leaves the process: a documented limit).
    assert.isTrue(yield* eventually(() => stdout.includes("\n"), 10_000), `the host never started the tool: ${stderr}`)
    yield* waitReady(ready)
    const running = yield* eventually(
      () => markedPids(marker).length >= options.processes && sessionLeaders(marker) >= options.sessions,
      5000
    )
    assert.isTrue(running, `expected ${options.processes} processes of the tool, found ${markedPids(marker).length}`)
    host.kill("SIGKILL")
    // The supervisor: SIGTERM, the 200 ms grace period, SIGKILL (a bound for a loaded machine, not a figure).
    const gone = yield* eventually(() => markedPids(marker).length === 0, 12_000)
    assert.isTrue(gone, `still running after the host died: ${markedPids(marker).join(", ")}; host said: ${stderr}`)
  }).pipe(
    Effect.ensuring(
      Effect.sync(() => {
        host.kill("SIGKILL")
        killMarked(marker)
      })
    )
  )
}

// Ignoring SIGTERM (inherited by what they start), they need the supervisor's SIGKILL.
const stubbornTree = (ready: string) => `trap '' TERM; sleep 300 & sleep 300 & echo $$ > ${ready}; wait`
const escapingTree = (ready: string) =>
  `trap '' TERM; setsid sleep 300 & (setsid sleep 300 &); sleep 300 & echo $$ > ${ready}; wait`

describe("Subprocess: the host dies", () => {
  it.live(
    "R5.2 a host SIGKILLed while a subprocess tool runs leaves nothing of it running (process group)",
    () => killHostDuring({ fixture: "host.ts", cgroup: false, script: stubbornTree, processes: 3, sessions: 1 }),
    30_000
  )

  it.live(
    "R5.2 a supervisor on a machine so busy that each poll takes a second still waits out the grace by the clock (review 185)",
    // A count of 10 ms polls made the 200 ms grace 20 s here, past the bound.
    () =>
      killHostDuring({
        fixture: "host.ts",
        cgroup: false,
        script: stubbornTree,
        processes: 3,
        sessions: 1,
        env: { ...process.env, PATH: slowPollsPath() }
      }),
    30_000
  )

  // The window between the spawn and the supervisor learning of the process, held open
  // by a spawner that hangs once its process is spawned. With a cgroup the trampoline
  // waits for the host's word; without one, the command runs from the spawn (a documented
  // limit: no shell stands between the spawn and the command, which keeps its environment).
  it.live.runIf(cgroups)(
    "R5.2 a host SIGKILLed between a spawn and telling its supervisor leaves nothing running: the command never ran (cgroup)",
    () => {
      const marker = randomUUID()
      const ready = path.join(tempDir(), "ready")
      const host = startHost("host.ts", [marker, "on", stubbornTree(ready), "stall"])
      return Effect.gen(function* () {
        // The trampoline runs (it carries the marker), waiting for the host's word.
        assert.isTrue(yield* eventually(() => markedPids(marker).length >= 1, 5000), "the process never started")
        yield* nap(300)
        host.kill("SIGKILL")
        const gone = yield* eventually(() => markedPids(marker).length === 0, 12_000)
        assert.isTrue(gone, `still running after the host died: ${markedPids(marker).join(", ")}`)
        assert.isFalse(fs.existsSync(ready), "the command ran without its supervisor knowing it")
      }).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            host.kill("SIGKILL")
            killMarked(marker)
          })
        )
      )
    },
    30_000
  )

  it.live.runIf(cgroups)(
    "R5.2 a host SIGKILLed while a subprocess tool runs leaves nothing of it running, setsid and double forks included (cgroup)",
    () => killHostDuring({ fixture: "host.ts", cgroup: true, script: escapingTree, processes: 4, sessions: 3 }),
    30_000
  )

  it.live.runIf(cgroups)(
    "R5.2 on kernels without cgroup.kill, the supervisor freezes the cgroup and kills each member",
    () =>
      killHostDuring({ fixture: "supervised-host.ts", cgroup: true, script: escapingTree, processes: 4, sessions: 3 }),
    30_000
  )
})

// ---------------------------------------------------------------------------------
// cgroups: nothing escapes
// ---------------------------------------------------------------------------------

const escaping = (cgroup: boolean) =>
  Subprocess.tool({
    name: "escape",
    description: "starts processes that leave its process group",
    input: Schema.Struct({ marker: Schema.String, ready: Schema.String, wait: Schema.Boolean }),
    output: Schema.String,
    command: ({ marker, ready, wait }) =>
      withMarker(
        // Two ways out of the group: setsid, and a daemon's double fork into a new session.
        `setsid sleep 300 >/dev/null 2>&1 & (setsid sleep 300 >/dev/null 2>&1 &); ` +
          (wait ? `sleep 300 & echo $$ > ${ready}; wait` : "sleep 0.1; echo started"),
        marker
      ),
    parse: (result) => result.containment,
    graceMillis: 100,
    cgroup
  })

describe.runIf(cgroups)("Subprocess with a cgroup", () => {
  it.live(
    "R5.2 a call interrupted the instant its process is spawned stops on SIGTERM, joined to its cgroup or not",
    () =>
      Effect.gen(function* () {
        // At onSpawn the trampoline has often not joined its cgroup yet: a SIGTERM to the
        // cgroup's members alone would miss it, and the stop would wait out the grace period.
        for (let i = 0; i < 10; i++) {
          const settled: Array<Subprocess.Settled> = []
          const spawned = yield* Deferred.make<void>()
          const fiber = yield* Effect.forkChild(
            Subprocess.run(
              { command: "sleep", args: ["5"] },
              {
                graceMillis: 2000,
                onSpawn: () => Deferred.doneUnsafe(spawned, Effect.void),
                onSettled: (s) => settled.push(s)
              }
            ),
            { startImmediately: true }
          )
          yield* Deferred.await(spawned)
          yield* Fiber.interrupt(fiber)
          assert.strictEqual(settled[0]?.containment, "cgroup")
          assert.strictEqual(settled[0]?.settlement, "cancelled", settled[0]?.detail)
          assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM"])
        }
        assert.deepStrictEqual(leftCgroups(), [])
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live(
    "R5.2 10 runs whose tool starts setsid and double-forked grandchildren: none outlives its run",
    () =>
      Effect.gen(function* () {
        const dir = tempDir()
        const outlived: Array<number> = []
        const records: Array<string> = []
        for (let i = 0; i < 10; i++) {
          const marker = randomUUID()
          const ready = path.join(dir, `ready-${i}`)
          // Even runs end on their own, leaving their grandchildren behind; odd runs are cancelled.
          const wait = i % 2 === 1
          const result = yield* Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "x", tools: [escaping(true)] })
            if (!wait) return yield* handle.result
            yield* waitReady(ready)
            yield* eventually(() => markedPids(marker).length >= 4 && sessionLeaders(marker) >= 3, 5000)
            return yield* handle.cancel
          }).pipe(
            Effect.scoped,
            Effect.provide(
              Layer.mergeAll(
                ScriptedModel.layer([
                  ScriptedModel.toolCall("escape", { marker, ready, wait }),
                  ScriptedModel.finalAnswer("done")
                ]),
                NodeServices.layer
              )
            )
          )
          // When the result is available, nothing is left: not a moment later.
          outlived.push(markedPids(marker).length)
          killMarked(marker)
          const interrupted = result.timeline.find((e) => e._tag === "tool.interrupted")
          const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
          records.push(
            wait
              ? `${result.status} ${interrupted?._tag === "tool.interrupted" ? /\(cgroup\)/.test(interrupted.detail) : false}`
              : `${result.status} ${succeeded?._tag === "tool.succeeded" ? String(succeeded.output) : "-"}`
          )
        }
        assert.deepStrictEqual(outlived, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        // Ended on its own: the output says what contained it; cancelled: the interruption's detail does.
        assert.deepStrictEqual(
          records,
          Array.from({ length: 10 }, (_, i) => (i % 2 === 1 ? "cancelled true" : "completed cgroup"))
        )
        assert.deepStrictEqual(leftCgroups(), [], "every cgroup was removed")
      }),
    60_000
  )

  it.live("R5.2 SIGTERM, grace, SIGKILL and reap reach what left the group; the records say cgroup", () =>
    Effect.gen(function* () {
      const marker = randomUUID()
      const ready = path.join(tempDir(), "ready")
      const settled: Array<Subprocess.Settled> = []
      const fiber = yield* Effect.forkChild(
        Subprocess.run(withMarker(escapingTree(ready), marker), { graceMillis: 100, onSettled: (s) => settled.push(s) })
      )
      yield* waitReady(ready)
      yield* eventually(() => markedPids(marker).length >= 4 && sessionLeaders(marker) >= 3, 5000)
      yield* Fiber.interrupt(fiber)
      const left = markedPids(marker)
      killMarked(marker)
      assert.deepStrictEqual(left, [])
      assert.strictEqual(settled[0]?.containment, "cgroup")
      assert.strictEqual(settled[0]?.settlement, "outcome_unknown")
      assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM", "SIGKILL"])
      assert.deepStrictEqual(leftCgroups(), [])
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R5.2 without cgroup.kill, freezing the cgroup and killing each member empties it", () =>
    Effect.gen(function* () {
      if (!support.available) return
      const cgroup = SubprocessCgroup.create({ ...support, kill: "freeze" })
      assert.isTrue("path" in cgroup)
      if (!("path" in cgroup)) return
      const marker = randomUUID()
      const ready = path.join(tempDir(), "ready")
      const child = spawn(
        "/bin/sh",
        [...SubprocessSpawn.trampolineArgs(cgroup, "/bin/sh", ["-c", escapingTree(ready)])],
        {
          stdio: ["ignore", "ignore", "ignore", "pipe"],
          detached: true,
          env: { ...process.env, EAR_TEST_MARKER: marker }
        }
      )
      // What `SubprocessSpawn.release` writes: the trampoline may run the command.
      const release = child.stdio[3]
      if (release && "end" in release) release.end("go\n")
      yield* waitReady(ready)
      yield* eventually(() => SubprocessCgroup.members(cgroup).length >= 4, 5000)
      assert.isAtLeast(SubprocessCgroup.members(cgroup).length, 4)
      yield* SubprocessCgroup.freezeAndKill(cgroup)
      const emptied = yield* eventually(() => !SubprocessCgroup.populated(cgroup), 2000)
      killMarked(marker)
      child.kill("SIGKILL")
      assert.isTrue(emptied)
      assert.isTrue(yield* SubprocessCgroup.remove(cgroup))
      assert.isFalse(fs.existsSync(cgroup.path))
    })
  )
})

// ---------------------------------------------------------------------------------
// The process group: the fallback, and its limit
// ---------------------------------------------------------------------------------

describe("Subprocess kept to its process group (cgroup: false, or no cgroups here)", () => {
  it.live("R5.2 the group is still stopped and reaped; the records say process_group", () =>
    Effect.gen(function* () {
      const result = yield* Subprocess.run({ command: "/bin/sh", args: ["-c", "echo hi"] }, { cgroup: false })
      assert.strictEqual(result.containment, "process_group")
      assert.strictEqual(result.stdout, "hi\n")
      const marker = randomUUID()
      const ready = path.join(tempDir(), "ready")
      const settled: Array<Subprocess.Settled> = []
      let pid = 0
      const fiber = yield* Effect.forkChild(
        Subprocess.run(withMarker(stubbornTree(ready), marker), {
          graceMillis: 100,
          cgroup: false,
          onSpawn: (p) => {
            pid = p
          },
          onSettled: (s) => settled.push(s)
        })
      )
      yield* waitReady(ready)
      yield* eventually(() => markedPids(marker).length >= 3, 5000)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(markedPids(marker), [])
      assert.isTrue(isGroupGone(pid))
      assert.strictEqual(settled[0]?.containment, "process_group")
      assert.strictEqual(settled[0]?.settlement, "outcome_unknown")
      assert.match(settled[0]?.detail ?? "", /\(process group\)/)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R5.2 the documented limit: a child that calls setsid escapes its process group", () =>
    Effect.gen(function* () {
      const marker = randomUUID()
      const ready = path.join(tempDir(), "ready")
      const fiber = yield* Effect.forkChild(
        Subprocess.run(withMarker(`setsid sleep 300 & sleep 300 & echo $$ > ${ready}; wait`, marker), {
          graceMillis: 100,
          cgroup: false
        })
      )
      yield* waitReady(ready)
      yield* eventually(() => markedPids(marker).length >= 3 && sessionLeaders(marker) >= 2, 5000)
      yield* Fiber.interrupt(fiber)
      yield* nap(50)
      const left = markedPids(marker)
      killMarked(marker)
      assert.strictEqual(left.length, 1, "only the sleep in a session of its own is left")
    }).pipe(Effect.provide(NodeServices.layer))
  )
})
