import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer, Metric, Option, Schema } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as Model from "../../src/model/Model.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunHost from "../../src/run/RunHost.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Metrics from "../../src/tracing/Metrics.ts"
import {
  acting,
  approvedPay,
  crashThenResume,
  dies,
  diesIn,
  layers,
  ofTag,
  pay,
  payThenAnswer
} from "../support/restart.ts"

/** An answer the provider stopped unfinished after billing `inputTokens`, as `FaultyModel.unfinished` plays it. */
const unfinishedAfter = (inputTokens: number) =>
  FaultyModel.toFailure({ kind: "unfinished", usage: { inputTokens, outputTokens: 0 } }, 0)

/**
 * Runs `runId` on a journal whose process dies once the model has been asked (`asked` says
 * how often) and the run has gone on a little: in the wait for the retry its failure asked for.
 */
const diesInRetryWait = (
  options: Run.Options<Tool.Any<never>>,
  runId: string,
  model: Layer.Layer<Model.Model>,
  asked: () => number
) =>
  Effect.gen(function* () {
    const faulty = FaultyJournal.make(yield* Journal.Journal, {})
    const first = yield* Run.run({ ...options, runId }).pipe(
      Effect.provideService(Journal.Journal, faulty.journal),
      Effect.provide(model),
      Effect.forkChild
    )
    while (asked() < 1) yield* Effect.yieldNow
    for (let i = 0; i < 50; i++) yield* Effect.yieldNow
    faulty.crash()
    yield* Fiber.interrupt(first)
  })

