/**
 * A recording two processes wrote (R9.4, R13): A, a process a resume took the run from, may
 * write on into the file (fenced off, it learns so at its next commit), before and among the
 * lines of B, the resumed run. Each recorder stamps its lines with its writer, and the file
 * reads as the journal holds it: A's lines below B's resume, then B's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Recording from "../../src/observability/Recording.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"

const result = Effect.runSync(
  Run.run({ goal: "What is 2 + 3?", tools: [] }).pipe(
    Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("5")]))
  )
)
const [started, filler] = result.timeline
const finished = result.timeline.at(-1)

type Writer = "A" | "B" | "C"

/** A line of `writer` for event `seq`: A's at whole seconds, B's a millisecond later; `end` is a `run.finished`. */
const line = (writer: Writer, seq: number, end = false) => ({
  ...(seq === 0 ? started : end ? finished : filler),
  seq,
  at: 1_000 * seq + (writer === "B" ? 1 : 0),
  recordedBy: writer
})

/** B's resume from `seq`. */
const resume = (seq: number) => ({
  _tag: "run.resumed",
  runId: result.runId,
  seq,
  at: 1_000 * seq + 1,
  fromSeq: seq,
  reason: "restart",
  inDoubt: [],
  recordedBy: "B"
})

type Line = ReturnType<typeof line> | ReturnType<typeof resume>

const read = (file: ReadonlyArray<Line>) => {
  const decoded = Recording.decode(file.map((l) => `${JSON.stringify(l)}\n`).join(""), "two.jsonl")
  return Result.isSuccess(decoded) ? decoded.success.events.map((e) => e.at) : decoded.failure.message
}

/** Every way of interleaving `a` and `b`, each in its own order. */
const interleavings = <T>(a: ReadonlyArray<T>, b: ReadonlyArray<T>): ReadonlyArray<ReadonlyArray<T>> => {
  if (a.length === 0) return [b]
  if (b.length === 0) return [a]
  const [x, ...restA] = a
  const [y, ...restB] = b
  return [
    ...interleavings(restA, b).map((rest) => [x as T, ...rest]),
    ...interleavings(a, restB).map((rest) => [y as T, ...rest])
  ]
}

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i)

describe("Recording of two writers", () => {
  it("R9.4 R13 every interleaving of a replaced process's lines with the resumed run's reads as the journal holds it (review 172)", () => {
    assert.strictEqual(finished?._tag, "run.finished")
    let cases = 0
    // A committed up to `committed - 1`; its recorder had written up to `before` when B's resume
    // came, and writes on to `upTo` (its committed lines late, then lines never committed, its
    // own ending last when `aEnds`); B writes `bLines` lines after its resume, its ending last
    // when `bEnds` (else it is parked, or still going).
    for (const committed of [1, 2, 3])
      for (const before of range(0, committed + 2))
        for (const upTo of range(Math.max(before, committed - 1), committed + 3))
          for (const aEnds of [false, true])
            for (const bLines of [0, 1, 2, 3])
              for (const bEnds of [false, true]) {
                if (bEnds && bLines === 0) continue
                if (aEnds && upTo < committed) continue
                const a = range(before + 1, upTo).map((seq) => line("A", seq, aEnds && seq === upTo))
                const b = [
                  resume(committed),
                  ...range(1, bLines).map((i) => line("B", committed + i, bEnds && i === bLines))
                ]
                const truth = [...range(0, committed - 1).map((seq) => seq * 1_000), ...b.map((l) => l.at)]
                for (const late of interleavings(a, b)) {
                  const file = [...range(0, before).map((seq) => line("A", seq)), ...late]
                  assert.deepStrictEqual(read(file), truth, JSON.stringify(file.map((l) => [l.recordedBy, l.seq])))
                  cases++
                }
              }
    assert.isAbove(cases, 10_000)
  })

  it("R9.4 R13 a replaced process's late batches never push the resumed run's lines and ending out (review 172)", () => {
    const file = [
      ...range(0, 5).map((seq) => line("A", seq)),
      resume(3),
      ...range(6, 10).map((seq) => line("A", seq)),
      line("B", 4),
      ...range(11, 13).map((seq) => line("A", seq)),
      line("B", 5),
      line("B", 6),
      line("B", 7, true)
    ]
    // Before: [0, 1000, 2000, 3001, 6000 … 13000], B's 4 to 7 and its ending lost.
    assert.deepStrictEqual(read(file), [0, 1_000, 2_000, 3_001, 4_001, 5_001, 6_001, 7_001])
  })

  it("R9.4 R13 a resumed run still going (parked) is not handed the replaced process's lines, nor its ending (review 172)", () => {
    const start = [...range(0, 6).map((seq) => line("A", seq)), resume(3), line("B", 4), line("B", 5)]
    // Before: A's 7 to 9 appended to the run; with A's ending, the run read as ended with A's status.
    assert.deepStrictEqual(
      read([...start, line("A", 7), line("A", 8), line("A", 9)]),
      [0, 1_000, 2_000, 3_001, 4_001, 5_001]
    )
    assert.deepStrictEqual(read([...start, line("A", 7), line("A", 8, true)]), [0, 1_000, 2_000, 3_001, 4_001, 5_001])
  })

  it("R13 a writer that goes on after another started the run again is a second run of one id: not_a_run", () => {
    const again = { ...line("B", 0), at: 5 }
    const twice = read([line("A", 0), line("A", 1), again, line("A", 2), line("B", 1)])
    assert.include(twice, "not a run: event 2 follows another run's start")
    // One writer's lines that go back are two runs of one id as well, stamped or not.
    assert.include(read([line("A", 0), line("A", 1), line("A", 1)]), "event 1 follows event 1")
    // Started again once the first had stopped writing: the second run, the first replaced.
    assert.deepStrictEqual(read([line("A", 0), line("A", 1), again, line("B", 1)]), [5, 1_001])
  })

  it("R9.4 R13 a writer first seen after another's start or resume is held as a replaced one (review 174)", () => {
    // B started the run again from nothing (a take-over before A's first commit, its file set
    // aside); A, fenced off at its next commit, writes on into B's file.
    const started = { ...line("B", 0), at: 1 }
    const file = [started, line("A", 3), line("B", 1), line("A", 4), line("B", 2, true), line("A", 5)]
    // Before: A's 3 to 5 read as the run's, B's ending buried under them.
    assert.deepStrictEqual(read(file), [1, 1_001, 2_001])
    // A's line landing between B's setting its file aside and B's start (review 176: refused as two runs).
    assert.deepStrictEqual(read([line("A", 2), ...file]), [1, 1_001, 2_001])
    // A file that begins with B's resume from 3: A's lines first seen after it are held below it.
    assert.deepStrictEqual(read([resume(3), line("A", 2), line("A", 3), line("B", 4)]), [2_000, 3_001, 4_001])
    // A third writer after the run's ending changes nothing.
    const ended = [...range(0, 2).map((seq) => line("A", seq)), resume(3), line("B", 4, true)]
    assert.deepStrictEqual(read([...ended, line("C", 5)]), read(ended))
  })
})
