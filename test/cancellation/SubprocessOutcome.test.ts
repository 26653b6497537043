/**
 * A child that did not finish its work (R3.8, R5.2): stopped for too much output, or killed
 * by a signal its host did not send. For a command unsafe to repeat that is an unknown
 * outcome, never retried; otherwise a permanent failure.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Schema } from "effect"
import * as Subprocess from "../../src/cancellation/Subprocess.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { fixtures, isGone, isGroupGone, nap, tempDir } from "../support/processes.ts"

const child = path.join(fixtures, "child.mjs")
const node = (mode: string, ...args: ReadonlyArray<string>): Subprocess.Spec => ({
  command: process.execPath,
  args: [child, mode, ...args]
})

const failureOf = <A>(exit: Exit.Exit<A, Failure.Failure>): Failure.Failure => {
  const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
  if (error?._tag !== "Some") throw new Error("expected a typed failure")
  return error.value
}

describe("Subprocess.run: a child that did not finish", () => {
  it.live(
    "R3.8 R5.2 unsafe to repeat: too much output and a death by signal are unknown outcomes; an exit code is not",
    () =>
      Effect.gen(function* () {
        const unsafe = { unsafeToRepeat: true, graceMillis: 200 } as const
        const flood = failureOf(yield* Effect.exit(Subprocess.run(node("flood"), { ...unsafe, maxOutputBytes: 4096 })))
        assert.instanceOf(flood, Failure.UnknownOutcome)
        assert.strictEqual(flood.code, "output_too_large")
        assert.include(flood.hint, "whether its action took effect is unknown")
        const segv = failureOf(yield* Effect.exit(Subprocess.run(node("segv"), unsafe)))
        assert.instanceOf(segv, Failure.UnknownOutcome)
        assert.strictEqual(segv.code, "killed_SIGSEGV")
        // A shell whose command was killed says so by its code (128 + the signal's number).
        const wrapped = failureOf(
          yield* Effect.exit(
            Subprocess.run({ command: "/bin/sh", args: ["-c", 'sh -c "kill -9 \\$\\$"; exit $?'] }, unsafe)
          )
        )
        assert.instanceOf(wrapped, Failure.UnknownOutcome)
        assert.strictEqual(wrapped.code, "exit_137")
        assert.include(wrapped.hint, "killed by SIGKILL")
        // A program that exits 130 or 143 itself (after a SIGINT or SIGTERM it handled) says it failed.
        for (const code of [130, 143]) {
          const itself = failureOf(yield* Effect.exit(Subprocess.run(node("exit", String(code)), unsafe)))
          assert.instanceOf(itself, Failure.Permanent, String(code))
        }
        // The process said it failed: that is its answer.
        const exited = failureOf(yield* Effect.exit(Subprocess.run(node("exit", "3"), unsafe)))
        assert.instanceOf(exited, Failure.Permanent)
        // Safe to repeat (the default): permanent failures, as before.
        const safe = failureOf(yield* Effect.exit(Subprocess.run(node("flood"), { maxOutputBytes: 4096 })))
        assert.instanceOf(safe, Failure.Permanent)
        assert.strictEqual(safe.code, "output_too_large")
      }).pipe(Effect.provide(NodeServices.layer))
  )
})

describe("Subprocess.run: a child stopped for too much output, then interrupted", () => {
  for (const cgroup of [true, false]) {
    it.live(
      `R5.2 R3.8 an interruption during that stop keeps its record: killed mid-action, never completed (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          // The flood ignores SIGTERM; the stop for its output waits out the grace period, and
          // the interruption comes inside it. The reclamation after found nothing left and
          // said "had already exited", completed (review 86).
          const settled: Array<Subprocess.Settled> = []
          let pid = 0
          const flood: Subprocess.Spec = {
            command: "/bin/sh",
            args: ["-c", "trap '' TERM; while :; do echo yyyyyyyyyyyyyyyy; done"]
          }
          const fiber = yield* Effect.forkChild(
            Subprocess.run(flood, {
              cgroup,
              maxOutputBytes: 4096,
              graceMillis: 1_000,
              onSpawn: (p) => {
                pid = p
              },
              onSettled: (s) => settled.push(s)
            })
          )
          while (pid === 0) yield* nap(2)
          yield* nap(300)
          yield* Fiber.interrupt(fiber)
          assert.isTrue(isGroupGone(pid))
          assert.strictEqual(settled.length, 1)
          assert.strictEqual(settled[0]?.settlement, "outcome_unknown", settled[0]?.detail)
          assert.deepStrictEqual(settled[0]?.signals, ["SIGTERM", "SIGKILL"])
        }).pipe(Effect.provide(NodeServices.layer))
    )
  }
})

describe("Subprocess.run: a child the system refuses to start", () => {
  it.live("R5.2 an argument longer than the system takes (E2BIG) is a typed spawn_failed, not a defect", () =>
    Effect.gen(function* () {
      for (const cgroup of [true, false]) {
        const exit = yield* Effect.exit(
          Subprocess.run({ command: "/bin/echo", args: ["y".repeat(200 * 1024)] }, { cgroup })
        )
        const failure = failureOf(exit)
        assert.instanceOf(failure, Failure.Permanent)
        assert.strictEqual(failure.code, "spawn_failed")
        assert.include(failure.hint, "E2BIG: its arguments and environment are too long")
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )
})

describe("Subprocess.run: specs and options a caller without types gets wrong", () => {
  it.live("R12 each is refused as invalid_options naming the field, in both containments, before a spawn", () =>
    Effect.gen(function* () {
      const specs: ReadonlyArray<readonly [unknown, string]> = [
        [{ args: ["x"] }, "command must be a string"],
        [{ command: "/bin/echo", args: "hello" }, "args must be an array of strings"],
        [{ command: "/bin/echo", args: [42] }, "args must be an array of strings"],
        [{ command: "/bin/echo", env: { X: 5 } }, "env.X must be a string"],
        [{ command: "/bin/echo", env: { "A=B": "c" } }, "invalid variable name"],
        [{ command: "/bin/echo", cwd: 7 }, "cwd must be a string"],
        [{ command: "/bin/ec\0ho" }, "may not hold a NUL byte"],
        [{ command: "/bin/echo", args: ["a\0b"] }, "may not hold a NUL byte"],
        [null, "the spec must be an object"]
      ]
      for (const cgroup of [true, false]) {
        for (const [spec, message] of specs) {
          let spawned = false
          const exit = yield* Effect.exit(
            Subprocess.run(spec as Subprocess.Spec, { cgroup, onSpawn: () => (spawned = true) })
          )
          const failure = failureOf(exit)
          assert.strictEqual(failure.code, "invalid_options", JSON.stringify(spec))
          assert.include(failure.hint, message)
          assert.isFalse(spawned)
        }
      }
      const options: ReadonlyArray<readonly [unknown, string]> = [
        [{ graceMillis: "100" }, "graceMillis must be a number"],
        [{ maxOutputBytes: "10" }, "maxOutputBytes must be an integer"],
        [{ cgroup: "no" }, "cgroup must be a boolean"],
        [{ unsafeToRepeat: 1 }, "unsafeToRepeat must be a boolean"]
      ]
      for (const [option, message] of options) {
        const failure = failureOf(yield* Effect.exit(Subprocess.run(node("finish", "0"), option as Subprocess.Options)))
        assert.strictEqual(failure.code, "invalid_options")
        assert.include(failure.hint, message)
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )
})

describe("Subprocess.tool: a child that did not finish", () => {
  /** A tool that appends a line to a ledger, then does what `then` says (a shell command). */
  const ledgerTool = (
    ledger: string,
    then: string,
    options: Partial<Subprocess.ToolOptions<{ readonly n: number }, string, never>>
  ) =>
    Subprocess.tool({
      name: "charge",
      description: "charges a card",
      input: Schema.Struct({ n: Schema.Number }),
      output: Schema.String,
      command: ({ n }) => ({ command: "/bin/sh", args: ["-c", `echo charge-${n} >> "$0"; ${then}`, ledger] }),
      parse: (result) => result.stdout,
      graceMillis: 200,
      maxOutputBytes: 10_000,
      ...options
    })
  const twoCalls = ScriptedModel.layer([
    ScriptedModel.toolCall("charge", { n: 1 }),
    ScriptedModel.toolCall("charge", { n: 2 }),
    ScriptedModel.finalAnswer("done")
  ])
  const runWith = (tool: ReturnType<typeof ledgerTool>) =>
    Run.run({ goal: "charge once", tools: [tool] }).pipe(Effect.provide(Layer.mergeAll(twoCalls, NodeServices.layer)))
  const flood = "trap '' TERM; while :; do echo yyyyyyyyyyyyyyyyyyyyyyyy; done"

  it.live("R3.8 R5.2 an external call stopped for too much output is never repeated, even with recoverErrors", () =>
    Effect.gen(function* () {
      const ledger = path.join(tempDir(), "ledger")
      const result = yield* runWith(ledgerTool(ledger, flood, { sideEffect: "external", recoverErrors: true }))
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.strictEqual(fs.readFileSync(ledger, "utf8"), "charge-1\n")
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.failure?.code : undefined, "output_too_large")
    })
  )

  it.live("R3.8 R5.2 an external call killed by a signal it was not sent (the OOM killer) is an unknown outcome", () =>
    Effect.gen(function* () {
      const ledger = path.join(tempDir(), "ledger")
      const result = yield* runWith(ledgerTool(ledger, "kill -9 $$", { sideEffect: "external" }))
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.strictEqual(fs.readFileSync(ledger, "utf8"), "charge-1\n")
    })
  )

  it.live(
    "R5.2 a read tool or an idempotent one stopped for too much output fails as before, for the model to correct",
    () =>
      Effect.gen(function* () {
        for (const options of [{ sideEffect: "read" }, { sideEffect: "write", idempotent: true }] as const) {
          const ledger = path.join(tempDir(), "ledger")
          const result = yield* runWith(ledgerTool(ledger, flood, { ...options, recoverErrors: true }))
          assert.strictEqual(result.status, "completed", JSON.stringify(options))
          assert.strictEqual(fs.readFileSync(ledger, "utf8"), "charge-1\ncharge-2\n")
        }
      })
  )
})

