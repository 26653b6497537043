import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, HashMap, Layer, Schema } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as RunLog from "../../src/events/RunLog.ts"
import type * as StopReason from "../../src/events/StopReason.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Signature from "../../src/tools/Signature.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { makeStore } from "../support/tools.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

/** The stop is what the result and its one `termination.decided` say, and the counters are the fold of the log. */
const assertStop = (result: RunResult.RunResult, reason: StopReason.StopReason) => {
  assert.strictEqual(result.stopReason, reason)
  assert.strictEqual(result.policy, reason)
  const decided = ofTag(result.timeline, "termination.decided")
  assert.deepStrictEqual(
    decided.map((e) => [e.policy, e.reason]),
    [[reason, reason]]
  )
  assert.deepStrictEqual(result.counters, Counters.snapshot(Counters.fold(result.timeline)))
}

let seq = 0
/** Stamps a draft as the run stamps its events (`RunContext.emit`). */
const ev = (draft: Event.Draft, at = 0): Event.Event => ({ ...draft, runId: "r", seq: seq++, at }) as Event.Event

const responded = (text: string, calls: ReadonlyArray<readonly [string, string]> = [], usage = Model.noUsage) =>
  ev({
    _tag: "model.responded",
    iteration: 1,
    text,
    toolCalls: calls.map(([name, args], i) => ({ id: `c${i}`, name, arguments: args })),
    callIds: calls.map((_, i) => `c${i}`),
    signatures: calls.map(([name, args]) => Signature.toolCallParsed(name, JSON.parse(args))),
    usage
  })
const failed = (name: string, message: string, maxRetries: number, code: "tool_failed" = "tool_failed") =>
  ev({ _tag: "tool.failed", callId: "c", name, error: { code, message, correctable: false }, maxRetries })
const succeeded = (name: string, observation: string, sideEffect: Tool.SideEffect = "read") =>
  ev({
    _tag: "tool.succeeded",
    callId: "c",
    name,
    sideEffect,
    observation,
    input: {},
    output: null
  })

/** A read-only, idempotent search whose result is `answer`'s for the query. */
const searchTool = (answer: (q: string) => string) =>
  Tool.make({
    name: "search",
    description: "Search",
    input: Schema.Struct({ q: Schema.String }),
    output: Schema.String,
    sideEffect: "read",
    idempotent: true,
    handler: ({ q }) => Effect.sync(() => answer(q))
  })

/** Calls of `search` with `calls`, then a final answer: the run's result once it warned twice, then stopped `loop_detected`. */
const stopsLooping = <T extends Tool.Any>(search: T, calls: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const result = yield* Run.run({ goal: "find it", tools: [search] })
    assertStop(result, "loop_detected")
    assert.deepStrictEqual(
      ofTag(result.timeline, "reminder.injected").map((e) => e.kind),
      ["loop_warning", "loop_warning"]
    )
    return result
  }).pipe(
    Effect.provide(
      withScript([...calls.map((args) => ScriptedModel.toolCall("search", args)), ScriptedModel.finalAnswer("no")])
    )
  )

/** A tool that always fails; `recoverErrors` makes its failures observations. */
const failing = (options: {
  readonly maxRetries?: number
  readonly hint: (q: string) => string
  readonly code?: (q: string) => string
}) => {
  const seen: Array<string> = []
  const tool = Tool.make({
    name: "flaky",
    description: "A service that fails",
    input: Schema.Struct({ q: Schema.String }),
    output: Schema.String,
    sideEffect: "read",
    idempotent: true,
    recoverErrors: true,
    maxRetries: options.maxRetries,
    handler: ({ q }) => {
      seen.push(q)
      const code = options.code?.(q) ?? "service_down"
      return Effect.fail(
        new Failure.Permanent({ source: "tool", category: "unavailable", code, attempts: 1, hint: options.hint(q) })
      )
    }
  })
  return { tool, seen }
}

