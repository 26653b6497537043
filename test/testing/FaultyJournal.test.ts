/**
 * `FaultyJournal` plays a process that dies at a commit (R9): the run stops there with no
 * result for its caller, whatever it was doing, its ending included; the journal keeps
 * what was committed before; faults that can never be injected are refused.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import { approvedPay, payThenAnswer } from "../support/restart.ts"

const answer = ScriptedModel.layer([ScriptedModel.finalAnswer("forty-two")])

const interruptedOnly = <A, E>(exit: Exit.Exit<A, E>) => Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)

describe("FaultyJournal (R9)", () => {
  // A one-step run commits its start (1), the response (2), then its ending (3).
  for (const when of ["before", "after"] as const) {
    it.effect(`R9 killed at the last commit (${when} it is written): the caller gets no result`, () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when } })
        const exit = yield* Effect.exit(
          Run.run({ goal: "answer", runId: "r1", tools: [] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(answer)
          )
        )
        assert.isTrue(faulty.crashed())
        assert.isTrue(interruptedOnly(exit), "a dead process returns nothing: its caller is interrupted")
        const kept = Option.getOrThrow(yield* Effect.orDie(store.read("r1")))
        assert.strictEqual(Option.isSome(kept.result), when === "after", "the ending is kept only once written")
        const resumed = yield* Run.resume("r1", { tools: [] }, "restart").pipe(Effect.provide(answer))
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(resumed.finalAnswer, "forty-two")
      }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, Approval.layerMemory)))
    )
  }

  for (const commit of [1, 2]) {
    it.effect(`R9 killed at commit ${commit}: no result either, not a cancelled one`, () =>
      Effect.gen(function* () {
        const faulty = FaultyJournal.make(yield* Journal.Journal, { crashAt: { commit } })
        const handle = yield* Run.start({ goal: "answer", runId: "r1", tools: [] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(answer)
        )
        const exit = yield* Effect.exit(handle.result)
        assert.isTrue(faulty.crashed())
        assert.isTrue(interruptedOnly(exit), `commit ${commit}: ${String(exit)}`)
      }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, Approval.layerMemory)))
    )
  }

  it.effect("crash() while a run waits for a person: later calls fail, crashedAt is the run's clock", () =>
    Effect.gen(function* () {
      const payment = approvedPay()
      const faulty = FaultyJournal.make(yield* Journal.Journal, {})
      yield* TestClock.adjust("5 minutes")
      const fiber = yield* Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal),
        Effect.provide(payThenAnswer),
        Effect.forkChild
      )
      const gate = yield* Approval.ApprovalGate
      while ((yield* gate.pending).length === 0) yield* Effect.yieldNow
      faulty.crash()
      yield* Fiber.interrupt(fiber)
      assert.isTrue(faulty.crashed())
      assert.strictEqual(faulty.crashedAt(), 5 * 60_000)
      const read = yield* Effect.flip(faulty.journal.read("r1"))
      assert.include(read.message, "died")
    }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, Approval.layerMemory)))
  )

  it("faults that can never be injected are a RangeError naming the field", () => {
    const store = {} as Journal.Service // Never called: `make` refuses first.
    for (const [faults, field] of [
      [{ crashAt: { commit: 0 } }, "crashAt.commit"],
      [{ crashAt: { commit: -1 } }, "crashAt.commit"],
      [{ crashAt: { commit: 1.5 } }, "crashAt.commit"],
      [{ crashAt: { commit: Number.NaN } }, "crashAt.commit"],
      [{ crashAt: { commit: 2, when: "During" } }, "crashAt.when"],
      [{ unavailableOn: 3 }, "unavailableOn"],
      [{ conflictOn: true }, "conflictOn"],
      // A misspelt fault would inject nothing: a crash-safety test would pass without its crash.
      [{ crashat: { commit: 2 } }, '"crashat"'],
      [{ lostReply: () => true }, '"lostReply"'],
      [{ crashAt: null }, "crashAt must be"]
    ] as const) {
      assert.throws(
        () => FaultyJournal.make(store, faults as unknown as FaultyJournal.Faults),
        RangeError,
        field,
        JSON.stringify(faults)
      )
    }
  })
})
