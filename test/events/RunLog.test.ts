import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, HashMap, Layer, Random, Schema } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as RunLog from "../../src/events/RunLog.ts"
import type * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import type * as RunContext from "../../src/run/internal/RunContext.ts"
import * as Lifecycle from "../../src/run/lifecycle/Lifecycle.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"

let seq = 0
const ev = (draft: Event.Draft, at = 1_000): Event.Event => ({ ...draft, runId: "r", seq: seq++, at }) as Event.Event

const started = ev({
  _tag: "run.started",
  goal: "the goal",
  model: "m",
  tools: ["a", "b"],
  deadlineAt: 9_999,
  system: "sys"
})
const responded = (callIds: ReadonlyArray<string>, names: ReadonlyArray<string>): Event.Event =>
  ev({
    _tag: "model.responded",
    iteration: 1,
    text: "",
    toolCalls: callIds.map((id, i) => ({ id: `model-${id}`, name: names[i] ?? "a", arguments: "{}" })),
    callIds,
    signatures: callIds.map(() => "sig"),
    usage: { inputTokens: 1, outputTokens: 1 }
  })
const succeeded = (callId: string, name: string, observation: string) =>
  ev({
    _tag: "tool.succeeded",
    callId,
    name,
    sideEffect: "none",
    observation,
    input: {},
    output: null
  })

describe("RunLog.fold (unit)", () => {
  it("R9 the conversation: system and goal, then each answer with its tool results in call order", () => {
    const error = { code: "invalid_arguments" as const, message: "bad", correctable: true }
    const state = RunLog.fold([
      started,
      responded(["c1", "c2"], ["a", "b"]),
      // c2 ends first, and a reminder comes while c1 is still running.
      succeeded("c2", "b", "two"),
      ev({ _tag: "reminder.injected", kind: "loop_detected", text: "stop repeating" }),
      ev({ _tag: "tool.failed", callId: "c1", name: "a", error, maxRetries: 2 })
    ])
    assert.deepStrictEqual(RunLog.messages(state), [
      { _tag: "system", content: "sys" },
      { _tag: "user", content: "the goal" },
      {
        _tag: "assistant",
        content: "",
        toolCalls: [
          { id: "model-c1", name: "a", arguments: "{}" },
          { id: "model-c2", name: "b", arguments: "{}" }
        ]
      },
      // The tool messages carry the model's own ids, right after the answer that asked for them.
      { _tag: "tool", toolCallId: "model-c1", name: "a", content: "Error (invalid_arguments): bad", failed: true },
      { _tag: "tool", toolCallId: "model-c2", name: "b", content: "two" },
      { _tag: "user", content: "[runtime reminder: loop_detected] stop repeating" }
    ])
  })

  it("R3.8 R11 ids go back as the model wrote them, but a repeat in one answer or an empty one (reviews 126, 127)", () => {
    const answer = (ids: ReadonlyArray<string>, callIds: ReadonlyArray<string>) =>
      RunLog.messages(
        RunLog.fold([
          started,
          ev({
            _tag: "model.responded",
            iteration: 1,
            text: "",
            toolCalls: ids.map((id) => ({ id, name: "a", arguments: "{}" })),
            callIds,
            signatures: ids.map(() => "sig"),
            usage: { inputTokens: 1, outputTokens: 1 }
          }),
          ...callIds.map((callId) => succeeded(callId, "a", callId))
        ])
      )
    const sent = (messages: ReadonlyArray<Model.Message>) => [
      messages.flatMap((m) => (m._tag === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [])),
      messages.flatMap((m) => (m._tag === "tool" ? [m.toolCallId] : []))
    ]
    // Kimi K2's ids (not ones the run keeps as identities) go back as they came: the model needs them so.
    const kimi = ["functions.lookup:0", "functions.lookup:1"]
    assert.deepStrictEqual(sent(answer(kimi, ["call#1", "call#2"])), [kimi, kimi])
    // A repeat, and an empty id, go back under the call's identity, each result paired with its call.
    const repeated = ["same", "same#2", "call#1"]
    assert.deepStrictEqual(sent(answer(["same", "same", ""], repeated)), [repeated, repeated])
    // An identity the model happened to send as an id of its own is not sent twice.
    assert.deepStrictEqual(sent(answer(["a#2", "a", "a"], ["call#1", "a", "a#2"])), [
      ["a#2", "a", "a#2#"],
      ["a#2", "a", "a#2#"]
    ])
  })

  it("R9 an earlier state keeps its conversation when a later one grows, and can grow apart", () => {
    const first = RunLog.fold([started])
    const later = RunLog.step(first, responded([], []))
    assert.strictEqual(RunLog.messages(first).length, 2)
    assert.strictEqual(RunLog.messages(later).length, 3)
    const apart = RunLog.step(first, ev({ _tag: "reminder.injected", kind: "k", text: "t" }))
    assert.strictEqual(RunLog.messages(later)[2]?._tag, "assistant")
    assert.strictEqual(RunLog.messages(apart)[2]?._tag, "user")
    assert.strictEqual(RunLog.messages(first).length, 2)
  })

  it("R3.5 R11 corrections and truncations outstanding are folded from their episodes", () => {
    let state = RunLog.fold([started, responded(["c1"], ["a"])])
    state = RunLog.step(
      state,
      ev({
        _tag: "recovery.started",
        kind: "tool_argument_correction",
        callId: "c1",
        attempt: 1,
        delayMillis: 0,
        cause: "x"
      })
    )
    assert.strictEqual(RunLog.correctionOf(state, "a"), 1)
    state = RunLog.step(state, responded(["c2"], ["a"]))
    state = RunLog.step(
      state,
      ev({ _tag: "recovery.completed", kind: "tool_argument_correction", callId: "c2", attempt: 1 })
    )
    assert.strictEqual(RunLog.correctionOf(state, "a"), undefined)
    state = RunLog.step(
      state,
      ev({ _tag: "recovery.started", kind: "output_truncation", attempt: 2, delayMillis: 0, cause: "output_truncated" })
    )
    assert.strictEqual(state.truncation, 2)
    state = RunLog.step(state, ev({ _tag: "recovery.completed", kind: "output_truncation", attempt: 2 }))
    assert.strictEqual(state.truncation, undefined)
  })

  it("R1.3 R3.9 the waits in flight and the model in use are folded from the log", () => {
    let state = RunLog.fold([started, responded(["c1", "c2"], ["a", "b"])])
    state = RunLog.step(state, ev({ _tag: "approval.requested", callId: "c1", name: "a", arguments: {}, expiresAt: 1 }))
    state = RunLog.step(
      state,
      ev({ _tag: "recovery.started", kind: "tool_retry", callId: "c2", attempt: 1, delayMillis: 10, cause: "x" })
    )
    assert.deepStrictEqual([state.approvals, state.retries], [["c1"], ["c2"]])
    assert.strictEqual(RunLog.phaseOf(state, "tool_executing"), "awaiting_approval")
    state = RunLog.step(state, ev({ _tag: "approval.decided", callId: "c1", name: "a", decision: "approved" }))
    assert.strictEqual(RunLog.phaseOf(state, "tool_executing"), "recovering")
    state = RunLog.step(
      state,
      ev({ _tag: "tool.started", callId: "c2", name: "b", attempt: 2, deadlineAt: 5, layer: "run" })
    )
    assert.strictEqual(RunLog.phaseOf(state, "tool_executing"), "tool_executing")
    const failure: Failure.Summary = {
      source: "provider",
      classification: "retryable",
      category: "other",
      code: "c",
      attempts: 1,
      hint: "h"
    }
    state = RunLog.step(state, ev({ _tag: "model.fallback", iteration: 1, from: "m", to: "backup", failure }))
    assert.deepStrictEqual([state.model, state.fallbacks], ["backup", 1])
  })
})

