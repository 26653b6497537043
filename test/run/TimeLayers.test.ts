import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Schedule, Schema, Stream } from "effect"
import { LanguageModel } from "effect/ai"
import { CircuitBreaker } from "effect/persistence"
import type * as Event from "../../src/events/Event.ts"
import type * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as LanguageModelAdapter from "../../src/providers/LanguageModelAdapter.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"
import { assertRoundTrips } from "../support/schema.ts"

/** A model call that never answers: only a time layer can end it. */
const silent: ScriptedModel.Step = () => Effect.never

const hangingTool = (options: Partial<Tool.Options<Record<string, never>, string, never>> = {}) =>
  Tool.make({
    name: "hang",
    description: "waits forever",
    input: Schema.Struct({}),
    output: Schema.String,
    handler: () => Effect.never,
    ...options
  })

/** Runs in the background on the TestClock, moving it 10 ms at a time until the run ends. */
const runOn = (script: ReadonlyArray<ScriptedModel.Step>, options: Omit<Run.Options<Tool.Any<never>>, "goal">) =>
  drive(Run.run({ goal: "x", recovery: { backoff: Recovery.backoff({ jitter: false }) }, ...options })).pipe(
    Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer))
  )

const events = <Tag extends Event.Event["_tag"]>(result: RunResult.RunResult, tag: Tag) =>
  result.timeline.filter((e): e is Event.Of<Tag> => e._tag === tag)

const started = (result: RunResult.RunResult) => result.timeline[0] as Event.Of<"run.started">

/** Nothing in the run happened, waited or slept past its deadline. */
const withinRunDeadline = (result: RunResult.RunResult) => {
  const { at, deadlineAt } = started(result)
  for (const e of result.timeline) assert.isAtMost(e.at, deadlineAt, `${e._tag} at ${e.at - at} ms`)
}

const timeoutOf = (failure: Failure.Summary | undefined) => failure?.timeout

/** Time where every layer is set and only `tightest` is short (1 s); the others are 3 s to 10 s. */
const time = (tightest: "run" | "step" | "attempt" | "approval"): Run.Time => ({
  run: tightest === "run" ? "1 second" : "10 seconds",
  step: tightest === "step" ? "1 second" : "5 seconds",
  attempt: tightest === "attempt" ? "1 second" : "3 seconds",
  approval: tightest === "approval" ? "1 second" : "4 seconds"
})