describe("Counters.step (unit)", () => {
  it("R2.1 model responses count iterations, requested calls, tokens, cost, empty outputs and final answers", () => {
    let c = Counters.step(
      Counters.empty,
      ev({ _tag: "run.started", goal: "g", model: "model", tools: [], deadlineAt: 9 }, 100)
    )
    c = Counters.step(
      c,
      responded(
        "",
        [
          ["t", "{}"],
          ["t", "{}"],
          ["u", "{}"],
          // Names the model made up around `t`: no calls of it.
          ["t:1", "{}"],
          ["t:1.2:3", "{}"]
        ],
        { inputTokens: 3, outputTokens: 4, costUsd: 0.25 }
      )
    )
    assert.strictEqual(c.iterations, 1)
    assert.strictEqual(c.toolCalls, 5)
    assert.strictEqual(c.repeatedToolCallCount, 2)
    // Calls of one tool, for a policy of your own: `t` twice, `u` once, `tu` (a prefix of neither) never,
    // each made-up name once under its own name.
    assert.deepStrictEqual(
      ["t", "u", "tu", "t:1", "t:1.2:3"].map((name) => Counters.callsOf(c, name)),
      [2, 1, 0, 1, 1]
    )
    assert.isFalse(c.finalAnswerReceived)
    assert.strictEqual(c.emptyOutputs, 0)
    c = Counters.step(c, responded("   "))
    assert.strictEqual(c.emptyOutputs, 1)
    // A text that shows nothing is no answer (R2.3): zero-width spaces, NUL, a lone combining mark.
    // Nor what no font draws: a lone surrogate half, noncharacters (a private-use icon shows).
    for (const invisible of [
      "\u200b",
      "\u0000",
      "\u0301",
      " \u2060\ufeff\u3164 ",
      "\ud800",
      "\ufdd0\uffff\u{10fffe}"
    ]) {
      c = Counters.step(c, responded(invisible))
      assert.isFalse(c.finalAnswerReceived, JSON.stringify(invisible))
    }
    assert.strictEqual(c.emptyOutputs, 7)
    assert.isFalse(Model.isBlank("\ue000"))
    assert.isFalse(c.finalAnswerReceived)
    // However long: 4 MB of spaces before a word is an answer, 4 MB of NUL after a BOM none (R12: no stack overflow).
    assert.isTrue(Counters.step(c, responded(`${" ".repeat(4_300_000)}漢`)).finalAnswerReceived)
    assert.isFalse(Counters.step(c, responded(`\ufeff${"\u0000".repeat(4_300_000)}`)).finalAnswerReceived)
    c = Counters.step(c, responded("done", [], { inputTokens: 1, outputTokens: 1 }))
    assert.isTrue(c.finalAnswerReceived)
    assert.deepStrictEqual([c.iterations, c.inputTokens, c.outputTokens, c.costUsd], [9, 4, 5, 0.25])
    c = Counters.step(c, ev({ _tag: "reminder.injected", kind: "empty_output", text: "x" }, 350))
    assert.strictEqual(Counters.reminderCount(c, "empty_output"), 1)
    assert.strictEqual(c.elapsedMillis, 250)
  })

  it("R2.1 a failed model call that had cost tokens adds them, and its cost; one that had not adds none", () => {
    const failure = Failure.summarize(
      new Failure.Retryable({
        source: "provider",
        category: "provider_interrupted",
        code: "answer_unfinished",
        attempts: 1,
        hint: "paused"
      })
    )
    const failed = (usage?: Model.Usage) =>
      ev({ _tag: "model.failed", iteration: 1, failure, ...(usage === undefined ? {} : { usage }) })
    let c = Counters.step(
      Counters.empty,
      failed({ inputTokens: 30, outputTokens: 7, reasoningTokens: 5, costUsd: 0.5 })
    )
    c = Counters.step(c, failed())
    assert.deepInclude(c, { inputTokens: 30, outputTokens: 7, reasoningTokens: 5, cachedInputTokens: 0, costUsd: 0.5 })
    // No response came: neither an iteration nor a final answer.
    assert.deepInclude(c, { iterations: 0, finalAnswerReceived: false })
  })

  it("R2.1 repeated failures count per signature against the tool's maxRetries; denials never do", () => {
    const turn = () => responded("", [["t", "{}"]])
    let c = Counters.fold([
      turn(),
      failed("t", "down", 1),
      turn(),
      failed("t", "other", 1),
      turn(),
      failed("t", "down", 1)
    ])
    assert.deepStrictEqual([c.toolErrors, c.repeatedFailureCount, c.repeatedFailureOverLimit], [3, 2, 1])
    assert.deepStrictEqual([c.sameClassStreak, c.sameClassCode], [3, "tool_failed"])
    const blocked = ev({
      _tag: "tool.blocked",
      callId: "c",
      name: "t",
      error: { code: "permission_denied", message: "no", correctable: false }
    })
    c = Counters.fold([turn(), blocked, turn(), blocked, turn(), blocked, turn(), blocked])
    assert.deepStrictEqual([c.toolErrors, c.repeatedFailureCount, c.repeatedFailureOverLimit], [4, 4, 0])
    c = Counters.step(c, succeeded("t", "d"))
    assert.deepStrictEqual([c.sameClassStreak, c.sameClassCode], [0, ""])
  })

  it("R2.1 an observation repeats only while the state is unchanged; a write changes the state", () => {
    let c = Counters.fold([succeeded("ls", "d1"), succeeded("ls", "d1")])
    assert.strictEqual(c.unchangedObservations, 1)
    c = Counters.fold([succeeded("ls", "d1"), succeeded("w", "ok", "write"), succeeded("ls", "d1")])
    assert.strictEqual(c.unchangedObservations, 0)
    assert.strictEqual(c.stateVersion, 1)
  })

  it("R2.3 calls of one response failing alike are one failure to repeat: the model saw none of them", () => {
    const three = responded("", [
      ["put", `{"key":"k0"}`],
      ["put", `{"key":"k1"}`],
      ["put", `{"key":"k2"}`]
    ])
    const missing = () => failed("put", "value is missing", 1)
    let c = Counters.fold([three, missing(), missing(), missing()])
    // Every failure spends the error budget; as a repeat, the three are one.
    assert.deepStrictEqual([c.toolErrors, c.repeatedFailureCount, c.repeatedFailureOverLimit], [3, 1, 0])
    // The next response repeating the mistake is a repeat.
    c = Counters.step(Counters.step(c, responded("", [["put", `{"key":"k3"}`]])), missing())
    assert.deepStrictEqual([c.repeatedFailureCount, c.repeatedFailureOverLimit], [2, 1])
  })

  it("R3.5 the corrections one response needs share their attempt: one of the correction budget", () => {
    const correction = (attempt: number) =>
      ev({ _tag: "recovery.started", kind: "tool_argument_correction", attempt, delayMillis: 0, cause: "x" })
    let c = Counters.fold([correction(1), correction(1), correction(1)])
    assert.deepStrictEqual([c.toolCorrectionAttempts, c.recoveryAttempts], [1, 1])
    c = Counters.step(c, correction(2))
    c = Counters.step(
      c,
      ev({ _tag: "recovery.started", kind: "provider_retry", attempt: 1, delayMillis: 0, cause: "x" })
    )
    assert.deepStrictEqual([c.toolCorrectionAttempts, c.recoveryAttempts], [2, 3])
    // A log written when each correction took its own attempt folds as it did.
    c = Counters.fold([correction(1), correction(2), correction(3)])
    assert.deepStrictEqual([c.toolCorrectionAttempts, c.recoveryAttempts], [3, 3])
  })

  it("R2.1 recovery attempts, argument corrections and exhaustion", () => {
    const started = (kind: "tool_argument_correction" | "provider_retry") =>
      ev({ _tag: "recovery.started", kind, attempt: 1, delayMillis: 0, cause: "x" })
    const c = Counters.fold([
      started("tool_argument_correction"),
      started("provider_retry"),
      ev({ _tag: "recovery.failed", kind: "provider_retry", attempts: 3, cause: "x", scope: "call" })
    ])
    assert.deepStrictEqual([c.recoveryAttempts, c.toolCorrectionAttempts, c.recoveryExhausted], [2, 1, false])
    const spent = Counters.step(
      c,
      ev({ _tag: "recovery.failed", kind: "tool_argument_correction", attempts: 1, cause: "x", scope: "run" })
    )
    assert.isTrue(spent.recoveryExhausted)
  })

  it.effect("R12 a policy cannot change the counters it is handed, nested parts included, for later runs", () =>
    Effect.gen(function* () {
      // What every run starts from cannot be changed by user code, its parts included, nor the log's.
      for (const part of [Counters.empty, Counters.empty.failuresOfTurn, Counters.empty.lastCalls, RunLog.empty])
        assert.isTrue(Object.isFrozen(part))
      assert.throws(() => {
        ;(Counters.empty as { iterations: number }).iterations = 100
      })
      const failing = Tool.make({
        name: "read",
        description: "reads",
        input: Schema.Struct({ path: Schema.String }),
        output: Schema.String,
        sideEffect: "read",
        recoverErrors: true,
        handler: () => Effect.die(new Error("no such file"))
      })
      const script = Array.from({ length: 6 }, (_, i) => ScriptedModel.toolCall("read", { path: `f${i}` }))
      const pushed: Array<string> = []
      const meddling = Termination.make("meddling", ({ counters }) => {
        try {
          ;(counters.failuresOfTurn as Array<string>).push("read|defect|Error")
          pushed.push("pushed")
        } catch {
          // Frozen: the policy's own throw, caught here.
        }
        return Termination.continue_
      })
      yield* Run.run({ goal: "g", tools: [failing], policies: (defaults) => [meddling, ...defaults] }).pipe(
        Effect.provide(ScriptedModel.layer(script))
      )
      assert.deepStrictEqual([pushed, Counters.empty.failuresOfTurn], [[], []])
      // A later run, default policies only, stops on its repeated failure as a run in a fresh process does.
      const later = yield* Run.run({ goal: "g", tools: [failing] }).pipe(Effect.provide(ScriptedModel.layer(script)))
      assert.deepStrictEqual([later.stopReason, later.counters.toolErrors], ["repeated_tool_failure", 3])
    })
  )

  it("R2.1 step is pure: it never mutates the counters it is given", () => {
    const base = Object.freeze(Counters.fold([responded("", [["t", "{}"]]), failed("t", "down", 0)]))
    const before = JSON.stringify(Counters.snapshot(base))
    const sizes = [HashMap.size(base.callSignatures), HashMap.size(base.failureSignatures)]
    const events = [
      responded("", [
        ["t", "{}"],
        ["u", "{}"]
      ]),
      failed("t", "down", 0),
      succeeded("t", "d")
    ]
    const a = events.reduce(Counters.step, base)
    const b = events.reduce(Counters.step, base)
    assert.notStrictEqual(a, base)
    assert.deepStrictEqual(Counters.snapshot(a), Counters.snapshot(b))
    assert.strictEqual(JSON.stringify(Counters.snapshot(base)), before)
    assert.deepStrictEqual([HashMap.size(base.callSignatures), HashMap.size(base.failureSignatures)], sizes)
    assert.strictEqual(Counters.empty.iterations, 0)
    assert.strictEqual(HashMap.size(Counters.empty.callSignatures), 0)
  })
})

