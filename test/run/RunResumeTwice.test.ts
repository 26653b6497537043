/**
 * A run killed again while it resumes (R9, R3.8): the second restart must end as the first
 * one would have. Found by the real-crash suite (test/run/DurableCrash.test.ts): a call in
 * doubt without a status query was recorded failed (outcome unknown) by the first restart,
 * which died before committing its stop; the second restart took that failure for a settled
 * call and asked the model to go on, so the run ended `completed` with the payment in doubt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"

/** Pays twice (c1, c2), then answers. */
const model = ScriptedModel.layerFunction((request) =>
  request.iteration <= 2
    ? ScriptedModel.toolCall("pay", { amount: request.iteration }, `c${request.iteration}`)
    : ScriptedModel.finalAnswer("paid")
)

type When = "before" | "after"

/** Runs `r1`, killed at `first`; resumes it, killed at `second` of the resumed run; resumes it again to its end. */
const killedTwice = (reconcile: boolean, first: readonly [number, When], second: readonly [number, When]) =>
  Effect.gen(function* () {
    const payment = FaultyTools.ledgered({
      name: "pay",
      idempotent: false,
      sideEffect: "external",
      behaviour: () => "apply",
      reconcile
    })
    const tools = [payment.tool]
    const store = yield* Journal.Journal
    const once = FaultyJournal.make(store, { crashAt: { commit: first[0], when: first[1] } })
    // A process that dies gives its caller no result: it is interrupted.
    yield* Effect.exit(
      Run.run({ goal: "pay twice", runId: "r1", tools }).pipe(Effect.provideService(Journal.Journal, once.journal))
    )
    const twice = FaultyJournal.make(store, { crashAt: { commit: second[0], when: second[1] } })
    yield* TestClockDriver.drive(Run.resume("r1", { tools }, "restart")).pipe(
      Effect.provideService(Journal.Journal, twice.journal),
      Effect.exit
    )
    const result = yield* TestClockDriver.drive(Run.resume("r1", { tools }, "restart"))
    return { result, paid: ["r1:c1", "r1:c2"].map((key) => payment.ledger.count(key)) }
  }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, Approval.layerMemory, model)))

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

describe("Run.resume after a crash during a resume (R9)", () => {
  it.effect(
    "R3.8 a call in doubt without a status query stays the run's stop when the restart that recorded it dies: unknown_outcome, the model not asked again",
    () =>
      Effect.gen(function* () {
        // Commit 4 of the run, c1's result, is lost: c1 paid, in doubt. Commit 1 of the restart holds
        // run.resumed and c1's failure (outcome unknown); the restart dies right after it.
        const { result, paid } = yield* killedTwice(false, [4, "before"], [1, "after"])
        assert.strictEqual(result.status, "unknown_outcome")
        assert.deepStrictEqual(
          result.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        assert.deepStrictEqual(paid, [1, 0])
        assert.deepStrictEqual(
          ofTag(result.timeline, "model.responded").map((e) => e.iteration),
          [1]
        )
        assert.lengthOf(ofTag(result.timeline, "run.resumed"), 2)
      })
  )

  it.effect(
    "R9 killed at every commit of a run and then at every commit of its restart: each payment exactly once, or unknown_outcome with it pending",
    () =>
      Effect.gen(function* () {
        const wrong: Array<string> = []
        const whens = ["before", "after"] as const
        for (const reconcile of [true, false]) {
          for (let k1 = 1; k1 <= 8; k1++) {
            for (const w1 of whens) {
              for (let k2 = 1; k2 <= 7; k2++) {
                for (const w2 of whens) {
                  const { result, paid } = yield* killedTwice(reconcile, [k1, w1], [k2, w2])
                  const pending = result.pendingActions.map((p) => p.callId)
                  const fine =
                    result.status === "completed"
                      ? paid.every((n) => n === 1)
                      : result.status === "unknown_outcome" &&
                        pending.length === 1 &&
                        paid.every((n, i) => (pending[0] === `c${i + 1}` ? n <= 1 : n === (i === 0 ? 1 : 0)))
                  if (!fine) {
                    wrong.push(`reconcile ${reconcile}, ${k1} ${w1} then ${k2} ${w2}: ${result.status}, paid ${paid}`)
                  }
                }
              }
            }
          }
        }
        assert.deepStrictEqual(wrong, [])
      }),
    60_000
  )
})
