import { assert, describe, it } from "@effect/vitest"
import { Effect, Metric, Schema } from "effect"
import * as Failure from "../../src/failure/Failure.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { runtime, span } from "../../src/tracing/Attributes.ts"
import * as Metrics from "../../src/tracing/Metrics.ts"
import { drive } from "../support/clock.ts"
import { echo } from "../support/tools.ts"
import { memoryTracer } from "../support/tracer.ts"

const count = (metric: Metric.Metric<number, Metric.CounterState<number>>) =>
  Effect.map(Metric.value(metric), (state) => state.count)

describe("issue 15 metrics", () => {
  it.effect("runs by status and stop reason, steps, tool calls by outcome, tokens, durations after a few runs", () =>
    Effect.gen(function* () {
      const ok = Run.run({ goal: "echo", tools: [echo] }).pipe(
        Effect.provide(
          ScriptedModel.layer([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("hi")])
        )
      )
      const unknown = Run.run({ goal: "call", tools: [echo] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("nope", {}), ScriptedModel.finalAnswer("gave up")]))
      )
      const results = [yield* ok, yield* ok, yield* unknown]
      const completed = Metric.withAttributes(Metrics.runs, { status: "completed", stop_reason: "goal_reached" })
      assert.strictEqual(yield* count(completed), results.filter((r) => r.status === "completed").length)
      assert.strictEqual(
        yield* count(Metrics.steps),
        results.reduce((n, r) => n + r.counters.iterations, 0)
      )
      const calls = (tag: "tool.succeeded" | "tool.failed") =>
        results.reduce((n, r) => n + r.timeline.filter((e) => e._tag === tag).length, 0)
      assert.strictEqual(yield* count(Metric.withAttributes(Metrics.toolCalls, { outcome: "succeeded" })), 2)
      assert.strictEqual(
        yield* count(Metric.withAttributes(Metrics.toolCalls, { outcome: "succeeded" })),
        calls("tool.succeeded")
      )
      assert.strictEqual(
        yield* count(Metric.withAttributes(Metrics.toolCalls, { outcome: "failed" })),
        calls("tool.failed")
      )
      assert.strictEqual(
        yield* count(Metric.withAttributes(Metrics.tokens, { "gen_ai.token.type": "input" })),
        results.reduce((n, r) => n + r.counters.inputTokens, 0)
      )
      const runDurations = yield* Metric.value(Metrics.runDuration)
      assert.strictEqual(runDurations.count, 3)
      const stepDurations = yield* Metric.value(Metrics.stepDuration)
      assert.strictEqual(
        stepDurations.count,
        results.reduce((n, r) => n + r.counters.iterations, 0)
      )
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("R13 a step whose model call failed for good is counted a step, as its duration is (review 166)", () =>
    Effect.gen(function* () {
      const denied = new Failure.Permanent({
        source: "provider",
        category: "unauthorized",
        code: "http_401",
        attempts: 1,
        hint: "unauthorized"
      })
      const result = yield* Run.run({ goal: "echo", tools: [echo] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("echo", { text: "hi" }), denied]))
      )
      assert.strictEqual(result.stopReason, "model_error")
      const steps = (yield* Metric.value(Metrics.steps)).count
      const durations = (yield* Metric.value(Metrics.stepDuration)).count
      // Before: 1 step counted, 2 step durations.
      assert.deepStrictEqual([steps, durations], [2, 2])
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect(
    "R12 R13 a failure code a tool built from its arguments is no metric label nor span attribute (review 187)",
    () =>
      Effect.gen(function* () {
        let attempts = 0
        const lookup = Tool.make({
          name: "lookup",
          description: "looks a user up",
          input: Schema.Struct({ user: Schema.String }),
          output: Schema.String,
          idempotent: true,
          sideEffect: "read",
          handler: ({ user }) =>
            attempts++ === 0
              ? Effect.fail(
                  new Failure.Retryable({
                    source: "tool",
                    category: "connection",
                    code: `not found: ${user}\x1b[2J`,
                    attempts: 1,
                    hint: "not found"
                  })
                )
              : Effect.succeed("found")
        })
        const { tracer, spans } = memoryTracer()
        const result = yield* drive(
          Run.run({ goal: "look up", tools: [lookup] }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ScriptedModel.toolCall("lookup", { user: "SECRET-0" }),
                ScriptedModel.finalAnswer("done")
              ])
            )
          )
        ).pipe(Effect.withTracer(tracer))
        assert.strictEqual(result.status, "completed")
        // A code that reads as no code is shown as `failure`: before, it was the label of a series of
        // its own and the backoff span's cause, escape sequence and argument included.
        const retried = Metric.withAttributes(Metrics.retries, { kind: "tool_retry", cause: "failure" })
        assert.strictEqual(yield* count(retried), 1)
        const backoff = spans.find((s) => s.name === span.backoff)
        assert.strictEqual(backoff?.attributes.get(runtime.cause), "failure")
        assert.notInclude(JSON.stringify(spans.map((s) => [...s.attributes])), "SECRET-0")
      }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("a failed run counts under its own status and stop reason", () =>
    Effect.gen(function* () {
      yield* Metrics.record({
        status: "failed",
        stopReason: "recovery_exhausted",
        elapsedMillis: 10,
        counters: { iterations: 1, inputTokens: 0, outputTokens: 0, costUsd: 0 },
        timeline: []
      })
      const failed = Metric.withAttributes(Metrics.runs, { status: "failed", stop_reason: "recovery_exhausted" })
      assert.strictEqual(yield* count(failed), 1)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect(
    "R13 a call whose first attempt timed out and whose retry succeeded is one call, counted by its outcome",
    () =>
      Effect.gen(function* () {
        let attempts = 0
        const slowOnce = Tool.make({
          name: "fetch",
          description: "fetches",
          input: Schema.Struct({ page: Schema.Number }),
          output: Schema.String,
          idempotent: true,
          sideEffect: "read",
          timeout: "50 millis",
          handler: () => (attempts++ === 0 ? Effect.as(Effect.sleep("2 seconds"), "late") : Effect.succeed("page"))
        })
        const result = yield* drive(
          Run.run({ goal: "fetch", tools: [slowOnce] }).pipe(
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("fetch", { page: 1 }), ScriptedModel.finalAnswer("done")])
            )
          )
        )
        const settled = result.timeline.flatMap((e) =>
          e._tag === "tool.interrupted" || e._tag === "tool.succeeded" ? [e._tag] : []
        )
        assert.deepStrictEqual(settled, ["tool.interrupted", "tool.succeeded"])
        const outcome = (name: string) => count(Metric.withAttributes(Metrics.toolCalls, { outcome: name }))
        assert.strictEqual(yield* outcome("succeeded"), 1)
        assert.strictEqual(yield* outcome("interrupted"), 0)
        assert.strictEqual(result.counters.toolCalls, 1)
      }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )
  it.effect(
    "R9 R13 an ending the journal did not take is counted with the result its caller is given, and the resume's ending again",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1 ? ScriptedModel.toolCall("echo", { text: "a" }) : ScriptedModel.finalAnswer("done")
        )
        const completed = Metric.withAttributes(Metrics.runs, { status: "completed", stop_reason: "goal_reached" })
        // The store out of reach from the third commit on: the run ends, its ending not in its journal.
        const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= 3 })
        const first = yield* Run.run({ goal: "g", tools: [echo], runId: "r1" }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          drive,
          Effect.provide(model)
        )
        assert.isDefined(first.unrecorded)
        // Nobody may resume it: the ending its caller was given is counted.
        assert.strictEqual(yield* count(completed), 1)
        assert.strictEqual(yield* count(Metrics.steps), first.counters.iterations)
        const resumed = yield* drive(Run.resume("r1", { tools: [echo] })).pipe(Effect.provide(model))
        assert.strictEqual(resumed.stopReason, "goal_reached")
        assert.isUndefined(resumed.unrecorded)
        assert.strictEqual(yield* count(completed), 2)
        assert.strictEqual(yield* count(Metrics.steps), first.counters.iterations + resumed.counters.iterations)
      }).pipe(Effect.provide(Journal.layerMemory), Effect.provideService(Metric.MetricRegistry, new Map()))
  )
})
