import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as StopReason from "../../src/events/StopReason.ts"
import * as Timeline from "../../src/events/Timeline.ts"
import * as Explain from "../../src/explain/Explain.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { drive } from "../support/clock.ts"
import { dies, pay as ledgeredPay, payThenAnswer, layers as restartLayers } from "../support/restart.ts"
import { echo } from "../support/tools.ts"

type Options = Omit<Run.Options<Tool.Any<never>>, "goal">

/** Runs on the TestClock (10 ms at a time) with a scripted model, as the time-layer tests do. */
const runOn = (model: Layer.Layer<Model.Model>, options: Options) =>
  drive(Run.run({ goal: "x", recovery: { backoff: Recovery.backoff({ jitter: false }) }, ...options })).pipe(
    Effect.provide(Layer.mergeAll(model, NodeServices.layer))
  )

const scripted = (script: ReadonlyArray<ScriptedModel.Step>, options: Options) =>
  runOn(ScriptedModel.layer(script), options)

/** The explanation of a result, checked against what the result itself says. */
const explained = (result: RunResult.RunResult) => {
  const e = RunResult.explain(result)
  assert.isTrue(e.ended)
  assert.strictEqual(e.status, result.status)
  assert.strictEqual(e.stopReason, result.stopReason)
  assert.strictEqual(e.decision?.policy, result.policy)
  assert.strictEqual(e.decision?.detail, result.detail)
  assert.deepStrictEqual(e.pendingActions, result.pendingActions)
  assert.strictEqual(e.elapsedMillis, result.elapsedMillis)
  const text = Explain.format(e)
  assert.include(text, `(${result.stopReason})`)
  assert.include(text, `Next safe step (${e.next.kind}`)
  return e
}

const gauge = (e: Explain.Explanation, counter: string) => {
  const found = e.gauges.find((g) => g.counter === counter)
  assert.isDefined(found, counter)
  return found as Explain.Gauge
}

const decisive = (e: Explain.Explanation) => e.gauges.filter((g) => g.decisive).map((g) => g.counter)

/** A model call that never answers: only a time layer can end it. */
const silent: ScriptedModel.Step = () => Effect.never

const tool = (options: Partial<Tool.Options<{ readonly n?: number | undefined }, string, never>> & { name: string }) =>
  Tool.make({
    description: options.name,
    input: Schema.Struct({ n: Schema.optional(Schema.Number) }),
    output: Schema.String,
    handler: () => Effect.succeed("ok"),
    ...options
  })

const permanent = (code: string, hint: string) =>
  new Failure.Permanent({ source: "tool", category: "not_found", code, attempts: 1, hint })

/** A run that echoes once, then answers: validated by `validation`. */
const echoedThenDone = (validation: Options["validation"]) =>
  scripted([ScriptedModel.toolCall("echo", { text: "a" }), ScriptedModel.finalAnswer("done")], {
    tools: [echo],
    validation
  })

const echoStep = Validation.step("echo", "echo something", [Criterion.toolSucceeded("echo")])

const covered = new Set<StopReason.StopReason>()

