import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { approval, base, invariants, run, tagsOf } from "../support/properties.ts"
import { diesIn } from "../support/restart.ts"

// The invariants of `Properties.check` and `checkScenario`, each catching a doctored run, and
// the scenarios `toScenario` builds.

const edit = (result: RunResult.RunResult, timeline: ReadonlyArray<Event.Event>): RunResult.RunResult => ({
  ...result,
  timeline: timeline.map((e, seq) => ({ ...e, seq }))
})

/** A run relabelled everywhere its ending is said: the decisions, the last state, run.finished and the result. */
const relabel = (
  result: RunResult.RunResult,
  reason: RunResult.RunResult["stopReason"],
  status: RunResult.RunResult["status"],
  policy: string
): RunResult.RunResult => ({
  ...edit(
    result,
    result.timeline.map((e) =>
      e._tag === "termination.decided"
        ? { ...e, reason, policy }
        : e._tag === "run.finished"
          ? { ...e, stopReason: reason, status }
          : e._tag === "state.changed" && e.to === result.status
            ? { ...e, to: status }
            : e
    )
  ),
  stopReason: reason,
  status,
  policy
})

describe("Properties.check catches broken runs", () => {
  it.effect("R3.4 R3.3 a retry past the budget, the schedule or the deadline is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "ServerError" }, { _tag: "RateLimited", retryAfterSeconds: 2 }]
      })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      assert.include(invariants(Properties.check(result, { ...scenario.budget, maxRecoveries: 1 })), "R3.4 run budget")
      assert.include(invariants(Properties.check(result, { ...scenario.budget, scheduleRetries: 1 })), "R3.3 episode")
      assert.include(
        invariants(Properties.check(result, { ...scenario.budget, runTimeoutMillis: 1_000 })),
        "R3.3 deadline"
      )
    })
  )

  it.effect("R2.1 an answer paid for and not counted, or a request past the token budget, is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "Unfinished", tokens: 100 }, { _tag: "ServerError" }],
        answerTokens: 40,
        maxTokens: 90
      })
      // The unfinished answer spent the budget: no retry is asked, and its 100 tokens are counted.
      assert.deepStrictEqual(
        [result.stopReason, result.counters.inputTokens + result.counters.outputTokens],
        ["budget_exhausted", 100]
      )
      assert.deepStrictEqual(
        scenario.model.paid.map((u) => u.inputTokens + u.outputTokens),
        [100]
      )
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      // A failure's usage the counters leave out, and the model paid for more than the timeline records.
      const uncounted = edit(
        result,
        result.timeline.map((e) => (e._tag === "model.failed" ? { ...e, usage: undefined } : e))
      )
      assert.include(invariants(Properties.check(uncounted, scenario.budget)), "R2.1 usage counted")
      assert.include(invariants(Properties.checkScenario(scenario, uncounted)), "R2.1 paid")
      // Nor may one answer's usage pass for another's: the totals agree, the answers do not.
      const { scenario: two, result: both } = yield* run({
        ...base,
        steps: [{ _tag: "Unfinished", tokens: 100 }],
        answerTokens: 40
      })
      const failedUsage = both.timeline.find((e) => e._tag === "model.failed")
      const moved = edit(
        both,
        both.timeline.map((e) =>
          e._tag === "model.failed"
            ? { ...e, usage: undefined }
            : e._tag === "model.responded" && failedUsage?._tag === "model.failed" && failedUsage.usage !== undefined
              ? {
                  ...e,
                  usage: {
                    inputTokens: e.usage.inputTokens + failedUsage.usage.inputTokens,
                    outputTokens: e.usage.outputTokens + failedUsage.usage.outputTokens
                  }
                }
              : e
        )
      )
      assert.deepStrictEqual(Properties.checkScenario(two, both), [])
      assert.include(invariants(Properties.checkScenario(two, moved)), "R2.1 paid")
      // With a budget the answers passed sooner, the run went on past it.
      const { scenario: under, result: spent } = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [{ _tag: "Succeeds" }] }],
        answerTokens: 40
      })
      assert.strictEqual(spent.status, "completed")
      assert.include(invariants(Properties.check(spent, { ...under.budget, maxTokens: 30 })), "R2.1 token budget")
      assert.notInclude(invariants(Properties.check(spent, { ...under.budget, maxTokens: 80 })), "R2.1 token budget")
    })
  )

  it.effect("R3.1 a retry caused by a permanent failure is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({ ...base, steps: [{ _tag: "ServerError" }] })
      const doctored = edit(
        result,
        result.timeline.map((e) =>
          e._tag === "model.failed" ? { ...e, failure: { ...e.failure, classification: "permanent" as const } } : e
        )
      )
      assert.include(invariants(Properties.check(doctored, scenario.budget)), "R3.1 never retried")
      const renamed = edit(
        result,
        result.timeline.map((e) => (e._tag === "recovery.started" ? { ...e, cause: "http_400" } : e))
      )
      assert.include(invariants(Properties.check(renamed, scenario.budget)), "R3.1 never retried")
    })
  )

  it.effect(
    "R10 R3.2 a provider retry of a permanent HTTP status is reported, whatever the log classified (review 130)",
    () =>
      Effect.gen(function* () {
        const { scenario, result } = yield* run({ ...base, steps: [{ _tag: "ServerError" }] })
        const failed = result.timeline.find((e) => e._tag === "model.failed")
        assert.strictEqual(failed?._tag, "model.failed")
        const code = failed?._tag === "model.failed" ? failed.failure.code : ""
        assert.match(code, /^http_5\d\d$/)
        // The same log, its retried failure's code changed: a runtime that retried another status.
        const as = (status: string) =>
          edit(
            result,
            result.timeline.map((e) =>
              e._tag === "model.failed" && e.failure.code === code
                ? { ...e, failure: { ...e.failure, code: status } }
                : e._tag === "recovery.started" && e.cause === code
                  ? { ...e, cause: status }
                  : e
            )
          )
        for (const status of ["http_404", "http_403", "http_422", "http_301", "http_600"]) {
          assert.include(invariants(Properties.check(as(status), scenario.budget)), "R3.1 never retried", status)
        }
        for (const status of ["http_408", "http_409", "http_429", "http_500", "http_599", code]) {
          assert.notInclude(invariants(Properties.check(as(status), scenario.budget)), "R3.1 never retried", status)
        }
      })
  )

  it.effect(
    "R10 R3.1 a call that fails for good after a retry of another failure, or after its own retries, is no retry of it",
    () =>
      Effect.gen(function* () {
        const budget = { runTimeoutMillis: 60_000, maxRecoveries: 8, scheduleRetries: 2, toolMaxRetries: { t: 2 } }
        const runOne = <I, O>(tool: Tool.Tool<I, O>) =>
          Run.run({ goal: "g", tools: [tool], time: { run: "1 minute" } }).pipe(
            TestClockDriver.drive,
            Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("t", { a: 1 }), ScriptedModel.finalAnswer("x")]))
          )
        const gone = new Failure.Permanent({
          source: "tool",
          category: "not_found",
          code: "gone",
          attempts: 1,
          hint: "gone"
        })
        // Busy, retried once; then gone for good: recovery.failed says "never retried", and the failure counts 2 attempts.
        const flaky = FaultyTools.flaky({
          name: "t",
          failures: 2,
          recoverErrors: true,
          failure: (call) =>
            call.n === 1
              ? new Failure.Retryable({
                  source: "tool",
                  category: "unavailable",
                  code: "busy",
                  attempts: 1,
                  hint: "busy"
                })
              : gone
        })
        const retriedThenGone = yield* runOne(flaky.tool)
        // A tool that retried inside itself, then failed for good (R3.4: it carries its 3 attempts outward).
        const own = Tool.make({
          name: "t",
          description: "retries by itself",
          input: Schema.Struct({ a: Schema.Number }),
          output: Schema.String,
          sideEffect: "read",
          recoverErrors: true,
          handler: () => Effect.fail(FailureBoundary.withAttempts(gone, 3))
        })
        const ownRetries = yield* runOne(own)
        // An idempotent write refused at first (retried), whose retry's answer is lost: unknown outcome.
        const ledgered = FaultyTools.ledgered({
          name: "t",
          idempotent: true,
          sideEffect: "write",
          behaviour: ["fail_before_apply", "apply_then_lose"]
        })
        const retriedThenLost = yield* runOne(ledgered.tool)
        for (const [result, attempts] of [
          [retriedThenGone, 2],
          [ownRetries, 3],
          [retriedThenLost, 2]
        ] as const) {
          const failed = result.timeline.find((e) => e._tag === "tool.failed")
          assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.failure?.attempts : undefined, attempts)
          assert.notInclude(invariants(Properties.check(result, budget)), "R3.1 never retried")
        }
        // Made by hand: the run retried the permanent failure the call then ended with. Caught by
        // the call's own ending, whatever the list of codes known to be permanent.
        const retriedGone = edit(
          retriedThenGone,
          retriedThenGone.timeline.map((e) => (e._tag === "recovery.started" ? { ...e, cause: "gone" } : e))
        )
        assert.include(invariants(Properties.check(retriedGone, { ...budget, neverRetried: [] })), "R3.1 never retried")
        const retriedLost = edit(
          retriedThenLost,
          retriedThenLost.timeline.map((e) => (e._tag === "recovery.started" ? { ...e, cause: "connection_lost" } : e))
        )
        assert.include(invariants(Properties.check(retriedLost, { ...budget, neverRetried: [] })), "R3.1 never retried")
      })
  )

  it.effect(
    "R10 R4.2 an attempt that holds its step past its deadline is reported, whether it ends or the run deadline leaves it behind",
    () =>
      Effect.gen(function* () {
        const stubborn = (millis: number) =>
          Tool.make({
            name: "t",
            description: "cannot be interrupted",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "read",
            maxRetries: 0,
            handler: () => Effect.as(Effect.uninterruptible(Effect.sleep(millis)), "late")
          })
        const budget = { runTimeoutMillis: 20_000, maxRecoveries: 8, scheduleRetries: 2, stepTimeoutMillis: 5_000 }
        for (const millis of [10_000, 60_000]) {
          const result = yield* Run.run({
            goal: "g",
            tools: [stubborn(millis)],
            time: { run: "20 seconds", step: "5 seconds", stopGrace: "20 millis" }
          }).pipe(
            TestClockDriver.drive,
            Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("t", {}), ScriptedModel.finalAnswer("x")]))
          )
          // Ended at 10 s (its step_timeout says so), or left behind at the run deadline.
          assert.strictEqual(result.stopReason, millis === 10_000 ? "step_timeout" : "run_timeout")
          assert.include(invariants(Properties.check(result, budget)), "R4.2 step deadline")
        }
      })
  )

  it.effect("R2.5 R8 a missing or early run.finished and counters off the timeline are reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [{ _tag: "Succeeds" }] }]
      })
      const unfinished = edit(result, result.timeline.slice(0, -1))
      assert.include(invariants(Properties.check(unfinished, scenario.budget)), "R2.5 ending")
      const last = result.timeline[result.timeline.length - 1] as Event.Event
      const early = edit(result, [...result.timeline.slice(0, 1), last, ...result.timeline.slice(1)])
      assert.include(invariants(Properties.check(early, scenario.budget)), "R2.5 ending")
      const miscounted = { ...result, counters: { ...result.counters, toolCalls: result.counters.toolCalls + 1 } }
      assert.deepStrictEqual(Properties.check(miscounted, scenario.budget), [
        { invariant: "R8 counters", detail: "toolCalls: the result says 2, the timeline folds to 1" }
      ])
      const unknownReason = { ...result, stopReason: "gave_up" } as unknown as RunResult.RunResult
      assert.include(invariants(Properties.check(unknownReason, scenario.budget)), "R2.5 ending")
      // Its own elapsed time too, not only its counters' (review 175).
      const late = { ...result, elapsedMillis: result.elapsedMillis + 2_990 }
      assert.deepStrictEqual(Properties.check(late, scenario.budget), [
        {
          invariant: "R8 counters",
          detail: `elapsedMillis: the result says ${late.elapsedMillis}, the timeline folds to ${result.elapsedMillis}`
        }
      ])
    })
  )

  it.effect("R3.7 R3.8 a call of a tool that may not be sent twice, retried, is reported (review 175)", () =>
    Effect.gen(function* () {
      // A user's bug: a charge that does not deduplicate declared idempotent, its timeout retryable.
      const charges: Array<string> = []
      const pay = Tool.make({
        name: "pay",
        description: "charges a card",
        input: Schema.Struct({ amount: Schema.Number }),
        output: Schema.String,
        sideEffect: "external",
        idempotent: true,
        handler: ({ amount }, context) =>
          Effect.suspend(() => {
            charges.push(context.callId)
            return charges.length === 1
              ? Effect.fail(
                  new Failure.Retryable({
                    source: "tool",
                    category: "timeout",
                    code: "gateway_timeout",
                    attempts: 1,
                    hint: "timed out"
                  })
                )
              : Effect.succeed(`charged ${amount}`)
          })
      })
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay", tools: [pay], time: { run: "10 seconds" } })
      ).pipe(
        Effect.provide(
          ScriptedModel.layer([ScriptedModel.toolCall("pay", { amount: 5 }), ScriptedModel.finalAnswer("paid")])
        )
      )
      assert.strictEqual(charges.length, 2)
      const budget: Properties.Budget = {
        runTimeoutMillis: 10_000,
        maxRecoveries: 8,
        scheduleRetries: 2,
        toolMaxRetries: { pay: 2 },
        correctionBudget: 3,
        maxIterations: 20,
        maxToolCalls: 50
      }
      // Before: nothing reported, the card charged twice.
      assert.deepStrictEqual(invariants(Properties.check(result, { ...budget, mayActTwice: ["pay"] })), [
        "R3.7 idempotent only"
      ])
      // Told nothing of it, the kit takes the tool's word.
      assert.deepStrictEqual(Properties.check(result, budget), [])
    })
  )

  it.effect(
    "R2.5 R10 a stop reason with no witness in the log is reported: a model_error relabelled as another stop",
    () =>
      Effect.gen(function* () {
        const { scenario, result } = yield* run({ ...base, steps: [{ _tag: "BadRequest" }] })
        assert.deepStrictEqual([result.stopReason, Properties.checkScenario(scenario, result)], ["model_error", []])
        // Relabelled everywhere it is said: the decision, run.finished and the result.
        const relabelled = (reason: RunResult.RunResult["stopReason"], policy: string) => ({
          ...edit(
            result,
            result.timeline.map((e) =>
              e._tag === "termination.decided" || e._tag === "run.finished"
                ? { ...e, stopReason: reason, reason, policy }
                : e
            )
          ),
          stopReason: reason,
          policy
        })
        // At 1 of 10 iterations, at t=0 of a 60 s deadline, with no retry, no tool call: every one passed before.
        for (const [reason, policy] of [
          ["max_iterations", "max_iterations"],
          ["run_timeout", "run_timeout"],
          ["recovery_exhausted", "recovery_exhausted"],
          ["max_tool_calls", "max_tool_calls"],
          ["tool_error", "runtime"],
          ["cancelled", "runtime"],
          ["inconsistent_result", "runtime"],
          ["step_timeout", "runtime"]
        ] as const) {
          const found = Properties.checkScenario(scenario, relabelled(reason, policy))
          assert.include(invariants(found), "R2.5 stop witnessed", reason)
        }
        // A stop a policy of the user's decided (one the run lists) is theirs to explain; a name it does not list is not.
        const byMine = relabelled("max_iterations", "my_policy")
        const listing = edit(
          byMine,
          byMine.timeline.map((e) =>
            e._tag === "run.started" ? { ...e, policies: [...(e.policies ?? []), "my_policy"] } : e
          )
        )
        assert.notInclude(invariants(Properties.check(listing, scenario.budget)), "R2.5 stop witnessed")
        assert.include(invariants(Properties.check(byMine, scenario.budget)), "R2.5 stop witnessed")
        // A policy of the user's that replaced a built-in under its name, stopping for a reason that built-in never gives.
        assert.notInclude(
          invariants(Properties.check(relabelled("repeated_tool_call", "max_iterations"), scenario.budget)),
          "R2.5 stop witnessed"
        )
        // The runtime's own names for its stops: a step deadline's, validation's.
        for (const [reason, policy] of [
          ["step_timeout", "step_timeout"],
          ["validation_failed", "validation"]
        ] as const) {
          assert.include(
            invariants(Properties.check(relabelled(reason, policy), scenario.budget)),
            "R2.5 stop witnessed",
            reason
          )
        }
      })
  )

  it.effect("R2.5 R3.4 recovery_exhausted on a failure its provider had already retried is witnessed by it", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "g", tools: [] }).pipe(
        Effect.provide(FaultyModel.layer(FaultyModel.make([FaultyModel.alreadyRetried(503, 3)])))
      )
      assert.strictEqual(result.stopReason, "recovery_exhausted")
      // No recovery.failed: the run retried nothing; the provider's client had.
      const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2 }
      assert.notInclude(invariants(Properties.check(result, budget)), "R2.5 stop witnessed")
    })
  )

  it.effect("R2.5 a step_timeout from a retry its step refused, beside another call's failure, is witnessed", () =>
    Effect.gen(function* () {
      // A concurrent batch: the retryable call's retry would wait past its 1 ms step; the other call failed for good after it.
      const { scenario, result } = yield* run({
        ...base,
        steps: [
          {
            _tag: "CallTools",
            calls: [{ _tag: "Retryable", failures: 1, idempotent: true }, { _tag: "Permanent" }]
          }
        ],
        runTimeoutSeconds: 1,
        maxRecoveries: 1,
        scheduleRetries: 1,
        toolMaxRetries: 1,
        correctionBudget: 0,
        maxIterations: 2,
        maxToolCalls: 2,
        recoverErrors: false,
        seed: 0,
        stepTimeoutMillis: 1,
        concurrency: 2
      })
      assert.deepStrictEqual([result.stopReason, Properties.checkScenario(scenario, result)], ["step_timeout", []])
    })
  )

  it.effect("R10 a budget whose limit is missing or not a number is refused, naming the field, never passed", () =>
    Effect.gen(function* () {
      const { result } = yield* run({ ...base, steps: [{ _tag: "BadRequest" }] })
      for (const [budget, field] of [
        [{}, "runTimeoutMillis"],
        [{ runTimeoutMillis: Number.NaN, maxRecoveries: 1, scheduleRetries: 1 }, "runTimeoutMillis"],
        [{ runTimeoutMillis: 1000, maxRecoveries: 1.5, scheduleRetries: 1 }, "maxRecoveries"],
        [
          { runTimeoutMillis: 1000, maxRecoveries: 1, scheduleRetries: 1, stepTimeoutMillis: Number.NaN },
          "stepTimeoutMillis"
        ],
        [
          { runTimeoutMillis: 1000, maxRecoveries: 1, scheduleRetries: 1, toolMaxRetries: { pay: -1 } },
          "toolMaxRetries"
        ]
      ] as const) {
        // A budget computed wrongly, as a test without types may.
        assert.throws(() => Properties.check(result, budget as unknown as Properties.Budget), RangeError, field)
      }
    })
  )

  it.effect("R10 a budget whose limit is infinite is refused, naming the field, as NaN is", () =>
    Effect.gen(function* () {
      const { result } = yield* run({ ...base, steps: [{ _tag: "BadRequest" }] })
      const budget = { runTimeoutMillis: 1000, maxRecoveries: 1, scheduleRetries: 1 }
      for (const [given, field] of [
        [{ ...budget, runTimeoutMillis: Number.POSITIVE_INFINITY }, "runTimeoutMillis"],
        [{ ...budget, stepTimeoutMillis: Number.POSITIVE_INFINITY }, "stepTimeoutMillis"],
        [{ ...budget, attemptTimeoutMillis: Number.POSITIVE_INFINITY }, "attemptTimeoutMillis"],
        [{ ...budget, approvalTimeoutMillis: Number.POSITIVE_INFINITY }, "approvalTimeoutMillis"],
        [{ ...budget, maxTokens: Number.POSITIVE_INFINITY }, "maxTokens"],
        [{ ...budget, toolTimeoutMillis: { pay: Number.POSITIVE_INFINITY } }, "toolTimeoutMillis"]
      ] as const) {
        // An infinite limit passes every comparison: it would switch the check off.
        assert.throws(() => Properties.check(result, given as Properties.Budget), RangeError, field)
      }
    })
  )

  it.effect(
    "R10 R3.3 Properties.check flags a run past the budget's run timeout even when run.started records a later deadline",
    () =>
      Effect.gen(function* () {
        const slow = FaultyTools.slow({ name: "slow", millis: 30_000 })
        const model = ScriptedModel.layer([ScriptedModel.toolCall("slow", {}), ScriptedModel.finalAnswer("done")])
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "g", tools: [slow.tool], time: { run: "60 seconds" } }).pipe(Effect.provide(model)),
          { upTo: "2 minutes" }
        )
        assert.deepStrictEqual([result.status, result.elapsedMillis], ["completed", 30_000])
        const budget = { runTimeoutMillis: 60_000, maxRecoveries: 8, scheduleRetries: 2 }
        assert.deepStrictEqual(Properties.check(result, budget), [])
        // The budget says 5 s: the run's own record of a 60 s deadline does not excuse its 30 s.
        const found = Properties.check(result, { ...budget, runTimeoutMillis: 5_000 })
        assert.deepStrictEqual(
          found.map((v) => v.detail),
          [
            "run.started records the deadline 60000, 60000 ms after its start, past the run timeout of 5000 ms",
            "the run took 30000 ms, over its timeout of 5000 ms"
          ]
        )
        assert.deepStrictEqual(invariants(found), ["R3.3 deadline", "R3.3 deadline"])
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect(
    "R2.5 R10 a completed run relabelled run_timeout, step_timeout, model_error, tool_error, unknown_outcome or internal_error has no witness: a failure the run got past is none",
    () =>
      Effect.gen(function* () {
        // A provider failure whose retry was answered, then a final answer, at t < 1 s of 60 s and of a 30 s step.
        const retried = yield* run({ ...base, steps: [{ _tag: "ServerError" }], stepTimeoutMillis: 30_000 })
        assert.deepStrictEqual(
          [retried.result.status, Properties.checkScenario(retried.scenario, retried.result)],
          ["completed", []]
        )
        for (const [reason, status, policy] of [
          ["run_timeout", "failed", "run_timeout"],
          ["step_timeout", "failed", "step_timeout"],
          ["model_error", "failed", "runtime"],
          ["unknown_outcome", "unknown_outcome", "runtime"],
          ["internal_error", "failed", "runtime"]
        ] as const) {
          const found = Properties.check(relabel(retried.result, reason, status, policy), retried.scenario.budget)
          assert.include(invariants(found), "R2.5 stop witnessed", reason)
        }
        // A tool that hands its errors to the model failed for good; the model went on and answered.
        const recovered = yield* run({ ...base, steps: [{ _tag: "CallTools", calls: [{ _tag: "Permanent" }] }] })
        assert.deepStrictEqual(
          [recovered.result.status, Properties.checkScenario(recovered.scenario, recovered.result)],
          ["completed", []]
        )
        for (const reason of ["tool_error", "run_timeout", "step_timeout"] as const) {
          const lie = relabel(recovered.result, reason, "failed", reason === "tool_error" ? "runtime" : reason)
          assert.include(invariants(Properties.check(lie, recovered.scenario.budget)), "R2.5 stop witnessed", reason)
        }
        // The real stops still have theirs: a permanent provider failure, a defect of a policy.
        const failed = yield* run({ ...base, steps: [{ _tag: "BadRequest" }] })
        assert.deepStrictEqual(
          [failed.result.stopReason, Properties.checkScenario(failed.scenario, failed.result)],
          ["model_error", []]
        )
        const broken = yield* Run.run({
          goal: "g",
          tools: [],
          policies: (defaults) => [
            {
              name: "broken",
              decide: () => {
                throw new Error("boom")
              }
            },
            ...defaults
          ]
        }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))
        const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2 }
        assert.deepStrictEqual([broken.stopReason, Properties.check(broken, budget)], ["internal_error", []])
      })
  )

  it("R10 a case written by hand out of its ranges is refused, naming the field", () => {
    assert.throws(
      () => Properties.toScenario({ ...base, runTimeoutSeconds: -5 }),
      /Properties.toScenario: .*runTimeoutSeconds/s
    )
  })

  it.effect("R3.8 a payment sent twice under one key is reported by checkScenario", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [{ _tag: "UnknownOutcome", reconcile: "none" }] }]
      })
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      const context = { runId: "prop", callId: "c1", idempotencyKey: "prop:c1", settle: () => {} }
      yield* Effect.exit(scenario.tools.pay.tool.handler({ q: "c1" }, context))
      assert.includeMembers(invariants(Properties.checkScenario(scenario, result)), ["R3.8 unknown outcome"])
    })
  )

  it.effect("R2.3 R3.8 a case turns into the script, tools and limits it describes", () =>
    Effect.gen(function* () {
      const scenario = Properties.toScenario({
        ...base,
        steps: [
          { _tag: "RateLimited", retryAfterSeconds: 1 },
          { _tag: "CallTools", calls: [{ _tag: "PermissionDenied" }, { _tag: "InvalidArgument" }] },
          { _tag: "Unauthorized" }
        ],
        ending: "script_exhausted",
        maxRecoveries: 3
      })
      assert.deepStrictEqual([...scenario.plan.keys()], ["c1", "c2"])
      assert.notInclude(scenario.permission.allowTools ?? [], "forbidden")
      assert.strictEqual(scenario.budget.maxRecoveries, 3)
      assert.strictEqual(scenario.budget.toolMaxRetries?.lookup, 2)
      const result = yield* Properties.runScenario(scenario)
      assert.strictEqual(result.stopReason, "model_error")
      assert.deepStrictEqual(scenario.model.calls, [0, 1000, 1000])
      assert.strictEqual(scenario.tools.forbidden.calls.count, 0)
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
    }).pipe(Effect.provide(NodeServices.layer))
  )
})

