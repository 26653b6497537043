import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as Timeline from "../../src/events/Timeline.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import { echo } from "../support/tools.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Extract<Event.Event, { _tag: T }> => e._tag === tag)

/** The conversation the model saw on its last call. */
const lastRequest = (seen: Array<Model.Request>) => seen[seen.length - 1]?.messages ?? []

describe("finish reasons (R11)", () => {
  it.effect(
    "R11 an answer cut off by the output token limit is not final: the model is asked to finish it, shorter",
    () => {
      const seen: Array<Model.Request> = []
      const script: ReadonlyArray<ScriptedModel.Step> = [
        (request) => {
          seen.push({ ...request, messages: [...request.messages] })
          return ScriptedModel.cutOff("The answer is")
        },
        (request) => {
          seen.push({ ...request, messages: [...request.messages] })
          return ScriptedModel.finalAnswer("The answer is 42.")
        }
      ]
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "answer", tools: [echo] })
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.finalAnswer, "The answer is 42.")
        const [cut] = ofTag(result.timeline, "model.responded")
        assert.strictEqual(cut?.finishReason, "length")
        assert.deepStrictEqual(
          ofTag(result.timeline, "recovery.started").map((e) => [e.kind, e.attempt, e.cause]),
          [["output_truncation", 1, "output_truncated"]]
        )
        assert.deepStrictEqual(
          ofTag(result.timeline, "recovery.completed").map((e) => [e.kind, e.attempt]),
          [["output_truncation", 1]]
        )
        // The second request carries the cut answer and the runtime's request to finish it.
        const messages = lastRequest(seen)
        assert.deepInclude(messages[messages.length - 2], { _tag: "assistant", content: "The answer is" })
        assert.include(
          messages[messages.length - 1]?._tag === "user" ? messages[messages.length - 1]?.content : "",
          "cut off"
        )
        assert.strictEqual(result.counters.toolCorrectionAttempts, 1)
        assert.strictEqual(result.counters.emptyOutputs, 0)
        assert.include(Timeline.format(result.timeline), "cut off at the output token limit: The answer is")
        assert.deepStrictEqual(result.counters, Counters.snapshot(Counters.fold(result.timeline)))
      }).pipe(Effect.provide(withScript(script)))
    }
  )

  it.effect("R11 R3.5 answers cut off past the correction budget end the run output_truncated, never completed", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [echo], recovery: { correctionBudget: 2 } })
      assert.strictEqual(result.stopReason, "output_truncated")
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.finalAnswer, undefined)
      assert.strictEqual(ofTag(result.timeline, "model.responded").length, 3)
      assert.deepStrictEqual(
        ofTag(result.timeline, "recovery.failed").map((e) => [e.kind, e.attempts, e.scope]),
        [["output_truncation", 2, "run"]]
      )
      assert.include(result.detail, "correction budget of 2")
      assert.isFalse(result.counters.finalAnswerReceived)
      assert.doesNotThrow(() => Schema.encodeSync(RunResult.RunResult)(result))
    }).pipe(
      Effect.provide(
        withScript([ScriptedModel.cutOff("The"), ScriptedModel.cutOff("The answer"), ScriptedModel.cutOff("The a")])
      )
    )
  )

  it.effect("R11 R3.5 truncation corrections and argument corrections share one budget", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "echo", tools: [echo], recovery: { correctionBudget: 1 } })
      assert.strictEqual(result.stopReason, "output_truncated")
      assert.deepStrictEqual(
        ofTag(result.timeline, "recovery.started").map((e) => e.kind),
        ["tool_argument_correction"]
      )
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("echo", {}), ScriptedModel.cutOff("I will now")])))
  )

  it.effect(
    "R11 an empty answer cut off by the limit (all of it spent on reasoning) is a truncation, not an empty output",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "answer", tools: [echo] })
        assert.strictEqual(result.stopReason, "goal_reached")
        assert.strictEqual(result.counters.emptyOutputs, 0)
        assert.strictEqual(ofTag(result.timeline, "reminder.injected")[0]?.kind, "output_truncated")
      }).pipe(
        Effect.provide(
          withScript([
            { ...ScriptedModel.cutOff(""), reasoning: "Let me think about this for a very long" },
            ScriptedModel.finalAnswer("42")
          ])
        )
      )
  )

  it.effect("R11 R3.5 tool-call arguments cut off by the limit are a correctable result that names the cut", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "echo", tools: [echo] })
      assert.strictEqual(result.status, "completed")
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "invalid_arguments")
      assert.isTrue(failed?.error.correctable)
      assert.include(failed?.error.message, "cut off by the output token limit")
      assert.deepStrictEqual(ofTag(result.timeline, "tool.succeeded").length, 1)
    }).pipe(
      Effect.provide(
        withScript([
          { ...ScriptedModel.toolCall("echo", '{"text": "a long te'), finishReason: "length" },
          ScriptedModel.toolCall("echo", { text: "short" }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  )

  it.effect("R11 an answer the content filter withheld is a permanent content_filtered failure and its own stop", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [echo] })
      assert.strictEqual(result.stopReason, "content_filtered")
      assert.strictEqual(result.status, "failed")
      const [failed] = ofTag(result.timeline, "model.failed")
      assert.deepInclude(failed?.failure, { classification: "permanent", code: "content_filtered" })
      assert.strictEqual(ofTag(result.timeline, "model.responded").length, 0)
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
    }).pipe(Effect.provide(withScript([ScriptedModel.filtered])))
  )

  it.effect(
    "R11 R2.1 a filtered answer that was paid past the budget stops content_filtered: nothing more was asked",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "answer", tools: [echo], limits: { maxCostUsd: 0.5 } })
        // Before, budget_exhausted, and Explain advised raising maxCostUsd: no budget would have let the run go on.
        assert.strictEqual(result.stopReason, "content_filtered", result.detail)
        // What it cost is counted all the same.
        assert.closeTo(result.counters.costUsd, 0.8, 1e-9)
      }).pipe(
        Effect.provide(
          withScript([
            Model.response({
              toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"a"}' }],
              usage: { inputTokens: 1, outputTokens: 1, costUsd: 0.4 }
            }),
            Model.response({ finishReason: "content_filter", usage: { inputTokens: 1, outputTokens: 1, costUsd: 0.4 } })
          ])
        )
      )
  )

  it.effect(
    "R6.1 R11 an answer of a model of your own that says it calls tools and carries none is no final answer (review 193)",
    () =>
      Effect.gen(function* () {
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "answer", tools: [echo], limits: { maxTokens: 1_000 } })
        )
        // Before, the first answer was taken: completed, goal_reached, "Let me open the file first.".
        assert.strictEqual(result.finalAnswer, "The file says 42.")
        const [failed] = ofTag(result.timeline, "model.failed")
        assert.deepInclude(failed?.failure, { classification: "retryable", code: "answer_unfinished" })
        assert.deepStrictEqual(
          ofTag(result.timeline, "model.responded").map((e) => e.text),
          ["The file says 42."]
        )
        // What it cost counts.
        assert.deepStrictEqual([result.counters.inputTokens, result.counters.outputTokens], [21, 11])
      }).pipe(
        Effect.provide(
          withScript([
            Model.response({
              text: "Let me open the file first.",
              finishReason: "tool_calls",
              usage: { inputTokens: 20, outputTokens: 10 }
            }),
            Model.response({ text: "The file says 42.", usage: { inputTokens: 1, outputTokens: 1 } })
          ])
        )
      )
  )

  it.effect("R11 the model's reasoning is kept on its turn and on the timeline, never in an observation", () => {
    const seen: Array<Model.Request> = []
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "echo", tools: [echo] })
      assert.strictEqual(result.status, "completed")
      const [first] = ofTag(result.timeline, "model.responded")
      assert.strictEqual(first?.reasoning, "I should echo it")
      const assistant = lastRequest(seen).find((m) => m._tag === "assistant")
      assert.deepInclude(assistant, { reasoning: "I should echo it" })
      for (const m of lastRequest(seen)) if (m._tag === "tool") assert.notInclude(m.content, "I should echo it")
      for (const e of ofTag(result.timeline, "tool.succeeded")) assert.notInclude(JSON.stringify(e), "should echo")
    }).pipe(
      Effect.provide(
        withScript([
          { ...ScriptedModel.toolCall("echo", { text: "hi" }), reasoning: "I should echo it" },
          (request) => {
            seen.push({ ...request, messages: [...request.messages] })
            return ScriptedModel.finalAnswer("hi")
          }
        ])
      )
    )
  })
})