describe("Run.resume (R9)", () => {
  it.effect("R9 a finished run's result is committed with it: resuming gives it back, running nothing", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const first = yield* Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
        Effect.provide(payThenAnswer)
      )
      assert.strictEqual(first.status, "completed")
      const again = yield* Run.resume("r1", { tools: [payment.tool] }).pipe(Effect.provide(payThenAnswer))
      assert.deepStrictEqual(again, first)
      assert.strictEqual(payment.ledger.total, 1)
      const stored = yield* (yield* Journal.Journal).read("r1")
      assert.isTrue(Option.isSome(stored) && Option.isSome(stored.value.result))
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9.2 killed after the intent record, before the payment: reconciliation finds it not applied, it pays once",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        // Commit 1: the run's start; 2: up to the model's response; 3: the payment's intent (its tool.started).
        const { resumed } = yield* crashThenResume({ crashAt: { commit: 3, when: "after" } }, [payment.tool])
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(payment.ledger.total, 1)
        assert.strictEqual(payment.ledger.count("r1:c1"), 1)
        const [back] = ofTag(resumed.timeline, "run.resumed")
        assert.deepStrictEqual(back?.inDoubt, ["c1"])
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
          ["not_applied"]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9.2 killed after the payment, before its result was committed: it is found applied, never paid twice",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        // Commit 4 (the payment's result) is lost with the process.
        const { resumed } = yield* crashThenResume({ crashAt: { commit: 4, when: "before" } }, [payment.tool])
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(payment.ledger.total, 1)
        assert.strictEqual(payment.calls.count, 1)
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
          ["applied"]
        )
        // The model was asked once for the payment and once, after the restart, for its answer.
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "model.responded").map((e) => e.iteration),
          [1, 2]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 in doubt without a status query: never resent, the run ends unknown_outcome with the call pending",
    () =>
      Effect.gen(function* () {
        const payment = pay(false)
        const { resumed } = yield* crashThenResume({ crashAt: { commit: 4, when: "before" } }, [payment.tool])
        assert.strictEqual(resumed.status, "unknown_outcome")
        assert.strictEqual(payment.calls.count, 1)
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
      }).pipe(Effect.provide(layers))
  )

  /**
   * Runs `r1` (pay 10, a one-minute run) on a journal that dies as `faults` say, then resumes
   * it two minutes later: past its deadline. `tools` must hold a `pay`.
   */
  const resumedLate = (faults: FaultyJournal.Faults, tools: ReadonlyArray<Tool.Any<never>>) =>
    Effect.gen(function* () {
      yield* dies(faults, { goal: "pay 10", tools, time: { run: "1 minute" } }, payThenAnswer)
      yield* TestClock.adjust("2 minutes")
      const resumedAt = yield* Clock.currentTimeMillis
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools, time: { run: "1 minute" } }))
      return { resumed, resumedAt }
    }).pipe(Effect.provide(payThenAnswer))

  /** A payment whose status query never answers; `asked` holds the keys it was asked about. */
  const hangingQuery = () => {
    const asked: Array<string> = []
    const tool: Tool.Any<never> = {
      ...acting("pay", { reconcile: true }).tool,
      reconcile: (_input, { idempotencyKey }) =>
        Effect.andThen(
          Effect.sync(() => asked.push(idempotencyKey)),
          Effect.never
        )
    }
    return { tool, asked }
  }

  it.effect(
    "R3.11 resumed past its deadline without a status query: nothing more runs, run_timeout with the call in doubt pending",
    () =>
      Effect.gen(function* () {
        const payment = pay(false)
        const { resumed } = yield* resumedLate({ crashAt: { commit: 4, when: "before" } }, [payment.tool])
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.strictEqual(payment.calls.count, 1)
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
        assert.isFalse(resumed.timeline.slice(from).some((e) => e._tag === "model.requested"))
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 R3.11 R9.2 resumed past its deadline, the payment in doubt is asked about first: found applied, its result is recorded and nothing is pending",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        // Commit 4 (the payment's result) is lost with the process: the payment took place.
        const { resumed, resumedAt } = yield* resumedLate({ crashAt: { commit: 4, when: "before" } }, [payment.tool])
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.strictEqual(payment.calls.count, 1)
        assert.deepStrictEqual(payment.reconciled, ["r1:c1"])
        assert.deepStrictEqual(resumed.pendingActions, [])
        const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
        const after = resumed.timeline.slice(from)
        assert.deepStrictEqual(
          ofTag(after, "tool.reconciled").map((e) => e.verdict),
          ["applied"]
        )
        // Its real result, as a live run records an applied call's; asked at once, not waited for.
        const [succeeded] = ofTag(after, "tool.succeeded")
        assert.strictEqual(succeeded?.callId, "c1")
        assert.strictEqual(succeeded?.at, resumedAt)
        assert.isFalse(after.some((e) => e._tag === "model.requested" || e._tag === "tool.started"))
        assert.strictEqual(resumed.counters.toolCalls, 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R10 R3.8 the property kit finds nothing wrong in a run resumed past its deadline that records what its status query found",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        const tools = [payment.tool]
        const time = { run: "1 minute", step: "30 seconds" } as const
        yield* dies({ crashAt: { commit: 4, when: "before" } }, { goal: "pay 10", tools, time }, payThenAnswer)
        yield* TestClock.adjust("2 minutes")
        const resumed = yield* TestClockDriver.drive(
          Run.resume("r1", { tools, time }).pipe(Effect.provide(payThenAnswer))
        )
        assert.deepStrictEqual(resumed.pendingActions, [])
        const budget = {
          runTimeoutMillis: 60_000,
          stepTimeoutMillis: 30_000,
          maxRecoveries: 8,
          scheduleRetries: 2,
          correctionBudget: 3
        }
        assert.deepStrictEqual(Properties.check(resumed, budget), [])
        // Work started after such a resume is still past the deadline.
        const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
        const asked = resumed.timeline.find((e) => e._tag === "model.requested")
        const resumedAt = resumed.timeline[from]?.at ?? 0
        const askedLate = asked === undefined ? [] : [{ ...asked, at: resumedAt }]
        const timeline = [...resumed.timeline.slice(0, from + 1), ...askedLate, ...resumed.timeline.slice(from + 1)]
        assert.include(
          Properties.check({ ...resumed, timeline }, budget).map((v) => v.invariant),
          "R3.3 deadline"
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 R3.11 R9.2 resumed past its deadline, a payment found not applied is not sent again: it ends unpaid, nothing pending",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        // Commit 3 (the payment's intent) is kept, and the process dies before the payment is made.
        const { resumed } = yield* resumedLate({ crashAt: { commit: 3, when: "after" } }, [payment.tool])
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.strictEqual(payment.ledger.total, 0)
        assert.deepStrictEqual(payment.reconciled, ["r1:c1"])
        assert.deepStrictEqual(resumed.pendingActions, [])
        const [failed] = ofTag(resumed.timeline, "tool.failed")
        assert.strictEqual(failed?.error.notRetriedFor, "deadline")
        assert.strictEqual(failed?.error.failure?.classification, "retryable")
        assert.strictEqual(ofTag(resumed.timeline, "tool.started").length, 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 R3.11 R4.1 resumed past its deadline, a status query that never answers is given 5 s: the call stays pending",
    () =>
      Effect.gen(function* () {
        const { tool: hanging, asked } = hangingQuery()
        const { resumed, resumedAt } = yield* resumedLate({ crashAt: { commit: 4, when: "before" } }, [hanging])
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.deepStrictEqual(asked, ["r1:c1"])
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        const [finished] = ofTag(resumed.timeline, "run.finished")
        assert.strictEqual(finished?.at, resumedAt + 5_000)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 R3.11 resumed past its deadline, an undecided payment stays pending with what its status query said",
    () =>
      Effect.gen(function* () {
        const undecided = acting("pay", { reconcile: () => ({ _tag: "Undecidable", detail: "the bank does not say" }) })
        const { resumed } = yield* resumedLate({ crashAt: { commit: 4, when: "before" } }, [undecided.tool])
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        assert.include(resumed.pendingActions[0]?.detail, "the bank does not say")
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
          ["undecidable"]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R5.1 R3.8 resumed past its deadline, a cancel during the status query ends the run cancelled, the call pending",
    () =>
      Effect.gen(function* () {
        const { tool: hanging, asked } = hangingQuery()
        const tools = [hanging]
        yield* dies(
          { crashAt: { commit: 4, when: "before" } },
          { goal: "pay 10", tools, time: { run: "1 minute" } },
          payThenAnswer
        )
        yield* TestClock.adjust("2 minutes")
        const resuming = yield* Run.resume("r1", { tools, time: { run: "1 minute" } }).pipe(
          Effect.provide(payThenAnswer),
          Effect.forkChild
        )
        while (asked.length === 0) yield* Effect.yieldNow
        yield* Fiber.interrupt(resuming)
        const stored = Option.getOrThrow(yield* (yield* Journal.Journal).read("r1"))
        assert.nestedInclude(Option.getOrThrow(stored.result), {
          status: "cancelled",
          "pendingActions[0].callId": "c1",
          "pendingActions[0].detail": "interrupted while its status query ran; whether it took effect is still unknown"
        })
        const from = stored.events.findIndex((e) => e._tag === "run.resumed")
        assert.deepStrictEqual(
          ofTag(stored.events.slice(from), "tool.interrupted").map((e) => e.settlement),
          ["outcome_unknown", "outcome_unknown"]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.8 R6.4 resumed past its deadline, a call found applied goes through its postcondition again", () =>
    Effect.gen(function* () {
      const checked: Array<string> = []
      const payment = pay(true)
      const confirmed: Tool.Any<never> = {
        ...payment.tool,
        postcondition: (_input, _output, { callId }) => Effect.sync(() => checked.push(callId) > 0)
      }
      // Commit 4, the payment's result, is lost: it was paid and checked, and nothing of that is kept.
      const { resumed } = yield* resumedLate({ crashAt: { commit: 4, when: "before" } }, [confirmed])
      assert.deepStrictEqual(checked, ["c1", "c1"])
      assert.strictEqual(resumed.stopReason, "run_timeout")
      assert.deepStrictEqual(resumed.pendingActions, [])
      const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
      const after = resumed.timeline.slice(from)
      assert.deepStrictEqual(
        ofTag(after, "tool.succeeded").map((e) => e.callId),
        ["c1"]
      )
      assert.deepStrictEqual(
        ofTag(after, "tool.interrupted").map((e) => e.settlement),
        ["outcome_unknown"]
      )
      assert.strictEqual(payment.calls.count, 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 resumed past its deadline, what a status query settled is committed at once: a second crash does not ask it again",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        const tools = [payment.tool]
        const options = { tools, time: { run: "1 minute" } } as const
        yield* dies({ crashAt: { commit: 4, when: "before" } }, { goal: "pay 10", ...options }, payThenAnswer)
        yield* TestClock.adjust("2 minutes")
        // The resumed process dies in its turn at its second commit: the run's ending is lost.
        const faulty = FaultyJournal.make(yield* Journal.Journal, { crashAt: { commit: 2, when: "before" } })
        yield* diesIn(
          faulty,
          Run.resume("r1", options).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(payThenAnswer)
          )
        )
        const third = yield* TestClockDriver.drive(Run.resume("r1", options).pipe(Effect.provide(payThenAnswer)))
        assert.strictEqual(third.stopReason, "run_timeout")
        assert.deepStrictEqual(payment.reconciled, ["r1:c1"])
        assert.deepStrictEqual(third.pendingActions, [])
        assert.strictEqual(payment.calls.count, 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.3 R3.8 resumed past its deadline in the resend of a call found not applied: its episode ends, the resend is asked about, nothing is sent again",
    () =>
      Effect.gen(function* () {
        // The first attempt loses its connection before it acts; its status query finds it not applied;
        // the resend (attempt 2, its intent committed) hangs, and the process dies there.
        const payment = acting("pay", { reconcile: true, behaviour: ["lose_before_apply", "hang"] })
        const tools = [payment.tool]
        const options = { goal: "pay 10", tools, time: { run: "1 minute" } } as const
        const faulty = FaultyJournal.make(yield* Journal.Journal, {})
        const first = yield* Run.run({ ...options, runId: "r1" }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(payThenAnswer),
          Effect.forkChild
        )
        while (payment.calls.count < 2) yield* TestClock.adjust("10 millis")
        faulty.crash()
        yield* Fiber.interrupt(first)
        yield* TestClock.adjust("2 minutes")
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools, time: { run: "1 minute" } })).pipe(
          Effect.provide(payThenAnswer)
        )
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.strictEqual(payment.calls.count, 2)
        assert.strictEqual(payment.ledger.total, 0)
        assert.deepStrictEqual(payment.reconciled, ["r1:c1", "r1:c1"])
        assert.deepStrictEqual(resumed.pendingActions, [])
        const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
        const [ended] = ofTag(resumed.timeline.slice(from), "recovery.failed")
        assert.strictEqual(ended?.attempts, 2)
        assert.include(ended?.cause, "the run deadline had passed")
        assert.strictEqual(ofTag(resumed.timeline, "tool.started").length, 2)
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.3 R4.2 resumed with a shorter step while a retry waits: the rest of its wait ends with the step", () =>
    Effect.gen(function* () {
      const payment = acting("pay", { idempotent: true, behaviour: ["fail_before_apply", "apply"] })
      const tools = [payment.tool]
      const recovery = { backoff: Recovery.backoff({ base: "5 seconds", cap: "10 seconds", jitter: false }) }
      // Commit 4, after the first attempt's failure: its 5 s wait is in the log.
      yield* dies({ crashAt: { commit: 4, when: "after" } }, { goal: "pay 10", tools, recovery }, payThenAnswer)
      const resumedAt = yield* Clock.currentTimeMillis
      const resumed = yield* TestClockDriver.drive(
        Run.resume("r1", { tools, time: { step: "1 second" }, recovery }).pipe(Effect.provide(payThenAnswer))
      )
      assert.strictEqual(resumed.stopReason, "step_timeout")
      const [finished] = ofTag(resumed.timeline, "run.finished")
      assert.strictEqual(finished?.at, resumedAt + 1_000)
      assert.strictEqual(payment.calls.count, 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a finished run read back gives its typed output as the run did: a Date stays one", () =>
    Effect.gen(function* () {
      const Output = Schema.Struct({ due: Schema.DateFromString, total: Schema.Number })
      const model = ScriptedModel.layerFunction(() =>
        ScriptedModel.finalAnswer(JSON.stringify({ due: "2026-01-02T00:00:00.000Z", total: 5 }))
      )
      const first = yield* Run.run({ goal: "when", tools: [], runId: "t1", output: Output }).pipe(Effect.provide(model))
      const again = yield* Run.resume("t1", { tools: [], output: Output }).pipe(Effect.provide(model))
      assert.instanceOf(first.output?.due, Date)
      assert.deepStrictEqual(again, first)
      // RunHost.drive, which a workflow calls, reads it back alike.
      const hosted = yield* RunHost.drive("t1", { goal: "when", tools: [], output: Output }).pipe(Effect.provide(model))
      assert.deepStrictEqual(hosted._tag === "Finished" ? hosted.result.output : undefined, first.output)
      // A run whose limits took an answer nested deeper than the default reads it back too.
      const nest = (n: number): unknown => (n === 0 ? 1 : [nest(n - 1)])
      const Deep = Schema.Struct({ due: Schema.DateFromString, deep: Schema.Unknown })
      const deepModel = ScriptedModel.layerFunction(() =>
        ScriptedModel.finalAnswer(JSON.stringify({ due: "2026-01-02T00:00:00.000Z", deep: nest(80) }))
      )
      const limits = { maxArgumentDepth: 200 }
      const deep = yield* Run.run({ goal: "when", tools: [], runId: "t2", output: Deep, limits }).pipe(
        Effect.provide(deepModel)
      )
      assert.instanceOf(deep.output?.due, Date)
      const deepAgain = yield* Run.resume("t2", { tools: [], output: Deep }).pipe(Effect.provide(deepModel))
      assert.instanceOf(deepAgain.output?.due, Date)
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 R12 a finished run read back with a schema its answer does not decode with has no output", () =>
    Effect.gen(function* () {
      const City = Schema.Struct({ city: Schema.String })
      const Counted = Schema.Struct({ city: Schema.String, population: Schema.Number })
      const model = ScriptedModel.layerFunction(() => ScriptedModel.finalAnswer(JSON.stringify({ city: "Paris" })))
      const first = yield* Run.run({ goal: "where", tools: [], runId: "c1", output: City }).pipe(Effect.provide(model))
      assert.deepStrictEqual(first.output, { city: "Paris" })
      const other = yield* Run.resume("c1", { tools: [], output: Counted }).pipe(Effect.provide(model))
      assert.isFalse("output" in other)
      assert.strictEqual(other.finalAnswer, first.finalAnswer)
      const hosted = yield* RunHost.drive("c1", { goal: "where", tools: [], output: Counted }).pipe(
        Effect.provide(model)
      )
      assert.isFalse(hosted._tag === "Finished" && "output" in hosted.result)
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a result whose ending the journal could not take says so (unrecorded); one it took does not", () =>
    Effect.gen(function* () {
      const store = yield* Journal.Journal
      const model = ScriptedModel.layer([ScriptedModel.finalAnswer("done")])
      // Commits: 1 the start, 2 the response; from the third (the ending) on, the store is out of reach.
      const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= 3 })
      const lost = yield* TestClockDriver.drive(
        Run.run({ goal: "x", tools: [], runId: "u1", time: { stopGrace: 300 } }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(model)
        )
      )
      assert.strictEqual(lost.status, "completed")
      assert.include(lost.unrecorded ?? "", "could not be reached")
      // The journal holds the run up to its last commit: read back, it is not finished.
      assert.isTrue(Option.isSome(yield* store.read("u1")))
      const kept = yield* Run.run({ goal: "x", tools: [], runId: "u2" }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")]))
      )
      assert.deepStrictEqual([kept.status, kept.unrecorded], ["completed", undefined])
      // Fenced off at its last commit: the journal holds another process's run, not this ending.
      const fenced = yield* Run.run({ goal: "x", tools: [], runId: "u3" }).pipe(
        Effect.provideService(Journal.Journal, FaultyJournal.make(store, { conflictOn: (n) => n === 3 }).journal),
        Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")]))
      )
      assert.include(fenced.unrecorded ?? "", "another process owns this run now")
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 an idempotent call in doubt runs again", () =>
    Effect.gen(function* () {
      const payment = pay(false, true)
      // Commit 3 is the idempotent call's attempt; 4, at the iteration's end, holds its result.
      const { resumed } = yield* crashThenResume({ crashAt: { commit: 4, when: "before" } }, [payment.tool])
      assert.strictEqual(resumed.status, "completed")
      assert.strictEqual(payment.calls.count, 2)
      // Idempotent: the second call found the first one's receipt under the same key.
      assert.strictEqual(payment.ledger.total, 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 killed before the first commit: the run starts over under its id", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const { resumed } = yield* crashThenResume({ crashAt: { commit: 1, when: "before" } }, [payment.tool])
      assert.strictEqual(resumed.status, "completed")
      assert.strictEqual(resumed.runId, "r1")
      assert.strictEqual(payment.ledger.total, 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 killed while its model is first asked: the run is in its journal, and a restart finds and ends it",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        // Commit 1, the run's start, is made before the model is first asked.
        yield* dies({ crashAt: { commit: 1, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        const store = yield* Journal.Journal
        assert.deepStrictEqual(yield* store.unfinished, ["r1"])
        const [recovered] = yield* Run.recover({ tools: [payment.tool] }).pipe(Effect.provide(payThenAnswer))
        assert.isTrue(recovered !== undefined && recovered._tag === "Success")
        if (recovered?._tag === "Success") assert.strictEqual(recovered.success.status, "completed")
        assert.strictEqual(payment.ledger.total, 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a run id its journal holds already: the run stops before its model is asked", () =>
    Effect.gen(function* () {
      let asked = 0
      const model = ScriptedModel.layerFunction(() => {
        asked++
        return ScriptedModel.finalAnswer("done")
      })
      const first = yield* Run.run({ goal: "first", runId: "r1", tools: [] }).pipe(Effect.provide(model))
      assert.strictEqual(first.status, "completed")
      const second = yield* Run.run({ goal: "second", runId: "r1", tools: [] }).pipe(Effect.provide(model))
      assert.strictEqual(second.stopReason, "internal_error")
      // Review 194: it said another process owned the run, in one process.
      assert.include(second.detail, "its id is taken")
      assert.notInclude(second.detail, "another process")
      assert.strictEqual(asked, 1, "the second run never asked its model")
      const kept = yield* Run.resume("r1", { tools: [] }).pipe(Effect.provide(model))
      assert.strictEqual(kept.finalAnswer, "done", "the journal keeps the first run")
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a model response lost with the process is asked for again, at no recovery cost", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      // Commit 5: the end of iteration 1 and the second response; lost.
      const { resumed } = yield* crashThenResume({ crashAt: { commit: 5, when: "before" } }, [payment.tool])
      assert.strictEqual(resumed.status, "completed")
      assert.strictEqual(payment.ledger.total, 1)
      assert.strictEqual(resumed.counters.recoveryAttempts, 0)
      assert.strictEqual(resumed.counters.iterations, 2)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.9 R9 a run resumed while its call waits for its circuit spends no retry on the refusals before the crash (review 142)",
    () =>
      Effect.gen(function* () {
        // An idempotent write that is down: maxRetries 2 gives its handler three calls; its circuit opens at each failure.
        let calls = 0
        const save = Tool.make({
          name: "save",
          description: "Saves.",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          idempotent: true,
          maxRetries: 2,
          handler: () => Effect.suspend(() => (calls++, Effect.fail(FailureBoundary.http({ status: 503, now: 0 }))))
        })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1 ? ScriptedModel.toolCall("save", {}, "c1") : ScriptedModel.finalAnswer("done")
        )
        const recovery = { backoff: Recovery.backoff({ jitter: false, retries: 10 }), maxRecoveries: 10 }
        const breakers = () =>
          Breakers.layerMemory({ tool: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, {})
        const first = yield* Effect.forkChild(
          Run.run({ goal: "x", runId: "r1", tools: [save], recovery }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide([breakers(), model])
          )
        )
        // The process dies once the wait for its circuit is committed.
        const refusedWait = Effect.map(
          store.read("r1"),
          (stored) =>
            Option.isSome(stored) &&
            stored.value.events.some((e) => e._tag === "recovery.started" && e.circuit !== undefined)
        )
        for (let i = 0; i < 500 && !(yield* refusedWait); i++) yield* TestClock.adjust("10 millis")
        faulty.crash()
        yield* Fiber.interrupt(first)
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [save], recovery }, "restart")).pipe(
          Effect.provide([breakers(), model])
        )
        // Before, the refusal counted as a spent retry: two handler calls in all.
        assert.strictEqual(calls, 3)
        assert.strictEqual(resumed.stopReason, "tool_error")
      }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a commit fenced off by another writer: the handler does not run, the run stops writing", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const store = yield* Journal.Journal
      const faulty = FaultyJournal.make(store, { conflictOn: (n) => n === 3 })
      const result = yield* Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal),
        Effect.provide(payThenAnswer)
      )
      assert.strictEqual(payment.calls.count, 0)
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "another process owns this run")
      assert.strictEqual(faulty.commits(), 3)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9.4 R7 a run fenced off at its model's answer stops at once: it puts no call up for approval (review 134)",
    () =>
      Effect.gen(function* () {
        const payment = approvedPay()
        const store = yield* Journal.Journal
        // Another writer fences the run off at its commit of the model's answer.
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n === 2 })
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "pay 10",
            runId: "r1",
            tools: [payment.tool],
            time: { run: "1 day", approval: "12 hours" }
          }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(
              JournalApprovals.layer().pipe(Layer.provide(Layer.succeed(Journal.Journal, faulty.journal)))
            ),
            Effect.provide(payThenAnswer)
          )
        )
        // Before, it put the call on the table and waited 12 hours for a person it could not act for.
        assert.isBelow(yield* Clock.currentTimeMillis, 60_000)
        assert.strictEqual(result.stopReason, "internal_error")
        assert.include(result.detail, "another process owns this run now")
        assert.isDefined(result.unrecorded)
        assert.notInclude(
          result.timeline.map((e) => e._tag),
          "approval.requested"
        )
        assert.deepStrictEqual(yield* store.pendingApprovals({ runId: "r1" }), [])
        assert.strictEqual(payment.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9.4 R7 a run fenced off while its call waits for a person stops at once and leaves the call on the table for the run's owner (review 134)",
    () =>
      Effect.gen(function* () {
        const payment = approvedPay()
        const look = FaultyTools.slow({ name: "look", millis: 0 })
        const store = yield* Journal.Journal
        // The commit of the read's result, made while the payment waits, is fenced off.
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n === 4 })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["pay", { amount: 10 }, "c1"], ["look", {}, "c2"])
            : ScriptedModel.finalAnswer("paid")
        )
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "pay 10",
            runId: "r1",
            tools: [payment.tool, look.tool],
            concurrency: 2,
            time: { run: "1 day", approval: "12 hours" }
          }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(
              JournalApprovals.layer().pipe(Layer.provide(Layer.succeed(Journal.Journal, faulty.journal)))
            ),
            Effect.provide(model)
          )
        )
        assert.strictEqual(faulty.commits(), 4)
        assert.isBelow(yield* Clock.currentTimeMillis, 60_000)
        assert.strictEqual(result.stopReason, "internal_error")
        assert.include(result.detail, "another process owns this run now")
        // The owner resumed from the journal, which holds the request: it waits for the same call.
        assert.deepStrictEqual(
          (yield* store.pendingApprovals({ runId: "r1" })).map((r) => r.callId),
          ["c1"]
        )
        assert.strictEqual(payment.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9.4 R5.3 a run fenced off while a handler that ignores interruption runs gives its result within the stop grace, the call left behind (review 137)",
    () =>
      Effect.gen(function* () {
        // A payment that never ends and ignores interruption, beside a note whose result commit is fenced off.
        const stubborn = Tool.make({
          name: "stubborn",
          description: "Never ends, and ignores interruption.",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          handler: () => Effect.uninterruptible(Effect.never)
        })
        const note = FaultyTools.slow({ name: "note", millis: 0, sideEffect: "external", idempotent: false })
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n >= 5 })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["stubborn", {}, "c1"], ["note", {}, "c2"])
            : ScriptedModel.finalAnswer("done")
        )
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "go",
            runId: "r1",
            tools: [stubborn, note.tool],
            concurrency: 2,
            time: { run: "1 day", stopGrace: "200 millis" }
          }).pipe(Effect.provideService(Journal.Journal, faulty.journal), Effect.provide(model)),
          { upTo: "3 days", step: "1 second" }
        )
        // Before, the caller waited for the handler, for good: the fence started no stop grace, as a cancel does.
        assert.strictEqual(result.stopReason, "internal_error")
        assert.include(result.detail, "another process owns this run now")
        assert.include(result.detail, "it was left behind")
        assert.isDefined(result.unrecorded)
        assert.deepStrictEqual(
          result.pendingActions.map((a) => a.callId),
          ["c1"]
        )
      }).pipe(Effect.provide(layers)),
    10_000
  )

  it.effect(
    "R9 a run another process resumed while its model answered is told so at its last commit, never completed with an ending the journal does not hold",
    () =>
      Effect.gen(function* () {
        const look = FaultyTools.slow({ name: "look", millis: 0 })
        let answers = 0
        const model = ScriptedModel.layerFunction((request) => {
          if (request.iteration === 1) return ScriptedModel.toolCall("look", {}, "c1")
          answers++
          // The first process's model is slow; meanwhile a second process resumes the run.
          return answers === 1
            ? Effect.as(Effect.sleep("600 millis"), ScriptedModel.finalAnswer("A's answer"))
            : ScriptedModel.finalAnswer("B's answer")
        })
        const first = yield* Effect.forkChild(
          Run.run({ goal: "look", runId: "f1", tools: [look.tool] }).pipe(Effect.provide(model))
        )
        while (answers === 0) yield* Effect.yieldNow
        // Another process on the same store: the runs this one drives are not its own.
        const otherProcess = FaultyJournal.make(yield* Journal.Journal, {}).journal
        const second = yield* Run.resume("f1", { tools: [look.tool] }).pipe(
          Effect.provide(model),
          Effect.provideService(Journal.Journal, otherProcess)
        )
        yield* TestClock.adjust("1 second")
        const overtaken = yield* Fiber.join(first)
        assert.strictEqual(second.finalAnswer, "B's answer")
        assert.strictEqual(overtaken.stopReason, "internal_error")
        assert.include(overtaken.detail, "another process owns this run now")
        // One run, counted once, as its journal holds it: the overtaken process records no metrics of an ending the run does not have (R13).
        const counted = (status: string, stopReason: string) =>
          Effect.map(
            Metric.value(Metric.withAttributes(Metrics.runs, { status, stop_reason: stopReason })),
            (state) => state.count
          )
        assert.deepStrictEqual(
          [yield* counted("completed", "goal_reached"), yield* counted("failed", "internal_error")],
          [1, 0]
        )
        assert.strictEqual((yield* Metric.value(Metrics.steps)).count, 2)
        // The journal holds the second process's ending.
        const stored = yield* Run.resume("f1", { tools: [look.tool] }).pipe(Effect.provide(model))
        assert.strictEqual(stored.finalAnswer, "B's answer")
        // Reading a finished run back from its journal counts nothing again.
        assert.strictEqual(yield* counted("completed", "goal_reached"), 1)
      }).pipe(Effect.provide(layers), Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("R9 R2.1 a process that dies in the wait after a paid failure is resumed with what it cost counted", () =>
    Effect.gen(function* () {
      let calls = 0
      const model = Layer.succeed(Model.Model, {
        generate: () =>
          Effect.suspend(() => {
            calls++
            return Effect.fail(unfinishedAfter(400))
          })
      })
      const options = { goal: "x", tools: [], limits: { maxTokens: 500 } }
      // The first answer failed, paid for (400 of 500 tokens); its retry waits its backoff: the process dies.
      yield* diesInRetryWait(options, "r1", model, () => calls)
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", options, "restart").pipe(Effect.provide(model)))
      // 800 tokens were paid for in two calls, and 800 are counted: the budget stops the run after the second.
      assert.deepStrictEqual([resumed.stopReason, calls, resumed.counters.inputTokens], ["budget_exhausted", 2, 800])
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 R3.3 a process that dies in a paid failure's retry wait is resumed in that wait, in the same episode",
    () =>
      Effect.gen(function* () {
        const asked: Array<number> = []
        const model = Layer.succeed(Model.Model, {
          generate: () =>
            Effect.flatMap(Clock.currentTimeMillis, (now) => {
              asked.push(now)
              return asked.length === 1
                ? Effect.fail(unfinishedAfter(30))
                : Effect.succeed(Model.response({ text: "done" }))
            })
        })
        const options = { goal: "x", tools: [], recovery: { backoff: Recovery.backoff({ base: "1 second" }) } }
        yield* diesInRetryWait(options, "w1", model, () => asked.length)
        yield* TestClock.adjust("400 millis")
        const resumed = yield* TestClockDriver.drive(Run.resume("w1", options, "restart").pipe(Effect.provide(model)))
        const started = resumed.timeline.find((e) => e._tag === "recovery.started")
        const after = resumed.timeline.slice(resumed.timeline.findIndex((e) => e._tag === "run.resumed"))
        // The retry the dead process waited for is asked as its attempt 2, once its wait ends, and closes the episode.
        assert.deepStrictEqual(
          after.flatMap((e) =>
            e._tag === "model.requested"
              ? [`requested ${e.attempt}`]
              : e._tag === "recovery.completed" || e._tag === "recovery.started"
                ? [`${e._tag} ${e.attempt}`]
                : []
          ),
          ["requested 2", "recovery.completed 1"]
        )
        // At the end of the wait the log recorded (jittered, so compared to the last bits a sum may differ in).
        const wakeAt = (started?.at ?? 0) + (started?._tag === "recovery.started" ? started.delayMillis : 0)
        const requested = after.find((e) => e._tag === "model.requested")
        assert.closeTo(requested?.at ?? 0, wakeAt, 1e-6)
        assert.deepStrictEqual([resumed.status, resumed.counters.inputTokens, asked.length], ["completed", 30, 2])
      }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a journal out of reach for a moment at the intent record is waited for: the call runs once", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const store = yield* Journal.Journal
      // The intent (commit 3) fails ten times in a row: about ten seconds of backoff.
      const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= 3 && n <= 12 })
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(payThenAnswer)
        )
      )
      assert.strictEqual(result.status, "completed", result.detail)
      assert.strictEqual(payment.ledger.total, 1)
      assert.lengthOf(ofTag(result.timeline, "tool.failed"), 0)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R4.2 R9 the step deadline bounds the intent record's wait: step_timeout at the step's end, nothing ran",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= 3 })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool], time: { step: "1 second" } }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(payThenAnswer)
          )
        )
        assert.strictEqual(result.stopReason, "step_timeout", result.detail)
        const [started] = ofTag(result.timeline, "tool.started")
        const [failed] = ofTag(result.timeline, "tool.failed")
        assert.strictEqual(failed?.at, started?.deadlineAt, "cut off at the attempt's deadline, not 30 s later")
        assert.strictEqual(payment.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.live("R5.2 R9 a call cancelled while its intent record waits is recorded cancelled: it never ran", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const store = yield* Journal.Journal
      const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= 3 })
      const handle = yield* Run.start({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal),
        Effect.provide(payThenAnswer)
      )
      // The intent record is tried again with backoff (on the live clock: the last commit's retries sleep too).
      yield* Effect.sleep("1 second")
      const result = yield* handle.cancel
      assert.strictEqual(result.stopReason, "cancelled")
      assert.deepStrictEqual(
        ofTag(result.timeline, "tool.interrupted").map((e) => [e.callId, e.settlement]),
        [["c1", "cancelled"]]
      )
      assert.strictEqual(payment.calls.count, 0)
    }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R9 an unreachable journal at the intent record: the call fails retryable and its handler never runs", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const store = yield* Journal.Journal
      const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= 3 })
      // The commit is tried again with backoff: the clock is moved for it.
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(payThenAnswer)
        )
      )
      assert.strictEqual(payment.calls.count, 0)
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.failure?.code, "journal_unavailable")
      assert.strictEqual(failed?.error.failure?.classification, "retryable")
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a resumed run whose tools changed is refused with a typed ResumeError naming the tool", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      yield* crashThenResume({ crashAt: { commit: 3, when: "after" } }, [payment.tool]).pipe(Effect.ignore)
      const changed = Tool.make({
        name: "pay",
        description: "Pays.",
        input: Schema.Struct({ amount: Schema.Number, currency: Schema.String }),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "external",
        handler: () => Effect.succeed({ ok: true })
      })
      const store = yield* Journal.Journal
      const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when: "after" } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "pay 10", runId: "r2", tools: [payment.tool] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(payThenAnswer)
        )
      )
      const error = yield* Effect.flip(Run.resume("r2", { tools: [changed] }).pipe(Effect.provide(payThenAnswer)))
      assert.strictEqual(error._tag, "ResumeError")
      assert.strictEqual(error.reason, "incompatible")
      assert.include(error.message, "pay")
      const missing = yield* Effect.flip(
        Run.resume("nope", { tools: [payment.tool] }).pipe(Effect.provide(payThenAnswer))
      )
      assert.strictEqual(missing.reason, "not_found")
      // An id no run can have is no run's: not a store out of reach ("resuming later may work").
      for (const id of ["", "x".repeat(300), "x\ud800"]) {
        const impossible = yield* Effect.flip(
          Run.resume(id, { tools: [payment.tool] }).pipe(Effect.provide(payThenAnswer))
        )
        assert.strictEqual(impossible.reason, "not_found", JSON.stringify(id))
      }
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a tool named __proto__ or toString is fingerprinted as any other: a changed one is refused", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const named = (name: string, sideEffect: Tool.SideEffect) =>
        Tool.make({
          name,
          description: "A tool with an awkward name.",
          input: Schema.Struct({}),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect,
          handler: () => Effect.succeed({ ok: true })
        })
      const store = yield* Journal.Journal
      const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when: "after" } })
      yield* diesIn(
        faulty,
        Run.run({
          goal: "pay 10",
          runId: "r3",
          tools: [payment.tool, named("__proto__", "read"), named("toString", "read")]
        }).pipe(Effect.provideService(Journal.Journal, faulty.journal), Effect.provide(payThenAnswer))
      )
      for (const [tools, says] of [
        [[payment.tool, named("__proto__", "external"), named("toString", "read")], 'the tool "__proto__" changed'],
        [[payment.tool, named("__proto__", "read")], 'the tool "toString", which is not given']
      ] as const) {
        const error = yield* Effect.flip(Run.resume("r3", { tools }).pipe(Effect.provide(payThenAnswer)))
        assert.strictEqual(error.reason, "incompatible")
        assert.include(error.message, says)
      }
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R7 R9 a run resumed with a tool that no longer needs approval is refused: a waiting call never runs unapproved",
    () =>
      Effect.gen(function* () {
        const gated = approvedPay()
        // Commit 3: the approval request.
        yield* dies(
          { crashAt: { commit: 3, when: "after" } },
          { goal: "pay 10", tools: [gated.tool] },
          payThenAnswer
        ).pipe(Effect.ignore)
        const ungated = pay(true)
        const error = yield* Effect.flip(
          Run.resume("r1", { tools: [ungated.tool] }).pipe(Effect.provide(payThenAnswer))
        )
        assert.strictEqual(error.reason, "incompatible")
        assert.include(error.message, "needs approval")
        assert.strictEqual(ungated.calls.count + gated.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R7 killed while awaiting approval: the request is put back with its original expiry and decided after",
    () =>
      Effect.gen(function* () {
        const payment = FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          behaviour: () => "apply",
          reconcile: true,
          needsApproval: true
        })
        const tools = [payment.tool]
        const store = yield* Journal.Journal
        // Commit 3: the approval request.
        const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when: "after" } })
        yield* diesIn(
          faulty,
          Run.run({ goal: "pay 10", runId: "r1", tools }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(payThenAnswer)
          )
        )
        const kept = Option.getOrThrow(yield* Effect.orDie(store.read("r1")))
        const [asked] = ofTag(kept.events, "approval.requested")
        assert.isDefined(asked)
        const fiber = yield* Run.resume("r1", { tools }, "restart").pipe(
          Effect.provide(payThenAnswer),
          Effect.forkChild
        )
        const gate = yield* Approval.ApprovalGate
        let pending = yield* gate.pending
        while (pending.length === 0) {
          yield* Effect.yieldNow
          pending = yield* gate.pending
        }
        assert.strictEqual(pending[0]?.expiresAt, asked?.expiresAt)
        assert.strictEqual(payment.calls.count, 0)
        yield* gate.decide("r1", "c1", Approval.approved("ops"))
        const resumed = yield* Fiber.join(fiber)
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(payment.ledger.total, 1)
        assert.lengthOf(ofTag(resumed.timeline, "approval.requested"), 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.4 R9.2 a process killed three times as the payment begins, each time before it acted: the status query finds it not applied, the stops spend no retry, it pays once",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        const store = yield* Journal.Journal
        // The first process dies right after the payment's intent record, before the handler acts.
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        // Each restart records the stop, finds the call not applied, records the resend's intent, and dies there too.
        for (let restart = 1; restart <= 3; restart++) {
          const faulty = FaultyJournal.make(store, { crashAt: { commit: 1, when: "after" } })
          yield* diesIn(
            faulty,
            TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
              Effect.provideService(Journal.Journal, faulty.journal),
              Effect.provide(payThenAnswer)
            )
          )
        }
        assert.strictEqual(payment.ledger.total, 0)
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
          Effect.provide(payThenAnswer)
        )
        assert.strictEqual(resumed.status, "completed", resumed.detail)
        assert.strictEqual(payment.ledger.count("r1:c1"), 1)
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
          ["not_applied", "not_applied", "not_applied", "not_applied"]
        )
        assert.lengthOf(ofTag(resumed.timeline, "recovery.started"), 0)
      }).pipe(Effect.provide(layers))
  )
})
