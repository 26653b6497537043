import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Random, Ref, Schedule, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"
import { echo } from "../support/tools.ts"

const final = FaultyModel.respond(ScriptedModel.finalAnswer("done"))
const exact = Recovery.backoff({ jitter: false })

/** Runs in the background and moves the TestClock until the run ends. */
const runWith = (model: FaultyModel.FaultyModel, options: Omit<Run.Options<Tool.Any<never>>, "goal">) =>
  drive(Run.run({ goal: "x", ...options }), "10 millis", 200).pipe(
    Effect.provide(Layer.mergeAll(FaultyModel.layer(model), NodeServices.layer))
  )

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

const sinceStart = (model: FaultyModel.FaultyModel) => model.calls.map((t) => t - (model.calls[0] ?? 0))

describe("Recovery", () => {
  it.effect("R3.3 the default backoff waits 50 ms then 100 ms, through recovering and back", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.rateLimited(), FaultyModel.httpError(503), final])
      const result = yield* runWith(model, { tools: [echo], recovery: { backoff: exact } })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(sinceStart(model), [0, 50, 150])
      assert.deepStrictEqual(
        ofTag(result.timeline, "recovery.started").map((e) => [e.kind, e.attempt, e.delayMillis, e.cause]),
        [
          ["provider_retry", 1, 50, "http_429"],
          ["provider_retry", 2, 100, "http_503"]
        ]
      )
      assert.deepStrictEqual(
        ofTag(result.timeline, "recovery.completed").map((e) => e.attempt),
        [2]
      )
      const moves = ofTag(result.timeline, "state.changed").map((e) => e.to)
      assert.deepStrictEqual(moves.slice(2, 7), [
        "model_thinking",
        "recovering",
        "model_thinking",
        "recovering",
        "model_thinking"
      ])
      assert.strictEqual(result.counters.recoveryAttempts, 2)
    })
  )

  it.effect("R3.3 jitter keeps each delay within ±20% of the exponential step", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.connectionReset, FaultyModel.corruptJson, final])
      const result = yield* runWith(model, { tools: [echo] }).pipe(Random.withSeed("recovery"))
      const delays = ofTag(result.timeline, "recovery.started").map((e) => e.delayMillis)
      assert.strictEqual(delays.length, 2)
      const [first = -1, second = -1] = delays
      assert.isTrue(first >= 40 && first <= 60, `first delay ${first}`)
      assert.isTrue(second >= 80 && second <= 120, `second delay ${second}`)
      assert.strictEqual(result.status, "completed")
    })
  )

  it.effect("R3.3 when the retries are spent the run ends recovery_exhausted with recovery.failed", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([
        FaultyModel.httpError(500),
        FaultyModel.httpError(502),
        FaultyModel.timeout,
        final
      ])
      const result = yield* runWith(model, { tools: [echo], recovery: { backoff: exact } })
      assert.strictEqual(result.stopReason, "recovery_exhausted")
      assert.strictEqual(model.calls.length, 3)
      const failed = ofTag(result.timeline, "recovery.failed")
      assert.strictEqual(failed.length, 1)
      assert.strictEqual(failed[0]?.attempts, 3)
    })
  )

  it.effect("R3.2 Retry-After is honoured when it is longer than the backoff", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.rateLimited("2"), final])
      const result = yield* runWith(model, { tools: [echo], recovery: { backoff: exact } })
      assert.deepStrictEqual(sinceStart(model), [0, 2000])
      assert.strictEqual(ofTag(result.timeline, "recovery.started")[0]?.delayMillis, 2000)
      assert.strictEqual(result.status, "completed")
    })
  )

  it.effect("R3.3 a retry that would sleep past the run deadline is not taken: the run stops early and says why", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.rateLimited("5"), final])
      const result = yield* runWith(model, { tools: [echo], time: { run: "1 second" } })
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.include(result.detail, "would wait 5000 ms but only 1000 ms of the run are left")
      assert.strictEqual(model.calls.length, 1)
      assert.strictEqual(result.elapsedMillis, 0)
    })
  )

  it.effect("R3.2 a permanent provider error is never retried", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.httpError(401), final])
      const result = yield* runWith(model, { tools: [echo] })
      assert.strictEqual(result.stopReason, "model_error")
      assert.strictEqual(model.calls.length, 1)
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
    })
  )

  it.effect("R3.4 a failure its owner already retried is not retried again by the loop", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([FaultyModel.alreadyRetried(503, 3), final])
      const result = yield* runWith(model, { tools: [echo] })
      assert.strictEqual(result.stopReason, "recovery_exhausted")
      assert.include(result.detail, "already retried 2 times by its owner")
      assert.strictEqual(model.calls.length, 1)
    })
  )

  it.effect("R3.4 an owner's attempts are honoured on every attempt, not only the first", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      // The first attempt fails once; the second reports that its owner already retried it twice.
      const tool = Tool.make({
        name: "lookup",
        description: "retries inside from its second call on",
        input: Schema.Struct({}),
        output: Schema.String,
        idempotent: true,
        maxRetries: 5,
        handler: () =>
          Ref.updateAndGet(calls, (n) => n + 1).pipe(
            Effect.flatMap((n) => {
              const failure = FailureBoundary.http({ status: 503, now: 0 })
              return Effect.fail(n === 1 ? failure : FailureBoundary.withAttempts(failure, 3))
            })
          )
      })
      const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("lookup", {})), final])
      const result = yield* runWith(model, { tools: [tool], recovery: { backoff: exact } })
      assert.strictEqual(yield* Ref.get(calls), 2)
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 1)
      const failed = ofTag(result.timeline, "recovery.failed")[0]
      assert.include(failed?.cause, "already retried 2 times by its owner")
    })
  )

  it.effect("R3.4 nested layers cannot multiply attempts: a tool that retries inside is run once by the loop", () =>
    Effect.gen(function* () {
      const attempts = yield* Ref.make(0)
      const inner = Tool.make({
        name: "fetch_page",
        description: "retries on its own, then reports how many times it tried",
        input: Schema.Struct({}),
        output: Schema.String,
        idempotent: true,
        maxRetries: 5,
        recoverErrors: true,
        handler: () =>
          Ref.update(attempts, (n) => n + 1).pipe(
            Effect.andThen(Effect.fail(FailureBoundary.http({ status: 503, now: 0 }))),
            Effect.retry({ times: 2 }),
            Effect.mapError((failure) => FailureBoundary.withAttempts(failure, 3))
          )
      })
      const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("fetch_page", {})), final])
      const result = yield* runWith(model, { tools: [inner] })
      assert.strictEqual(yield* Ref.get(attempts), 3)
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
      const failed = ofTag(result.timeline, "tool.failed")[0]
      assert.strictEqual(failed?.error.failure?.attempts, 3)
    })
  )

  it.effect("R3.7 an idempotent tool's retryable failure is retried with the backoff", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      const flaky = Tool.make({
        name: "lookup",
        description: "fails once",
        input: Schema.Struct({}),
        output: Schema.String,
        idempotent: true,
        handler: () =>
          Ref.updateAndGet(calls, (n) => n + 1).pipe(
            Effect.flatMap((n) =>
              n === 1
                ? Effect.fail(FailureBoundary.connection({ source: "tool", detail: "reset" }))
                : Effect.succeed("ok")
            )
          )
      })
      const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("lookup", {})), final])
      const result = yield* runWith(model, { tools: [flaky], recovery: { backoff: exact } })
      assert.strictEqual(yield* Ref.get(calls), 2)
      assert.strictEqual(result.status, "completed")
      const started = ofTag(result.timeline, "recovery.started")
      assert.deepStrictEqual(
        started.map((e) => [e.kind, e.delayMillis]),
        [["tool_retry", 50]]
      )
      assert.strictEqual(ofTag(result.timeline, "recovery.completed")[0]?.kind, "tool_retry")
    })
  )

  it.effect("R3.7 a tool that is not idempotent is never retried automatically, and fails fast by default", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      const send = Tool.make({
        name: "send_email",
        description: "not idempotent",
        input: Schema.Struct({}),
        output: Schema.String,
        idempotent: false,
        handler: () =>
          Ref.update(calls, (n) => n + 1).pipe(
            Effect.andThen(Effect.fail(FailureBoundary.connection({ source: "tool", detail: "reset" })))
          )
      })
      const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("send_email", {})), final])
      const result = yield* runWith(model, { tools: [send] })
      assert.strictEqual(yield* Ref.get(calls), 1)
      assert.strictEqual(result.stopReason, "tool_error")
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
    })
  )

  it.effect(
    "R3.3 the schedule is not stepped for a failure that is not retried (a user's schedule sees only real retries)",
    () =>
      Effect.gen(function* () {
        let stepped = 0
        const counting = exact.pipe(
          Schedule.tap(() =>
            Effect.sync(() => {
              stepped++
            })
          )
        )
        const send = Tool.make({
          name: "send_email",
          description: "not idempotent",
          input: Schema.Struct({}),
          output: Schema.String,
          idempotent: false,
          handler: () =>
            Effect.fail(
              new Failure.Retryable({
                source: "tool",
                category: "unavailable",
                code: "busy",
                attempts: 1,
                hint: "busy"
              })
            )
        })
        const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("send_email", {})), final])
        const result = yield* runWith(model, { tools: [send], recovery: { backoff: counting } })
        assert.strictEqual(stepped, 0)
        assert.strictEqual(result.stopReason, "tool_error")
        const failed = ofTag(result.timeline, "tool.failed")[0]
        assert.strictEqual(failed?.error.failure?.code, "busy")
      })
  )

  it.effect("R3.4 all retries of a run draw on one budget", () =>
    Effect.gen(function* () {
      const model = FaultyModel.make([
        FaultyModel.rateLimited(),
        FaultyModel.rateLimited(),
        FaultyModel.respond(ScriptedModel.toolCall("echo", { text: "a" })),
        FaultyModel.rateLimited(),
        FaultyModel.rateLimited(),
        final
      ])
      const result = yield* runWith(model, { tools: [echo], recovery: { backoff: exact, maxRecoveries: 3 } })
      assert.strictEqual(result.stopReason, "recovery_exhausted")
      assert.strictEqual(result.counters.recoveryAttempts, 3)
      assert.include(result.detail, "recovery budget of 3 retries is spent")
      assert.strictEqual(ofTag(result.timeline, "recovery.failed")[0]?.scope, "run")
    })
  )

  describe("R3.4 the calls of a concurrent batch failing together spend no more than the run's budget", () => {
    const failingTool = (name: string, work: number) =>
      Tool.make({
        name,
        description: "does some work, then fails retryably",
        input: Schema.Struct({}),
        output: Schema.String,
        idempotent: true,
        sideEffect: "read",
        maxRetries: 5,
        handler: () =>
          Effect.andThen(
            // Enough steps that the scheduler may hand over to another call of the batch between them.
            Effect.forEach(
              Array.from({ length: work }, (_, i) => i),
              Effect.succeed,
              { discard: true }
            ),
            Effect.fail(
              new Failure.Retryable({
                source: "tool",
                category: "transient_http",
                code: "http_503",
                attempts: 1,
                hint: "down"
              })
            )
          )
      })
    const batch = (work: number, backoff?: Recovery.Backoff) => {
      const tools = Array.from({ length: 6 }, (_, i) => failingTool(`t${i}`, work))
      const model = FaultyModel.make([
        FaultyModel.respond(ScriptedModel.toolCalls(...tools.map((t) => [t.name, {}] as const))),
        final
      ])
      return runWith(model, {
        tools,
        concurrency: 6,
        recovery: { maxRecoveries: 1, ...(backoff === undefined ? {} : { backoff }) }
      })
    }
    const retries = (timeline: ReadonlyArray<Event.Event>) =>
      ofTag(timeline, "recovery.started").filter((e) => e.kind === "tool_retry").length

    it.effect("R3.4 when each call's schedule waits on an effect before it answers", () =>
      Effect.gen(function* () {
        const yielding = exact.pipe(Schedule.modifyDelay(({ duration }) => Effect.as(Effect.yieldNow, duration)))
        const result = yield* batch(0, yielding)
        assert.strictEqual(retries(result.timeline), 1)
        assert.strictEqual(result.counters.recoveryAttempts, 1)
        assert.strictEqual(result.stopReason, "recovery_exhausted")
      })
    )

    it.effect("R3.4 when the scheduler hands over between the calls' failures", () =>
      Effect.gen(function* () {
        for (const work of [0, 1000, 1998, 2047, 4000]) {
          const result = yield* batch(work)
          assert.strictEqual(retries(result.timeline), 1, `handlers of ${work} steps`)
          assert.strictEqual(result.stopReason, "recovery_exhausted", `handlers of ${work} steps`)
        }
      })
    )
  })

  it.effect("R3.10 a conflict is not resent, even by an idempotent tool: the model re-reads", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      const save = Tool.make({
        name: "save",
        description: "fails with a version conflict",
        input: Schema.Struct({}),
        output: Schema.String,
        idempotent: true,
        recoverErrors: true,
        handler: () =>
          Ref.update(calls, (n) => n + 1).pipe(
            Effect.andThen(
              Effect.fail(
                new Failure.Retryable({
                  source: "tool",
                  category: "conflict",
                  code: "version_conflict",
                  attempts: 1,
                  hint: "the document changed since you read it"
                })
              )
            )
          )
      })
      const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("save", {})), final])
      const result = yield* runWith(model, { tools: [save], recovery: { backoff: exact } })
      assert.strictEqual(yield* Ref.get(calls), 1)
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
      assert.strictEqual(result.status, "completed")
    })
  )

  it.effect(
    "R3.10 a conflict of a tool that fails fast goes back to the model too: the run goes on, nothing resent",
    () =>
      Effect.gen(function* () {
        const calls = yield* Ref.make(0)
        const reserve = Tool.make({
          name: "reserve",
          description: "fails with a conflict, and does not hand its errors to the model",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          handler: () =>
            Ref.update(calls, (n) => n + 1).pipe(
              Effect.andThen(
                Effect.fail(
                  new Failure.Permanent({
                    source: "tool",
                    category: "conflict",
                    code: "out_of_stock",
                    attempts: 1,
                    hint: "no widget left"
                  })
                )
              )
            )
        })
        const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.toolCall("reserve", {})), final])
        const result = yield* runWith(model, { tools: [reserve], recovery: { backoff: exact } })
        // Before, the run ended tool_error: nothing re-read the state (review 76).
        assert.deepStrictEqual([result.status, yield* Ref.get(calls)], ["completed", 1])
        const failed = ofTag(result.timeline, "tool.failed")
        assert.include(failed[0]?.error.message ?? "", "no widget left")
      })
  )

  it("Recovery.backoff refuses nonsense", () => {
    assert.throws(() => Recovery.backoff({ retries: -1 }), /retries must be an integer >= 0/)
    assert.throws(() => Recovery.backoff({ factor: 0.5 }), /factor must be >= 1/)
    // A delay that is not a duration >= 0 named, not effect's bare "Invalid Input" nor a retry at once.
    assert.throws(() => Recovery.backoff({ base: -5 }), /base must be a finite duration >= 0, got -5/)
    assert.throws(() => Recovery.backoff({ base: Number.NaN }), /base must be a finite duration >= 0, got NaN/)
    assert.throws(() => Recovery.backoff({ base: "soon" as never }), /base must be a finite duration >= 0, got soon/)
    assert.throws(() => Recovery.backoff({ base: Number.POSITIVE_INFINITY }), /base must be a finite duration/)
    assert.throws(() => Recovery.backoff({ cap: "-1 second" as never }), /cap must be a duration >= 0/)
    assert.doesNotThrow(() => Recovery.backoff({ base: 0, cap: Number.POSITIVE_INFINITY }))
    assert.isTrue(Failure.isFailure(FailureBoundary.http({ status: 500, now: 0 })))
  })
})
