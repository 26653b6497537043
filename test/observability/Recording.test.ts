import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Result, Schema } from "effect"
import * as Recording from "../../src/observability/Recording.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { nodeLayer, tempDirectory } from "./support.ts"

const result = Effect.runSync(
  Run.run({ goal: "What is 2 + 3?", tools: [] }).pipe(
    Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("5")]))
  )
)
const jsonl = result.timeline.map((e) => Recording.line(e) ?? "").join("")
const failure = (text: string) => {
  const decoded = Recording.decode(text, "run.jsonl")
  assert.isTrue(Result.isFailure(decoded))
  return Result.isFailure(decoded) ? decoded.failure : undefined
}

describe("Recording", () => {
  it("reads a JSONL recording back to the run's timeline", () => {
    const recording = Result.getOrThrow(Recording.decode(jsonl))
    assert.deepStrictEqual(recording.events, result.timeline)
    assert.isFalse(recording.torn)
  })

  it("skips a torn last line (a crash in the middle of a write) and says so", () => {
    const finished = result.timeline.at(-1)
    assert.strictEqual(finished?._tag, "run.finished")
    const last = finished === undefined ? "" : (Recording.line(finished) ?? "")
    const torn = jsonl.slice(0, jsonl.length - last.length) + last.slice(0, 25)
    const recording = Result.getOrThrow(Recording.decode(torn))
    assert.deepStrictEqual(recording.events, result.timeline.slice(0, -1))
    assert.isTrue(recording.torn)
  })

  it("R9 R13 a resume's events replace what the dead process recorded past its last commit: no seq twice", () => {
    const timeline = result.timeline
    assert.isAtLeast(timeline.length, 6)
    const lines = (events: ReadonlyArray<(typeof timeline)[number]>) =>
      events.map((e) => Recording.line(e) ?? "").join("")
    // The dead process recorded up to seq 4; its commit held up to seq 2; the resume goes on from seq 3.
    const at = timeline[3]?.at ?? 0
    const resumed = { _tag: "run.resumed", runId: result.runId, seq: 3, at, fromSeq: 3, reason: "restart", inDoubt: [] }
    const crashed = `${lines(timeline.slice(0, 5))}${JSON.stringify(resumed)}\n${lines(timeline.slice(4))}`
    const recording = Result.getOrThrow(Recording.decode(crashed))
    assert.deepStrictEqual(
      recording.events.map((e) => [e.seq, e._tag]),
      [...timeline.slice(0, 3), resumed, ...timeline.slice(4)].map((e) => [e.seq, e._tag])
    )
    assert.strictEqual(recording.replaced, 2)
    assert.strictEqual(Result.getOrThrow(Recording.decode(jsonl)).replaced, 0)
  })

  it("reads a last event whose line break is not written yet", () => {
    const recording = Result.getOrThrow(Recording.decode(jsonl.trimEnd()))
    assert.strictEqual(recording.events.length, result.timeline.length)
    assert.isFalse(recording.torn)
  })

  it("reads a RunResult as JSON: its timeline and the result", () => {
    const text = JSON.stringify(Schema.encodeSync(Schema.toCodecJson(RunResult.RunResult))(result))
    const recording = Result.getOrThrow(Recording.decode(text))
    assert.deepStrictEqual(recording.events, result.timeline)
    assert.strictEqual(recording.result?.stopReason, "goal_reached")
  })

  it("a damaged line that is not the last is bad JSON, by its number", () => {
    const lines = jsonl.split("\n")
    lines[1] = "{ not json"
    const error = failure(lines.join("\n"))
    assert.strictEqual(error?.reason, "bad_json")
    assert.include(error?.message, "run.jsonl: not JSON: line 2")
  })

  it("JSON that is no run is not_a_run, saying what was expected", () => {
    for (const text of ['{"hello":"world"}', '{"_tag":"nonsense","seq":0}\n', "", '{"timeline":[1]}']) {
      const error = failure(text)
      assert.strictEqual(error?.reason, "not_a_run", text)
      assert.include(error?.message, "run.jsonl: not a run")
    }
  })

  it("text that is no JSON at all is bad_json", () => {
    assert.strictEqual(failure("<html>")?.reason, "bad_json")
  })

  it.effect("a file that is not there is missing", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const error = yield* Effect.flip(Recording.read(`${directory}/nope.jsonl`))
      assert.strictEqual(error.reason, "missing")
      assert.include(error.message, "nope.jsonl: no such file")
      yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(`${directory}/run.jsonl`, jsonl))
      assert.strictEqual((yield* Recording.read(`${directory}/run.jsonl`)).events.length, result.timeline.length)
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )
})
