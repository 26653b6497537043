/**
 * A model's usage as the run counts it (R2.1): a part larger than its whole (cache reads
 * beside the prompt's tokens, reasoning beside the completion's) was reported beside it, and
 * is counted so, whether it comes with an answer, a failure or a cut-off, as the built-in
 * providers count it.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Failure from "../../../src/failure/Failure.ts"
import * as Model from "../../../src/model/Model.ts"
import * as Recovery from "../../../src/recovery/Recovery.ts"
import * as Run from "../../../src/run/Run.ts"
import type * as RunResult from "../../../src/run/RunResult.ts"
import { genAi } from "../../../src/tracing/Attributes.ts"
import { drive } from "../../support/clock.ts"
import { assertRoundTrips } from "../../support/schema.ts"
import { memoryTracer } from "../../support/tracer.ts"

/** Parts larger than their wholes: 40 cached of 10, 30 reasoning of 5. */
const beside: Model.Usage = { inputTokens: 10, cachedInputTokens: 40, outputTokens: 5, reasoningTokens: 30 }
const counted = { inputTokens: 50, cachedInputTokens: 40, outputTokens: 35, reasoningTokens: 30 }

const usages = (result: RunResult.RunResult) =>
  result.timeline.flatMap((e) =>
    (e._tag === "model.responded" || e._tag === "model.failed") && e.usage !== undefined ? [e.usage] : []
  )

const assertCounted = (result: RunResult.RunResult, times: number) => {
  for (const usage of usages(result)) assert.deepInclude(usage, counted)
  assert.lengthOf(usages(result), times)
  assert.deepInclude(result.counters, {
    inputTokens: 50 * times,
    cachedInputTokens: 40 * times,
    outputTokens: 35 * times,
    reasoningTokens: 30 * times
  })
  assertRoundTrips(result)
}

const run = (model: Model.Model["Service"], options: Partial<Run.Options<never>> = {}) =>
  drive(Run.run({ goal: "x", tools: [], ...options })).pipe(
    Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, model), NodeServices.layer))
  )

describe("R2.1 a part of a usage larger than its whole is counted beside it", () => {
  it.effect("R2.1 an answer's usage", () =>
    Effect.gen(function* () {
      const result = yield* run({ generate: () => Effect.succeed(Model.response({ text: "done", usage: beside })) })
      assert.strictEqual(result.stopReason, "goal_reached")
      assertCounted(result, 1)
    })
  )

  it.effect("R2.1 R13 a failed answer's usage, on its event and on its attempt's span (review 159)", () =>
    Effect.gen(function* () {
      const failure = new Failure.Permanent({
        source: "provider",
        category: "invalid_response",
        code: "broken",
        attempts: 1,
        hint: "broken",
        usage: beside
      })
      const { tracer, spans } = memoryTracer()
      const result = yield* Effect.withTracer(run({ generate: () => Effect.fail(failure) }), tracer)
      assert.strictEqual(result.stopReason, "model_error")
      assertCounted(result, 1)
      const chat = spans.find((s) => s.name.startsWith("chat"))
      assert.deepStrictEqual(
        [chat?.attributes.get(genAi.inputTokens), chat?.attributes.get(genAi.outputTokens)],
        [50, 35]
      )
    })
  )

  it.effect("R2.1 what an answer cut off by a timeout had cost", () =>
    Effect.gen(function* () {
      const result = yield* run(
        { generate: () => Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff(beside))) },
        { time: { run: "1 second" }, recovery: { backoff: Recovery.backoff({ retries: 0 }) } }
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assertCounted(result, 1)
    })
  )
})
