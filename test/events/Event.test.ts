import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Result, Schema } from "effect"
import * as Counters from "../../src/events/Counters.ts"
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

  it("R9 a success written with its observation's digest still decodes, and folds to the same counters", () => {
    const codec = Schema.toCodecJson(Schema.Array(Event.Event))
    const stamp = (seq: number) => ({ runId: "r", seq, at: 1000 + seq })
    const now = [
      { _tag: "tool.started", callId: "c1", name: "ls", attempt: 1, deadlineAt: 5000, layer: "tool", ...stamp(0) },
      {
        _tag: "tool.succeeded",
        callId: "c1",
        name: "ls",
        sideEffect: "read",
        observation: "a b",
        input: {},
        output: ["a", "b"],
        ...stamp(1)
      }
    ]
    // Earlier logs carried the observation's digest beside the observation.
    const before = [now[0], { ...now[1], observationDigest: "digest" }]
    const old = Schema.decodeUnknownSync(codec)(before)
    const fresh = Schema.decodeUnknownSync(codec)(now)
    assert.deepStrictEqual(Counters.fold([...old, ...old]), Counters.fold([...fresh, ...fresh]))
    assert.strictEqual(Counters.fold([...fresh, ...fresh]).unchangedObservations, 1)
  })

  it("R8 a tool.started is an attempt: without its number and deadline (format 1's call start), or as format 1's tool.attempted, it does not decode", () => {
    const codec = Schema.toCodecJson(Event.Event)
    const stamp = { runId: "r", seq: 0, at: 1000 }
    const attempt = {
      _tag: "tool.started",
      callId: "c1",
      name: "ls",
      attempt: 1,
      deadlineAt: 5000,
      layer: "tool",
      ...stamp
    }
    assert.strictEqual(Schema.decodeUnknownSync(codec)(attempt)._tag, "tool.started")
    assert.isTrue(
      Result.isFailure(Schema.decodeUnknownResult(codec)({ _tag: "tool.started", callId: "c1", name: "ls", ...stamp }))
    )
    assert.isTrue(Result.isFailure(Schema.decodeUnknownResult(codec)({ ...attempt, _tag: "tool.attempted" })))
  })
})

describe("Timeline lines in a terminal", () => {
  it("R3.1 control characters from the goal or the model are written out, never sent raw", () => {
    const started: Event.Event = {
      _tag: "run.started",
      runId: "r",
      seq: 0,
      at: 0,
      goal: "hi\u001b]0;owned\u0007\u001b[2J\u009b",
      tools: [],
      model: "m"
    } as unknown as Event.Event
    const line = Timeline.formatEvent(started, 0)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is looked for.
    assert.notMatch(line, /[\u0000-\u001f\u007f-\u009f]/)
    assert.include(line, "\\x1b]0;owned\\x07\\x1b[2J\\x9b")
  })
})
