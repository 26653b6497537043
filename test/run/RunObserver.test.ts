/**
 * A run's observers are user code: one that throws, gives no attachment or never settles
 * cannot keep the run from giving its result (R12), nor the other observers from seeing it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunObserver from "../../src/run/RunObserver.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"

const answer = ScriptedModel.layer([ScriptedModel.finalAnswer("done")])

/** An observer that keeps the tags it sees. */
const watching = () => {
  const seen: Array<Event.Event["_tag"]> = []
  const observer: RunObserver.Observer = { attach: () => ({ event: (e) => seen.push(e._tag), settled: Effect.void }) }
  return { seen, observer }
}

const runWith = (broken: RunObserver.Observer) =>
  Effect.gen(function* () {
    const good = watching()
    const started = Date.now()
    // Observers stack as their layers are provided in turn (merged, one layer would win).
    const result = yield* Run.run({ goal: "x", tools: [], time: { stopGrace: "100 millis" } }).pipe(
      Effect.provide(RunObserver.layer(Effect.succeed(good.observer))),
      Effect.provide(Layer.merge(answer, RunObserver.layer(Effect.succeed(broken))))
    )
    return { result, seen: good.seen, millis: Date.now() - started }
  })

describe("RunObserver (R12)", () => {
  const broken: ReadonlyArray<readonly [string, RunObserver.Observer]> = [
    [
      "attach throws",
      {
        attach: () => {
          throw new Error("boom")
        }
      }
    ],
    ["attach gives nothing", { attach: () => undefined as unknown as RunObserver.Attached }],
    [
      "attach gives no event function",
      { attach: () => ({ event: 5, settled: Effect.void }) as unknown as RunObserver.Attached }
    ],
    [
      "attach gives no settled effect",
      { attach: () => ({ event: () => {}, settled: 5 }) as unknown as RunObserver.Attached }
    ],
    ["settled fails", { attach: () => ({ event: () => {}, settled: Effect.die(new Error("boom")) }) }],
    // Getters that answer the check, then throw (review 120: the run never ended, nor could be interrupted).
    ...(["event", "settled"] as const).map((field): readonly [string, RunObserver.Observer] => [
      `attach gives a ${field} getter that throws on its second read`,
      {
        attach: () => {
          let reads = 0
          const fields = { event: () => {}, settled: Effect.void }
          return Object.defineProperty({ ...fields }, field, {
            get: () => {
              reads += 1
              if (reads > 1) throw new Error("second read")
              return fields[field]
            }
          }) as RunObserver.Attached
        }
      }
    ])
  ]
  for (const [name, observer] of broken) {
    it.live(`R12 an observer whose ${name}: the run ends as it would, the other observers see it all`, () =>
      Effect.gen(function* () {
        const { result, seen } = yield* runWith(observer)
        assert.strictEqual(result.stopReason, "goal_reached")
        assert.deepStrictEqual(
          seen,
          result.timeline.map((e) => e._tag)
        )
      })
    )
  }

  it.live(
    "R12 an observer that never settles holds the result for the stop grace at most, and at least 5 s (a recorder's writes)",
    () =>
      Effect.gen(function* () {
        // The stop grace is 100 ms: a grace that short is for cancels, not for a recorder's disk.
        const { result, millis } = yield* runWith({ attach: () => ({ event: () => {}, settled: Effect.never }) })
        assert.strictEqual(result.stopReason, "goal_reached")
        assert.isAtLeast(millis, 4_900, "it is waited for, as a recorder finishing its writes is")
      }),
    30_000
  )

  it.live(
    "R12 an observer whose settled cannot be interrupted holds the result for its wait, no longer",
    () =>
      Effect.gen(function* () {
        const { result, millis } = yield* runWith({
          attach: () => ({ event: () => {}, settled: Effect.uninterruptible(Effect.never) })
        })
        assert.strictEqual(result.stopReason, "goal_reached")
        assert.isAtLeast(millis, 4_900)
      }),
    30_000
  )

  it.live(
    "R8 R5.1 an observer that cancels the run from its event callback: every observer still sees the log's order",
    () =>
      Effect.gen(function* () {
        const handles = new Map<string, Run.Handle<never>>()
        const seen: Array<number> = []
        const canceller: RunObserver.Observer = {
          attach: (runId) => ({
            event: (e) => {
              const handle = handles.get(runId)
              if (e._tag === "tool.started" && handle !== undefined) Effect.runFork(handle.cancel)
            },
            settled: Effect.void
          })
        }
        const recorder: RunObserver.Observer = {
          attach: () => ({
            event: (e) => {
              seen.push(e.seq)
            },
            settled: Effect.void
          })
        }
        const hangs = Tool.make({
          name: "hangs",
          description: "Never answers",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          handler: () => Effect.never
        })
        const result = yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "x", tools: [hangs] })
            handles.set(handle.runId, handle)
            return yield* handle.result
          })
        ).pipe(
          // The model answers once the handle is known to the canceller.
          Effect.provide(
            ScriptedModel.layerFunction(() => Effect.as(Effect.sleep("20 millis"), ScriptedModel.toolCall("hangs", {})))
          ),
          Effect.provide(RunObserver.layer(Effect.succeed(recorder))),
          Effect.provide(RunObserver.layer(Effect.succeed(canceller)))
        )
        assert.strictEqual(result.status, "cancelled")
        // Before, the cancel's run.stopping reached the recorder inside tool.started's delivery: 6, 8, 7, 9.
        assert.deepStrictEqual(
          seen,
          result.timeline.map((e) => e.seq)
        )
      })
  )
})
