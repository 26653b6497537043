import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as RunState from "../../src/events/RunState.ts"
import * as StopReason from "../../src/events/StopReason.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as ToolArguments from "../../src/tools/ToolArguments.ts"
import * as Validation from "../../src/validation/Validation.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

const states = (timeline: ReadonlyArray<Event.Event>) => ofTag(timeline, "state.changed").map((e) => e.to)

/** Asserts the result and its single `termination.decided` event agree on why the run stopped. */
const assertStop = (result: RunResult.RunResult, reason: StopReason.StopReason, policy: string) => {
  assert.strictEqual(result.stopReason, reason)
  assert.strictEqual(result.policy, policy)
  const decided = ofTag(result.timeline, "termination.decided")
  assert.strictEqual(decided.length, 1)
  assert.strictEqual(decided[0]?.policy, policy)
  assert.strictEqual(decided[0]?.reason, reason)
}

/** A read-only tool that records every handler invocation. */
const probe = () => {
  const seen: Array<string> = []
  const tool = Tool.make({
    name: "probe",
    description: "Look something up",
    input: Schema.Struct({ q: Schema.String }),
    output: Schema.String,
    sideEffect: "read",
    idempotent: true,
    handler: ({ q }) =>
      Effect.sync(() => {
        seen.push(q)
        return `answer for ${q}`
      })
  })
  return { tool, seen }
}

const counters = (patch: Partial<Counters.Counters> = {}): Counters.Counters => ({ ...Counters.empty, ...patch })
const at = (
  patch: Partial<Counters.Counters>,
  options: { readonly phase?: Termination.Checkpoint["phase"]; readonly now?: number } = {}
): Termination.Checkpoint => ({
  phase: options.phase ?? "after_model",
  counters: counters(patch),
  now: options.now ?? 0,
  deadlineAt: 1000
})
const tagOf = (policy: Termination.Policy, checkpoint: Termination.Checkpoint) => policy.decide(checkpoint)._tag
const names = (policies: ReadonlyArray<Termination.Policy>) => policies.map((p) => p.name)

const defaultOrder = [
  ..."final_answer run_timeout max_tool_calls max_iterations repeated_tool_call repeated_tool_failure".split(" "),
  ..."recovery_exhausted max_tool_errors empty_output loop_detected budget_exhausted same_class_errors".split(" ")
]