describe("R4 time layers: each layer fires first in turn", () => {
  it.effect(
    "R4.2 R12 stepping the recovery schedule is a wait of the step: one that never decides ends step_timeout at the step",
    () =>
      Effect.gen(function* () {
        const undecided = Schedule.spaced("10 millis").pipe(Schedule.modifyDelay(() => Effect.never))
        const result = yield* drive(
          Run.run({
            goal: "x",
            tools: [],
            time: { run: "1 minute", step: "2 seconds" },
            recovery: { backoff: undecided }
          })
        ).pipe(
          Effect.provide(
            FaultyModel.layer(
              FaultyModel.make([FaultyModel.httpError(503), FaultyModel.respond(ScriptedModel.finalAnswer("x"))])
            )
          )
        )
        assert.strictEqual(result.stopReason, "step_timeout")
        assert.strictEqual(result.elapsedMillis, 2_000)
        assert.include(result.detail, "would wait without end")
      })
  )

  it.effect(
    "R12 a recovery schedule that fails (its type says it cannot) is named: internal_error, not the model's failure",
    () =>
      Effect.gen(function* () {
        // Erased on purpose: the schedule's type says it never fails.
        const failing = Schedule.spaced("10 millis").pipe(
          Schedule.modifyDelay(() => Effect.fail("boom") as unknown as Effect.Effect<Duration.Duration>)
        )
        const result = yield* drive(Run.run({ goal: "x", tools: [], recovery: { backoff: failing } })).pipe(
          Effect.provide(
            FaultyModel.layer(
              FaultyModel.make([FaultyModel.httpError(503), FaultyModel.respond(ScriptedModel.finalAnswer("x"))])
            )
          )
        )
        assert.strictEqual(result.stopReason, "internal_error")
        assert.include(result.detail, "the recovery schedule failed with")
      })
  )

  it.effect(
    "R4.1 R12 a run deadline of 1,000 years is a run that ends by itself, one past it is refused naming it (review 182); the next run's deadline still fires",
    () =>
      Effect.gen(function* () {
        const far = yield* runOn([ScriptedModel.finalAnswer("done")], {
          tools: [],
          time: { run: "365250 days" }
        })
        assert.strictEqual(far.stopReason, "goal_reached")
        const pastTheLongest: ReadonlyArray<Duration.Input> = [
          Duration.millis(1e303),
          "9999999999 days",
          Duration.millis(1000 * 365.25 * 86_400_000 + 1)
        ]
        for (const run of pastTheLongest) {
          const past = yield* runOn([ScriptedModel.finalAnswer("done")], { tools: [], time: { run } })
          assert.strictEqual(past.stopReason, "internal_error")
          assert.include(past.detail, "time.run: Expected a positive duration of at most 365250 days")
        }
        const near = yield* runOn([silent], { tools: [], time: { run: "1 second" } })
        assert.strictEqual(near.stopReason, "run_timeout")
      })
  )

  it.effect("R4.1 run layer first: the run deadline cuts off the model call; the run ends run_timeout", () =>
    Effect.gen(function* () {
      const result = yield* runOn([silent], { tools: [], time: time("run") })
      assert.strictEqual(result.stopReason, "run_timeout")
      const failed = events(result, "model.failed")
      assert.deepStrictEqual(timeoutOf(failed[0]?.failure), {
        layer: "run",
        elapsedMillis: 1000,
        mayHaveSideEffects: false
      })
      assert.strictEqual(result.elapsedMillis, 1000)
      withinRunDeadline(result)
      // A call asked at +600 ms waited 400 ms when the deadline cut it off: its own wait, not the run's length.
      const slow = Tool.make({
        name: "slow",
        description: "Takes 600 ms",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        handler: () => Effect.as(Effect.sleep("600 millis"), "done")
      })
      const later = yield* runOn([ScriptedModel.toolCall("slow", {}), silent], { tools: [slow], time: time("run") })
      assert.strictEqual(later.stopReason, "run_timeout")
      assert.deepInclude(timeoutOf(events(later, "model.failed")[0]?.failure), { layer: "run", elapsedMillis: 400 })
    })
  )

  it.effect("R4.1 step layer first: the step deadline cuts off the model call; no retry fits; step_timeout", () =>
    Effect.gen(function* () {
      const result = yield* runOn([silent, ScriptedModel.finalAnswer("never asked")], {
        tools: [],
        time: time("step")
      })
      assert.strictEqual(result.stopReason, "step_timeout")
      const [failed] = events(result, "model.failed")
      assert.strictEqual(failed?.failure.code, "step_timeout")
      assert.deepStrictEqual(timeoutOf(failed?.failure), {
        layer: "step",
        elapsedMillis: 1000,
        mayHaveSideEffects: false
      })
      assert.strictEqual(failed?.at, started(result).at + 1000)
      // The retry would have to wait past the step deadline: recovery gives up instead of sleeping.
      assert.lengthOf(events(result, "recovery.started"), 0)
      assert.match(events(result, "recovery.failed")[0]?.cause ?? "", /of the step are left/)
      withinRunDeadline(result)
    })
  )

  it.effect("R4.1 attempt layer first: the attempt timeout cuts off one call, which is retried in time", () =>
    Effect.gen(function* () {
      const result = yield* runOn([silent, ScriptedModel.finalAnswer("done")], { tools: [], time: time("attempt") })
      assert.strictEqual(result.status, "completed")
      const [failed] = events(result, "model.failed")
      assert.strictEqual(failed?.failure.classification, "retryable")
      assert.deepStrictEqual(timeoutOf(failed?.failure), {
        layer: "attempt",
        elapsedMillis: 1000,
        mayHaveSideEffects: false
      })
      const [retry] = events(result, "recovery.started")
      assert.strictEqual(retry?.delayMillis, 50)
      assert.strictEqual(result.elapsedMillis, 1050)
      withinRunDeadline(result)
    })
  )

  it.effect("R4.1 R4.3 tool layer first: the timeout says tool layer, elapsed time, side effects may exist", () =>
    Effect.gen(function* () {
      const tool = hangingTool({ timeout: "1 second", sideEffect: "write" })
      const result = yield* runOn([ScriptedModel.toolCall("hang", {})], { tools: [tool], time: time("attempt") })
      assert.strictEqual(result.status, "unknown_outcome")
      assert.strictEqual(result.stopReason, "unknown_outcome")
      const [failed] = events(result, "tool.failed")
      assert.strictEqual(failed?.error.failure?.classification, "unknown")
      assert.deepStrictEqual(timeoutOf(failed?.error.failure), {
        layer: "tool",
        elapsedMillis: 1000,
        mayHaveSideEffects: true
      })
      assert.lengthOf(events(result, "recovery.started"), 0)
      assert.lengthOf(result.pendingActions, 1)
      assertRoundTrips(result)
      withinRunDeadline(result)
    })
  )

  it.effect("R4.1 R7 approval layer first: nobody decides in time; the run ends approval_expired", () =>
    Effect.gen(function* () {
      let ran = 0
      const tool = hangingTool({ needsApproval: true, handler: () => Effect.sync(() => `ran ${++ran}`) })
      const result = yield* runOn([ScriptedModel.toolCall("hang", {})], { tools: [tool], time: time("approval") })
      assert.strictEqual(result.stopReason, "approval_expired")
      assert.strictEqual(result.status, "failed")
      const [decided] = events(result, "approval.decided")
      assert.strictEqual(decided?.decision, "expired")
      assert.strictEqual(decided?.layer, "approval")
      assert.strictEqual(decided?.at, started(result).at + 1000)
      assert.strictEqual(ran, 0)
      withinRunDeadline(result)
    })
  )
})

