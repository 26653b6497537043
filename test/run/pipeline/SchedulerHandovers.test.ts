/**
 * Runs under a scheduler that hands over every few steps: whichever fiber runs between a
 * call's record and its next step, every call ends recorded as it ended, the phase follows
 * the waits, and the retry budget holds (R1.3, R3.4, R3.8, R5.2).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Scheduler, Schema } from "effect"
import * as Failure from "../../../src/failure/Failure.ts"
import * as FailureBoundary from "../../../src/failure/FailureBoundary.ts"
import * as Recovery from "../../../src/recovery/Recovery.ts"
import * as Run from "../../../src/run/Run.ts"
import * as Properties from "../../../src/testing/Properties.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"
import * as Approval from "../../../src/tools/Approval.ts"
import * as Tool from "../../../src/tools/Tool.ts"

/** Fails `fails` times, then succeeds; yields `work` times first. */
const flaky = (name: string, fails: number, work: number) => {
  let n = 0
  return Tool.make({
    name,
    description: name,
    input: Schema.Struct({ k: Schema.String }),
    output: Schema.String,
    idempotent: true,
    sideEffect: "read",
    maxRetries: 5,
    recoverErrors: true,
    handler: () =>
      Effect.gen(function* () {
        for (let i = 0; i < work; i++) yield* Effect.yieldNow
        n++
        if (n <= fails) {
          return yield* Effect.fail(
            new Failure.Retryable({
              source: "tool",
              category: "transient_http",
              code: `e_${name}`,
              attempts: 1,
              hint: "down"
            })
          )
        }
        return "ok"
      })
  })
}

const pay = Tool.make({
  name: "pay",
  description: "pays",
  input: Schema.Struct({ k: Schema.String }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: () => Effect.succeed("paid")
})

const decidingAfter = (decision: Approval.Decision, millis: number): Approval.Gate => ({
  request: () => Effect.as(Effect.sleep(millis), decision),
  decide: () => Effect.void,
  expire: () => Effect.die("no call of this gate expires"),
  pending: Effect.succeed([])
})

describe("R1.3 R3.4 R5.2 a concurrent batch under a scheduler that hands over every few steps", () => {
  it.effect("R1.3 R5.2 every call ends recorded, the phase follows the waits, the budget holds", () =>
    Effect.gen(function* () {
      const violations: Array<string> = []
      for (const ops of [3, 4, 5, 7]) {
        for (const maxRecoveries of [1, 3]) {
          for (const decision of [Approval.approved("ops"), Approval.rejected("no", "ops")]) {
            for (const after of [0, 30, 120]) {
              let turn = 0
              const model = ScriptedModel.layerFunction(() =>
                Effect.suspend(() => {
                  turn++
                  if (turn === 1) return Effect.fail(FailureBoundary.http({ status: 503, now: 0 }))
                  if (turn === 2) {
                    return Effect.succeed(
                      ScriptedModel.toolCalls(
                        ["a", { k: "1" }],
                        ["b", { k: "2" }],
                        ["pay", { k: "3" }],
                        ["c", { k: "4" }]
                      )
                    )
                  }
                  return Effect.succeed(ScriptedModel.finalAnswer("done"))
                })
              )
              const result = yield* TestClockDriver.drive(
                Run.run({
                  goal: "g",
                  tools: [flaky("a", 2, 3), flaky("b", 2, 1), flaky("c", 3, 0), pay],
                  concurrency: 4,
                  recovery: { maxRecoveries, backoff: Recovery.backoff({ jitter: false, retries: 3 }) }
                }).pipe(
                  Effect.provide(model),
                  Effect.provideService(Approval.ApprovalGate, decidingAfter(decision, after)),
                  Effect.provideService(Scheduler.MaxOpsBeforeYield, ops)
                )
              )
              const budget = {
                runTimeoutMillis: 600_000,
                maxRecoveries,
                scheduleRetries: 3,
                toolMaxRetries: { a: 5, b: 5, c: 5 }
              }
              for (const v of Properties.check(result, budget)) {
                violations.push(
                  `ops ${ops}, budget ${maxRecoveries}, ${decision._tag} after ${after} ms: ${v.invariant}: ${v.detail}`
                )
              }
            }
          }
        }
      }
      assert.deepStrictEqual(violations, [])
    })
  )
})

describe("R3.8 R5.2 a cancel that lands right after a status query answered", () => {
  const yields = (k: number) =>
    Effect.forEach(
      Array.from({ length: k }, (_, i) => i),
      () => Effect.yieldNow,
      { discard: true }
    )

  /** A write cut off by its timeout whose status query answers `verdict`, the run cancelled `k` steps after. */
  const cancelledAfterVerdict = (verdict: "Applied" | "NotApplied", k: number, ops: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        let cancel: Effect.Effect<unknown> = Effect.void
        const write = Tool.make({
          name: "w",
          description: "writes, slowly",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          timeout: "1 second",
          handler: () => Effect.as(Effect.sleep("10 seconds"), "late"),
          reconcile: () =>
            Effect.andThen(
              Effect.forkDetach(
                Effect.andThen(
                  yields(k),
                  Effect.suspend(() => cancel)
                )
              ),
              Effect.succeed<Tool.Reconciliation<string>>(
                verdict === "Applied" ? { _tag: "Applied", output: "done" } : { _tag: "NotApplied" }
              )
            )
        })
        const handle = yield* Run.start({ goal: "g", tools: [write] })
        cancel = handle.cancel
        return yield* handle.result
      })
    ).pipe(
      Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("w", {}), ScriptedModel.finalAnswer("done")])),
      TestClockDriver.drive,
      Effect.provideService(Scheduler.MaxOpsBeforeYield, ops)
    )

  it.effect(
    "R3.8 R5.2 the answer is kept: a write found applied is listed as done, never lost or taken for unknown",
    () =>
      Effect.gen(function* () {
        for (const ops of [3, 4, 5, 6, 7]) {
          for (let k = 0; k < 12; k++) {
            const at = `ops ${ops}, cancel ${k} steps after`
            const applied = yield* cancelledAfterVerdict("Applied", k, ops)
            const reconciled = applied.timeline.some((e) => e._tag === "tool.reconciled" && e.verdict === "applied")
            if (!reconciled) continue
            assert.deepStrictEqual(
              [applied.sideEffects.map((s) => s.callId), applied.pendingActions.map((a) => a.callId)],
              [["call_1"], []],
              at
            )
            const notApplied = yield* cancelledAfterVerdict("NotApplied", k, ops)
            assert.deepStrictEqual(notApplied.sideEffects, [], at)
          }
        }
      })
  )
})