describe("Termination policies (unit)", () => {
  it("R2.3 final answer: a candidate only right after a model response", () => {
    const decision = Termination.finalAnswer.decide(at({ finalAnswerReceived: true }))
    assert.deepStrictEqual(decision._tag === "Stop" ? decision.reason : decision._tag, "goal_reached")
    assert.strictEqual(
      tagOf(Termination.finalAnswer, at({ finalAnswerReceived: true }, { phase: "after_tools" })),
      "Continue"
    )
    assert.strictEqual(tagOf(Termination.finalAnswer, at({})), "Continue")
  })

  it("R2.3 run_timeout: one millisecond before the deadline continues, at the deadline stops", () => {
    assert.strictEqual(tagOf(Termination.runTimeout, at({}, { now: 999 })), "Continue")
    const decision = Termination.runTimeout.decide(at({}, { now: 1000 }))
    assert.strictEqual(decision._tag === "Stop" && decision.reason, "run_timeout")
    assert.strictEqual(tagOf(Termination.runTimeout, at({}, { now: 5000 })), "Stop")
  })

  it("R2.3 each limit: the last value that continues vs the first that stops, in both phases", () => {
    const cases: ReadonlyArray<
      readonly [Termination.Policy, Partial<Counters.Counters>, Partial<Counters.Counters>, StopReason.StopReason]
    > = [
      [Termination.maxToolCalls(2), { toolCalls: 2 }, { toolCalls: 3 }, "max_tool_calls"],
      [Termination.maxIterations(3), { iterations: 2 }, { iterations: 3 }, "max_iterations"],
      [
        Termination.repeatedToolCall(3),
        { repeatedToolCallCount: 2 },
        { repeatedToolCallCount: 3 },
        "repeated_tool_call"
      ],
      [
        Termination.repeatedToolFailure,
        { repeatedFailureCount: 5 },
        { repeatedFailureOverLimit: 1 },
        "repeated_tool_failure"
      ],
      [Termination.recoveryExhausted, { recoveryAttempts: 9 }, { recoveryExhausted: true }, "recovery_exhausted"],
      [Termination.maxToolErrors(8), { toolErrors: 8 }, { toolErrors: 9 }, "max_tool_errors"],
      [Termination.maxToolErrors(0), { toolErrors: 0 }, { toolErrors: 1 }, "max_tool_errors"],
      [Termination.emptyOutput(2), { emptyOutputs: 2 }, { emptyOutputs: 3 }, "empty_output"],
      [
        Termination.loopDetected(3),
        { unchangedObservations: 0 },
        { unchangedObservations: 3, unchangedWhenWarned: 2 },
        "loop_detected"
      ],
      [
        Termination.budget({ maxTokens: 100 }),
        { inputTokens: 60, outputTokens: 40 },
        { inputTokens: 60, outputTokens: 41 },
        "budget_exhausted"
      ],
      [Termination.budget({ maxCostUsd: 0.5 }), { costUsd: 0.5 }, { costUsd: 0.51 }, "budget_exhausted"],
      // Three responses at $0.10 sum to 0.30000000000000004: that is the budget, not over it.
      [Termination.budget({ maxCostUsd: 0.3 }), { costUsd: 0.1 + 0.1 + 0.1 }, { costUsd: 0.3001 }, "budget_exhausted"]
    ]
    for (const [policy, within, past, reason] of cases) {
      for (const phase of ["after_model", "after_tools"] as const) {
        assert.strictEqual(tagOf(policy, at(within, { phase })), "Continue", `${policy.name} within, ${phase}`)
        const decision = policy.decide(at(past, { phase }))
        assert.strictEqual(decision._tag === "Stop" ? decision.reason : decision._tag, reason, `${policy.name} past`)
        assert.strictEqual(policy.name, reason)
      }
    }
    assert.strictEqual(tagOf(Termination.budget({}), at({ inputTokens: 1e12, costUsd: 1e9 })), "Continue")
  })

  it("R2.3 loop_detected warns once per new unchanged observation before it stops", () => {
    const policy = Termination.loopDetected(3)
    const first = policy.decide(at({ unchangedObservations: 1 }))
    assert.strictEqual(first._tag === "Warn" && first.kind, "loop_warning")
    assert.strictEqual(tagOf(policy, at({ unchangedObservations: 1, unchangedWhenWarned: 1 })), "Continue")
    assert.strictEqual(tagOf(policy, at({ unchangedObservations: 2, unchangedWhenWarned: 1 })), "Warn")
    assert.strictEqual(tagOf(policy, at({ unchangedObservations: 3, unchangedWhenWarned: 2 })), "Stop")
  })

  it("R2.3 repeats that reach the threshold at once are warned of first; the stop needs a repeat after the warning", () => {
    const policy = Termination.loopDetected(3)
    assert.strictEqual(tagOf(policy, at({ unchangedObservations: 4 })), "Warn")
    assert.strictEqual(tagOf(policy, at({ unchangedObservations: 4, unchangedWhenWarned: 4 })), "Continue")
    assert.strictEqual(tagOf(policy, at({ unchangedObservations: 5, unchangedWhenWarned: 4 })), "Stop")
  })

  it("R2.4 same_class_errors reminds after tools once the threshold more failed in a row since its last reminder, and never stops", () => {
    const policy = Termination.sameClassErrors(3)
    const decision = policy.decide(at({ sameClassStreak: 3, sameClassCode: "not_found" }, { phase: "after_tools" }))
    assert.strictEqual(decision._tag, "Warn")
    if (decision._tag === "Warn") {
      assert.strictEqual(decision.kind, "same_class_errors")
      assert.include(decision.text, "not_found")
    }
    assert.strictEqual(tagOf(policy, at({ sameClassStreak: 2 }, { phase: "after_tools" })), "Continue")
    assert.strictEqual(
      tagOf(policy, at({ sameClassStreak: 4, sameClassWhenWarned: 3 }, { phase: "after_tools" })),
      "Continue"
    )
    assert.strictEqual(
      tagOf(policy, at({ sameClassStreak: 6, sameClassWhenWarned: 3 }, { phase: "after_tools" })),
      "Warn"
    )
    // A batch took the streak from 2 to 4, past the threshold, with no reminder yet: reminded now.
    assert.strictEqual(tagOf(policy, at({ sameClassStreak: 4 }, { phase: "after_tools" })), "Warn")
    assert.strictEqual(tagOf(policy, at({ sameClassStreak: 3 }, { phase: "after_model" })), "Continue")
  })

  it("R2.3 constructors throw a RangeError naming the policy and the bad value", () => {
    const bad: ReadonlyArray<readonly [() => unknown, string, string]> = [
      [() => Termination.maxToolCalls(0), "maxToolCalls", "got 0"],
      [() => Termination.maxToolCalls(1.5), "maxToolCalls", "got 1.5"],
      [() => Termination.maxIterations(-1), "maxIterations", "got -1"],
      [() => Termination.repeatedToolCall(Number.NaN), "repeatedToolCall", "got NaN"],
      [() => Termination.maxToolErrors(-1), "maxToolErrors", "got -1"],
      [() => Termination.emptyOutput(Number.POSITIVE_INFINITY), "emptyOutput", "got Infinity"],
      [() => Termination.loopDetected(0), "loopDetected", "got 0"],
      [() => Termination.sameClassErrors(0), "sameClassErrors", "got 0"],
      [() => Termination.budget({ maxTokens: -5 }), "budget", "got -5"],
      [() => Termination.budget({ maxCostUsd: Number.NaN }), "budget", "got NaN"],
      [() => Termination.defaults({ maxIterations: 0 }), "maxIterations", "got 0"]
    ]
    for (const [thunk, policy, value] of bad) {
      assert.throws(thunk, RangeError)
      try {
        thunk()
      } catch (error) {
        assert.include(String(error), `Termination.${policy}`)
        assert.include(String(error), value)
      }
    }
    assert.strictEqual(Termination.maxToolErrors(0).name, "max_tool_errors")
    assert.strictEqual(Termination.emptyOutput(0).name, "empty_output")
  })
})