describe("R4.2 each wait gets min(its own limit, step left, run left)", () => {
  it.effect("R4.2 a tool whose own timeout is longer than the step is cut off by the step: step_timeout", () =>
    Effect.gen(function* () {
      const tool = hangingTool({ timeout: "3 seconds", sideEffect: "read", idempotent: true })
      const result = yield* runOn([ScriptedModel.toolCall("hang", {})], {
        tools: [tool],
        time: { run: "10 seconds", step: "1 second" }
      })
      assert.strictEqual(result.stopReason, "step_timeout")
      const [failed] = events(result, "tool.failed")
      assert.strictEqual(failed?.error.failure?.classification, "retryable")
      assert.deepStrictEqual(timeoutOf(failed?.error.failure), {
        layer: "step",
        elapsedMillis: 1000,
        mayHaveSideEffects: false
      })
      withinRunDeadline(result)
    })
  )

  it.effect("R4.2 a tool that hands its errors to the model gets a fresh step after the step deadline", () =>
    Effect.gen(function* () {
      let calls = 0
      const tool = hangingTool({
        sideEffect: "read",
        idempotent: true,
        maxRetries: 1,
        recoverErrors: true,
        handler: () => (++calls === 1 ? Effect.never : Effect.succeed("found"))
      })
      const result = yield* runOn(
        [ScriptedModel.toolCall("hang", {}), ScriptedModel.toolCall("hang", {}), ScriptedModel.finalAnswer("done")],
        { tools: [tool], time: { run: "10 seconds", step: "1 second" } }
      )
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(events(result, "tool.failed")[0]?.error.failure?.code, "step_timeout")
      assert.lengthOf(events(result, "tool.succeeded"), 1)
    })
  )

  it.effect(
    "R4.2 a model call gets the tightest deadline in its request, and the step's time shrinks across retries",
    () =>
      Effect.gen(function* () {
        const deadlines: Array<number> = []
        const record: ScriptedModel.Step = (request) => {
          deadlines.push(request.deadlineAt)
          return Effect.fail(FailureBoundary.http({ status: 503, now: request.deadlineAt }))
        }
        const result = yield* runOn([record, record, record], {
          tools: [],
          time: { run: "10 seconds", step: "1 second", attempt: "3 seconds" }
        })
        const at = started(result).at
        // Attempt 1 at 0 ms, attempt 2 after 50 ms, attempt 3 after 100 more: each is given what is left of the step.
        assert.deepStrictEqual(
          deadlines.map((d) => d - at),
          [1000, 1000, 1000]
        )
        assert.strictEqual(result.stopReason, "recovery_exhausted")
      })
  )

  it.effect("R4.2 R3.3 a Retry-After longer than what is left of the step is not waited: step_timeout at once", () =>
    Effect.gen(function* () {
      const result = yield* runOn([FailureBoundary.http({ status: 429, retryAfter: "2", now: 0 })], {
        tools: [],
        time: { run: "10 seconds", step: "1 second" }
      })
      assert.strictEqual(result.stopReason, "step_timeout")
      assert.strictEqual(result.elapsedMillis, 0)
    })
  )

  it.effect("R4.2 R7 an approval wait longer than the step is cut off by the step: step_timeout", () =>
    Effect.gen(function* () {
      const tool = hangingTool({ needsApproval: true })
      const result = yield* runOn([ScriptedModel.toolCall("hang", {})], {
        tools: [tool],
        time: { run: "10 seconds", step: "1 second", approval: "3 seconds" }
      })
      assert.strictEqual(result.stopReason, "step_timeout")
      const [decided] = events(result, "approval.decided")
      assert.strictEqual(decided?.decision, "expired")
      assert.strictEqual(decided?.layer, "step")
    })
  )

  it.effect("R4.2 R7 the run deadline withdraws a pending approval: run_timeout, the call never ran", () =>
    Effect.gen(function* () {
      const tool = hangingTool({ needsApproval: true })
      const result = yield* runOn([ScriptedModel.toolCall("hang", {})], { tools: [tool], time: time("run") })
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(events(result, "approval.decided")[0]?.decision, "withdrawn")
      assert.strictEqual(events(result, "tool.interrupted")[0]?.settlement, "cancelled")
      // The detail names the state the deadline found, not the one the cleanup left.
      assert.include(result.detail, "while the run was awaiting_approval")
      withinRunDeadline(result)
    })
  )

  it.effect("R4 invalid step, attempt and approval timeouts are refused with a clear message", () =>
    Effect.gen(function* () {
      for (const [field, value, shown] of [
        ["step", "0 millis", '"0 millis"'],
        ["attempt", -5, "-5"],
        ["approval", "soon", '"soon"']
      ] as const) {
        const result = yield* runOn([], { tools: [], time: { [field]: value } })
        assert.strictEqual(result.stopReason, "internal_error")
        assert.strictEqual(
          result.detail,
          `invalid run options: time.${field}: Expected a positive duration of at most 365250 days (1000 years; "30 seconds", or milliseconds), got ${shown}`
        )
      }
    })
  )

  it.effect("R4.2 R6.4 a postcondition that hangs is bounded by the tool timeout: inconsistent_result", () =>
    Effect.gen(function* () {
      const checked = Tool.make({
        name: "write",
        description: "write and confirm",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "write",
        timeout: "1 second",
        handler: () => Effect.succeed("ok"),
        postcondition: () => Effect.never
      })
      const result = yield* runOn([ScriptedModel.toolCall("write", {}), ScriptedModel.finalAnswer("done")], {
        tools: [checked],
        time: { step: "3 seconds" }
      })
      assert.strictEqual(result.stopReason, "inconsistent_result")
      assert.include(result.detail, "the check did not answer within the tool timeout of 1000 ms")
      assert.isAtMost(result.elapsedMillis, 1100)
      // The write took place: the check's timeout does not say it left nothing behind (R4.3), nor that its outcome is unknown.
      const failure = events(result, "tool.failed")[0]?.error.failure
      assert.deepInclude(timeoutOf(failure), { layer: "tool", mayHaveSideEffects: true })
      assert.notStrictEqual(failure?.classification, "unknown")
      assert.deepStrictEqual(
        result.sideEffects.map((e) => e.name),
        ["write"]
      )
    })
  )

  it.effect("R4.3 a provider's timeout of the deadline it was handed names the run's limit, from the request", () =>
    Effect.gen(function* () {
      // A circuit store that takes 150 ms to admit a call (a remote one): the provider starts
      // late, and its own timer, set for the request's deadline, fires first (review 124).
      const slowStore = Layer.effect(
        CircuitBreaker.CircuitBreakerStore,
        Effect.map(CircuitBreaker.CircuitBreakerStore, (inner) => ({
          ...inner,
          admit: (key: string) => Effect.andThen(Effect.sleep("150 millis"), inner.admit(key))
        }))
      ).pipe(Layer.provide(CircuitBreaker.layerStoreMemory()))
      const never = LanguageModelAdapter.layer().pipe(
        Layer.provide(
          Layer.effect(
            LanguageModel.LanguageModel,
            LanguageModel.make({ generateText: () => Effect.never, streamText: () => Stream.never })
          )
        )
      )
      const failureWith = (time: Run.Time) =>
        Effect.map(
          drive(Run.run({ goal: "x", tools: [], time, recovery: { backoff: Recovery.backoff({ retries: 0 }) } })).pipe(
            Effect.provide(Layer.mergeAll(never, Breakers.layer().pipe(Layer.provide(slowStore))))
          ),
          (result) => events(result, "model.failed")[0]?.failure
        )
      // It said "the attempt timeout of 850 ms": the time left when the provider began.
      const attempt = yield* failureWith({ attempt: "1 second" })
      assert.strictEqual(attempt?.hint, "no answer within the attempt timeout of 1000 ms")
      assert.deepInclude(timeoutOf(attempt), { layer: "attempt", elapsedMillis: 1000 })
      // The step's: 1 s waited since the request, not 850 ms.
      const step = yield* failureWith({ step: "1 second" })
      assert.strictEqual(step?.hint, "no answer within the step deadline (cut off after 1000 ms)")
      assert.deepInclude(timeoutOf(step), { layer: "step", elapsedMillis: 1000 })
    })
  )

  it.effect("R4.3 a timeout's words name its limit, and the time its wait took as elapsed", () =>
    Effect.gen(function* () {
      // A 1 s attempt timeout on a model call that cannot be interrupted until 3 s.
      const held = yield* runOn(
        [() => Effect.uninterruptible(Effect.as(Effect.sleep("3 seconds"), ScriptedModel.finalAnswer("late")))],
        { tools: [], time: { run: "1 minute", step: "5 seconds", attempt: "1 second" } }
      )
      const heldFailure = events(held, "model.failed")[0]?.failure
      assert.strictEqual(heldFailure?.hint, "no answer within the attempt timeout of 1000 ms (cut off after 3000 ms)")
      assert.deepInclude(timeoutOf(heldFailure), { layer: "attempt", elapsedMillis: 3000 })
      // A 1 s run deadline reached 400 ms into a model call.
      const quick = Tool.make({
        name: "quick",
        description: "600 ms",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        handler: () => Effect.as(Effect.sleep("600 millis"), "done")
      })
      const cut = yield* runOn([ScriptedModel.toolCall("quick", {}), silent], { tools: [quick], time: time("run") })
      const cutFailure = events(cut, "model.failed")[0]?.failure
      assert.strictEqual(cutFailure?.hint, "no answer within the run deadline (cut off after 400 ms)")
      assert.deepInclude(timeoutOf(cutFailure), { layer: "run", elapsedMillis: 400 })
      // A postcondition held past its tool's 1 s timeout.
      const checked = Tool.make({
        name: "write",
        description: "write and confirm",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "write",
        timeout: "1 second",
        handler: () => Effect.succeed("ok"),
        postcondition: () => Effect.uninterruptible(Effect.as(Effect.sleep("3 seconds"), true))
      })
      const late = yield* runOn([ScriptedModel.toolCall("write", {}), ScriptedModel.finalAnswer("done")], {
        tools: [checked],
        time: { step: "5 seconds" }
      })
      assert.include(late.detail, "the check did not answer within the tool timeout of 1000 ms (cut off after 3000 ms)")
    })
  )

  it.effect("R5.2 R4.3 a call cut off on several attempts has one tool.interrupted per attempt, naming it", () =>
    Effect.gen(function* () {
      const read = hangingTool({ sideEffect: "read", idempotent: true, timeout: "1 second", maxRetries: 2 })
      const result = yield* runOn([ScriptedModel.toolCall("hang", {}, "c1"), ScriptedModel.finalAnswer("done")], {
        tools: [read],
        recovery: { maxRecoveries: 8 }
      })
      const interrupted = events(result, "tool.interrupted").filter((e) => e.callId === "c1")
      assert.deepStrictEqual(
        interrupted.map((e) => e.attempt),
        [1, 2, 3]
      )
      assert.strictEqual(events(result, "tool.failed").filter((e) => e.callId === "c1").length, 1)
      assertRoundTrips(result)
    })
  )

  it.effect(
    "R4.2 a permission policy or a postcondition cut off by the step deadline ends the step: step_timeout",
    () =>
      Effect.gen(function* () {
        // A permission policy that never answers, under a step of 1 s.
        const neverDecides = Layer.succeed(Permission.Permission, { check: () => Effect.never })
        const byPolicy = yield* runOn([ScriptedModel.toolCall("hang", {}), ScriptedModel.finalAnswer("x")], {
          tools: [hangingTool()],
          time: time("step")
        }).pipe(Effect.provide(neverDecides))
        assert.deepStrictEqual([byPolicy.status, byPolicy.stopReason], ["failed", "step_timeout"])
        assert.include(byPolicy.detail, "the permission policy for hang was cut off by the step deadline")
        assert.lengthOf(events(byPolicy, "tool.started"), 0)

        // A postcondition that never answers: it contradicted nothing, the step ran out.
        const checked = hangingTool({ handler: () => Effect.succeed("done"), postcondition: () => Effect.never })
        const byCheck = yield* runOn([ScriptedModel.toolCall("hang", {}), ScriptedModel.finalAnswer("x")], {
          tools: [checked],
          time: time("step")
        })
        assert.deepStrictEqual([byCheck.status, byCheck.stopReason], ["failed", "step_timeout"])
        withinRunDeadline(byCheck)
        // The same for a tool that hands its errors to the model: its action is done, the check
        // ran out; the model must not be told it failed (it would run it again).
        const recovering = hangingTool({
          handler: () => Effect.succeed("done"),
          postcondition: () => Effect.never,
          recoverErrors: true
        })
        const byRecovering = yield* runOn(
          [ScriptedModel.toolCall("hang", {}), ScriptedModel.toolCall("hang", {}), ScriptedModel.finalAnswer("x")],
          { tools: [recovering], time: time("step") }
        )
        assert.deepStrictEqual([byRecovering.status, byRecovering.stopReason], ["failed", "step_timeout"])
        assert.lengthOf(events(byRecovering, "tool.started"), 1)
      })
  )
})

