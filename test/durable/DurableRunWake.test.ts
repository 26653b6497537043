/**
 * A parked durable run whose decision is on the approvals table without its wake (R9.3, R7):
 * the process that approved died between the two, or the store answered after the caller
 * gave up. The run reads the table again every `recheckAfter` while parked, and goes on; it
 * waited for the approval's expiry before, hours away (review 157).
 */
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Layer, Schema } from "effect"
import { DurableRun } from "../../src/durable/index.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as RunOptions from "../../src/run/RunOptions.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { tempFiles } from "../support/files.ts"

const fileOf = tempFiles("durable-wake-")

const paid: Array<string> = []
const pay = Tool.make({
  name: "pay",
  description: "Pays an amount.",
  input: Schema.Struct({ amount: Schema.Number }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: (_, context) => Effect.sync(() => (paid.push(context.idempotencyKey), "paid"))
})

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("pay", { amount: 5 }, "c1") : ScriptedModel.finalAnswer("paid")
)

const runtime = (settings: DurableRun.Settings) =>
  DurableRun.layer({ tools: [pay], time: { approval: "1 hour" } }, settings).pipe(
    Layer.provideMerge(DurableRun.layerEmbedded({ filename: fileOf() })),
    Layer.provide(model)
  )

describe("R9.3 R7 a decision on the table whose wake was lost", () => {
  it.live(
    "R9.3 R7 a parked run whose approval is on the table without its wake goes on at its next read, not at its expiry",
    () =>
      Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const journal = yield* Journal.Journal
        const runId = yield* runs.start({ goal: "pay", runId: "w1" })
        let callId: string | undefined
        while (callId === undefined) {
          callId = (yield* runs.pending(runId))[0]?.callId
          yield* Effect.sleep(50)
        }
        // Parked (the run waits in its process for a second first), then approved on the table
        // alone, as by a process that died before it woke the run.
        yield* Effect.sleep("2500 millis")
        yield* JournalApprovals.record(journal, runId, callId, Approval.approved("ops"))
        const result = yield* runs.result(runId).pipe(Effect.timeout("20 seconds"))
        assert.strictEqual(result.status, "completed", result.detail)
        assert.deepStrictEqual(paid, [`${runId}:${callId}`])
      }).pipe(Effect.provide(runtime({ recheckAfter: "2 seconds" }))),
    60_000
  )

  it.live(
    "R9.3 R8 rounds that find nothing decided leave the run parked as it was: one resume, for the decision (review 159)",
    () =>
      Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "w2" })
        let callId: string | undefined
        while (callId === undefined) {
          callId = (yield* runs.pending(runId))[0]?.callId
          yield* Effect.sleep(50)
        }
        // Parked through three rounds or more before the decision.
        yield* Effect.sleep("4500 millis")
        yield* runs.approve(runId, callId, { by: "ops" })
        const result = yield* runs.result(runId).pipe(Effect.timeout("20 seconds"))
        assert.strictEqual(result.status, "completed", result.detail)
        // Before: a drive per round, each a `run.resumed` of a restart that never happened.
        assert.lengthOf(
          result.timeline.filter((e) => e._tag === "run.resumed"),
          1
        )
      }).pipe(Effect.provide(runtime({ recheckAfter: "1 second" }))),
    60_000
  )

  it.effect("R12 a recheck time that is not a finite duration of a second or more fails the layer, naming it", () =>
    Effect.gen(function* () {
      // Less than a second: a busy loop of table reads and durable timers.
      for (const recheckAfter of [0, -1, Number.NaN, "forever", "500 millis", Number.POSITIVE_INFINITY] as const) {
        const error = yield* Effect.flip(
          Layer.build(runtime({ recheckAfter: recheckAfter as Duration.Input })).pipe(Effect.scoped)
        )
        assert.instanceOf(error, RunOptions.InvalidRunOptions)
        assert.deepStrictEqual(error.path, ["recheckAfter"])
      }
    })
  )

  it.live(
    "R4.1 R7 R9.3 a run a runner with a closer time.run parks again wakes at that deadline, not at its first expiry (review 170)",
    () =>
      Effect.gen(function* () {
        const filename = fileOf()
        const runner = (run: Duration.Input, recheckAfter: Duration.Input) =>
          DurableRun.layer({ tools: [pay], time: { approval: "1 hour", run } }, { recheckAfter }).pipe(
            Layer.provideMerge(
              DurableRun.layerEmbedded({ filename, shardingConfig: { entityTerminationTimeout: "200 millis" } })
            ),
            Layer.provide(model)
          )
        // The old code: two hours to run; parked on a call that expires in an hour, a recheck in 2 s.
        const firstExpiry = yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          yield* runs.start({ goal: "pay", runId: "w3" })
          let expiresAt: number | undefined
          while (expiresAt === undefined) {
            expiresAt = (yield* runs.pending("w3"))[0]?.expiresAt
            yield* Effect.sleep(50)
          }
          yield* Effect.sleep("2500 millis")
          return expiresAt
        }).pipe(Effect.provide(runner("2 hours", "2 seconds")))
        // The new code, 8 s to run and rechecks 10 minutes apart: the first recheck wakes the run here,
        // which puts its call back expiring at the closer deadline and parks again.
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          let deadline: number | undefined
          while (deadline === undefined) {
            const row = (yield* runs.pending("w3"))[0]
            if (row !== undefined && row.expiresAt < firstExpiry) deadline = row.expiresAt
            yield* Effect.sleep(50)
          }
          // Before: the engine kept the first park's timer (an hour away) under the call's name.
          const result = yield* runs.result("w3").pipe(Effect.timeout("20 seconds"))
          assert.strictEqual(result.stopReason, "run_timeout")
          assert.isBelow(Date.now() - deadline, 10_000)
        }).pipe(Effect.provide(runner("8 seconds", "10 minutes")))
      }),
    60_000
  )
})
