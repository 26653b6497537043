import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Event from "../../src/events/Event.ts"
import * as Timeline from "../../src/events/Timeline.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { echo, makeStore } from "../support/tools.ts"

const store = makeStore()
const script = Layer.mergeAll(
  ScriptedModel.layer([
    ScriptedModel.toolCall("write_json_file", { artifact_name: "r.json" }),
    ScriptedModel.toolCalls(["write_json_file", { artifact_name: "r.json", content: "{}" }], ["echo", { text: "x" }]),
    ScriptedModel.finalAnswer("done")
  ]),
  NodeServices.layer
)

describe("Event", () => {
  it.effect(
    "R8 every event of a run is valid against the Event schema, and the timeline round-trips through JSON",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "x", tools: [store.write, echo] })
        const codec = Schema.toCodecJson(Schema.Array(Event.Event))
        const json = JSON.stringify(Schema.encodeUnknownSync(codec)(result.timeline))
        const decoded = Schema.decodeUnknownSync(codec)(JSON.parse(json))
        assert.deepStrictEqual(decoded, result.timeline)
        const kinds = new Set(result.timeline.map((e) => e._tag))
        for (const tag of [
          "run.started",
          "state.changed",
          "model.requested",
          "model.responded",
          "tool.started",
          "tool.failed",
          "tool.succeeded",
          "recovery.started",
          "recovery.completed",
          "termination.decided",
          "validation.checked",
          "run.finished"
        ]) {
          assert.isTrue(kinds.has(tag as Event.Event["_tag"]), tag)
        }
      }).pipe(Effect.provide(script))
  )

  it.effect("R6.5 the run result is valid against the RunResult schema", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      assert.isTrue(Schema.is(RunResult.RunResult)(result))
      for (const key of ["status", "stopReason", "checks", "evidence", "counters", "elapsedMillis", "timeline"]) {
        assert.property(result, key)
      }
    }).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.finalAnswer("ok")]), NodeServices.layer)))
  )

  it.effect("the timeline renders one line per event, with time since the start", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      const lines = Timeline.format(result.timeline).split("\n")
      assert.strictEqual(lines.length, result.timeline.length)
      assert.match(lines[0] ?? "", /^\s+\+0ms {2}run\.started/)
      assert.include(lines[lines.length - 1], "run.finished        completed (goal_reached)")
    }).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.finalAnswer("ok")]), NodeServices.layer)))
  )
})