describe("R4.2 R3.11 an attempt's intent record and its handler share one bound", () => {
  /** A journal whose commit of a `tool.started` takes `millis`: waiting (a store out of reach) or blocking the event loop. */
  const slowIntent = (journal: Journal.Service, millis: number, how: "wait" | "block"): Journal.Service => ({
    ...journal,
    append: (runId, batch) =>
      batch.events.some((e) => e._tag === "tool.started")
        ? Effect.andThen(
            how === "wait"
              ? Effect.sleep(millis)
              : Effect.sync(() => {
                  const end = Date.now() + millis
                  while (Date.now() < end) {
                    // The event loop is held, as SQLite does waiting out another process's lock.
                  }
                }),
            journal.append(runId, batch)
          )
        : journal.append(runId, batch)
  })
  const pay = (paid: { count: number }, handler?: () => Effect.Effect<string>) =>
    Tool.make({
      name: "pay",
      description: "Pays",
      input: Schema.Struct({}),
      output: Schema.String,
      sideEffect: "external",
      recoverErrors: true,
      timeout: "1 second",
      handler: () =>
        handler?.() ??
        Effect.sync(() => {
          paid.count++
          return "paid"
        })
    })
  const script = ScriptedModel.layer([ScriptedModel.toolCall("pay", {}), ScriptedModel.finalAnswer("done")])

  it.effect(
    "R4.2 R4.3 an intent record that takes 800 ms leaves the handler 200 ms of its 1 s: cut off at 1 s, as tool.started says",
    () =>
      Effect.gen(function* () {
        const journal = slowIntent(yield* Journal.Journal, 800, "wait")
        const result = yield* drive(
          Run.run({ goal: "pay", tools: [pay({ count: 0 }, () => Effect.never)] }).pipe(
            Effect.provideService(Journal.Journal, journal),
            Effect.provide(script)
          )
        )
        const [attempt] = events(result, "tool.started")
        const [failed] = events(result, "tool.failed")
        assert.deepInclude(attempt, { layer: "tool", deadlineAt: started(result).at + 1000 })
        assert.strictEqual(failed?.at, attempt?.deadlineAt)
        assert.deepInclude(timeoutOf(failed?.error.failure), { layer: "tool", elapsedMillis: 1000 })
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R4.2 an intent record that takes all of the attempt's time: the handler never starts", () =>
    Effect.gen(function* () {
      const paid = { count: 0 }
      const journal = slowIntent(yield* Journal.Journal, 1000, "wait")
      const result = yield* drive(
        Run.run({ goal: "pay", tools: [pay(paid)] }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provide(script)
        )
      )
      assert.strictEqual(paid.count, 0)
      const [settled] = events(result, "tool.interrupted")
      assert.deepInclude(settled, { attempt: 1, settlement: "cancelled" })
      assert.include(settled?.detail ?? "", "it never ran")
      assert.deepStrictEqual(result.sideEffects, [])
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.live("R3.11 R12 an intent record that holds the event loop past the run deadline: the payment never starts", () =>
    Effect.gen(function* () {
      const paid = { count: 0 }
      const journal = slowIntent(yield* Journal.Journal, 300, "block")
      const result = yield* Run.run({ goal: "pay", tools: [pay(paid)], time: { run: "150 millis" } }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provide(script)
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(paid.count, 0)
      assert.deepStrictEqual(result.sideEffects, [])
      assert.deepStrictEqual(events(result, "tool.succeeded"), [])
    }).pipe(Effect.provide(Journal.layerMemory))
  )
  it.effect(
    "R4.2 R3.9 a circuit's store that takes all of an attempt's time: neither the model nor the tool is called past it",
    () =>
      Effect.gen(function* () {
        /** A breaker store (a Redis behind a partition) whose admission answers after 5 s. */
        const slowStore = Layer.effect(
          CircuitBreaker.CircuitBreakerStore,
          Effect.map(Effect.service(CircuitBreaker.CircuitBreakerStore), (inner) =>
            CircuitBreaker.CircuitBreakerStore.of({
              ...inner,
              admit: (key) => Effect.delay(inner.admit(key), "5 seconds")
            })
          )
        ).pipe(Layer.provide(CircuitBreaker.layerStoreMemory()))
        let asked = 0
        const model = Layer.succeed(Model.Model, {
          generate: () =>
            Effect.sync(() => {
              asked++
              return ScriptedModel.finalAnswer("done")
            })
        })
        const viaModel = yield* drive(
          Run.run({ goal: "x", tools: [], time: { attempt: "500 millis" } }).pipe(
            Effect.provide(model),
            Effect.provide(Breakers.layer().pipe(Layer.provide(slowStore)))
          )
        )
        assert.strictEqual(asked, 0)
        assert.deepInclude(timeoutOf(events(viaModel, "model.failed")[0]?.failure), { layer: "attempt" })
        const ran = { count: 0 }
        const read = Tool.make({
          name: "read",
          description: "Reads",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          timeout: "500 millis",
          handler: () =>
            Effect.sync(() => {
              ran.count++
              return "read"
            })
        })
        const viaTool = yield* drive(
          Run.run({ goal: "x", tools: [read] }).pipe(
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("read", {}), ScriptedModel.finalAnswer("done")])
            ),
            Effect.provide(Breakers.layer({ provider: false }).pipe(Layer.provide(slowStore)))
          )
        )
        assert.strictEqual(ran.count, 0)
        const [settled] = events(viaTool, "tool.interrupted")
        assert.include(settled?.detail ?? "", "it never ran")
      })
  )
  it.effect(
    "R4.2 R3.8 a write the step deadline cut off: its status query is not asked with nothing of the step left, and says so",
    () =>
      Effect.gen(function* () {
        let asked = 0
        const pay = Tool.make({
          name: "pay",
          description: "Pays",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          handler: () => Effect.never,
          reconcile: () =>
            Effect.sync((): Tool.Reconciliation<string> => {
              asked++
              return { _tag: "Applied", output: "paid" }
            })
        })
        const result = yield* runOn([ScriptedModel.toolCall("pay", {}), ScriptedModel.finalAnswer("done")], {
          tools: [pay],
          time: { step: "1 second" }
        })
        assert.strictEqual(asked, 0)
        assert.strictEqual(result.stopReason, "unknown_outcome")
        const [reconciled] = events(result, "tool.reconciled")
        assert.deepInclude(reconciled, { verdict: "undecidable" })
        assert.include(reconciled?.detail ?? "", "the step deadline, which had passed (it was not asked)")
      })
  )
})

describe("R2.1 R4.2 an answer each layer cuts off is counted with what it cost so far", () => {
  /** A model whose answer is coming, paid for, when a timer cuts it off: it reports what it cost. */
  const paying = Layer.succeed(Model.Model, {
    generate: () =>
      Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff({ inputTokens: 1_000, outputTokens: 4_000 })))
  })
  const cases = [
    // The first answer's 5,000 tokens leave room for a second; its 5,000 more pass 6,000.
    { layer: "attempt", time: { attempt: "400 millis" }, limits: { maxTokens: 6_000 }, stop: "budget_exhausted", n: 2 },
    { layer: "step", time: { step: "400 millis" }, limits: {}, stop: "step_timeout", n: 1 },
    { layer: "run", time: { run: "400 millis" }, limits: {}, stop: "run_timeout", n: 1 }
  ] as const
  for (const { layer, time, limits, stop, n } of cases)
    it.effect(`R2.1 R4.2 the ${layer} layer`, () =>
      Effect.gen(function* () {
        const result = yield* drive(
          Run.run({ goal: "x", tools: [], time, limits, recovery: { backoff: Recovery.backoff({ jitter: false }) } })
        ).pipe(Effect.provide(paying))
        assert.strictEqual(result.stopReason, stop, result.detail)
        const failed = events(result, "model.failed")
        assert.strictEqual(failed[0]?.failure.code, `${layer}_timeout`)
        assert.deepStrictEqual(failed[0]?.usage, { inputTokens: 1_000, outputTokens: 4_000 })
        assert.lengthOf(failed, n)
        assert.strictEqual(result.counters.outputTokens, 4_000 * n)
        assertRoundTrips(result)
      })
    )
})
