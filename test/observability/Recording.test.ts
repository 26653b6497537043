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

/** The run's first events and its ending, to make lines of two writers from. */
const [started, filler] = result.timeline
const finished = result.timeline.at(-1)

/** An event `seq` as a process's recorder writes it: A's at whole seconds, B's a millisecond later, each stamped. */
const as = (seq: number, writer: "A" | "B", event: unknown = seq === 0 ? started : filler) => ({
  ...(event as object),
  seq,
  at: 1_000 * seq + (writer === "B" ? 1 : 0),
  recordedBy: writer
})

/** B's resume from seq 3. */
const resumed = {
  _tag: "run.resumed",
  runId: result.runId,
  seq: 3,
  at: 3_001,
  fromSeq: 3,
  reason: "restart",
  inDoubt: [],
  recordedBy: "B"
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

  it("R9.4 R13 a replaced process's late events, written among the resumed run's, are not the run's (reviews 166, 168)", () => {
    const seqs = (to: number) => Array.from({ length: to + 1 }, (_, seq) => as(seq, "A"))
    // A records up to seq 4, its commit holding up to 2; B resumes from 3 and goes on to 5. A, fenced
    // off only at its next commit, goes on meanwhile (5, 6), then B (6, 7). A's 5 follows A's 4 only;
    // A's 6 follows both A's 5 and B's 5, and goes with the line before it, A's.
    const file = [...seqs(4), resumed, as(4, "B"), as(5, "B"), as(5, "A"), as(6, "A"), as(6, "B"), as(7, "B")]
    const recording = Result.getOrThrow(Recording.decode(file.map((e) => `${JSON.stringify(e)}\n`).join("")))
    // Before: refused as two runs (review 166), or A's 6 kept and B's 6 and 7 taken for late (review 168).
    assert.deepStrictEqual(
      recording.events.map((e) => e.at),
      [0, 1_000, 2_000, 3_001, 4_001, 5_001, 6_001, 7_001]
    )
    assert.strictEqual(recording.replaced, 4)
  })

  it("R9.4 R13 a replaced process's late line that could be the resumed run's next never takes the rest of the run (reviews 169, 171)", () => {
    assert.strictEqual(finished?._tag, "run.finished")
    const read = (file: ReadonlyArray<unknown>) =>
      Result.getOrThrow(Recording.decode(file.map((e) => `${JSON.stringify(e)}\n`).join(""))).events.map((e) => e.at)
    const before = [as(0, "A"), as(1, "A"), as(2, "A"), as(3, "A")]
    // A's late 5 (after B's 4) follows A's 4 and B's 4 alike; B's 5, 6 and ending 7 are B's whichever it was.
    const late = read([
      ...before,
      as(4, "A"),
      resumed,
      as(4, "B"),
      as(5, "A"),
      as(5, "B"),
      as(6, "B"),
      as(7, "B", finished)
    ])
    // Before: [0, 1000, 2000, 3001, 4001, 5000], B's ending taken for A's.
    assert.strictEqual(late.at(-1), 7_001)
    assert.deepStrictEqual(late.slice(0, 5), [0, 1_000, 2_000, 3_001, 4_001])
    // A's one late 4, between B's 4 and 5: the run is read to its ending (before: unfinished at 4).
    assert.deepStrictEqual(
      read([...before, resumed, as(4, "B"), as(4, "A"), as(5, "B"), as(6, "B"), as(7, "B", finished)]),
      [0, 1_000, 2_000, 3_001, 4_001, 5_001, 6_001, 7_001]
    )
    // A process taken over writes more late lines (5 to 10) than the resumed run had left after the
    // tie (5 to its ending, 7): the run's ending wins (review 171: the longer tail took the run).
    const zombie = Array.from({ length: 6 }, (_, i) => as(5 + i, "A"))
    const ran = read([
      ...before,
      as(4, "A"),
      resumed,
      as(4, "B"),
      as(5, "B"),
      as(6, "B"),
      as(7, "B", finished),
      ...zombie
    ])
    assert.deepStrictEqual(ran, [0, 1_000, 2_000, 3_001, 4_001, 5_001, 6_001, 7_001])
    // A batch the resumed run's recorder lost (its 6), over a dead process's lines up to 6: its 7 and
    // ending are its own (review 171: taken for the dead process's late lines).
    const dead = [as(4, "A"), as(5, "A"), as(6, "A")]
    const lost = read([...before, ...dead, resumed, as(4, "B"), as(5, "B"), as(7, "B"), as(8, "B", finished)])
    assert.deepStrictEqual(lost, [0, 1_000, 2_000, 3_001, 4_001, 5_001, 7_001, 8_001])
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

  it.effect(
    "R12 R13 a torn last line cut inside a character is skipped; bytes that are no UTF-8 elsewhere are unreadable",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const fs = yield* FileSystem.FileSystem
        const bytes = (text: string, ...more: Array<number>) =>
          new Uint8Array([...new TextEncoder().encode(text), ...more])
        // "你" is e4 bd a0, "好" e5 a5 bd: the crash cut the second after its second byte.
        for (const [name, content] of [
          ["cut.jsonl", bytes(`${jsonl}{"_tag":"model.responded","text":"`, 0xe4, 0xbd, 0xa0, 0xe5, 0xa5)],
          ["cut-alone.jsonl", bytes(jsonl, 0xf0, 0x9f, 0x98)]
        ] as const) {
          yield* fs.writeFile(`${directory}/${name}`, content)
          const recording = yield* Recording.read(`${directory}/${name}`)
          assert.deepStrictEqual(recording.events, result.timeline, name)
          assert.isTrue(recording.torn, name)
        }
        // Cut short anywhere but at the end, or bytes no UTF-8 has, the file is unreadable, the last line or not.
        const lines = jsonl.split("\n")
        const firstLine = `${lines[0]}\n`
        for (const [name, content] of [
          ["inner.jsonl", bytes(firstLine.slice(0, 20), 0xe4, 0xbd, ...new TextEncoder().encode(firstLine.slice(20)))],
          ["last.jsonl", bytes(`${jsonl}{"_tag":"`, 0xff, 0x41)],
          ["lone.jsonl", bytes(`${jsonl}{"_tag":"`, 0xe4, 0x41)]
        ] as const) {
          yield* fs.writeFile(`${directory}/${name}`, content)
          const error = yield* Effect.flip(Recording.read(`${directory}/${name}`))
          assert.deepStrictEqual([error.reason, error.detail], ["unreadable", "bytes that are no UTF-8 text"], name)
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

  it("R13 a RunResult a newer version wrote says so too: an event kind, a status or a stop reason it does not know (review 187)", () => {
    const json = Schema.encodeSync(Schema.toCodecJson(RunResult.RunResult))(result) as Record<string, unknown> & {
      readonly timeline: ReadonlyArray<unknown>
    }
    const future = { _tag: "run.teleported", runId: result.runId, seq: 1, at: 0 }
    for (const [value, says] of [
      [
        { ...json, timeline: [json.timeline[0], future, ...json.timeline.slice(1)] },
        'event 2 of its timeline: an event of a kind this version does not know ("run.teleported")'
      ],
      [{ ...json, status: "paused" }, 'a status this version does not know ("paused")'],
      [{ ...json, stopReason: "token_rate_limited" }, 'a stopReason this version does not know ("token_rate_limited")']
    ] as const) {
      const error = failure(JSON.stringify(value))
      assert.strictEqual(error?.reason, "not_a_run")
      assert.include(error?.detail, says)
      assert.include(error?.detail, "written by a newer version")
    }
  })

  it("R12 an error names what a file says in a few words: a run id of 1 MiB is cut (review 187)", () => {
    const other = { ...(started as object), runId: "x".repeat(1 << 20) }
    const error = failure(`${jsonl}${JSON.stringify(other)}\n`)
    assert.include(error?.detail, "events of two runs")
    assert.isBelow(error?.message.length ?? Infinity, 500)
  })

  it.effect(
    "R12 a maxBytes that is no positive integer is invalid_options, never a read without bound (review 187)",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${directory}/run.jsonl`, jsonl)
        for (const maxBytes of [Number.NaN, 0, -1, 0.5, Number.POSITIVE_INFINITY, "100" as unknown as number]) {
          const error = yield* Effect.flip(Recording.read(`${directory}/run.jsonl`, { maxBytes }))
          assert.strictEqual(error.reason, "invalid_options", String(maxBytes))
          assert.include(error.detail, "maxBytes")
        }
        assert.deepStrictEqual(
          (yield* Recording.read(`${directory}/run.jsonl`, { maxBytes: 1 << 20 })).events,
          result.timeline
        )
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it("R12 R13 an event at a time no Date can hold is not_a_run, by its line and field, in a recording or a result", () => {
    const at = (time: number, index: number) =>
      result.timeline.map((e, i) => Recording.line(i === index ? { ...e, at: time } : e) ?? "").join("")
    const last = result.timeline.length - 1
    for (const [text, where] of [
      [at(1e20, 0), "line 1"],
      [at(1e20, 1), "line 2"],
      // The last line, its line break not written yet: whole JSON, so no torn line.
      [at(1e20, last).trimEnd(), `line ${last + 1}`]
    ] as const) {
      const error = failure(text)
      assert.strictEqual(error?.reason, "not_a_run", where)
      assert.include(error?.detail, `${where}: its "at" (100000000000000000000) is no time a date can hold`)
    }
    // The bounds a Date holds are times still.
    assert.isTrue(Result.isSuccess(Recording.decode(at(-8.64e15, 0))))
    assert.isTrue(Result.isSuccess(Recording.decode(at(8.64e15, last))))
    const encode = Schema.encodeSync(Schema.toCodecJson(RunResult.RunResult))
    const timeline = result.timeline.map((e, i) => (i === 2 ? { ...e, at: -1e300 } : e))
    const error = failure(JSON.stringify(encode({ ...result, timeline })))
    assert.strictEqual(error?.reason, "not_a_run")
    assert.include(error?.detail, 'event 3 of its timeline: its "at" (-1e+300) is no time a date can hold')
  })

  it("R12 what a file says is quoted with its control characters written out: no file clears the terminal", () => {
    const error = failure("\x1b[2J\x1b[3J\x1b[Hxx\n")
    assert.strictEqual(error?.reason, "bad_json")
    assert.notInclude(error?.message, "\x1b")
    assert.include(error?.message, "\\x1b[2J")
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