describe("Properties.check catches broken time layers, approvals and state changes", () => {
  it.effect("R1.2 R1.3 a state change off the table or out of phase is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [approval("approve", 500)] }]
      })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      // awaiting_approval → model_thinking is not an edge of the table.
      const illegal = edit(
        result,
        result.timeline.map((e) =>
          e._tag === "state.changed" && e.from === "awaiting_approval" ? { ...e, to: "model_thinking" as const } : e
        )
      )
      assert.includeMembers(invariants(Properties.check(illegal, scenario.budget)), ["R1.2 state machine"])
      // A run that never enters awaiting_approval while its call waits.
      const unphased = edit(
        result,
        result.timeline.filter((e) => !(e._tag === "state.changed" && e.to === "awaiting_approval"))
      )
      assert.include(invariants(Properties.check(unphased, scenario.budget)), "R1.3 phase")
    })
  )

  it.effect("R4.2 R4.3 a timeout of a layer the run lacks, or past its limit, is reported", () =>
    Effect.gen(function* () {
      // The step deadline cuts off a hanging model call: step_timeout.
      const { scenario, result } = yield* run({ ...base, steps: [{ _tag: "Hang" }], stepTimeoutMillis: 1_000 })
      assert.strictEqual(result.stopReason, "step_timeout")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      const noStep = invariants(Properties.check(result, { ...scenario.budget, stepTimeoutMillis: undefined }))
      assert.include(noStep, "R4.2 time layers")
      const tighter = Properties.check(result, { ...scenario.budget, stepTimeoutMillis: 500 })
      assert.include(invariants(tighter), "R4.2 time layers")
      const misreported = edit(
        result,
        result.timeline.map((e) =>
          e._tag === "model.failed" && e.failure.timeout !== undefined
            ? { ...e, failure: { ...e.failure, timeout: { ...e.failure.timeout, elapsedMillis: 700 } } }
            : e
        )
      )
      assert.include(invariants(Properties.check(misreported, scenario.budget)), "R4.3 timeout report")
    })
  )

  it.effect("R4.2 FaultyModel's own timeout is the provider's report, not the run's attempt layer", () =>
    Effect.gen(function* () {
      // FaultyModel.timeout claims 30 s at the instant of the request; the attempt timeout is 1 s.
      const { scenario, result } = yield* run({ ...base, steps: [{ _tag: "Timeout" }], attemptTimeoutMillis: 1_000 })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      // The same claim a second after the request is the run's own layer: past its limit.
      const late = edit(
        result,
        result.timeline.map((e) => (e._tag === "model.failed" ? { ...e, at: e.at + 1_000 } : e))
      )
      assert.include(invariants(Properties.check(late, scenario.budget)), "R4.2 time layers")
    })
  )

  it.effect("R4.2 a retry waiting past its step's deadline is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "ServerError" }],
        stepTimeoutMillis: 1_000
      })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      const long = edit(
        result,
        result.timeline.map((e) => (e._tag === "recovery.started" ? { ...e, delayMillis: 1_000 } : e))
      )
      assert.include(invariants(Properties.check(long, scenario.budget)), "R4.2 step deadline")
    })
  )

  it.effect("R7 a handler before its approval, or a rejection that does not end the run, is reported", () =>
    Effect.gen(function* () {
      const approved = yield* run({ ...base, steps: [{ _tag: "CallTools", calls: [approval("approve", 500)] }] })
      assert.deepStrictEqual(tagsOf(approved.result, "c1"), [
        "approval.requested",
        "approval.decided",
        "tool.started",
        "tool.succeeded"
      ])
      assert.strictEqual(approved.scenario.tools.transfer.calls.forCall("c1")[0]?.at, 500)
      const early = edit(
        approved.result,
        approved.result.timeline.filter((e) => e._tag !== "approval.decided")
      )
      assert.includeMembers(invariants(Properties.check(early, approved.scenario.budget)), [
        "R7 approvals",
        "R7 approval first"
      ])

      const rejected = yield* run({ ...base, steps: [{ _tag: "CallTools", calls: [approval("reject", 200)] }] })
      assert.strictEqual(rejected.result.stopReason, "approval_rejected")
      assert.deepStrictEqual(Properties.checkScenario(rejected.scenario, rejected.result), [])
      const guessed = { ...rejected.result, stopReason: "tool_error" } as RunResult.RunResult
      assert.include(invariants(Properties.check(guessed, rejected.scenario.budget)), "R7 approval stop")
      // The handler of a rejected call must never run.
      const context = { runId: "prop", callId: "c1", idempotencyKey: "prop:c1", settle: () => {} }
      yield* Effect.exit(rejected.scenario.tools.transfer.tool.handler({ q: "c1" }, context))
      assert.include(invariants(Properties.checkScenario(rejected.scenario, rejected.result)), "R7 approval first")
    })
  )

  it.effect("R7 R4.2 an approval expires by the tightest layer: approval_expired, or step_timeout", () =>
    Effect.gen(function* () {
      const byApproval = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [approval("never", 0)] }],
        approvalTimeoutMillis: 2_000,
        stepTimeoutMillis: 5_000
      })
      assert.strictEqual(byApproval.result.stopReason, "approval_expired")
      assert.strictEqual(byApproval.result.elapsedMillis, 2_000)
      assert.deepStrictEqual(Properties.checkScenario(byApproval.scenario, byApproval.result), [])
      assert.include(
        invariants(
          Properties.check(byApproval.result, { ...byApproval.scenario.budget, approvalTimeoutMillis: 1_000 })
        ),
        "R4.2 approval wait"
      )

      const byStep = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [approval("approve", 3_000)] }],
        approvalTimeoutMillis: 5_000,
        stepTimeoutMillis: 2_000
      })
      assert.strictEqual(byStep.result.stopReason, "step_timeout")
      // The step deadline withdrew the request (this run started where the first one left the clock).
      const startedAt = byStep.result.timeline[0]?.at ?? 0
      assert.deepStrictEqual(byStep.scenario.approvals.withdrawn, [{ callId: "c1", at: startedAt + 2_000 }])
      assert.lengthOf(byStep.scenario.approvals.pending, 0)
      assert.deepStrictEqual(Properties.checkScenario(byStep.scenario, byStep.result), [])
    })
  )

  it.effect("R7 R1 a concurrent batch: an approval waits while a sibling's retry sleeps, then both finish", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [
          { _tag: "CallTools", calls: [{ _tag: "Retryable", failures: 1, idempotent: true }, approval("approve", 20)] }
        ],
        concurrency: 2
      })
      assert.strictEqual(result.status, "completed")
      const moves = result.timeline.flatMap((e) => (e._tag === "state.changed" ? [`${e.from}>${e.to}`] : []))
      assert.includeMembers(moves, ["recovering>awaiting_approval", "awaiting_approval>recovering"])
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
    })
  )

  it("R4.1 R7 a case turns into the limits, concurrency and approval tools it describes", () => {
    const scenario = Properties.toScenario({
      ...base,
      steps: [{ _tag: "CallTools", calls: [approval("approve", 10, { idempotent: false })] }],
      stepTimeoutMillis: 1_500,
      attemptTimeoutMillis: 700,
      approvalTimeoutMillis: 900,
      toolTimeoutMillis: 300,
      concurrency: 3
    })
    assert.strictEqual(scenario.options.concurrency, 3)
    assert.deepInclude(scenario.options.time, { step: 1_500, attempt: 700, approval: 900 })
    const wire = scenario.options.tools.find((t) => t.name === "wire")
    assert.deepInclude(wire?.metadata, { needsApproval: true, idempotent: false })
    assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(wire?.metadata.timeout ?? 0)), 300)
    assert.include(scenario.permission.allowTools ?? [], "transfer")
    assert.deepStrictEqual(scenario.budget.toolTimeoutMillis, { lookup: 300, transfer: 300, wire: 300 })
    // Without a call that needs approval, the run is offered no such tool.
    const plain = Properties.toScenario(base)
    assert.notInclude(
      plain.options.tools.map((t) => t.name),
      "transfer"
    )
    assert.isUndefined(plain.options.concurrency)
  })
})