describe("a command that exited, interrupted while what it left running is stopped", () => {
  // Exits 0 at once, its action done, leaving a job that takes 1 s to stop on SIGTERM: an
  // interruption that lands in that second used to find no record at all (review 124).
  /** Pays, leaving a job behind that takes 1 s to stop on SIGTERM (ready once `paid` is written). */
  const payingScript = (paid: string) =>
    `"${process.execPath}" "${child}" slow-term 1000 --ready "${paid}.job" >/dev/null 2>&1 & ` +
    `while [ ! -s "${paid}.job" ]; do sleep 0.01; done; echo paid > "${paid}"; echo receipt`
  /** Waits until the command has paid and exited, and the stop of what it left has begun. */
  const paidAndExited = (paid: string, pid: () => number) =>
    Effect.gen(function* () {
      while (!fs.existsSync(paid) || pid() === 0 || !isGone(pid())) yield* nap(5)
      yield* nap(200)
    })

  /** Runs the command `script(paid)` writes, interrupted once it has paid and exited: what onSettled was given. */
  const interruptedAfterPaying = (script: (paid: string) => string, graceMillis: number, cgroup: boolean) =>
    Effect.gen(function* () {
      const paid = path.join(tempDir(), "paid")
      const settled: Array<Subprocess.Settled> = []
      let pid = 0
      const fiber = yield* Effect.forkChild(
        Subprocess.run(
          { command: "/bin/sh", args: ["-c", script(paid)] },
          {
            graceMillis,
            cgroup,
            onSpawn: (p) => {
              pid = p
            },
            onSettled: (s) => settled.push(s)
          }
        )
      )
      yield* paidAndExited(paid, () => pid)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(isGroupGone(pid))
      return settled
    }).pipe(Effect.provide(NodeServices.layer))

  for (const cgroup of [true, false]) {
    it.live(`R5.2 R3.8 Subprocess.run reports the record of its ending to onSettled (cgroup: ${cgroup})`, () =>
      Effect.gen(function* () {
        const settled = yield* interruptedAfterPaying(payingScript, 3_000, cgroup)
        // Before, the effect was interrupted as its reclamation ended, and onSettled never called.
        assert.strictEqual(settled.length, 1)
        assert.strictEqual(settled[0]?.settlement, "completed", settled[0]?.detail)
        assert.include(settled[0]?.detail, "had already exited; what it left running stopped on SIGTERM")
      })
    )

    it.live(
      `R5.2 R3.8 what it left that had to be killed puts its action in doubt, and says so (cgroup: ${cgroup})`,
      () =>
        Effect.gen(function* () {
          // It pays once the job it leaves ignores SIGTERM (on a busy machine a SIGTERM came before the trap).
          const stubborn = (paid: string) =>
            `(trap '' TERM; : > ${paid}.job; exec sleep 30) >/dev/null 2>&1 & while [ ! -e ${paid}.job ]; do sleep 0.01; done; echo paid > ${paid}; echo receipt`
          const settled = yield* interruptedAfterPaying(stubborn, 600, cgroup)
          assert.strictEqual(settled[0]?.settlement, "outcome_unknown", settled[0]?.detail)
          // It said the command itself "did not stop within the grace period".
          assert.include(
            settled[0]?.detail,
            "had already exited; what it left running did not stop within the 600 ms grace"
          )
        })
    )

    it.live(`R5.2 R3.8 a cancelled run records the call completed, never "it never ran" (cgroup: ${cgroup})`, () =>
      Effect.gen(function* () {
        const paid = path.join(tempDir(), "paid")
        let pid = 0
        const pay = Subprocess.tool({
          name: "pay",
          description: "Pays, leaving a job behind.",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          graceMillis: 3_000,
          cgroup,
          command: () => ({ command: "/bin/sh", args: ["-c", payingScript(paid)] }),
          parse: (r) => r.stdout.trim(),
          onSpawn: (p) => {
            pid = p
          }
        })
        const result = yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "pay once", tools: [pay] })
            yield* paidAndExited(paid, () => pid)
            return yield* handle.cancel
          })
        ).pipe(
          Effect.provide(
            Layer.mergeAll(
              ScriptedModel.layer([ScriptedModel.toolCall("pay", {}, "c1"), ScriptedModel.finalAnswer("paid")]),
              NodeServices.layer
            )
          )
        )
        assert.strictEqual(result.stopReason, "cancelled")
        const interrupted = result.timeline.find((e) => e._tag === "tool.interrupted")
        // Before: `cancelled`, "interrupted before its command was started; it never ran", with the payment made.
        assert.strictEqual(
          interrupted?._tag === "tool.interrupted" ? interrupted.settlement : undefined,
          "completed",
          interrupted?._tag === "tool.interrupted" ? interrupted.detail : ""
        )
        assert.include(interrupted?._tag === "tool.interrupted" ? interrupted.detail : "", "had already exited")
        assert.deepStrictEqual(result.pendingActions, [])
      }).pipe(Effect.provide(NodeServices.layer))
    )
  }
})