describe("Termination.evaluate and combinators", () => {
  it("R2.2 the defaults are in the documented order", () => {
    assert.deepStrictEqual(names(Termination.defaults()), defaultOrder)
  })

  it("R2.2 when two policies would stop, the earlier one wins", () => {
    const checkpoint = at({ iterations: 5, toolCalls: 9 })
    const a = Termination.maxToolCalls(1)
    const b = Termination.maxIterations(1)
    assert.strictEqual(Termination.evaluate([a, b], checkpoint).stop?.reason, "max_tool_calls")
    assert.strictEqual(Termination.evaluate([b, a], checkpoint).stop?.reason, "max_iterations")
    assert.strictEqual(Termination.evaluate([b, a], checkpoint).stop?.policy, "max_iterations")
    // A built-in is not the user's own; a policy of the user's under a built-in's name is.
    assert.isFalse(Termination.evaluate([b, a], checkpoint).stop?.own)
    const mine = Termination.make("max_iterations", () => Termination.stop("max_iterations", "mine"))
    assert.isTrue(Termination.evaluate([mine], checkpoint).stop?.own)
  })

  it("R12 a user's policy's words are cut to 4096 characters: its stop's detail and its warning's text", () => {
    const huge = "x".repeat(5_000_000)
    const talker = Termination.make("talker", () => Termination.warn("talk", huge))
    const stopper = Termination.make("stopper", () => Termination.stop("budget_exhausted", huge))
    const verdict = Termination.evaluate([talker, stopper], at({}))
    // Before, 5 MB of each went into the log, the result and the conversation as they were.
    assert.strictEqual(verdict.stop?.detail, `${"x".repeat(4096)}... (${5_000_000 - 4096} more characters)`)
    assert.strictEqual(verdict.warnings[0]?.text, `${"x".repeat(4096)}... (${5_000_000 - 4096} more characters)`)
    // Words within the bound are kept as they are.
    const brief = Termination.evaluate(
      [Termination.make("b", () => Termination.stop("budget_exhausted", "spent"))],
      at({})
    )
    assert.strictEqual(brief.stop?.detail, "spent")
  })

  it("R2.2 warnings from policies before the stop are collected in order; none after it", () => {
    const w = (name: string) => Termination.make(name, () => Termination.warn(name, `text ${name}`))
    const stopper = Termination.make("stopper", () => Termination.stop("budget_exhausted", "spent"))
    const verdict = Termination.evaluate([w("w1"), Termination.maxIterations(99), w("w2"), stopper, w("w3")], at({}))
    assert.deepStrictEqual(verdict.stop, { policy: "stopper", reason: "budget_exhausted", detail: "spent", own: true })
    assert.deepStrictEqual(
      verdict.warnings.map((x) => [x.policy, x.kind, x.text]),
      [
        ["w1", "w1", "text w1"],
        ["w2", "w2", "text w2"]
      ]
    )
    const none = Termination.evaluate([w("w1"), w("w2")], at({}))
    assert.isUndefined(none.stop)
    assert.strictEqual(none.warnings.length, 2)
    assert.deepStrictEqual(Termination.evaluate([], at({})), { stop: undefined, warnings: [] })
  })

  it("R2.2 remove, replace, insertBefore, insertAfter and prioritize edit a copy of the list", () => {
    const defaults = Termination.defaults()
    const custom = Termination.make("custom", () => Termination.continue_)
    const removed = Termination.remove(defaults, "max_iterations")
    assert.deepStrictEqual(
      names(removed),
      defaultOrder.filter((n) => n !== "max_iterations")
    )
    const replaced = Termination.replace(defaults, "max_iterations", custom)
    assert.strictEqual(replaced[3], custom)
    assert.strictEqual(replaced.length, defaults.length)
    assert.deepStrictEqual(names(Termination.insertBefore(defaults, "run_timeout", custom)).slice(0, 3), [
      "final_answer",
      "custom",
      "run_timeout"
    ])
    assert.deepStrictEqual(names(Termination.insertAfter(defaults, "same_class_errors", custom)).slice(-2), [
      "same_class_errors",
      "custom"
    ])
    const prioritized = Termination.prioritize(defaults, ["budget_exhausted", "max_iterations"])
    assert.deepStrictEqual(names(prioritized), [
      "budget_exhausted",
      "max_iterations",
      ...defaultOrder.filter((n) => n !== "budget_exhausted" && n !== "max_iterations")
    ])
    assert.deepStrictEqual(names(defaults), defaultOrder)
  })

  it("R2.2 an unknown policy name is a RangeError listing the names there are", () => {
    const defaults = Termination.defaults()
    const custom = Termination.make("custom", () => Termination.continue_)
    const edits: ReadonlyArray<() => unknown> = [
      () => Termination.remove(defaults, "nope"),
      () => Termination.replace(defaults, "nope", custom),
      () => Termination.insertBefore(defaults, "nope", custom),
      () => Termination.insertAfter(defaults, "nope", custom),
      () => Termination.prioritize(defaults, ["max_iterations", "nope"])
    ]
    for (const edit of edits) {
      assert.throws(edit, RangeError, /"nope".*final_answer, run_timeout, max_tool_calls/)
    }
  })
})