/** What a state says, as plain data, to compare a live state with a fold. */
const view = (state: RunLog.State) => ({
  counters: {
    ...Counters.snapshot(state.counters),
    state: state.counters.state,
    stateVersion: state.counters.stateVersion,
    unchangedWhenWarned: state.counters.unchangedWhenWarned
  },
  tallies: [
    state.counters.callSignatures,
    state.counters.failureSignatures,
    state.counters.observationKeys,
    state.counters.reminders
  ].map((map) => Array.from(HashMap.entries(map)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  messages: RunLog.messages(state),
  batch: state.batch,
  model: [state.model, state.fallbacks],
  corrections: Array.from(HashMap.entries(state.corrections)).sort(),
  truncation: state.truncation ?? null,
  outputCorrection: state.outputCorrection ?? null,
  waits: [state.approvals, state.retries],
  stopping: state.stopping ?? null,
  finished: state.finished
})

/**
 * Runs a generated case as `Properties.runScenario` does, watching the run from inside:
 * its state (as plain data, taken at once) at every event, and the conversation each
 * model request carried, with the number of events logged when it was sent.
 *
 * Every other case asks for a typed final output (a JSON string): the scripted final
 * answer (`done`, not JSON) goes back as a correction, and the answers after it are JSON,
 * so the output correction's state is folded too (R6.1).
 */
const watched = (c: Properties.Case) =>
  Effect.gen(function* () {
    const scenario = Properties.toScenario(c)
    const typed = c.seed % 2 === 0
    const options = typed ? { ...scenario.options, output: Schema.String } : scenario.options
    const live: Array<string> = []
    const sent: Array<{ readonly events: number; readonly messages: string }> = []
    const clock = yield* Clock.Clock
    const { ctx, resolved } = Lifecycle.prepare(options, clock, undefined)
    ctx.listeners.push(() => {
      live.push(JSON.stringify(view(ctx.log)))
    })
    const faulty = yield* Effect.provide(Model.Model, FaultyModel.layer(scenario.model))
    let answered = false
    const recording = Layer.succeed(Model.Model, {
      generate: (request: Model.Request) => {
        sent.push({ events: ctx.events.length, messages: JSON.stringify(request.messages) })
        if (typed && answered) return Effect.succeed(ScriptedModel.finalAnswer(JSON.stringify("done")))
        return Effect.map(faulty.generate(request), (response) => {
          if (response.toolCalls.length === 0) answered = true
          return response
        })
      }
    })
    const done = yield* Deferred.make<RunResult.RunResult, RunContext.Suspended>()
    // As `Run.run` does: the run in a fiber of its own, which its deadline interrupts.
    const run = Effect.andThen(Lifecycle.fork(ctx, resolved, done), Deferred.await(done))
    const result = yield* Properties.drive(run, { step: scenario.budget.runTimeoutMillis + 1000, maxSteps: 3 }).pipe(
      Random.withSeed(scenario.case.seed),
      Effect.provide(
        Layer.mergeAll(
          recording,
          Permission.layer(scenario.permission),
          Layer.succeed(Approval.ApprovalGate, scenario.approvals.gate)
        )
      ),
      Effect.provideService(Breakers.Breakers, undefined)
    )
    return { result, live, sent }
  }).pipe(Effect.provide(NodeServices.layer))

const runs = Math.max(1_000, Number(process.env.PROPERTY_RUNS ?? 1_000))

const foldsToLive = ([c]: readonly [Properties.Case]) =>
  Effect.map(watched(c), ({ result, live, sent }) => {
    const timeline = result.timeline
    assert.strictEqual(live.length, timeline.length, "one live state per event")
    let state = RunLog.empty
    for (let i = 0; i < timeline.length; i++) {
      const event = timeline[i] as Event.Event
      state = RunLog.step(state, event)
      // Folding the prefix from scratch, not only step by step, gives the same state.
      const folded = i % 7 === 0 || i === timeline.length - 1 ? RunLog.fold(timeline.slice(0, i + 1)) : state
      assert.strictEqual(JSON.stringify(view(folded)), live[i], `the state at seq ${i} (${event._tag})`)
    }
    for (const request of sent) {
      const prefix = RunLog.fold(timeline.slice(0, request.events))
      assert.strictEqual(request.messages, JSON.stringify(RunLog.messages(prefix)), "the conversation sent")
    }
    assert.isAbove(sent.length, 0)
  })

describe("RunLog.fold (property)", () => {
  it.effect.prop(
    "R9 folding any prefix of a run's timeline gives the state the live run had at that event, conversation included",
    [Properties.arbitrary],
    foldsToLive,
    { timeout: 120_000, arbitrary: { runs } }
  )

  it.effect.prop(
    "R9 the same for concurrent batches, approvals and retries side by side",
    [Properties.arbitraryConcurrent],
    foldsToLive,
    { timeout: 120_000, arbitrary: { runs } }
  )
})

describe("RunLog.restartsOf (R3.4)", () => {
  const base = { runId: "r1", at: 0 }
  const started = (seq: number, callId: string, attempt: number): Event.Event => ({
    _tag: "tool.started",
    callId,
    name: "ship",
    attempt,
    deadlineAt: 1000,
    layer: "tool",
    seq,
    ...base
  })
  const resumed = (seq: number, inDoubt: ReadonlyArray<string>): Event.Event => ({
    _tag: "run.resumed",
    fromSeq: seq,
    reason: "restart",
    inDoubt,
    seq,
    ...base
  })

  it("R3.4 counts the attempts the process's stops cut off, once each however many resumes found them in doubt", () => {
    const events = [
      started(0, "c2", 1),
      resumed(1, ["c1", "c2"]),
      // Each next process stopped before c2 ran again: the same attempt, found in doubt again.
      resumed(2, ["c2"]),
      resumed(3, ["c2"]),
      started(4, "c2", 2),
      resumed(5, ["c2"])
    ]
    // Before, each resume counted: 4, and the call was retried past its maxRetries.
    assert.strictEqual(RunLog.restartsOf(events, "c2"), 2)
    assert.strictEqual(RunLog.restartsOf(events, "c2", 4), 1)
    assert.strictEqual(RunLog.restartsOf(events, "c1"), 0)
  })
})