describe("R13 Explain: why a run stopped, from its log alone", () => {
  it.effect("R6 goal_reached: the final_answer policy, nothing to do next", () =>
    Effect.gen(function* () {
      const result = yield* scripted([ScriptedModel.finalAnswer("done")], { tools: [echo] })
      const e = explained(result)
      covered.add(e.stopReason ?? "goal_reached")
      assert.strictEqual(e.decision?.policy, "final_answer")
      assert.strictEqual(e.next.kind, "none")
      assert.deepStrictEqual(decisive(e), [])
      // Nothing set: the default policies' limits, said to be defaults.
      assert.deepInclude(gauge(e, "iterations"), { value: 1, max: 20, source: "recorded" })
    })
  )

  it.effect(
    "R6.3 validation_failed with only an optional step unfinished: the next step is the failing checks, as nextStep says",
    () =>
      Effect.gen(function* () {
        const result = yield* echoedThenDone({
          plan: [
            echoStep,
            Validation.step("polish", "polish", [Criterion.toolSucceeded("polish")], { required: false })
          ],
          stopHooks: [Validation.stopHook("tests", () => Effect.succeed({ passed: false, detail: "2 tests fail" }))]
        })
        assert.deepStrictEqual([result.stopReason, result.nextStep], ["validation_failed", undefined])
        const e = explained(result)
        // It said: finish the unfinished plan step "polish".
        assert.strictEqual(e.next.text, "fix what the failing checks name, then run again")
      })
  )

  it.effect(
    "R6.3 R13 a completed run whose optional step is not done lists no failed check, as its report does (review 118)",
    () =>
      Effect.gen(function* () {
        const result = yield* echoedThenDone({
          plan: [
            echoStep,
            Validation.step("polish", "polish", [Criterion.toolSucceeded("polish")], { required: false })
          ]
        })
        assert.strictEqual(result.status, "completed", result.detail)
        const e = explained(result)
        assert.deepStrictEqual(e.validation?.failed, [])
        assert.deepStrictEqual(
          e.validation?.unfinished.map((i) => i.id),
          ["polish"]
        )
        assert.notInclude(Explain.format(e), "✗")
      })
  )

  it.effect("R6.3 R13 a plan step that held with no tool result behind it is unfinished in the explanation too", () =>
    Effect.gen(function* () {
      const result = yield* echoedThenDone({
        plan: [
          echoStep,
          Validation.step("claim", "claim it", [Criterion.custom("claims", () => "I did it")]),
          Validation.step("ghost", "cite a call", [
            Criterion.custom("cites", () => ({ detail: "x", callId: "call_999" }))
          ])
        ]
      })
      assert.deepStrictEqual(
        result.completed.map((i) => i.id),
        ["echo"]
      )
      const e = explained(result)
      assert.deepStrictEqual(
        [e.validation?.completed.map((i) => i.id), e.validation?.unfinished.map((i) => i.id)],
        [["echo"], ["claim", "ghost"]]
      )
      assert.include(e.validation?.unfinished[0]?.detail, "no tool result of this run backs it")
      assert.notInclude(Explain.format(e), "Completed: echo, claim")
    })
  )

  it.effect("R6.2 validation_failed: the failing checks, the unfinished plan step, decided by validation", () =>
    Effect.gen(function* () {
      const result = yield* echoedThenDone({
        plan: [echoStep, Validation.step("write", "write the report", [Criterion.toolSucceeded("write_json_file")])]
      })
      const e = explained(result)
      covered.add("validation_failed")
      assert.strictEqual(e.stopReason, "validation_failed")
      assert.strictEqual(e.status, "partial")
      assert.strictEqual(e.decision?.policy, "validation")
      assert.deepStrictEqual(
        e.validation?.unfinished.map((i) => i.id),
        result.unfinished.map((i) => i.id)
      )
      assert.deepStrictEqual(
        e.validation?.completed.map((i) => i.id),
        ["echo"]
      )
      assert.deepStrictEqual(
        e.validation?.unfinished.map((i) => i.id),
        ["write"]
      )
      assert.includeMembers(e.validation?.failed.map((c) => c.name) ?? [], ["plan:write"])
      assert.strictEqual(e.next.kind, "fix")
      assert.include(e.next.text, '"write"')
    })
  )

  it.effect(
    "R13 R2.3 the repeated observation names the calls since the state last changed, as the counters count them",
    () =>
      Effect.gen(function* () {
        const read = Tool.make({
          name: "read",
          description: "reads",
          input: Schema.Struct({ n: Schema.Number }),
          output: Schema.String,
          sideEffect: "read",
          idempotent: true,
          handler: () => Effect.succeed("unchanged contents")
        })
        const write = Tool.make({
          name: "write",
          description: "writes",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          handler: () => Effect.succeed("written")
        })
        const script = [
          ScriptedModel.toolCall("read", { n: 1 }, "c1"),
          ScriptedModel.toolCall("write", {}, "c2"),
          ...[3, 4, 5, 6].map((n) => ScriptedModel.toolCall("read", { n }, `c${n}`)),
          ScriptedModel.finalAnswer("done")
        ]
        const e = explained(yield* scripted(script, { tools: [read, write] }))
        assert.strictEqual(e.stopReason, "loop_detected")
        assert.deepStrictEqual(e.repetition?._tag === "observation" ? e.repetition.callIds : [], [
          "c3",
          "c4",
          "c5",
          "c6"
        ])
      })
  )

  it.effect(
    "R13 R2.5 a policy of the run's own that stops with a limit's reason: decided by it, in its words, no built-in limit said to be passed",
    () =>
      Effect.gen(function* () {
        // The README's policy: at most 3 echoes, in a run whose tool-call limit is far off.
        const echoes = Termination.make(
          "max_echoes",
          ({ counters }) =>
            Counters.callsOf(counters, "echo") > 3
              ? Termination.stop("max_tool_calls", "more than 3 echoes asked for")
              : Termination.continue_,
          { maxEchoes: 3 }
        )
        const calls = ["a", "b", "c", "d", "e"].map((text) => ScriptedModel.toolCall("echo", { text }))
        const result = yield* scripted(calls, {
          tools: [echo],
          policies: (defaults) => Termination.insertBefore(defaults, "max_iterations", echoes)
        })
        const e = explained(result)
        assert.strictEqual(e.stopReason, "max_tool_calls")
        assert.deepInclude(e.decision, { policy: "max_echoes", own: true, detail: "more than 3 echoes asked for" })
        assert.include(e.summary, '"max_echoes"')
        assert.deepStrictEqual(
          e.gauges.filter((g) => g.decisive),
          []
        )
        assert.deepInclude(gauge(e, "toolCalls"), { value: 4, max: 50, decisive: false })
        assert.isUndefined(e.next.limit)
        assert.include(e.next.text, 'policy "max_echoes"')
        assert.notInclude(Explain.format(e), "→")
        // The built-in policy under its own name is no policy of the run's own.
        const builtIn = explained(yield* scripted(calls, { tools: [echo], limits: { maxToolCalls: 2 } }))
        assert.deepInclude(builtIn.decision, { policy: "max_tool_calls", own: false })
        assert.strictEqual(builtIn.next.limit, "limits.maxToolCalls")
      })
  )

  it.effect(
    "R13 R2.2 a policy of the run's own that replaces a built-in under its name and stops for another reason is the run's own",
    () =>
      Effect.gen(function* () {
        /** A run whose own policy, under the built-in's name, stops it at its first step for `reason`. */
        const replacedBy = (reason: StopReason.StopReason, detail: string) => {
          const mine = Termination.make(
            "max_iterations",
            ({ counters }) => (counters.iterations >= 1 ? Termination.stop(reason, detail) : Termination.continue_),
            { maxIterations: 20 }
          )
          return scripted([ScriptedModel.toolCall("echo", { text: "a" })], {
            tools: [echo],
            policies: (defaults) => Termination.replace(defaults, "max_iterations", mine)
          })
        }
        const result = yield* replacedBy("repeated_tool_call", "my own reason")
        const e = explained(result)
        assert.strictEqual(e.stopReason, "repeated_tool_call")
        assert.deepInclude(e.decision, { policy: "max_iterations", own: true, detail: "my own reason" })
        assert.deepStrictEqual(
          e.gauges.filter((g) => g.decisive),
          []
        )
        assert.include(e.next.text, 'policy "max_iterations"')
        assert.isUndefined(e.next.limit)
        // Stopping for the built-in's own reason, far from the built-in's limit: the run recorded it as its own.
        const stopped = yield* replacedBy("max_iterations", "my own limit")
        const [decided] = stopped.timeline.filter((e) => e._tag === "termination.decided")
        assert.isTrue(decided?._tag === "termination.decided" && decided.own)
        const same = explained(stopped)
        assert.deepInclude(same.decision, { policy: "max_iterations", own: true, detail: "my own limit" })
        assert.deepStrictEqual(
          same.gauges.filter((g) => g.decisive),
          []
        )
        const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2, correctionBudget: 3 }
        assert.deepStrictEqual(Properties.check(stopped, budget), [])
      })
  )

  it.effect("R4.1 run_timeout: the run layer fired, the state it found and the model call in flight", () =>
    Effect.gen(function* () {
      const result = yield* scripted([silent], { tools: [], time: { run: "1 second" } })
      const e = explained(result)
      covered.add("run_timeout")
      assert.strictEqual(e.deadline?.layer, "run")
      assert.strictEqual(e.deadline?.firedAtMillis, 1000)
      assert.strictEqual(e.deadline?.limitMillis, 1000)
      assert.strictEqual(e.deadline?.deadlineAt, e.startedAt + 1000)
      assert.strictEqual(e.deadline?.state, "model_thinking")
      const [call] = e.deadline?.inFlight ?? []
      assert.strictEqual(call?.kind, "model_call")
      assert.strictEqual(call?.layer, "run")
      assert.match(call?.became ?? "", /^failed: /)
      assert.deepInclude(gauge(e, "elapsedMillis"), { value: 1000, max: 1000, source: "recorded", decisive: true })
      assert.deepStrictEqual({ kind: e.next.kind, limit: e.next.limit }, { kind: "raise_limit", limit: "time.run" })
    })
  )

  it.effect("R4.1 step_timeout: the step layer fired on the model call, with its deadline", () =>
    Effect.gen(function* () {
      const result = yield* scripted([silent, ScriptedModel.finalAnswer("never")], {
        tools: [],
        time: { run: "10 seconds", step: "1 second" }
      })
      const e = explained(result)
      covered.add("step_timeout")
      assert.strictEqual(e.deadline?.layer, "step")
      assert.strictEqual(e.deadline?.deadlineAt, e.startedAt + 1000)
      assert.strictEqual(e.deadline?.elapsedMillis, 1000)
      assert.strictEqual(e.deadline?.limitMillis, 1000)
      assert.strictEqual(e.failure?.code, "step_timeout")
      assert.strictEqual(e.failure?.source, "model")
      assert.deepStrictEqual(
        e.deadline?.inFlight.map((w) => w.kind),
        ["model_call"]
      )
      assert.strictEqual(e.next.limit, "time.step")
    })
  )

  it.effect(
    "R4.3 R13 step_timeout of an answer that came after its step's deadline: the step that ended, not a timeout the run recovered from",
    () =>
      Effect.gen(function* () {
        const answerAfter =
          (millis: number): ScriptedModel.Step =>
          () =>
            Effect.as(Effect.sleep(millis), ScriptedModel.finalAnswer("late"))
        let calls = 0
        // Its first call hangs until the tool timeout (handed to the model, which goes on); its second answers.
        const lookup = tool({
          name: "lookup",
          sideEffect: "read",
          maxRetries: 0,
          recoverErrors: true,
          timeout: "300 millis",
          handler: () => (++calls === 1 ? Effect.never : Effect.succeed("found"))
        })
        const timedOut: ScriptedModel.Step = () => Effect.fail(FaultyModel.toFailure({ kind: "timeout" }, 0))
        const time = { run: "1 minute", step: "1 second" } as const
        const runs = [
          // Step 1's tool timeout, handed to the model; step 2's answer comes at its deadline.
          yield* scripted([ScriptedModel.toolCall("lookup", {}), answerAfter(1000)], { tools: [lookup], time }),
          // Step 1's attempt timeout, retried; step 2's answer comes at its deadline.
          yield* scripted([timedOut, ScriptedModel.toolCall("echo", { text: "a" }), answerAfter(1000)], {
            tools: [echo],
            time
          })
        ]
        for (const result of runs) {
          assert.strictEqual(result.stopReason, "step_timeout")
          const e = explained(result)
          const began = result.timeline.findLast((ev) => ev._tag === "model.requested")?.at ?? Number.NaN
          const decided = result.timeline.findLast((ev) => ev._tag === "termination.decided")?.at ?? Number.NaN
          assert.deepInclude(e.deadline, {
            layer: "step",
            deadlineAt: began + 1000,
            limitMillis: 1000,
            firedAtMillis: decided - e.startedAt,
            elapsedMillis: decided - began
          })
          // No failure of the step that ended: the earlier one was recovered from.
          assert.isUndefined(e.failure)
          assert.deepStrictEqual(
            e.deadline?.inFlight.map((w) => [w.kind, w.became]),
            [["model_call", "responded"]]
          )
          assert.strictEqual(e.next.limit, "time.step")
        }
      })
  )

  it.effect("R2.3 max_tool_calls: the counter beside its recorded limit", () =>
    Effect.gen(function* () {
      const batch = ScriptedModel.toolCalls(["echo", { text: "a" }], ["echo", { text: "b" }])
      const result = yield* scripted([batch], { tools: [echo], limits: { maxToolCalls: 1 } })
      const e = explained(result)
      covered.add("max_tool_calls")
      assert.strictEqual(e.stopReason, "max_tool_calls")
      assert.deepInclude(gauge(e, "toolCalls"), { value: 2, max: 1, source: "recorded", decisive: true })
      assert.deepStrictEqual(
        { kind: e.next.kind, limit: e.next.limit },
        { kind: "raise_limit", limit: "limits.maxToolCalls" }
      )
    })
  )

  it.effect("R2.3 max_iterations: iterations beside maxIterations", () =>
    Effect.gen(function* () {
      const result = yield* scripted(
        [ScriptedModel.toolCall("echo", { text: "a" }), ScriptedModel.toolCall("echo", { text: "b" })],
        { tools: [echo], limits: { maxIterations: 2 } }
      )
      const e = explained(result)
      covered.add("max_iterations")
      assert.deepInclude(gauge(e, "iterations"), { value: 2, max: 2, source: "recorded", decisive: true })
      assert.deepStrictEqual(decisive(e), ["iterations"])
      assert.strictEqual(e.next.limit, "limits.maxIterations")
    })
  )

  it.effect("R2.3 repeated_tool_call: the repeated signature and its arguments", () =>
    Effect.gen(function* () {
      const same = ScriptedModel.toolCall("echo", { text: "again" })
      const result = yield* scripted([same, same, same], { tools: [echo] })
      const e = explained(result)
      covered.add("repeated_tool_call")
      assert.strictEqual(e.repetition?._tag, "call")
      if (e.repetition?._tag !== "call") return
      assert.strictEqual(e.repetition.count, 3)
      assert.strictEqual(e.repetition.name, "echo")
      const responded = result.timeline.find((x): x is Event.Of<"model.responded"> => x._tag === "model.responded")
      assert.strictEqual(e.repetition.signature, responded?.signatures[0])
      assert.deepInclude(gauge(e, "repeatedToolCallCount"), { value: 3, max: 3, source: "recorded", decisive: true })
      assert.strictEqual(e.next.kind, "change_approach")
    })
  )

  it.effect("R2.3 repeated_tool_failure: the failure signature past the tool's retry limit", () =>
    Effect.gen(function* () {
      const fails = tool({
        name: "lookup",
        recoverErrors: true,
        maxRetries: 1,
        handler: () => Effect.fail(permanent("not_found", "nothing there"))
      })
      const result = yield* scripted(
        [ScriptedModel.toolCall("lookup", { n: 1 }), ScriptedModel.toolCall("lookup", { n: 2 })],
        { tools: [fails] }
      )
      const e = explained(result)
      covered.add("repeated_tool_failure")
      assert.strictEqual(e.stopReason, "repeated_tool_failure")
      assert.deepStrictEqual(e.repetition, {
        _tag: "failure",
        name: "lookup",
        code: "not_found",
        message: result.timeline.findLast((x): x is Event.Of<"tool.failed"> => x._tag === "tool.failed")?.error
          .message as string,
        count: 2,
        maxRetries: 1
      })
    })
  )

  it.effect("R3.3 recovery_exhausted: the model's failure, the retries beside maxRecoveries", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([
        FaultyModel.httpError(500),
        FaultyModel.httpError(500),
        FaultyModel.httpError(500)
      ])
      const result = yield* runOn(FaultyModel.layer(model), { tools: [echo], recovery: { maxRecoveries: 2 } })
      const e = explained(result)
      covered.add("recovery_exhausted")
      assert.strictEqual(e.stopReason, "recovery_exhausted")
      assert.strictEqual(e.failure?.source, "model")
      assert.strictEqual(e.failure?.code, "http_500")
      assert.deepInclude(gauge(e, "retries"), { value: 2, max: 2, source: "recorded", decisive: true })
      assert.isFalse(gauge(e, "toolCorrectionAttempts").decisive)
      assert.deepStrictEqual(
        { kind: e.next.kind, limit: e.next.limit },
        { kind: "retry", limit: "recovery.maxRecoveries" }
      )
    })
  )

  it.effect("R13 R3.3 recovery_exhausted by the run's own backoff schedule names Recovery.backoff, not the owner", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([
        FaultyModel.httpError(500),
        FaultyModel.httpError(502),
        FaultyModel.httpError(503)
      ])
      const result = yield* runOn(FaultyModel.layer(model), { tools: [echo] })
      const e = explained(result)
      assert.strictEqual(e.stopReason, "recovery_exhausted")
      assert.include(result.detail, "the schedule allows no retry after attempt 3")
      assert.deepStrictEqual(decisive(e), [])
      // Before (review 121): "its owner ... had retried the failure already", which no owner had.
      assert.deepStrictEqual(
        { kind: e.next.kind, limit: e.next.limit, text: e.next.text },
        {
          kind: "retry",
          limit: "recovery.backoff",
          text: "the run's backoff schedule allowed no more retries (model: http_503): retry later, or allow more with Recovery.backoff({ retries })"
        }
      )
    })
  )

  it.effect("R3.4 recovery_exhausted on a failure its owner had retried: no budget was spent, none to raise", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.alreadyRetried(503, 3)])
      const e = explained(yield* runOn(FaultyModel.layer(model), { tools: [echo] }))
      assert.strictEqual(e.stopReason, "recovery_exhausted")
      assert.deepStrictEqual(decisive(e), [])
      assert.deepStrictEqual({ kind: e.next.kind, limit: e.next.limit }, { kind: "retry", limit: undefined })
      assert.include(e.next.text, "had retried the failure already")
    })
  )

  it.effect(
    "R4.3 run_timeout decided before the deadline (a retry that would wait past it) names no layer that fired",
    () =>
      Effect.gen(function* () {
        const model = FaultyModel.make([FaultyModel.rateLimited("3600")])
        const e = explained(yield* runOn(FaultyModel.layer(model), { tools: [echo] }))
        assert.strictEqual(e.stopReason, "run_timeout")
        assert.isUndefined(e.deadline)
        assert.include(e.decision?.detail, "would wait 3600000 ms")
        assert.notInclude(Explain.format(e), "layer fired")
      })
  )

  it.effect("R2.3 max_tool_errors: the error budget and the last failure", () =>
    Effect.gen(function* () {
      const fails = tool({
        name: "lookup",
        recoverErrors: true,
        handler: ({ n }) => Effect.fail(permanent("not_found", `no item ${n}`))
      })
      const batch = ScriptedModel.toolCalls(["lookup", { n: 1 }], ["lookup", { n: 2 }])
      const result = yield* scripted([batch], { tools: [fails], limits: { maxToolErrors: 1 } })
      const e = explained(result)
      covered.add("max_tool_errors")
      assert.deepInclude(gauge(e, "toolErrors"), { value: 2, max: 1, source: "recorded", decisive: true })
      assert.strictEqual(e.failure?.name, "lookup")
      assert.strictEqual(e.failure?.code, "not_found")
      assert.strictEqual(e.next.limit, "limits.maxToolErrors")
    })
  )

  it.effect("R2.3 empty_output: empty responses beside their budget", () =>
    Effect.gen(function* () {
      const empty = ScriptedModel.finalAnswer("")
      const result = yield* scripted([empty, empty, empty], { tools: [echo] })
      const e = explained(result)
      covered.add("empty_output")
      assert.deepInclude(gauge(e, "emptyOutputs"), { value: 3, max: 2, source: "recorded", decisive: true })
    })
  )

  it.effect("R2.3 loop_detected: the unchanged observation and the calls that saw it", () =>
    Effect.gen(function* () {
      const status = tool({
        name: "status",
        sideEffect: "read",
        idempotent: true,
        handler: () => Effect.succeed("idle")
      })
      const result = yield* scripted(
        [1, 2, 3, 4].map((n) => ScriptedModel.toolCall("status", { n })),
        { tools: [status] }
      )
      const e = explained(result)
      covered.add("loop_detected")
      assert.strictEqual(e.repetition?._tag, "observation")
      if (e.repetition?._tag !== "observation") return
      const calls = result.timeline.flatMap((x) => (x._tag === "tool.succeeded" ? [x.callId] : []))
      assert.deepStrictEqual(e.repetition.callIds, calls)
      assert.strictEqual(e.repetition.count, 4)
      assert.include(e.repetition.observation, "idle")
      assert.deepInclude(gauge(e, "unchangedObservations"), { value: 3, max: 3, decisive: true })
    })
  )

  it.effect("R2.3 budget_exhausted: the token budget spent, the cost budget not", () =>
    Effect.gen(function* () {
      const costly = Model.response({
        toolCalls: [{ id: "c1", name: "echo", arguments: JSON.stringify({ text: "a" }) }],
        usage: { inputTokens: 60, outputTokens: 50 }
      })
      const result = yield* scripted([costly], { tools: [echo], limits: { maxTokens: 100, maxCostUsd: 5 } })
      const e = explained(result)
      covered.add("budget_exhausted")
      assert.deepInclude(gauge(e, "tokens"), { value: 110, max: 100, source: "recorded", decisive: true })
      assert.deepInclude(gauge(e, "costUsd"), { max: 5, decisive: false })
      assert.strictEqual(e.next.limit, "limits.maxTokens")
    })
  )

  it.effect("R2.3 budget_exhausted by the cost, the tokens at their budget and not over it (review 166)", () =>
    Effect.gen(function* () {
      const costly = Model.response({
        toolCalls: [{ id: "c1", name: "echo", arguments: JSON.stringify({ text: "a" }) }],
        usage: { inputTokens: 60, outputTokens: 40, costUsd: 1 }
      })
      const result = yield* scripted([costly], { tools: [echo], limits: { maxTokens: 100, maxCostUsd: 0.5 } })
      assert.include(result.detail, "spent, over the budget of $0.5")
      const e = explained(result)
      // Before: both decisive, and the next step raised the token budget the policy found not over.
      assert.deepInclude(gauge(e, "tokens"), { value: 100, max: 100, decisive: false })
      assert.deepInclude(gauge(e, "costUsd"), { max: 0.5, decisive: true })
      assert.strictEqual(e.next.limit, "limits.maxCostUsd")
    })
  )

  it.effect("R3.7 tool_error: the tool's failure and a fix", () =>
    Effect.gen(function* () {
      const fails = tool({ name: "fetch", handler: () => Effect.fail(permanent("gone", "the page is gone")) })
      const result = yield* scripted([ScriptedModel.toolCall("fetch", {})], { tools: [fails] })
      const e = explained(result)
      covered.add("tool_error")
      assert.deepInclude(e.failure, { source: "tool", name: "fetch", code: "gone", hint: "the page is gone" })
      assert.strictEqual(e.next.kind, "fix")
    })
  )

  it.effect("R12 format writes out the control characters of a tool's failure, as Timeline.format does", () =>
    Effect.gen(function* () {
      const hostile = "\x1b]0;pwned\x07\x1b[2J\rALL CHECKS PASSED"
      const fails = tool({ name: "build", handler: () => Effect.fail(permanent("build_failed", `said: ${hostile}`)) })
      const result = yield* scripted([ScriptedModel.toolCall("build", {})], { tools: [fails] })
      const text = Explain.format(explained(result))
      for (const raw of ["\x1b", "\x07", "\r"]) assert.notInclude(text, raw)
      assert.include(text, "said: \\x1b]0;pwned\\x07\\x1b[2J\\x0dALL CHECKS PASSED")
      assert.include(Timeline.format(result.timeline), "\\x1b]0;pwned\\x07")
    })
  )

  it.effect("R12 format writes out bidirectional overrides, so that a text reads as it is ordered", () =>
    Effect.gen(function* () {
      // Shown raw, U+202E turns "passed\u202Edeliaf" into what reads as "passedfailed" backwards.
      const hostile = "check \u202Edeliaf\u202C \u2066x\u2069 line\u2028break"
      const fails = tool({ name: "build", handler: () => Effect.fail(permanent("build_failed", hostile)) })
      const result = yield* scripted([ScriptedModel.toolCall("build", {})], { tools: [fails] })
      const text = Explain.format(explained(result))
      for (const raw of ["\u202E", "\u202C", "\u2066", "\u2069", "\u2028"]) assert.notInclude(text, raw)
      assert.include(text, "check \\u202edeliaf\\u202c \\u2066x\\u2069 line\\u2028break")
    })
  )

  it.effect("R3.2 model_error: the model's permanent failure", () =>
    Effect.gen(function* () {
      const result = yield* runOn(FaultyModel.layer(FaultyModel.make([FaultyModel.httpError(400)])), { tools: [] })
      const e = explained(result)
      covered.add("model_error")
      assert.deepInclude(e.failure, { source: "model", code: "http_400", classification: "permanent" })
    })
  )

  it.effect("R11 output_truncated: the correction budget spent", () =>
    Effect.gen(function* () {
      const cut = ScriptedModel.cutOff("half an ans")
      const result = yield* scripted([cut, cut], { tools: [], recovery: { correctionBudget: 1 } })
      const e = explained(result)
      covered.add("output_truncated")
      assert.deepInclude(gauge(e, "toolCorrectionAttempts"), { value: 1, max: 1, source: "recorded", decisive: true })
      assert.strictEqual(e.next.kind, "change_approach")
    })
  )

  it.effect("R11 content_filtered: the provider's filter", () =>
    Effect.gen(function* () {
      const result = yield* scripted([ScriptedModel.filtered], { tools: [] })
      const e = explained(result)
      covered.add("content_filtered")
      assert.strictEqual(e.failure?.source, "model")
      assert.strictEqual(e.next.kind, "change_approach")
    })
  )

  it.effect("R6.4 inconsistent_result: the postcondition that contradicted the success", () =>
    Effect.gen(function* () {
      const checked = tool({
        name: "write",
        sideEffect: "write",
        handler: () => Effect.succeed("ok"),
        postcondition: () => Effect.succeed(false)
      })
      const result = yield* scripted([ScriptedModel.toolCall("write", {})], {
        tools: [checked],
        validation: { plan: [Validation.step("more", "do more", [Criterion.toolSucceeded("more")])] }
      })
      const e = explained(result)
      covered.add("inconsistent_result")
      assert.deepInclude(e.failure, { source: "tool", name: "write", code: "inconsistent_result" })
      // The next safe step is to check the world, as the explanation says, not the plan's next work (R6.3).
      assert.deepStrictEqual([result.unfinished.map((i) => i.id), result.nextStep], [["more"], undefined])
      assert.include(e.next.text, "check the world by hand")
    })
  )

  it.effect(
    "R6.4 R6.3 a contradicted success stays the next thing to check when the deadline or a cancel cuts validation",
    () =>
      Effect.gen(function* () {
        const checked = tool({
          name: "write",
          sideEffect: "write",
          handler: () => Effect.succeed("ok"),
          postcondition: () => Effect.succeed(false)
        })
        const validation = {
          plan: [Validation.step("more", "do more", [Criterion.toolSucceeded("more")])],
          stopHooks: [
            Validation.stopHook("slow", () => Effect.as(Effect.sleep("5 seconds"), { passed: true, detail: "ok" }))
          ]
        }
        const script = [ScriptedModel.toolCall("write", {}, "w1")]
        const timedOut = yield* scripted(script, { tools: [checked], validation, time: { run: "1 second" } })
        const cancelled = yield* drive(
          Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "x", tools: [checked], validation })
            yield* Effect.sleep("1 second")
            return yield* handle.cancel
          }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)))
        )
        for (const [result, stop] of [
          [timedOut, "run_timeout"],
          [cancelled, "cancelled"]
        ] as const) {
          assert.strictEqual(result.stopReason, stop)
          assert.deepStrictEqual([result.unfinished.map((i) => i.id), result.nextStep], [["more"], undefined])
          const e = explained(result)
          assert.deepStrictEqual({ kind: e.next.kind, callIds: e.next.callIds }, { kind: "fix", callIds: ["w1"] })
          assert.include(
            e.next.text,
            "check the world by hand: write (w1): the tool reported success but its postcondition does not hold (the check answered false)"
          )
        }
        // A postcondition the step deadline cut off contradicted nothing: the step ended first.
        const unanswered = tool({
          name: "write",
          sideEffect: "write",
          handler: () => Effect.succeed("ok"),
          postcondition: () => Effect.never
        })
        const cut = yield* scripted(script, {
          tools: [unanswered],
          validation: { plan: validation.plan },
          time: { step: "1 second" }
        })
        assert.strictEqual(cut.stopReason, "step_timeout")
        assert.strictEqual(cut.nextStep, "do more")
        assert.isUndefined(Explain.contradicted(cut.timeline))
        assert.strictEqual(explained(cut).next.kind, "raise_limit")
      })
  )

  it.effect("R3.8 R4.3 unknown_outcome: the pending action, its key, and the tool layer that fired", () =>
    Effect.gen(function* () {
      const hang = tool({ name: "hang", sideEffect: "write", timeout: "1 second", handler: () => Effect.never })
      const result = yield* scripted([ScriptedModel.toolCall("hang", {})], { tools: [hang] })
      const e = explained(result)
      covered.add("unknown_outcome")
      const [pending] = e.pendingActions
      assert.strictEqual(pending?.name, "hang")
      assert.strictEqual(pending?.idempotencyKey, `${result.runId}:${pending?.callId}`)
      assert.strictEqual(e.deadline?.layer, "tool")
      assert.strictEqual(e.deadline?.elapsedMillis, 1000)
      assert.strictEqual(e.deadline?.deadlineAt, e.startedAt + 1000)
      assert.deepStrictEqual(
        { kind: e.next.kind, callIds: e.next.callIds },
        { kind: "reconcile", callIds: [pending?.callId as string] }
      )
    })
  )

  it.effect(
    "R6.3 R13 unknown_outcome with a plan: the steps done with evidence and those not, as the explanation lists them",
    () =>
      Effect.gen(function* () {
        const fetch = tool({ name: "fetch", sideEffect: "none", handler: () => Effect.succeed("3 rows") })
        const hang = tool({ name: "hang", sideEffect: "write", timeout: "1 second", handler: () => Effect.never })
        const result = yield* scripted([ScriptedModel.toolCall("fetch", {}), ScriptedModel.toolCall("hang", {})], {
          tools: [fetch, hang],
          validation: {
            plan: [
              Validation.step("fetch", "fetch the rows", [Criterion.toolSucceeded("fetch")]),
              Validation.step("write", "write them", [Criterion.toolSucceeded("hang")])
            ]
          }
        })
        assert.deepStrictEqual([result.status, result.stopReason], ["unknown_outcome", "unknown_outcome"])
        assert.deepStrictEqual(
          [result.completed.map((i) => i.id), result.unfinished.map((i) => i.id), result.nextStep],
          [["fetch"], ["write"], undefined]
        )
        const e = explained(result)
        assert.deepStrictEqual(
          [e.ended, e.validation?.completed.map((i) => i.id), e.validation?.unfinished.map((i) => i.id), e.next.kind],
          [true, ["fetch"], ["write"], "reconcile"]
        )
        assert.strictEqual(result.timeline.at(-1)?._tag, "run.finished")
      })
  )

  it.effect("R7 approval_rejected: which call, by whom, why", () =>
    Effect.gen(function* () {
      const pay = tool({ name: "pay", sideEffect: "external", needsApproval: true })
      const handle = yield* Run.start({ goal: "pay", tools: [pay] })
      yield* Stream.runHead(Stream.filter(handle.events, (x) => x._tag === "approval.requested"))
      yield* handle.reject("call_pay", "not this vendor", { by: "bob" })
      const result = yield* handle.result
      const e = explained(result)
      covered.add("approval_rejected")
      assert.deepInclude(e.approval, { name: "pay", decision: "rejected", by: "bob", reason: "not this vendor" })
      assert.deepStrictEqual(e.approval?.arguments, { n: 1 })
      assert.include(e.next.text, "bob")
      assert.deepStrictEqual(e.next.callIds, [e.approval?.callId as string])
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          ScriptedModel.layer([ScriptedModel.toolCall("pay", { n: 1 }, "call_pay")]),
          NodeServices.layer,
          Approval.layerMemory
        )
      )
    )
  )

  it.effect("R7 R4.1 approval_expired: the approval layer, its expiry and limit", () =>
    Effect.gen(function* () {
      const pay = tool({ name: "pay", sideEffect: "external", needsApproval: true })
      const result = yield* scripted([ScriptedModel.toolCall("pay", {})], {
        tools: [pay],
        time: { run: "10 seconds", approval: "1 second" }
      })
      const e = explained(result)
      covered.add("approval_expired")
      assert.deepInclude(e.approval, { name: "pay", decision: "expired", layer: "approval", decidedAtMillis: 1000 })
      assert.strictEqual(e.deadline?.layer, "approval")
      assert.strictEqual(e.deadline?.limitMillis, 1000)
      assert.strictEqual(e.deadline?.deadlineAt, e.startedAt + 1000)
      assert.deepStrictEqual({ kind: e.next.kind, limit: e.next.limit }, { kind: "decide", limit: "time.approval" })
    }).pipe(Effect.provide(Approval.layerMemory))
  )

  it.effect("R5.1 cancelled: when, in which state, and the tool call it cut off", () =>
    Effect.gen(function* () {
      const hang = tool({ name: "hang", sideEffect: "read", idempotent: true, handler: () => Effect.never })
      const handle = yield* Run.start({ goal: "x", tools: [hang] })
      yield* Stream.runHead(Stream.filter(handle.events, (x) => x._tag === "tool.started"))
      const result = yield* handle.cancel
      const e = explained(result)
      covered.add("cancelled")
      assert.strictEqual(e.cancellation?.state, "tool_executing")
      assert.isUndefined(e.cancellation?.by)
      const [call] = e.cancellation?.inFlight ?? []
      assert.deepInclude(call, { kind: "tool_call", name: "hang", attempt: 1, became: "cancelled" })
      assert.strictEqual(e.next.kind, "rerun")
    }).pipe(
      Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.toolCall("hang", {})]), NodeServices.layer))
    )
  )

  it.effect(
    "R5.2 R13 cancelled while a call waits for its retry: the retry is in flight, not the attempt that failed",
    () =>
      Effect.gen(function* () {
        const reset = new Failure.Retryable({
          source: "tool",
          category: "connection",
          code: "reset",
          attempts: 1,
          hint: "connection reset",
          retryAfterMillis: 60_000
        })
        const flaky = tool({ name: "flaky", sideEffect: "read", idempotent: true, handler: () => Effect.fail(reset) })
        const handle = yield* Run.start({ goal: "x", tools: [flaky] })
        yield* Stream.runHead(Stream.filter(handle.events, (x) => x._tag === "recovery.started"))
        const e = explained(yield* handle.cancel)
        assert.deepStrictEqual(
          (e.cancellation?.inFlight ?? []).map((work) => [work.kind, work.name, work.attempt]),
          [["retry", "flaky", 1]]
        )
      }).pipe(
        Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.toolCall("flaky", {})]), NodeServices.layer))
      )
  )

  it.effect(
    "R9 R13 a deadline that passed while the process was down: the attempt its resume settled is not in flight",
    () =>
      Effect.gen(function* () {
        const payment = ledgeredPay(true)
        yield* dies(
          { crashAt: { commit: 3, when: "after" } },
          { goal: "pay 10", tools: [payment.tool], time: { run: "1 minute" } },
          payThenAnswer
        )
        yield* TestClock.adjust("2 minutes")
        const resumed = yield* drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
          Effect.provide(payThenAnswer)
        )
        const settled = resumed.timeline.findIndex((x) => x._tag === "tool.interrupted")
        assert.isAbove(settled, -1)
        assert.isBelow(
          settled,
          resumed.timeline.findIndex((x) => x._tag === "run.stopping")
        )
        const e = Explain.explain(resumed.timeline)
        assert.deepStrictEqual(
          e.deadline?.inFlight.filter((work) => work.kind === "tool_call"),
          []
        )
      }).pipe(Effect.provide(restartLayers))
  )

  it.effect("R12 internal_error: the defect named by the runtime", () =>
    Effect.gen(function* () {
      const result = yield* scripted([ScriptedModel.finalAnswer("hi")], {
        tools: [echo],
        policies: (defaults) => [
          Termination.make("broken", () => {
            throw new Error("policy bug")
          }),
          ...defaults
        ]
      })
      const e = explained(result)
      covered.add("internal_error")
      assert.strictEqual(e.decision?.policy, "runtime")
      assert.include(e.decision?.detail ?? "", '"broken"')
      assert.strictEqual(e.next.kind, "fix")
    })
  )

  it.effect("R13 internal_error for invalid options: the explanation's detail is the result's", () =>
    Effect.gen(function* () {
      const result = yield* scripted([ScriptedModel.finalAnswer("hi")], {
        tools: [echo],
        validation: {
          plan: [
            Validation.step("a", "a", [Criterion.toolSucceeded("echo")]),
            Validation.step("a", "again", [Criterion.toolSucceeded("echo")])
          ]
        }
      })
      assert.include(result.detail, "invalid run options: validation.plan[1].id")
      assert.strictEqual(explained(result).decision?.detail, result.detail)
    })
  )

  it("R2.5 every StopReason has a test above", () => {
    assert.deepStrictEqual([...covered].sort(), [...StopReason.all].sort())
  })

  it("R13 format writes out 200,000 calls in flight, one a line (no spread into push)", () => {
    const calls = Array.from(
      { length: 200_000 },
      (_, i): Explain.InFlight => ({
        kind: "tool_call",
        name: "fetch",
        callId: `call_${i}`,
        attempt: 1,
        sinceMillis: i,
        deadlineAt: undefined,
        layer: undefined,
        became: undefined
      })
    )
    const text = Explain.format({ ...Explain.explain([]), inFlight: calls })
    const lines = text.split("\n")
    assert.strictEqual(lines.filter((l) => l.startsWith("    - fetch [call_")).length, 200_000)
    assert.include(lines, "    - fetch [call_199999] attempt 1, since +199999 ms")
  })

  it.effect(
    "R9 R4.1 run_timeout of a resume that brought the deadline closer: the limit in force, not the start's",
    () =>
      Effect.gen(function* () {
        const payment = ledgeredPay(true)
        yield* dies({ crashAt: { commit: 2, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        const resumed = yield* drive(
          Run.resume("r1", { tools: [payment.tool], time: { run: "2 seconds" } }, "restart")
        ).pipe(Effect.provide(ScriptedModel.layerFunction(() => Effect.never)))
        assert.strictEqual(resumed.stopReason, "run_timeout")
        const e = explained(resumed)
        assert.deepInclude(gauge(e, "elapsedMillis"), { value: 2000, max: 2000, decisive: true })
        assert.deepInclude(e.deadline, { layer: "run", limitMillis: 2000 })
        assert.notInclude(Explain.format(e), "600000")
      }).pipe(Effect.provide(restartLayers))
  )

  it.effect("R9 a log without run.finished: still running or a crash, the call in flight, resume next", () =>
    Effect.gen(function* () {
      const result = yield* scripted(
        [ScriptedModel.toolCall("echo", { text: "a" }), ScriptedModel.finalAnswer("done")],
        {
          tools: [echo]
        }
      )
      // Cut the log just after the call started, as a crash would leave it.
      const cut = result.timeline.findIndex((x) => x._tag === "tool.started")
      const e = Explain.explain(result.timeline.slice(0, cut + 1))
      assert.isFalse(e.ended)
      assert.isUndefined(e.status)
      assert.isUndefined(e.stopReason)
      assert.strictEqual(e.state, "tool_executing")
      assert.include(e.summary, "still running")
      const [call] = e.inFlight
      assert.deepInclude(call, { kind: "tool_call", name: "echo", attempt: 1, became: undefined })
      assert.deepStrictEqual(
        { kind: e.next.kind, callIds: e.next.callIds },
        { kind: "resume", callIds: [call?.callId] }
      )
      assert.include(Explain.format(e), "no ending")
      // An empty log is explained too.
      assert.isFalse(Explain.explain([]).ended)
    })
  )
})

describe("Explain of a run another process took over at its last commit (R13, R9.4)", () => {
  it.effect(
    "R13 RunResult.explain gives the result's ending, not the unrecorded one its timeline holds (review 151)",
    () =>
      Effect.gen(function* () {
        let hooks = 0
        let waiting = false
        // The first process's validation takes its time, while another process ends the run.
        const hook = Validation.stopHook("slow", () =>
          Effect.suspend(() => {
            hooks++
            if (hooks > 1) return Effect.succeed({ passed: true, detail: "ok" })
            waiting = true
            return Effect.as(Effect.sleep("600 millis"), { passed: true, detail: "ok" })
          })
        )
        const model = ScriptedModel.layerFunction(() => ScriptedModel.finalAnswer("answer"))
        const options = { goal: "x", tools: [], validation: { stopHooks: [hook] } }
        const first = yield* Effect.forkChild(Run.run({ ...options, runId: "o1" }).pipe(Effect.provide(model)))
        while (!waiting) yield* Effect.yieldNow
        const otherProcess = FaultyJournal.make(yield* Journal.Journal, {}).journal
        yield* Run.resume("o1", options).pipe(
          Effect.provide(model),
          Effect.provideService(Journal.Journal, otherProcess)
        )
        yield* TestClock.adjust("1 second")
        const overtaken = yield* Fiber.join(first)
        assert.deepStrictEqual([overtaken.status, overtaken.stopReason], ["failed", "internal_error"])
        const explained = RunResult.explain(overtaken)
        // Before: "completed (goal_reached)", next "nothing: the run completed and validation agreed".
        assert.deepStrictEqual([explained.status, explained.stopReason], ["failed", "internal_error"])
        assert.include(explained.summary, "Another process took the run over")
        assert.strictEqual(explained.next.kind, "none")
        // The log alone still says what it holds.
        assert.strictEqual(Explain.explain(overtaken.timeline).stopReason, "goal_reached")
      }).pipe(Effect.provide(restartLayers))
  )
})
