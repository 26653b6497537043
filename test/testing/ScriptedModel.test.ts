import { assert, describe, it } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"

const request: Model.Request = {
  runId: "r",
  iteration: 1,
  messages: [],
  tools: [],
  deadlineAt: Number.MAX_SAFE_INTEGER
}

/** The tool call ids of `answers` answers from a fresh model of `layer`. */
const idsFrom = (layer: Layer.Layer<Model.Model>, answers: number) =>
  Effect.gen(function* () {
    const model = yield* Model.Model
    const ids: Array<string> = []
    for (let i = 0; i < answers; i++) {
      const response = yield* model.generate(request)
      ids.push(...response.toolCalls.map((call) => call.id))
    }
    return ids
  }).pipe(Effect.provide(layer))

describe("ScriptedModel", () => {
  it.effect(
    "R12 a function model that returns no response is the run's invalid_response, as any model's would be",
    () =>
      Effect.gen(function* () {
        for (const answer of [null, { toolCalls: "x" }, 5]) {
          // What an untyped user function may return.
          const respond = () => answer as unknown as Model.Response
          const result = yield* Run.run({ goal: "g", tools: [] }).pipe(
            Effect.provide(ScriptedModel.layerFunction(respond))
          )
          assert.deepStrictEqual([result.status, result.stopReason], ["failed", "model_error"])
          assert.include(result.detail, "invalid_response")
        }
      })
  )

  it.effect("R10 each model numbers the calls it plays from call_1, whatever other models did", () =>
    Effect.gen(function* () {
      const script = [
        ScriptedModel.toolCalls(["a", {}], ["b", {}, "mine"], ["c", {}]),
        ScriptedModel.toolCall("a", {}),
        ScriptedModel.finalAnswer("done")
      ]
      const first = yield* idsFrom(ScriptedModel.layer(script), 3)
      const second = yield* idsFrom(ScriptedModel.layer(script), 3)
      assert.deepStrictEqual(first, ["call_1", "mine", "call_2", "call_3"])
      assert.deepStrictEqual(second, first)
    })
  )

  it.effect("R10 a function model numbers per build of its layer; a faulty model per model", () =>
    Effect.gen(function* () {
      const answer = ScriptedModel.toolCall("a", {})
      const layer = ScriptedModel.layerFunction(() => answer)
      assert.deepStrictEqual(yield* idsFrom(layer, 2), ["call_1", "call_2"])
      assert.deepStrictEqual(yield* idsFrom(layer, 1), ["call_1"])
      // A call taken out of its response keeps what marks it as the model's to number.
      const moved = Model.response({ toolCalls: answer.toolCalls })
      const faulty = () =>
        FaultyModel.layer(FaultyModel.make([FaultyModel.respond(moved), FaultyModel.respond(answer)]))
      assert.deepStrictEqual(yield* idsFrom(faulty(), 2), ["call_1", "call_2"])
      assert.deepStrictEqual(yield* idsFrom(faulty(), 1), ["call_1"])
    })
  )
})