describe("Counter-driven stops in a run (R2.3, R2.4)", () => {
  it.effect("R2.1 fold(timeline) of a real run equals the run's counters, event by event", () => {
    const store = makeStore()
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "write", tools: [store.write, store.read] })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(result.counters, Counters.snapshot(Counters.fold(result.timeline)))
      const incremental = result.timeline.reduce(Counters.step, Counters.empty)
      assert.deepStrictEqual(Counters.snapshot(incremental), result.counters)
      assert.strictEqual(incremental.state, "completed")
      assert.deepStrictEqual(
        [result.counters.iterations, result.counters.toolCalls, result.counters.toolErrors],
        [4, 3, 2]
      )
      assert.deepStrictEqual([result.counters.inputTokens, result.counters.outputTokens], [30, 12])
      assert.strictEqual(result.counters.toolCorrectionAttempts, 1)
    }).pipe(
      Effect.provide(
        withScript([
          Model.response({
            toolCalls: ScriptedModel.toolCall("write_json_file", { artifact_name: "a" }).toolCalls,
            usage: { inputTokens: 10, outputTokens: 4 }
          }),
          ScriptedModel.toolCalls(
            ["write_json_file", { artifact_name: "a", content: "x" }],
            ["read_file", { name: "b" }]
          ),
          Model.response({ text: "", usage: { inputTokens: 20, outputTokens: 8 } }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  })

  it.effect(
    "R2.3 R3.7 repeated_tool_failure: the same failure past the tool's maxRetries stops the run; with 0, a first failure goes back to the model",
    () =>
      Effect.gen(function* () {
        // maxRetries 1: past it at the second. 0: a failure seen once is no repeat, the second is.
        for (const maxRetries of [1, 0]) {
          const { tool, seen } = failing({ maxRetries, hint: () => "the service is down" })
          const result = yield* Run.run({ goal: "call", tools: [tool] }).pipe(
            Effect.provide(
              withScript([
                ScriptedModel.toolCall("flaky", { q: "a" }),
                ScriptedModel.toolCall("flaky", { q: "b" }),
                ScriptedModel.toolCall("flaky", { q: "c" })
              ])
            )
          )
          assertStop(result, "repeated_tool_failure")
          // Different arguments, so this is not a repeated call: the failure signature repeated.
          assert.deepStrictEqual(seen, ["a", "b"], `maxRetries ${maxRetries}`)
          assert.strictEqual(result.counters.repeatedFailureCount, 2)
          assert.strictEqual(result.counters.repeatedToolCallCount, 1)
        }
      })
  )

  it.effect(
    "R3.5 R2.3 a repeated failure that stops the run stops it before a correction is announced: every one asked for is given",
    () => {
      const store = makeStore()
      return Effect.gen(function* () {
        // The seed's scenario: the model keeps leaving out `content`; the third such failure is one too many.
        const result = yield* Run.run({ goal: "write", tools: [store.write] })
        assertStop(result, "repeated_tool_failure")
        const started = ofTag(result.timeline, "recovery.started").map((e) => e.attempt)
        assert.deepStrictEqual(started, [1, 2])
        // Each correction announced was a turn the model was given: a request follows it.
        for (const e of ofTag(result.timeline, "recovery.started")) {
          assert.isTrue(result.timeline.slice(e.seq).some((later) => later._tag === "model.requested"))
        }
        assert.strictEqual(result.counters.toolCorrectionAttempts, 2)
      }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCall("write_json_file", { artifact_name: "a" }),
            ScriptedModel.toolCall("write_json_file", { artifact_name: "b" }),
            ScriptedModel.toolCall("write_json_file", { artifact_name: "c" }),
            ScriptedModel.finalAnswer("never asked")
          ])
        )
      )
    }
  )

  it.effect("R2.3 recovery_exhausted: argument corrections past the correction budget stop the run", () => {
    const store = makeStore()
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "write", tools: [store.write], recovery: { correctionBudget: 1 } })
      assertStop(result, "recovery_exhausted")
      assert.deepStrictEqual(store.writes, [])
      assert.deepStrictEqual(
        result.timeline.filter((e) => e._tag.startsWith("recovery.")).map((e) => e._tag),
        ["recovery.started", "recovery.failed"]
      )
      assert.strictEqual(result.counters.toolCorrectionAttempts, 1)
      assert.isTrue(result.counters.recoveryExhausted)
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("write_json_file", { artifact_name: "a" }),
          ScriptedModel.toolCall("write_json_file", { artifact_name: "b" }),
          ScriptedModel.toolCall("write_json_file", { artifact_name: "c", content: "x" })
        ])
      )
    )
  })

  it.effect(
    "R3.5 R2.3 one response with several bad calls gets one correction turn: no repeat, one attempt of the budget",
    () => {
      const store = makeStore()
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "write", tools: [store.write], recovery: { correctionBudget: 1 } })
        assert.strictEqual(result.stopReason, "goal_reached")
        assert.deepStrictEqual(store.writes, ["d", "a", "b", "c"])
        // The model was asked again once, with the three corrections.
        assert.strictEqual(ofTag(result.timeline, "model.requested").length, 3)
        assert.deepStrictEqual(
          ofTag(result.timeline, "recovery.started").map((e) => [e.kind, e.attempt]),
          [
            ["tool_argument_correction", 1],
            ["tool_argument_correction", 1],
            ["tool_argument_correction", 1]
          ]
        )
        assert.deepStrictEqual(
          [result.counters.toolCorrectionAttempts, result.counters.recoveryAttempts, result.counters.toolErrors],
          [1, 1, 3]
        )
        assert.deepStrictEqual(result.counters, Counters.snapshot(Counters.fold(result.timeline)))
      }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCalls(
              ["write_json_file", { artifact_name: "a" }],
              ["write_json_file", { artifact_name: "b" }],
              ["write_json_file", { artifact_name: "c" }],
              ["write_json_file", { artifact_name: "d", content: "x" }]
            ),
            ScriptedModel.toolCalls(
              ["write_json_file", { artifact_name: "a", content: "x" }],
              ["write_json_file", { artifact_name: "b", content: "x" }],
              ["write_json_file", { artifact_name: "c", content: "x" }]
            ),
            ScriptedModel.finalAnswer("written")
          ])
        )
      )
    }
  )

  it.effect("R2.3 max_tool_errors: errors over the budget stop the run; later policies are not consulted", () => {
    const { tool, seen } = failing({ hint: (q) => `failed on ${q}` })
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "call", tools: [tool], limits: { maxToolErrors: 2 } })
      assertStop(result, "max_tool_errors")
      assert.deepStrictEqual(seen, ["a", "b", "c"])
      assert.strictEqual(result.counters.toolErrors, 3)
      assert.strictEqual(result.counters.repeatedFailureCount, 1)
      // same_class_errors comes after max_tool_errors in the order: its reminder never fires.
      assert.strictEqual(ofTag(result.timeline, "reminder.injected").length, 0)
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("flaky", { q: "a" }),
          ScriptedModel.toolCall("flaky", { q: "b" }),
          ScriptedModel.toolCall("flaky", { q: "c" }),
          ScriptedModel.finalAnswer("never asked for")
        ])
      )
    )
  })

  it.effect("R2.3 empty_output: empty responses are reminded, then stop past the budget", () => {
    const seenByModel: Array<ReadonlyArray<Model.Message>> = []
    const empty: ScriptedModel.Step = (request) => {
      seenByModel.push([...request.messages])
      return Model.response({})
    }
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "say something", tools: [] })
      assertStop(result, "empty_output")
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.counters.emptyOutputs, 3)
      assert.deepStrictEqual(
        ofTag(result.timeline, "reminder.injected").map((e) => e.kind),
        ["empty_output", "empty_output"]
      )
      const last = seenByModel[1]?.at(-1)
      assert.isTrue(last?._tag === "user" && last.content.includes("empty_output"))
    }).pipe(Effect.provide(withScript([empty, empty, empty, ScriptedModel.finalAnswer("never asked for")])))
  })

  it.effect("R2.3 empty_output: a budget of 0 stops at the first empty response", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "say something", tools: [], limits: { maxEmptyOutputs: 0 } })
      assertStop(result, "empty_output")
      assert.strictEqual(result.counters.iterations, 1)
    }).pipe(Effect.provide(withScript([Model.response({}), ScriptedModel.finalAnswer("late")])))
  )

  it.effect("R2.3 loop_detected: an unchanged observation warns the model first, then stops", () => {
    const seen: Array<string> = []
    const search = searchTool((q) => {
      seen.push(q)
      return "no results"
    })
    let nextTurn: ReadonlyArray<Model.Message> = []
    const capture: ScriptedModel.Step = (request) => {
      nextTurn = [...request.messages]
      return ScriptedModel.toolCall("search", { q: "report 2024" })
    }
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "find it", tools: [search] })
      assertStop(result, "loop_detected")
      assert.deepStrictEqual(seen, ["report", "the report", "report 2024", "reports"])
      const reminders = ofTag(result.timeline, "reminder.injected")
      assert.deepStrictEqual(
        reminders.map((e) => e.kind),
        ["loop_warning", "loop_warning"]
      )
      const decided = ofTag(result.timeline, "termination.decided")[0]
      assert.isTrue((reminders[0]?.seq ?? Infinity) < (decided?.seq ?? -1))
      const last = nextTurn.at(-1)
      assert.strictEqual(last?._tag, "user")
      assert.include(last?._tag === "user" ? last.content : "", "loop_warning")
      assert.strictEqual(result.counters.unchangedObservations, 3)
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("search", { q: "report" }),
          ScriptedModel.toolCall("search", { q: "the report" }),
          capture,
          ScriptedModel.toolCall("search", { q: "reports" }),
          ScriptedModel.finalAnswer("never asked for")
        ])
      )
    )
  })

  it.effect(
    "R2.3 the same result for other arguments stays unchanged whatever words of it the arguments send, declared or not",
    () => {
      const text = "No matching documents were found in the archive for this query."
      const search = searchTool(() => text)
      // Each query a piece of the result the model was shown, one through an argument the schema drops.
      const calls = [{ q: "documents" }, { q: "archive" }, { q: "found in" }, { q: "x", note: "matching" }]
      return Effect.map(stopsLooping(search, calls), (result) =>
        assert.deepStrictEqual(Counters.snapshot(Counters.fold(result.timeline)), result.counters)
      )
    }
  )

  it.effect(
    "R2.3 a semantic loop: near-identical queries whose result echoes them warn, then stop loop_detected",
    () => {
      const search = Tool.make({
        name: "search",
        description: "Search",
        input: Schema.Struct({ q: Schema.String }),
        output: Schema.Struct({ query: Schema.String, results: Schema.Array(Schema.String) }),
        sideEffect: "read",
        idempotent: true,
        handler: ({ q }) => Effect.succeed({ query: q, results: [] })
      })
      // Other spacing, other case: one query, one (empty) result set.
      const queries = ["report 2024", "report  2024 ", "Report 2024", "REPORT\t2024", "report 2024   "]
      return Effect.map(
        stopsLooping(
          search,
          queries.map((q) => ({ q }))
        ),
        (result) => assert.strictEqual(result.counters.toolCalls, 4)
      )
    }
  )

  it.effect(
    "R2.3 a semantic loop: queries alike on screen but for invisible characters warn, then stop (review 181)",
    () => {
      const search = searchTool((q) => `No results for ${q}`)
      const queries = [
        "café report",
        "caf\u200bé report",
        "café re\u00adport",
        "café\u2060 report",
        "ca\u200cfé report"
      ]
      return stopsLooping(
        search,
        queries.map((q) => ({ q }))
      )
    }
  )

  it.effect("R2.4 three same-code failures on different arguments inject a reminder before any stop", () => {
    const store = makeStore()
    let nextTurn: ReadonlyArray<Model.Message> = []
    const capture: ScriptedModel.Step = (request) => {
      nextTurn = [...request.messages]
      return ScriptedModel.finalAnswer("I will list the directory")
    }
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "read", tools: [store.read] })
      assert.strictEqual(result.status, "completed")
      const reminders = ofTag(result.timeline, "reminder.injected")
      assert.deepStrictEqual(
        reminders.map((e) => e.kind),
        ["same_class_errors"]
      )
      const thirdFailure = ofTag(result.timeline, "tool.failed")[2]
      assert.isTrue((thirdFailure?.seq ?? Infinity) < (reminders[0]?.seq ?? -1))
      const last = nextTurn.at(-1)
      assert.isTrue(last?._tag === "user" && last.content.includes("same_class_errors"))
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("read_file", { name: "a.txt" }),
          ScriptedModel.toolCall("read_file", { name: "b.txt" }),
          ScriptedModel.toolCall("read_file", { name: "c.txt" }),
          capture
        ])
      )
    )
  })

  it.effect("R2.4 failures that come in batches are reminded too: 2 then 2 in a row past the threshold of 3", () => {
    const { tool } = failing({ hint: (q) => `no ${q}`, code: () => "not_found" })
    const two = (a: string, b: string) => ScriptedModel.toolCalls(["flaky", { q: a }], ["flaky", { q: b }])
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "call", tools: [tool], limits: { maxToolErrors: 20 } })
      // Streaks of 2, 4 (reminded: past 3), 6 (not yet 3 more), 8 (reminded again).
      const reminders = ofTag(result.timeline, "reminder.injected").filter((e) => e.kind === "same_class_errors")
      assert.strictEqual(reminders.length, 2)
      const fourthFailure = ofTag(result.timeline, "tool.failed")[3]
      assert.isTrue((fourthFailure?.seq ?? Infinity) < (reminders[0]?.seq ?? -1))
      assert.include(reminders[0]?.text ?? "", "4 tool calls in a row")
      assert.include(reminders[1]?.text ?? "", "8 tool calls in a row")
    }).pipe(
      Effect.provide(
        withScript([two("a", "b"), two("c", "d"), two("e", "f"), two("g", "h"), ScriptedModel.finalAnswer("done")])
      )
    )
  })

  it.effect("R2.4 the error class is the failure's code: not_found is named, and different codes do not chain", () => {
    const { tool } = failing({ hint: (q) => `failed on ${q}`, code: (q) => (q.startsWith("nf") ? "not_found" : q) })
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "call", tools: [tool] })
      const reminders = ofTag(result.timeline, "reminder.injected")
      // timeout, conflict, not_found: three different classes, no reminder; then three not_found in a row: one.
      assert.strictEqual(reminders.length, 1)
      assert.include(reminders[0]?.text ?? "", '"not_found"')
      const fifthFailure = ofTag(result.timeline, "tool.failed")[4]
      assert.isTrue((fifthFailure?.seq ?? Infinity) < (reminders[0]?.seq ?? -1))
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("flaky", { q: "timeout" }),
          ScriptedModel.toolCall("flaky", { q: "conflict" }),
          ScriptedModel.toolCall("flaky", { q: "nf1" }),
          ScriptedModel.toolCall("flaky", { q: "nf2" }),
          ScriptedModel.toolCall("flaky", { q: "nf3" }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  })
})