describe("Properties.check counts the calls a run took up", () => {
  it.effect(
    "R2.3 calls refused before their handler (denied, unknown, bad arguments) count against maxToolCalls",
    () => {
      const save = Tool.make({
        name: "save",
        description: "Saves a text.",
        input: Schema.Struct({ text: Schema.String }),
        output: Schema.String,
        sideEffect: "write",
        handler: ({ text }) => Effect.succeed(text)
      })
      const denyAll: Permission.PermissionService = {
        check: () => Effect.succeed(Permission.deny("tool_not_allowed", "not on the list"))
      }
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "g", tools: [save] })
        assert.notInclude(
          result.timeline.map((e) => e._tag),
          "tool.started"
        )
        const budget = { runTimeoutMillis: 1e9, maxRecoveries: 10, scheduleRetries: 10 }
        assert.notInclude(invariants(Properties.check(result, { ...budget, maxToolCalls: 3 })), "R2.3 hard limits")
        assert.include(invariants(Properties.check(result, { ...budget, maxToolCalls: 2 })), "R2.3 hard limits")
      }).pipe(
        Effect.provideService(Permission.Permission, denyAll),
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCalls(["save", { text: "a" }, "A"], ["nosuch", {}, "B"], ["save", "{", "C"]),
            ScriptedModel.finalAnswer("x")
          ])
        )
      )
    }
  )
})

