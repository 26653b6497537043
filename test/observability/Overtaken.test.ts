/**
 * A run another process took over before its last commit (R9.4), as the observability
 * surface shows it (R13): its caller is told `internal_error`, its own ending is never
 * recorded, and the other process's ending is the journal's (review 166).
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, FileSystem, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import * as Journal from "../../src/journal/Journal.ts"
import * as LiveView from "../../src/observability/LiveView.ts"
import * as Recorder from "../../src/observability/Recorder.ts"
import * as Recording from "../../src/observability/Recording.ts"
import * as Viewer from "../../src/observability/Viewer.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { layers } from "../support/restart.ts"

const model = ScriptedModel.layerFunction(() => ScriptedModel.finalAnswer("answer"))

/** Options whose stop hook holds the first run's answer for 600 ms, long enough for another process to take it. */
const held = () => {
  const seen = { hooks: 0, waiting: false }
  const hook = Validation.stopHook("slow", () =>
    Effect.suspend(() => {
      seen.hooks++
      if (seen.hooks > 1) return Effect.succeed({ passed: true, detail: "ok" })
      seen.waiting = true
      return Effect.as(Effect.sleep("600 millis"), { passed: true, detail: "ok" })
    })
  )
  return { seen, options: { goal: "x", tools: [], validation: { stopHooks: [hook] } } }
}

/** Another process resumes the run while its first holds its answer, and finishes it (recorded under `recorded`). */
const takeOver = (
  runId: string,
  seen: { readonly waiting: boolean },
  options: ReturnType<typeof held>["options"],
  recorded?: ReturnType<typeof Recorder.layer>
) =>
  Effect.gen(function* () {
    while (!seen.waiting) yield* Effect.yieldNow
    const otherProcess = FaultyJournal.make(yield* Journal.Journal, {}).journal
    const theirs = yield* Run.resume(runId, options).pipe(
      Effect.provide(model),
      Effect.provide(recorded ?? Layer.empty),
      Effect.provideService(Journal.Journal, otherProcess)
    )
    yield* TestClock.adjust("1 second")
    return theirs
  })

describe("A run another process took over, as observed (R13, R9.4)", () => {
  it.effect(
    "R13 R9.4 the page of its result explains the ending its caller was given, not its log's (review 166)",
    () =>
      Effect.gen(function* () {
        const { seen, options } = held()
        const first = yield* Effect.forkChild(Run.run({ ...options, runId: "o1" }).pipe(Effect.provide(model)))
        yield* takeOver("o1", seen, options)
        const mine = yield* Fiber.join(first)
        assert.deepStrictEqual([mine.status, mine.stopReason], ["failed", "internal_error"])
        const explanation = Viewer.html(mine).match(/<pre id="explanation">([\s\S]*?)<\/pre>/)?.[1] ?? ""
        // Before: "completed (goal_reached) … nothing: the run completed and validation agreed".
        assert.include(explanation, "Another process took the run over")
        assert.notInclude(explanation, "nothing: the run completed")
      }).pipe(Effect.provide(Layer.mergeAll(layers, NodeServices.layer)))
  )

  it.effect("R13 R9.4 a live view of its handle ends with the ending the handle gives (review 166)", () =>
    Effect.gen(function* () {
      const { seen, options } = held()
      const written: Array<string> = []
      const handle = yield* Run.start({ ...options, runId: "o2" }).pipe(Effect.provide(model))
      const watching = yield* Effect.forkChild(
        LiveView.watch(handle, { tty: false, write: (t) => void written.push(t) })
      )
      yield* takeOver("o2", seen, options)
      const mine = yield* handle.result
      yield* Fiber.join(watching)
      assert.deepStrictEqual([mine.status, mine.stopReason], ["failed", "internal_error"])
      const shown = written.join("")
      // Before: "ended  completed  goal_reached".
      assert.include(shown, "ended  failed  internal_error")
      assert.notInclude(shown, "ended  completed")
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(layers, NodeServices.layer)))
  )

  it.effect(
    "R13 R9.4 recorded by both processes into one directory, it reads as the journal holds it (review 166)",
    () =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* fs.makeTempDirectoryScoped({ prefix: "overtaken-" })
        const recorded = Recorder.layer({ directory })
        const { seen, options } = held()
        const first = yield* Effect.forkChild(
          Run.run({ ...options, runId: "o3" }).pipe(Effect.provide(model), Effect.provide(recorded))
        )
        const theirs = yield* takeOver("o3", seen, options, recorded)
        const mine = yield* Fiber.join(first)
        assert.strictEqual(mine.stopReason, "internal_error")
        const text = yield* fs.readFileString(`${directory}/o3.jsonl`)
        // Each process's lines stamped with its writer: two in the file.
        const stamps = new Set(
          text
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l).recordedBy)
        )
        assert.strictEqual(stamps.size, 2)
        assert.isFalse(stamps.has(undefined))
        const read = Recording.decode(text, "o3.jsonl")
        // Before: refused, "event 8 follows event 12: the events of two runs of one id, written at once?".
        if (Result.isFailure(read)) return assert.fail(read.failure.message)
        assert.deepStrictEqual(
          read.success.events.map((e) => e.seq),
          theirs.timeline.map((e) => e.seq)
        )
        const last = read.success.events.at(-1)
        assert.strictEqual(last?._tag === "run.finished" ? last.status : last?._tag, theirs.status)
        assert.isAbove(read.success.replaced, 0)
      }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(layers, NodeServices.layer)))
  )
})
