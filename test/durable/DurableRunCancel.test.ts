/**
 * A durable run cancelled while its model's answer comes (R5.1, R2.1, R9): the engine
 * interrupts the run's body for the cancel, and the run is cancelled where it stands, as a
 * live run's cancel does: what the answer had cost is counted, and the requests it made are
 * in its log. It was taken away instead, its uncommitted events dropped, then cancelled from
 * its last commit (review 159).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer } from "effect"
import { DurableRun } from "../../src/durable/index.ts"
import { tempFiles } from "../support/files.ts"
import { payingModel } from "../support/paying.ts"

const fileOf = tempFiles("durable-cancel-")

const cost = { inputTokens: 1_000, outputTokens: 4_000, costUsd: 0.25 }

describe("R5.1 R2.1 a durable run cancelled while its model answers", () => {
  it.live(
    "R2.1 R5.1 R9 the cancel counts what the answer it cut off had cost, as a live run's cancel does",
    () =>
      Effect.gen(function* () {
        const asked = yield* Deferred.make<void>()
        const paying = payingModel(asked, cost)
        const layer = DurableRun.layer({ tools: [] }).pipe(
          Layer.provideMerge(DurableRun.layerEmbedded({ filename: fileOf() })),
          Layer.provide(paying)
        )
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          const runId = yield* runs.start({ goal: "x", runId: "cancel-cost" })
          yield* Deferred.await(asked)
          yield* runs.cancel(runId)
          const result = yield* runs.result(runId).pipe(Effect.timeout("30 seconds"))
          assert.strictEqual(result.stopReason, "cancelled", result.detail)
          // Before: 0, and no model.requested in the log.
          assert.strictEqual(result.counters.costUsd, 0.25)
          assert.strictEqual(result.counters.outputTokens, 4_000)
          const tags = result.timeline.map((e) => e._tag)
          assert.include(tags, "model.requested")
          assert.notInclude(tags, "run.resumed")
        }).pipe(Effect.provide(layer))
      }),
    60_000
  )
})