describe("R5.2 a cancel that lands as a retried call's last attempt times out", () => {
  it.effect("R5.2 each attempt is settled once: the timeout's record stands, none is added", () =>
    Effect.gen(function* () {
      const yields = (k: number) =>
        Effect.forEach(
          Array.from({ length: k }, (_, i) => i),
          () => Effect.yieldNow,
          { discard: true }
        )
      for (const ops of [3, 4, 5, 6, 7]) {
        for (let k = 0; k < 10; k++) {
          const result = yield* Effect.scoped(
            Effect.gen(function* () {
              let cancel: Effect.Effect<unknown> = Effect.void
              let made = 0
              const slow = Tool.make({
                name: "slow",
                description: "times out",
                input: Schema.Struct({}),
                output: Schema.String,
                idempotent: true,
                sideEffect: "read",
                maxRetries: 1,
                recoverErrors: true,
                timeout: "1 second",
                handler: () =>
                  Effect.suspend(() => {
                    made++
                    // The last attempt's timeout sets off the cancel, k steps later.
                    const fire =
                      made === 2 ? Effect.asVoid(Effect.forkDetach(Effect.andThen(yields(k), cancel))) : Effect.void
                    return Effect.onInterrupt(Effect.as(Effect.sleep("10 seconds"), "late"), () => fire)
                  })
              })
              const handle = yield* Run.start({
                goal: "g",
                tools: [slow],
                recovery: { maxRecoveries: 4, backoff: Recovery.backoff({ jitter: false, retries: 3 }) }
              })
              cancel = Effect.suspend(() => handle.cancel)
              return yield* handle.result
            })
          ).pipe(
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("slow", {}), ScriptedModel.finalAnswer("done")])
            ),
            TestClockDriver.drive,
            Effect.provideService(Scheduler.MaxOpsBeforeYield, ops)
          )
          const settled = result.timeline.filter((e) => e._tag === "tool.interrupted" && e.attempt === 2)
          assert.isAtMost(settled.length, 1, `ops ${ops}, cancel ${k} steps after`)
        }
      }
    })
  )
})
