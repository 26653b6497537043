/**
 * A concurrent batch under a scheduler that hands over every few steps: whichever call runs
 * between another's record and its next step, every call ends recorded, the phase follows
 * the waits, and the retry budget holds (R1.3, R3.4, R5.2).
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