describe("R2.5 R12 the built-in policies cannot be changed or imitated", () => {
  it("R12 a built-in policy, the shared ones included, is frozen: changing it throws", () => {
    for (const policy of [Termination.finalAnswer, Termination.maxIterations(5), ...Termination.defaults()]) {
      assert.isTrue(Object.isFrozen(policy), policy.name)
      assert.throws(() => {
        ;(policy as { decide: unknown }).decide = () => Termination.stop("cancelled", "forged")
      }, TypeError)
    }
    assert.isTrue(Object.isFrozen(Termination.maxIterations(5).limits))
  })

  it("R12 what the built-in policies and the run trust is frozen: a continue, the default limits, the states' table, the stop reasons", () => {
    const shared: ReadonlyArray<readonly [string, object]> = [
      ["continue_", Termination.continue_],
      ["defaultLimits", Termination.defaultLimits],
      ["RunState.table", RunState.table],
      ["RunState.table.created", RunState.table.created],
      ["StopReason.all", StopReason.all],
      ["StopReason.describe", StopReason.describe],
      ["Recovery.defaults", Recovery.defaults],
      ["Recovery.defaults.neverRetried", Recovery.defaults.neverRetried],
      ["Permission.allow", Permission.allow],
      ["ToolArguments.defaultLimits", ToolArguments.defaultLimits],
      ["Model.noUsage", Model.noUsage],
      ["Validation.empty", Validation.empty],
      ["Breakers.defaultPolicy", Breakers.defaultPolicy]
    ]
    for (const [name, value] of shared) assert.isTrue(Object.isFrozen(value), name)
    assert.throws(() => {
      Object.assign(Termination.continue_, { _tag: "Stop", reason: "goal_reached", detail: "forged" })
    }, TypeError)
    assert.strictEqual(Termination.continue_._tag, "Continue")
  })

  it("R2.3 R9 a built-in policy takes its limits as the limits option does: whole counts, safe integers, a repeat seen twice at least", () => {
    const refused: ReadonlyArray<readonly [() => unknown, string]> = [
      [() => Termination.repeatedToolCall(1), "threshold must be an integer >= 2, got 1"],
      [() => Termination.maxToolErrors(2.5), "limit must be an integer >= 0, got 2.5"],
      [() => Termination.emptyOutput(0.5), "budget must be an integer >= 0, got 0.5"],
      [() => Termination.budget({ maxTokens: 1e9 + 0.5 }), "maxTokens must be an integer >= 0"],
      [() => Termination.maxIterations(Number.MAX_VALUE), "limit must be an integer >= 1 and at most 2^53 - 1"],
      [() => Termination.budget({ maxTokens: 2 ** 60 }), "maxTokens must be an integer >= 0 and at most 2^53 - 1"],
      [() => Termination.maxIterations("5" as unknown as number), 'got the string "5"']
    ]
    for (const [make, message] of refused) assert.throws(make, RangeError, message)
    assert.strictEqual(Termination.budget({ maxCostUsd: 0.25 }).limits?.maxCostUsd, 0.25)
  })

  it.effect("R2.5 a policy made on a built-in's prototype, or copied from one, is checked as the user's own", () =>
    Effect.gen(function* () {
      const original = Termination.finalAnswer
      const forged = (decide: Termination.Policy["decide"]): ReadonlyArray<Termination.Policy> => [
        Object.create(Object.getPrototypeOf(original), {
          name: { value: "final_answer" },
          decide: { value: decide }
        }),
        { ...original, decide }
      ]
      for (const policy of forged(() => Termination.stop("validation_failed", "forged"))) {
        const result = yield* Run.run({
          goal: "x",
          tools: [],
          policies: (defaults) => Termination.replace(defaults, "final_answer", policy)
        }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("done")])))
        assert.strictEqual(result.stopReason, "internal_error")
        assert.include(result.detail, `the termination policy "final_answer"`)
        assert.include(result.detail, "validation_failed")
      }
    })
  )
})