describe("Properties.check reads the final answer and the batch over the limit (review 147)", () => {
  const echo = Tool.make({
    name: "echo",
    description: "Echoes.",
    input: Schema.Struct({ i: Schema.Number }),
    output: Schema.String,
    handler: ({ i }) => Effect.succeed(`got ${i}`)
  })
  const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2 }

  it.effect("R2.5 R11 goal_reached on a last answer cut off by its length, or blank, is reported", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "g", tools: [echo] }).pipe(
        Effect.provide(
          ScriptedModel.layer([ScriptedModel.toolCall("echo", { i: 1 }), ScriptedModel.finalAnswer("done")])
        )
      )
      assert.deepStrictEqual(Properties.check(result, budget), [])
      const last = result.timeline.findLastIndex((e) => e._tag === "model.responded")
      for (const change of [{ finishReason: "length" }, { text: " \u200b " }] as const) {
        const doctored = edit(
          result,
          result.timeline.map((e, i) => (i === last ? { ...e, ...change } : e))
        )
        // Before, any answer without tool calls anywhere in the run witnessed goal_reached.
        assert.include(invariants(Properties.check(doctored, budget)), "R2.5 stop witnessed", JSON.stringify(change))
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R2.3 a batch that goes over maxToolCalls and was partly run is reported, however few calls ran", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "g", tools: [echo] }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCalls(["echo", { i: 1 }, "A"], ["echo", { i: 2 }, "B"], ["echo", { i: 3 }, "C"]),
            ScriptedModel.finalAnswer("done")
          ])
        )
      )
      assert.notInclude(invariants(Properties.check(result, { ...budget, maxToolCalls: 3 })), "R2.3 hard limits")
      // Two of the batch of three ran under a limit of two: the batch is rejected whole, or not at all.
      const partly = edit(
        result,
        result.timeline.filter((e) => !("callId" in e && e.callId === "C"))
      )
      assert.include(invariants(Properties.check(partly, { ...budget, maxToolCalls: 2 })), "R2.3 hard limits")
    }).pipe(Effect.provide(NodeServices.layer))
  )
})

