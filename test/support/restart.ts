/**
 * What the crash-and-resume tests share (R9): a scripted model that pays then answers,
 * payment tools, and runs that die on a `FaultyJournal` and are resumed from it.
 */
import { assert } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Journal from "../../src/journal/Journal.ts"
import type * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import type * as Tool from "../../src/tools/Tool.ts"

export const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

/** Pays once at iteration 1, then answers. The same script serves the run and its resumption. */
export const payThenAnswer = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("pay", { amount: 10 }, "c1") : ScriptedModel.finalAnswer("paid")
)

/** A ledgered tool named `name` that is not idempotent and acts outside, applying every call unless told otherwise. */
export const acting = (name: string, options: Partial<Parameters<typeof FaultyTools.ledgered>[0]> = {}) =>
  FaultyTools.ledgered({ name, idempotent: false, sideEffect: "external", behaviour: () => "apply", ...options })

export const pay = (reconcile: boolean, idempotent = false) => acting("pay", { idempotent, reconcile })

/** A payment that waits for a person's approval (R7). */
export const approvedPay = (options: { readonly reconcile?: boolean } = {}) =>
  acting("pay", { reconcile: options.reconcile ?? true, needsApproval: true })

/**
 * Runs `effect`, a run on a `FaultyJournal` that dies, as the process that dies: it is
 * interrupted there with no result, as a `kill -9` stops its caller.
 */
export const diesIn = <A, E, R>(faulty: FaultyJournal.FaultyJournal, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(effect)
    assert.isTrue(faulty.crashed(), "the journal died as asked")
    assert.isTrue(
      Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause),
      "the process died: its run's caller is interrupted, with no result"
    )
  })

/** Runs `r1` with `options` and `model` on a journal that dies as `faults` say. */
export const dies = <T extends Tool.Any<never>>(
  faults: FaultyJournal.Faults,
  options: Omit<Run.Options<T>, "runId">,
  model: Layer.Layer<Model.Model>
) =>
  Effect.gen(function* () {
    const faulty = FaultyJournal.make(yield* Journal.Journal, faults)
    yield* diesIn(
      faulty,
      Run.run({ ...options, runId: "r1" }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal),
        Effect.provide(model)
      )
    )
  })

/**
 * Runs `r1` on a journal that dies as `faults` say, then resumes it from what the
 * journal kept, with the same tools.
 */
export const crashThenResume = <T extends Tool.Any<never>>(faults: FaultyJournal.Faults, tools: ReadonlyArray<T>) =>
  Effect.gen(function* () {
    const store = yield* Journal.Journal
    yield* dies(faults, { goal: "pay 10", tools }, payThenAnswer)
    // A resend after reconciliation waits out its backoff: the clock is moved for it.
    const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools }, "restart"))
    return { resumed, store }
  }).pipe(Effect.provide(payThenAnswer))

export const layers = Layer.mergeAll(Journal.layerMemory, Approval.layerMemory)
