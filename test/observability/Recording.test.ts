import { execFileSync } from "node:child_process"
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

  it("R13 a file holds one run: events of two run ids are not_a_run; a run started again is read from its start", () => {
    const other = Effect.runSync(
      Run.run({ goal: "another", tools: [] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("6")]))
      )
    )
    const otherJsonl = other.timeline.map((e) => Recording.line(e) ?? "").join("")
    const mixed = failure(jsonl + otherJsonl)
    assert.strictEqual(mixed?.reason, "not_a_run")
    assert.include(mixed?.detail, "events of two runs")
    // Its id used again (a Recorder before 0.3.0 appended it): the second run only, the first counted as replaced.
    const again = other.timeline.map((e) => Recording.line({ ...e, runId: result.runId }) ?? "").join("")
    const read = Result.getOrThrow(Recording.decode(jsonl + again))
    assert.deepStrictEqual(
      read.events.map((e) => e.seq),
      other.timeline.map((e) => e.seq)
    )
    assert.strictEqual(read.replaced, result.timeline.length)
    // A RunResult with no event, or one that mixes runs, is no run either.
    const encode = Schema.encodeSync(Schema.toCodecJson(RunResult.RunResult))
    for (const timeline of [[], [...result.timeline, ...other.timeline]]) {
      const text = JSON.stringify(encode({ ...result, timeline }))
      assert.strictEqual(failure(text)?.reason, "not_a_run", String(timeline.length))
    }
  })

  it("R13 events a recorder could not write leave a gap, and the rest still reads as the run", () => {
    const lines = jsonl.split("\n")
    const gapped = [...lines.slice(0, 2), ...lines.slice(4)].join("\n")
    const read = Result.getOrThrow(Recording.decode(gapped))
    assert.deepStrictEqual(
      read.events.map((e) => e.seq),
      result.timeline.filter((_, i) => i < 2 || i >= 4).map((e) => e.seq)
    )
  })

  it("R12 values nested deeper than a run records them are not_a_run, not a stack overflow", () => {
    const deep = `${'{"a":'.repeat(5000)}"x"${"}".repeat(5000)}`
    const [started, ...rest] = result.timeline
    const line = (Recording.line(started as never) ?? "").trimEnd().replace(/^\{/, `{"deep":${deep},`)
    const text = `${line}\n${rest.map((e) => Recording.line(e) ?? "").join("")}`
    const error = failure(text)
    assert.strictEqual(error?.reason, "not_a_run")
    assert.include(error?.detail, "nested more than")
  })

  it.effect("R12 only a regular file of at most maxBytes of UTF-8 is read", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      const dirError = yield* Effect.flip(Recording.read(directory))
      assert.deepStrictEqual([dirError.reason, dirError.detail], ["unreadable", "not a regular file (a directory)"])
      yield* fs.writeFileString(`${directory}/run.jsonl`, jsonl)
      const large = yield* Effect.flip(Recording.read(`${directory}/run.jsonl`, { maxBytes: 100 }))
      assert.strictEqual(large.reason, "too_large")
      yield* fs.writeFile(`${directory}/latin1.jsonl`, new Uint8Array([0x7b, 0xe9, 0x7d, 0x0a]))
      const latin1 = yield* Effect.flip(Recording.read(`${directory}/latin1.jsonl`))
      assert.deepStrictEqual([latin1.reason, latin1.detail], ["unreadable", "bytes that are no UTF-8 text"])
      if (process.platform !== "win32") {
        const fifo = `${directory}/fifo`
        execFileSync("mkfifo", [fifo])
        const fifoError = yield* Effect.flip(Recording.read(fifo))
        assert.strictEqual(fifoError.reason, "unreadable")
        assert.include(fifoError.detail, "not a regular file")
      }
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it("R13 an event of a kind this version does not know says so, last line or not: never a torn line", () => {
    const future = JSON.stringify({ _tag: "run.teleported", runId: result.runId, seq: 99, at: 0 })
    for (const text of [`${future}\n${jsonl}`, `${jsonl}${future}`]) {
      const error = failure(text)
      assert.strictEqual(error?.reason, "not_a_run")
      assert.include(error?.detail, 'does not know ("run.teleported"): written by a newer version')
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