describe("StopReason", () => {
  it("R2.5 the stop reasons are a finite, duplicate-free enumeration, each with display text", () => {
    assert.isTrue(Array.isArray(StopReason.all) && StopReason.all.length > 0)
    assert.strictEqual(new Set(StopReason.all).size, StopReason.all.length)
    assert.deepStrictEqual(Object.keys(StopReason.describe).sort(), [...StopReason.all].sort())
    for (const reason of StopReason.all) {
      assert.isTrue(StopReason.describe[reason].trim().length > 0, reason)
      assert.isTrue(Schema.is(StopReason.StopReason)(reason))
    }
    assert.isFalse(Schema.is(StopReason.StopReason)("The run deadline was reached."))
    for (const name of defaultOrder.filter((n) => n !== "final_answer" && n !== "same_class_errors")) {
      assert.include(StopReason.all, name)
    }
  })
})

describe("Termination in a run (R2.3)", () => {
  it.effect("R2.3 final answer: a candidate, then validating, then completed", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [probe().tool] })
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.finalAnswer, "42")
      assertStop(result, "goal_reached", "final_answer")
      assert.deepStrictEqual(states(result.timeline).slice(-3), ["model_thinking", "validating", "completed"])
      const decidedAt = ofTag(result.timeline, "termination.decided")[0]?.seq ?? -1
      const validatingAt = result.timeline.find((e) => e._tag === "state.changed" && e.to === "validating")?.seq ?? -1
      assert.isTrue(decidedAt < validatingAt)
    }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("42")])))
  )

  it.effect(
    "R2.2 R2.3 with final_answer left out, a text answer goes on without being called empty; a blank one is empty",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({
          goal: "answer",
          tools: [probe().tool],
          limits: { maxIterations: 3 },
          policies: (defaults) => Termination.remove(defaults, "final_answer")
        })
        assertStop(result, "max_iterations", "max_iterations")
        const reminders = ofTag(result.timeline, "reminder.injected").map((e) => [e.kind, e.text.includes("empty")])
        assert.deepStrictEqual(reminders, [
          ["answer_not_final", false],
          ["empty_output", true]
        ])
        assert.deepStrictEqual([result.counters.emptyOutputs, result.counters.finalAnswerReceived], [2, false])
      }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.finalAnswer("42"),
            ScriptedModel.finalAnswer("\u200b\u200b"),
            ScriptedModel.finalAnswer("\u0000")
          ])
        )
      )
  )

  it.effect("R2.3 final answer: validation can still refute the candidate", () =>
    Effect.gen(function* () {
      const hook = Validation.stopHook("tests_pass", () => Effect.succeed({ passed: false, detail: "tests fail" }))
      const result = yield* Run.run({ goal: "answer", tools: [probe().tool], validation: { stopHooks: [hook] } })
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "validation_failed")
      assert.strictEqual(ofTag(result.timeline, "termination.decided")[0]?.policy, "final_answer")
    }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("done, trust me")])))
  )

  it.effect("R2.3 run_timeout: a slow model call is cut at the deadline, not when it would have answered", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      let answered = false
      const slow: ScriptedModel.Step = () =>
        Deferred.succeed(started, undefined).pipe(
          Effect.andThen(Effect.sleep("5 seconds")),
          Effect.map(() => {
            answered = true
            return ScriptedModel.finalAnswer("late")
          })
        )
      const fiber = yield* Run.run({ goal: "slow", tools: [probe().tool], time: { run: "1 second" } }).pipe(
        Effect.provide(withScript([slow])),
        Effect.forkChild
      )
      yield* Deferred.await(started)
      yield* Effect.yieldNow
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.status, "failed")
      assertStop(result, "run_timeout", "run_timeout")
      assert.isFalse(answered)
      assert.strictEqual(result.elapsedMillis, 1000)
      assert.strictEqual(ofTag(result.timeline, "model.failed")[0]?.failure.code, "run_timeout")
    })
  )

  it.live(
    "R4.3 run_timeout: a model call that held the event loop past the deadline says how long it really waited",
    () =>
      Effect.gen(function* () {
        // Holds the event loop 600 ms, then never answers: the 200 ms deadline fires after the block.
        const blocking: ScriptedModel.Step = () =>
          Effect.suspend(() => {
            const from = Date.now()
            while (Date.now() - from < 600) {
              // Busy: nothing else runs.
            }
            return Effect.never
          })
        const result = yield* Run.run({ goal: "slow", tools: [], time: { run: "200 millis" } }).pipe(
          Effect.provide(withScript([blocking]))
        )
        assertStop(result, "run_timeout", "run_timeout")
        const [failed] = ofTag(result.timeline, "model.failed")
        assert.strictEqual(failed?.failure.timeout?.layer, "run")
        assert.isAtLeast(failed?.failure.timeout?.elapsedMillis ?? 0, 590, failed?.failure.hint)
      })
  )

  it.effect("R2.3 run_timeout: a slow tool does not keep the run waiting past the deadline (R4.2)", () =>
    Effect.gen(function* () {
      const sleeper = Tool.make({
        name: "sleeper",
        description: "Sleep",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        idempotent: true,
        handler: () => Effect.as(Effect.sleep("5 seconds"), "woke")
      })
      const fiber = yield* Run.run({ goal: "slow tool", tools: [sleeper], time: { run: "1 second" } }).pipe(
        Effect.provide(withScript([ScriptedModel.toolCall("sleeper", {}), ScriptedModel.finalAnswer("done")])),
        Effect.forkChild
      )
      yield* Effect.yieldNow
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.isAtMost(result.elapsedMillis, 1000)
    })
  )

  it.effect("R2.3 max tool calls: a batch that would pass the limit is rejected whole before any handler runs", () => {
    const { tool, seen } = probe()
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "many", tools: [tool], limits: { maxToolCalls: 2 } })
      assertStop(result, "max_tool_calls", "max_tool_calls")
      assert.deepStrictEqual(seen, [])
      assert.strictEqual(ofTag(result.timeline, "tool.started").length, 0)
      assert.strictEqual(result.counters.toolCalls, 3)
      assert.notInclude(states(result.timeline), "tool_executing")
    }).pipe(
      Effect.provide(
        withScript([ScriptedModel.toolCalls(["probe", { q: "a" }], ["probe", { q: "b" }], ["probe", { q: "c" }])])
      )
    )
  })

  it.effect("R2.3 max tool calls: a batch landing exactly on the limit runs; the next one is rejected whole", () => {
    const { tool, seen } = probe()
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "many", tools: [tool], limits: { maxToolCalls: 3 } })
      assertStop(result, "max_tool_calls", "max_tool_calls")
      assert.deepStrictEqual(seen, ["a", "b", "c"])
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("probe", { q: "a" }),
          ScriptedModel.toolCalls(["probe", { q: "b" }], ["probe", { q: "c" }]),
          ScriptedModel.toolCalls(["probe", { q: "d" }], ["probe", { q: "e" }])
        ])
      )
    )
  })

  it.effect("R2.3 max iterations: the run stops at the limit of model responses", () => {
    const { tool, seen } = probe()
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "loop", tools: [tool], limits: { maxIterations: 2 } })
      assertStop(result, "max_iterations", "max_iterations")
      assert.strictEqual(result.counters.iterations, 2)
      assert.strictEqual(ofTag(result.timeline, "model.requested").length, 2)
      assert.deepStrictEqual(seen, ["a"])
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("probe", { q: "a" }),
          ScriptedModel.toolCall("probe", { q: "b" }),
          ScriptedModel.finalAnswer("never asked for")
        ])
      )
    )
  })

  it.effect("R2.3 budget_exhausted: tokens over the budget stop the run before the response's tools run", () => {
    const { tool, seen } = probe()
    const usage = { inputTokens: 60, outputTokens: 50 }
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "spend", tools: [tool], limits: { maxTokens: 100 } })
      assertStop(result, "budget_exhausted", "budget_exhausted")
      assert.deepStrictEqual(seen, [])
      assert.strictEqual(result.counters.inputTokens + result.counters.outputTokens, 110)
    }).pipe(
      Effect.provide(
        withScript([
          Model.response({ toolCalls: ScriptedModel.toolCall("probe", { q: "a" }).toolCalls, usage }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  })
})

describe("User-edited policies in a run (R2.2)", () => {
  const echoes = (n: number) => Array.from({ length: n }, (_, i) => ScriptedModel.toolCall("probe", { q: `q${i}` }))

  it.effect("R2.2 removing max_iterations lets the run go past it until another policy stops it", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "go on",
        tools: [probe().tool],
        limits: { maxToolCalls: 4 },
        policies: (defaults) => Termination.remove(defaults, "max_iterations")
      })
      assertStop(result, "max_tool_calls", "max_tool_calls")
      assert.strictEqual(result.counters.iterations, 5)
    }).pipe(Effect.provide(withScript(echoes(6))))
  )

  it.effect("R2.2 prioritize changes which of two due policies decides", () =>
    Effect.gen(function* () {
      const spend = () =>
        Model.response({
          toolCalls: ScriptedModel.toolCalls(["probe", { q: "a" }], ["probe", { q: "b" }]).toolCalls,
          usage: { inputTokens: 500, outputTokens: 500 }
        })
      const limits = { maxToolCalls: 1, maxTokens: 10 }
      const byDefault = yield* Run.run({ goal: "x", tools: [probe().tool], limits }).pipe(
        Effect.provide(withScript([spend()]))
      )
      assertStop(byDefault, "max_tool_calls", "max_tool_calls")
      const reordered = yield* Run.run({
        goal: "x",
        tools: [probe().tool],
        limits,
        policies: (defaults) => Termination.prioritize(defaults, ["budget_exhausted"])
      }).pipe(Effect.provide(withScript([spend()])))
      assertStop(reordered, "budget_exhausted", "budget_exhausted")
    })
  )

  it.effect("R2.2 a user policy added to the list decides with its own name", () =>
    Effect.gen(function* () {
      const oneTool = Termination.make("one_tool_batch", ({ phase }) =>
        phase === "after_tools" ? Termination.stop("max_tool_calls", "one batch only") : Termination.continue_
      )
      const result = yield* Run.run({
        goal: "x",
        tools: [probe().tool],
        policies: (defaults) => Termination.insertAfter(defaults, "run_timeout", oneTool)
      })
      assertStop(result, "max_tool_calls", "one_tool_batch")
      assert.strictEqual(result.detail, "one batch only")
    }).pipe(Effect.provide(withScript(echoes(3))))
  )

  it.effect(
    "R6.1 R2.5 after a paid model failure, an earlier answer not taken is no final answer a policy may complete on",
    () =>
      Effect.gen(function* () {
        // Completes on an answer once enough tokens were spent: the first answer comes too cheap.
        const whenPaid = Termination.make("accept_when_paid", (c) =>
          c.phase === "after_model" && c.counters.finalAnswerReceived && c.counters.inputTokens > 50
            ? Termination.stop("goal_reached", "accepted")
            : Termination.continue_
        )
        const unfinished = new Failure.Retryable({
          source: "provider",
          category: "transient_http",
          code: "unfinished",
          attempts: 1,
          hint: "stopped unfinished",
          usage: { inputTokens: 80, outputTokens: 0 }
        })
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "x",
            tools: [probe().tool],
            policies: (d) => Termination.replace(d, "final_answer", whenPaid)
          })
        ).pipe(
          Effect.provide(
            withScript([
              { ...ScriptedModel.finalAnswer("early draft"), usage: { inputTokens: 10, outputTokens: 0 } },
              unfinished,
              ScriptedModel.finalAnswer("the answer")
            ])
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.finalAnswer, "the answer")
        assert.strictEqual(ofTag(result.timeline, "model.responded").length, 2)
      })
  )

  it.effect("R2.2 editing the policies with an unknown name fails the run with the names listed", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "x",
        tools: [probe().tool],
        policies: (defaults) => Termination.remove(defaults, "max_iteration")
      })
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, '"max_iteration"')
      assert.include(result.detail, "max_iterations")
    }).pipe(Effect.provide(withScript([])))
  )
})