describe("Properties.check passes resumed and fenced runs as the runtime ends them (review 122)", () => {
  const budget = { runTimeoutMillis: 600_000, maxRecoveries: 3, scheduleRetries: 2 }
  const slowModel = ScriptedModel.layerFunction((request) =>
    request.iteration === 1 ? ScriptedModel.toolCall("slow", {}) : ScriptedModel.finalAnswer("done")
  )

  /** A run that dies after its first commit, resumed from the journal with `time`. */
  const resumedWith = (started: Run.Options<never>["time"], resumed: Run.Options<never>["time"]) =>
    Effect.gen(function* () {
      const slow = FaultyTools.slow({ name: "slow", millis: 60_000 })
      const faulty = FaultyJournal.make(yield* Journal.Journal, { crashAt: { commit: 1, when: "after" } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "g", runId: "r1", tools: [slow.tool], time: started }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal)
        )
      )
      return yield* TestClockDriver.drive(Run.resume("r1", { tools: [slow.tool], time: resumed }))
    }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, slowModel, NodeServices.layer)))

  it.effect(
    "R2.5 R9 a step_timeout under a step timeout its resume laid (none at the start) is witnessed by the limits in force",
    () =>
      Effect.gen(function* () {
        const result = yield* resumedWith(undefined, { step: "1 second" })
        assert.deepStrictEqual([result.status, result.stopReason], ["failed", "step_timeout"])
        const started = result.timeline[0]
        assert.strictEqual(started?._tag === "run.started" ? started.limits?.stepTimeoutMillis : "none", undefined)
        const resumed = result.timeline.find((e) => e._tag === "run.resumed")
        assert.strictEqual(resumed?._tag === "run.resumed" ? resumed.limits?.stepTimeoutMillis : undefined, 1000)
        const failed = result.timeline.find((e) => e._tag === "tool.failed")
        assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.failure?.timeout?.layer : undefined, "step")
        // It was "R2.5 stop witnessed: … no step timeout is in force": only run.started's limits were read.
        assert.deepStrictEqual(Properties.check(result, { ...budget, stepTimeoutMillis: 1000 }), [])
      })
  )

  it.effect(
    "R2.5 R9 a resume that lengthens the step is checked against the longer step, not the start's: a relabelled stop before it is flagged",
    () =>
      Effect.gen(function* () {
        // Started with a 1 s step, resumed with a 10 s one: the run deadline (3 s) ends it at 3 s, in its first step.
        const result = yield* resumedWith({ run: "3 seconds", step: "1 second" }, { step: "10 seconds" })
        assert.deepStrictEqual([result.stopReason, result.elapsedMillis], ["run_timeout", 3000])
        const lengthened = { ...budget, runTimeoutMillis: 3000, stepTimeoutMillis: 10_000 }
        assert.deepStrictEqual(Properties.check(result, lengthened), [])
        // Read as step_timeout it has no witness: 3 s is within the 10 s step (the start's 1 s step is no longer in force).
        const lie = relabel(result, "step_timeout", "failed", "step_timeout")
        const found = Properties.check(lie, lengthened).filter((v) => v.invariant === "R2.5 stop witnessed")
        assert.deepStrictEqual(
          found.map((v) => v.detail),
          [
            "the run ended step_timeout, but it ended at 3000, before its step's deadline 10000, with no wait cut off by it and no retry refused"
          ]
        )
      })
  )

  it.effect(
    "R2.5 R1.2 R9 a run fenced off at its last commit (failed/internal_error, unrecorded) is checked against its own run.finished",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        // Its last commit only: one fenced off before stops there, its own log internal_error (review 134).
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n >= 3 })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "g", runId: "fenced", tools: [] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")]))
          )
        )
        // The runtime's documented result: another process owns the run; the timeline is this process's own.
        assert.deepStrictEqual(
          [result.status, result.stopReason, result.policy],
          ["failed", "internal_error", "runtime"]
        )
        assert.include(result.detail, "another process owns this run now")
        assert.isDefined(result.unrecorded)
        const finished = result.timeline.at(-1)
        assert.deepStrictEqual(finished?._tag === "run.finished" ? [finished.status, finished.stopReason] : [], [
          "completed",
          "goal_reached"
        ])
        // It was "R2.5 ending", "R2.5 stop witnessed" and "R1.2 state machine".
        assert.deepStrictEqual(Properties.check(result, budget), [])
        // Its own log is still checked: an ending its own log does not witness is flagged.
        const ownLie = {
          ...result,
          timeline: result.timeline.map((e) =>
            e._tag === "run.finished" ? { ...e, status: "failed" as const, stopReason: "run_timeout" as const } : e
          )
        }
        assert.include(invariants(Properties.check(ownLie, budget)), "R2.5 stop witnessed")
        // Without `unrecorded`, the same relabel is a result that disagrees with its log.
        const { unrecorded: _, ...told } = result
        assert.sameMembers(invariants(Properties.check(told, budget)), [
          "R2.5 ending",
          "R2.5 stop witnessed",
          "R1.2 state machine"
        ])
      }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, NodeServices.layer)))
  )

  it.effect("R1.2 R9 checkScenario takes a scenario's run fenced off at its last commit for no defect", () =>
    Effect.gen(function* () {
      const faulty = FaultyJournal.make(yield* Journal.Journal, { conflictOn: (n) => n >= 2 })
      const scenario = Properties.toScenario(base)
      const result = yield* Properties.runScenario(scenario).pipe(
        Effect.provideService(Journal.Journal, faulty.journal)
      )
      assert.deepStrictEqual([result.stopReason, result.unrecorded !== undefined], ["internal_error", true])
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
    }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, NodeServices.layer)))
  )
})
