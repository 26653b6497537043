import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Schema } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { TestClock } from "effect/testing"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Model from "../../src/model/Model.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as Replay from "../../src/testing/Replay.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"
import { assertRoundTrips } from "../support/schema.ts"

const unavailable = FailureBoundary.http({ status: 503, now: 0 })
const badRequest = FailureBoundary.http({ status: 400, now: 0 })

/** A model that fails every call with `failure`, counting the calls. */
const failing = (failure: Failure.Failure) => {
  let calls = 0
  const model: Model.Model["Service"] = {
    generate: () =>
      Effect.suspend(() => {
        calls++
        return Effect.fail(failure)
      })
  }
  return { model, calls: () => calls }
}

const backup = (): Model.Fallback => ({
  name: "backup",
  model: ScriptedModel.make([ScriptedModel.finalAnswer("done by the backup")])
})

const run = (primary: Model.Model["Service"], options: Partial<Run.Options<Tool.Any<never>>> = {}) =>
  drive(
    Run.run({
      goal: "x",
      tools: [],
      modelName: "primary",
      recovery: { backoff: Recovery.backoff({ jitter: false }) },
      ...options
    })
  ).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, primary), NodeServices.layer)))

const events = <Tag extends Event.Event["_tag"]>(result: RunResult.RunResult, tag: Tag) =>
  result.timeline.filter((e): e is Event.Of<Tag> => e._tag === tag)

/** An answer the provider stopped unfinished, after it had cost 1,010 tokens and $1. */
const paidUnfinished = new Failure.Retryable({
  source: "provider",
  category: "provider_interrupted",
  code: "answer_unfinished",
  attempts: 1,
  hint: "the provider stopped the answer unfinished (finish reason: pause)",
  usage: { inputTokens: 1_000, outputTokens: 10, costUsd: 1 }
})

describe("R2.1 R3.9 a failed answer that was paid for", () => {
  it.effect("R2.1 the budget it spends stops the run before a retry or a fallback is paid for", () =>
    Effect.gen(function* () {
      for (const limits of [{ maxTokens: 100 }, { maxCostUsd: 0.5 }]) {
        const primary = failing(paidUnfinished)
        const fallback = failing(paidUnfinished)
        const result = yield* run(primary.model, {
          limits,
          recovery: { fallbackModels: [{ name: "backup", model: fallback.model }] }
        })
        assert.deepStrictEqual(
          [result.stopReason, result.policy, primary.calls(), fallback.calls()],
          ["budget_exhausted", "budget_exhausted", 1, 0],
          JSON.stringify(limits)
        )
        assert.deepInclude(result.counters, { inputTokens: 1_000, outputTokens: 10, costUsd: 1 })
        // The log says why: the failure, then the policy's decision; no retry was started.
        assert.deepStrictEqual(
          result.timeline.filter((e) => e._tag.startsWith("recovery.") || e._tag === "model.fallback").length,
          0
        )
      }
    })
  )

  it.effect(
    "R12 a policy that throws when it looks is the run's defect, named: not the provider's, and no fallback is asked",
    () =>
      Effect.gen(function* () {
        const thrower = Termination.make("thrower", ({ counters }) => {
          if (counters.inputTokens > 0) throw new Error("policy bug")
          return Termination.continue_
        })
        const primary = failing(paidUnfinished)
        const fallback = failing(paidUnfinished)
        const result = yield* run(primary.model, {
          policies: (defaults) => [...defaults, thrower],
          recovery: { fallbackModels: [{ name: "backup", model: fallback.model }] }
        })
        assert.deepStrictEqual([result.stopReason, primary.calls(), fallback.calls()], ["internal_error", 1, 0])
        assert.include(result.detail, '"thrower"')
        assert.lengthOf(events(result, "model.fallback"), 0)
      })
  )

  it.live("R3.11 a policy that blocks past the deadline when it looks: the deadline's stop, whatever it says", () =>
    Effect.gen(function* () {
      const slow = Termination.make("slow_budget", ({ counters }) => {
        if (counters.inputTokens > 0) {
          const until = Date.now() + 150
          while (Date.now() < until) {
            // Blocks past the run's deadline.
          }
          return Termination.stop("budget_exhausted", "over my budget")
        }
        return Termination.continue_
      })
      const primary = failing(paidUnfinished)
      const result = yield* Run.run({
        goal: "x",
        tools: [],
        time: { run: "50 millis" },
        policies: (defaults) => [...defaults, slow]
      }).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, primary.model), NodeServices.layer)))
      assert.deepStrictEqual([result.stopReason, primary.calls()], ["run_timeout", 1])
    })
  )

  it.effect("R2.1 within the budget, it is retried as before, and every attempt's cost counts", () =>
    Effect.gen(function* () {
      const primary = failing(paidUnfinished)
      const result = yield* run(primary.model, {
        limits: { maxCostUsd: 10 },
        recovery: { backoff: Recovery.backoff({ jitter: false }), maxRecoveries: 2 }
      })
      assert.deepStrictEqual(
        [result.stopReason, primary.calls(), result.counters.costUsd],
        ["recovery_exhausted", 3, 3]
      )
    })
  )
})

describe("R3.9 fallback model", () => {
  it.effect("R3.9 when recovery gives up on the model, the run falls back to the next one and the result says so", () =>
    Effect.gen(function* () {
      const primary = failing(unavailable)
      const result = yield* run(primary.model, { recovery: { fallbackModels: [backup()] } })
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.finalAnswer, "done by the backup")
      // One call and the default two retries on the primary, then the switch.
      assert.strictEqual(primary.calls(), 3)
      assert.strictEqual(result.model, "backup")
      assert.lengthOf(result.fallbacks, 1)
      const [switched] = result.fallbacks
      assert.strictEqual(switched?.from, "primary")
      assert.strictEqual(switched?.to, "backup")
      assert.strictEqual(switched?.iteration, 1)
      assert.strictEqual(switched?.failure.code, "http_503")
      assert.strictEqual(events(result, "model.fallback")[0]?.seq, switched?.seq)
      // A model retry names no tool call.
      assert.strictEqual(events(result, "recovery.started")[0]?.callId, undefined)
    })
  )

  it.effect("R3.9 a permanent failure falls back at once, without retries", () =>
    Effect.gen(function* () {
      const primary = failing(badRequest)
      const result = yield* run(primary.model, { recovery: { fallbackModels: [backup()] } })
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(primary.calls(), 1)
      assert.strictEqual(result.elapsedMillis, 0)
    })
  )

  it.effect(
    "R3.9 R3.11 a content-filtered answer never falls back: no other model is asked to overrule the filter",
    () =>
      Effect.gen(function* () {
        const filtered: Model.Model["Service"] = ScriptedModel.make([ScriptedModel.filtered])
        const result = yield* run(filtered, { recovery: { fallbackModels: [backup()] } })
        assert.strictEqual(result.stopReason, "content_filtered")
        assert.lengthOf(result.fallbacks, 0)
        assert.strictEqual(result.model, "primary")
        assert.isUndefined(result.finalAnswer)
      })
  )

  it.effect("R3.9 R4.2 a Retry-After past the deadline hands the time left to the next model", () =>
    Effect.gen(function* () {
      const primary = failing(FailureBoundary.http({ status: 429, retryAfter: "60", now: 0 }))
      const result = yield* run(primary.model, {
        time: { run: "10 seconds" },
        recovery: { fallbackModels: [backup()] }
      })
      assert.deepStrictEqual([result.stopReason, result.finalAnswer], ["goal_reached", "done by the backup"])
      assert.strictEqual(primary.calls(), 1)
      assert.strictEqual(result.fallbacks[0]?.failure.code, "http_429")
      assert.strictEqual(result.elapsedMillis, 0)
    })
  )

  it.effect("R3.9 R3.11 without a next model, a Retry-After past the deadline stops the run at once, run_timeout", () =>
    Effect.gen(function* () {
      const primary = failing(FailureBoundary.http({ status: 429, retryAfter: "60", now: 0 }))
      const result = yield* run(primary.model, { time: { run: "10 seconds" } })
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.include(result.detail, "would wait 60000 ms")
      assert.strictEqual(result.elapsedMillis, 0)
    })
  )

  it.effect("R3.9 R3.4 the run's spent budget never falls back", () =>
    Effect.gen(function* () {
      const primary = failing(unavailable)
      const result = yield* run(primary.model, { recovery: { maxRecoveries: 1, fallbackModels: [backup()] } })
      assert.strictEqual(result.stopReason, "recovery_exhausted")
      assert.lengthOf(result.fallbacks, 0)
      assert.strictEqual(primary.calls(), 2)
    })
  )

  it.effect("R3.9 with every model failing, the run stops as without fallbacks and lists every switch", () =>
    Effect.gen(function* () {
      const result = yield* run(failing(badRequest).model, {
        recovery: {
          fallbackModels: [
            { name: "second", model: failing(badRequest).model },
            { name: "third", model: failing(badRequest).model }
          ]
        }
      })
      assert.strictEqual(result.stopReason, "model_error")
      assert.deepStrictEqual(
        result.fallbacks.map((s) => `${s.from}>${s.to}`),
        ["primary>second", "second>third"]
      )
      assert.strictEqual(result.model, "third")
    })
  )

  it.effect("R3.9 invalid fallbacks are refused with a clear message", () =>
    Effect.gen(function* () {
      const duplicate = yield* run(failing(badRequest).model, {
        recovery: { fallbackModels: [{ name: "primary", model: failing(badRequest).model }] }
      })
      assert.strictEqual(duplicate.stopReason, "internal_error")
      assert.include(duplicate.detail, `the name "primary" is used twice`)
      const missing = yield* run(failing(badRequest).model, {
        recovery: { fallbackModels: [{ name: "x" } as unknown as Model.Fallback] }
      })
      assert.include(missing.detail, "recovery.fallbackModels[0].model: field is required")
    })
  )

  it.effect("R3.9 Model.fallback builds a fallback from a provider layer", () =>
    Effect.gen(function* () {
      const fallback = yield* Model.fallback("scripted", ScriptedModel.layer([ScriptedModel.finalAnswer("hi")]))
      const result = yield* run(failing(badRequest).model, { recovery: { fallbackModels: [fallback] } })
      assert.strictEqual(result.model, "scripted")
      assert.strictEqual(result.finalAnswer, "hi")
    }).pipe(Effect.scoped)
  )
})

const breakers = Breakers.layerMemory({
  provider: { tripPolicy: CircuitBreaker.consecutive(3), openDuration: "30 seconds" },
  tool: { tripPolicy: CircuitBreaker.consecutive(2), openDuration: "30 seconds" }
})

const transitions = (result: RunResult.RunResult) =>
  events(result, "circuit.changed").map((e) => `${e.key} ${e.from}>${e.to}`)

describe("R3.9 circuit breakers in a run", () => {
  it.effect("R3.9 a provider circuit opens in one run; the next run skips the model at once and falls back", () =>
    Effect.gen(function* () {
      const primary = failing(unavailable)
      const first = yield* run(primary.model, { recovery: { fallbackModels: [backup()] } })
      assert.deepStrictEqual(transitions(first), ["provider:primary closed>open"])
      assert.strictEqual(events(first, "circuit.changed")[0]?.retryAfterMillis, 30_000)
      assertRoundTrips(first)
      assert.strictEqual(primary.calls(), 3)

      const second = yield* run(primary.model, { recovery: { fallbackModels: [backup()] } })
      assert.strictEqual(second.status, "completed")
      // Rejected without a call, and no wait for the circuit: straight to the backup.
      assert.strictEqual(primary.calls(), 3)
      assert.strictEqual(events(second, "model.failed")[0]?.failure.code, "circuit_open")
      assert.strictEqual(second.fallbacks[0]?.failure.code, "circuit_open")
      assert.strictEqual(second.elapsedMillis, 0)
      assert.deepStrictEqual(transitions(second), [])
    }).pipe(Effect.provide(breakers))
  )

  it.effect("R3.9 after the open duration a run's call is the probe: open>half_open>closed on its timeline", () =>
    Effect.gen(function* () {
      let healthy = false
      const flaky: Model.Model["Service"] = {
        generate: () => (healthy ? Effect.succeed(Model.response({ text: "ok" })) : Effect.fail(unavailable))
      }
      const first = yield* run(flaky)
      assert.strictEqual(first.stopReason, "recovery_exhausted")
      assert.deepStrictEqual(transitions(first), ["provider:primary closed>open"])
      yield* TestClock.adjust("30 seconds")
      healthy = true
      const second = yield* run(flaky)
      assert.strictEqual(second.status, "completed")
      assert.deepStrictEqual(transitions(second), [
        "provider:primary open>half_open",
        "provider:primary half_open>closed"
      ])
    }).pipe(Effect.provide(breakers))
  )

  it.effect("R3.9 a tool circuit opens after repeated failures; a later call is rejected without running", () =>
    Effect.gen(function* () {
      let runs = 0
      const search = Tool.make({
        name: "search",
        description: "search the web",
        input: Schema.Struct({ q: Schema.String }),
        output: Schema.String,
        sideEffect: "read",
        // Not retried automatically, and allowed to fail a few times before the repeated-failure stop.
        idempotent: false,
        maxRetries: 5,
        recoverErrors: true,
        handler: () =>
          Effect.suspend(() => {
            runs++
            return Effect.fail(
              new Failure.Retryable({
                source: "tool",
                category: "transient_http",
                code: "http_503",
                attempts: 1,
                hint: "down"
              })
            )
          })
      })
      const script = ScriptedModel.make([
        ScriptedModel.toolCall("search", { q: "a" }),
        ScriptedModel.toolCall("search", { q: "b" }),
        ScriptedModel.toolCall("search", { q: "c" }),
        ScriptedModel.finalAnswer("gave up searching")
      ])
      // The circuit stays open past the run's deadline: the third call is refused for good, and its
      // refusal handed to the model. (Within the deadline it would wait for the circuit.)
      const result = yield* run(script, { tools: [search], limits: { maxToolErrors: 10 }, time: { run: "10 seconds" } })
      assert.strictEqual(runs, 2)
      assert.deepStrictEqual(transitions(result), ["tool:search closed>open"])
      const codes = events(result, "tool.failed").map((e) => e.error.failure?.code)
      assert.deepStrictEqual(codes, ["http_503", "http_503", "circuit_open"])
    }).pipe(Effect.provide(breakers))
  )

  it.effect("R3.9 a circuit that opens during the retries hands over to the fallback at once, not after its wait", () =>
    Effect.gen(function* () {
      const primary = failing(unavailable)
      const result = yield* run(primary.model, {
        time: { run: "60 seconds" },
        recovery: { backoff: Recovery.backoff({ jitter: false, retries: 4 }), fallbackModels: [backup()] }
      }).pipe(
        Effect.provide(
          Breakers.layerMemory({ provider: { tripPolicy: CircuitBreaker.consecutive(2), openDuration: "30 seconds" } })
        )
      )
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(primary.calls(), 2)
      assert.strictEqual(result.fallbacks[0]?.failure.code, "circuit_open")
      // Two attempts and one 50 ms backoff; then the refused third attempt goes to the backup at 150 ms, not after 30 s.
      assert.strictEqual(result.elapsedMillis, 150)
    })
  )

  it.effect(
    "R3.9 with no fallback, a circuit open past the deadline stops the run as the circuit's doing, at once",
    () =>
      Effect.gen(function* () {
        const primary = failing(unavailable)
        const result = yield* run(primary.model, {
          time: { run: "3 seconds" },
          recovery: { backoff: Recovery.backoff({ jitter: false, retries: 4 }) }
        }).pipe(
          Effect.provide(
            Breakers.layerMemory({
              provider: { tripPolicy: CircuitBreaker.consecutive(2), openDuration: "30 seconds" }
            })
          )
        )
        assert.strictEqual(result.stopReason, "model_error")
        assert.include(result.detail, "circuit for primary is open")
        assert.strictEqual(result.elapsedMillis, 150)
      })
  )

  /**
   * One run's call is the circuit's trial (it takes 5 s); another run's call, refused
   * `circuit_half_open` meanwhile, runs `options` with its own model (`waiter`). Both forked, the
   * clock moved 10 ms at a time until both end.
   */
  const besideTrial = (
    options: Partial<Run.Options<Tool.Any<never>>>,
    waiter: Model.Model["Service"] = {
      generate: () => Effect.succeed(Model.response({ text: "done after the trial" }))
    }
  ) =>
    Effect.gen(function* () {
      let down = true
      const trial: Model.Model["Service"] = {
        generate: () =>
          down ? Effect.fail(unavailable) : Effect.as(Effect.sleep("5 seconds"), Model.response({ text: "slow" }))
      }
      const runOf = (model: Model.Model["Service"], more: Partial<Run.Options<Tool.Any<never>>>) =>
        Run.run({ goal: "x", tools: [], modelName: "primary", ...more }).pipe(
          Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, model), NodeServices.layer))
        )
      // One 503 opens the circuit for 1 s.
      yield* runOf(trial, { recovery: { backoff: Recovery.backoff({ retries: 0 }) } })
      yield* TestClock.adjust("2 seconds")
      down = false
      const a = yield* Effect.forkChild(runOf(trial, {}))
      yield* Effect.yieldNow
      const b = yield* Effect.forkChild(runOf(waiter, options))
      for (let i = 0; i < 3000 && (a.pollUnsafe() === undefined || b.pollUnsafe() === undefined); i++) {
        yield* TestClock.adjust("10 millis")
      }
      return [yield* Fiber.join(a), yield* Fiber.join(b)] as const
    }).pipe(
      Effect.provide(
        Breakers.layerMemory({ provider: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
      )
    )

  it.effect("R3.9 a call refused while another run's trial call is in flight waits for it and spends no retry", () =>
    Effect.gen(function* () {
      // No retry in its schedule nor in its budget: each wait for the trial must spend none (review 121).
      const [trial, waiting] = yield* besideTrial({
        recovery: { backoff: Recovery.backoff({ jitter: false, retries: 0 }), maxRecoveries: 0 }
      })
      assert.strictEqual(trial.status, "completed")
      assert.strictEqual(waiting.status, "completed", `${waiting.stopReason}: ${waiting.detail}`)
      const waits = events(waiting, "recovery.started")
      // Asked again after 250 ms, doubling up to 2 s, until the trial closed the circuit at 5 s.
      assert.deepStrictEqual(
        waits.map((e) => [e.delayMillis, e.cause, e.circuit]),
        [250, 500, 1000, 2000, 2000].map((delay) => [delay, "circuit_half_open", "half_open"])
      )
      assert.strictEqual(waiting.counters.recoveryAttempts, 0)
      assert.strictEqual(waiting.elapsedMillis, 5750)
      assertRoundTrips(waiting)
      // The test kit takes the waits as the run does: no retry spent, none past the schedule.
      assert.deepStrictEqual(
        Properties.check(waiting, { runTimeoutMillis: 600_000, maxRecoveries: 0, scheduleRetries: 0 }),
        []
      )
      // And a replay of it, with no breakers, waits as the run did and spends no retry either.
      const report = yield* Replay.replay(waiting.timeline, {
        tools: [],
        modelName: "primary",
        recovery: { backoff: Recovery.backoff({ jitter: false, retries: 0 }), maxRecoveries: 0 }
      })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )

  it.effect("R3.9 R10 a call its circuit refuses never calls the model: a scripted model keeps its script", () =>
    Effect.gen(function* () {
      // `generate` counted as it is called, not as its Effect runs: a refusal must not call it at all.
      let calls = 0
      const script = ScriptedModel.make([ScriptedModel.finalAnswer("done after the trial")])
      const waiter: Model.Model["Service"] = {
        generate: (request) => {
          calls++
          return script.generate(request)
        }
      }
      const [trial, waiting] = yield* besideTrial({}, waiter)
      assert.strictEqual(trial.status, "completed")
      // Before, each of the five refusals called `generate`, spending the script: its one answer went to a refusal.
      assert.strictEqual(waiting.status, "completed", `${waiting.stopReason}: ${waiting.detail}`)
      assert.strictEqual(waiting.finalAnswer, "done after the trial")
      assert.strictEqual(events(waiting, "recovery.started").length, 5)
      assert.strictEqual(calls, 1)
    })
  )

  it.effect("R3.9 R4.2 a call waiting for another run's trial call stops within its own deadline", () =>
    Effect.gen(function* () {
      const [trial, waiting] = yield* besideTrial({ time: { run: "3 seconds" } })
      assert.strictEqual(trial.status, "completed")
      // 250 + 500 + 1000 ms of waits; the next (2 s) would pass the deadline: the circuit's stop, not a sleep past it.
      assert.strictEqual(waiting.stopReason, "model_error")
      assert.include(waiting.detail, "half-open")
      assert.strictEqual(waiting.elapsedMillis, 1750)
    })
  )

  it.effect("R3.9 without breakers nothing is guarded and no circuit events appear", () =>
    Effect.gen(function* () {
      const primary = failing(unavailable)
      for (let i = 0; i < 3; i++) {
        const result = yield* run(primary.model)
        assert.deepStrictEqual(transitions(result), [])
        assert.strictEqual(result.stopReason, "recovery_exhausted")
      }
      assert.strictEqual(primary.calls(), 9)
    })
  )
})

/** Blocks the event loop for `millis`, as user code that never yields does: the run's deadline cannot fire meanwhile. */
const block = (millis: number) => {
  const until = Date.now() + millis
  while (Date.now() < until) {
    // spin
  }
}

/** A backup model that answers at once, counting how often it is asked. */
const answering = () => {
  let asked = 0
  const model: Model.Model["Service"] = {
    generate: () =>
      Effect.sync(() => {
        asked++
        return Model.response({ text: "too late" })
      })
  }
  return { model, asked: () => asked }
}

describe("R3.11 a model call that outlasts the run deadline", () => {
  const blockedThenFailed = (failure: Failure.Failure): Model.Model["Service"] => ({
    generate: () =>
      Effect.suspend(() => {
        block(300)
        return Effect.fail(failure)
      })
  })
  const live = (primary: Model.Model["Service"], fallbackModels: ReadonlyArray<Model.Fallback>) =>
    Run.run({
      goal: "x",
      tools: [],
      modelName: "primary",
      time: { run: "100 millis" },
      recovery: { fallbackModels }
    }).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, primary), NodeServices.layer)))

  it.live("R3.11 a model call failing for good after the run deadline passed ends run_timeout, not model_error", () =>
    Effect.gen(function* () {
      const result = yield* live(blockedThenFailed(badRequest), [])
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.include(result.detail, "deadline passed")
    })
  )

  it.live("R3.11 no fallback model is asked once the run deadline has passed", () =>
    Effect.gen(function* () {
      const backup = answering()
      const result = yield* live(blockedThenFailed(badRequest), [{ name: "backup", model: backup.model }])
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(backup.asked(), 0)
      assert.lengthOf(result.fallbacks, 0)
      assert.strictEqual(result.model, "primary")
    })
  )

  it.live("R4.2 past its step's deadline, no fallback is asked and no late answer accepted: step_timeout", () =>
    Effect.gen(function* () {
      const backup = answering()
      const inStep = (primary: Model.Model["Service"], fallbackModels: ReadonlyArray<Model.Fallback>) =>
        Run.run({
          goal: "x",
          tools: [],
          modelName: "primary",
          time: { step: "100 millis" },
          recovery: { fallbackModels }
        }).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, primary), NodeServices.layer)))
      const failed = yield* inStep(blockedThenFailed(badRequest), [{ name: "backup", model: backup.model }])
      assert.deepStrictEqual([failed.stopReason, backup.asked(), failed.model], ["step_timeout", 0, "primary"])
      assert.include(failed.detail, "after its step's deadline")
      const answeredLate: Model.Model["Service"] = {
        generate: () =>
          Effect.sync(() => {
            block(300)
            return Model.response({ text: "late answer" })
          })
      }
      const late = yield* inStep(answeredLate, [])
      assert.deepStrictEqual([late.stopReason, late.finalAnswer], ["step_timeout", undefined])
    })
  )

  it.live("R3.11 no retry is asked once the run deadline has passed", () =>
    Effect.gen(function* () {
      let asked = 0
      const primary: Model.Model["Service"] = {
        generate: () =>
          Effect.suspend(() => {
            asked++
            block(300)
            return Effect.fail(unavailable)
          })
      }
      const result = yield* live(primary, [])
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(asked, 1)
    })
  )
})

describe("R3.4 R3.9 a failure of a tool's or a model's own that claims a circuit's refusal", () => {
  /** What a tool or a model may fail with of its own: a circuit's category, with no breaker behind it. */
  const claimed = (source: "tool" | "provider", category: "circuit_open" | "circuit_half_open", after: number) =>
    new Failure.Retryable({ source, category, code: "overloaded", attempts: 1, hint: "busy", retryAfterMillis: after })

  it.effect("R3.4 a tool's draws on its retries: not a poll every 0 ms until the deadline (review 140)", () =>
    Effect.gen(function* () {
      let calls = 0
      const flaky = Tool.make({
        name: "flaky",
        description: "Fails as if its circuit refused it.",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        idempotent: true,
        maxRetries: 2,
        handler: () => Effect.suspend(() => (calls++, Effect.fail(claimed("tool", "circuit_half_open", 0))))
      })
      const result = yield* drive(
        Run.run({ goal: "x", tools: [flaky], time: { run: "20 seconds" }, recovery: { maxRecoveries: 3 } })
      ).pipe(
        Effect.provide(
          Layer.mergeAll(
            ScriptedModel.layer([ScriptedModel.toolCall("flaky", {}), ScriptedModel.finalAnswer("done")]),
            NodeServices.layer
          )
        )
      )
      // Before, 302,397 calls in 20 s, none of them counted.
      assert.strictEqual(calls, 3)
      assert.strictEqual(result.stopReason, "tool_error")
      assert.isFalse(result.timeline.some((e) => e._tag === "recovery.started" && e.circuit !== undefined))
      // Replayed, the tool's own failure is the failure it was, not a refusal (review 141).
      const replayed = yield* drive(
        Replay.replay(result.timeline, { tools: [flaky], recovery: { maxRecoveries: 3 }, time: { run: "20 seconds" } })
      )
      assert.strictEqual(replayed._tag, "Matched", replayed._tag === "Diverged" ? replayed.detail : "")
    })
  )

  it.effect(
    "R3.4 a model's draws on the run's recoveries: recovery_exhausted, not model_error at the deadline (review 140)",
    () =>
      Effect.gen(function* () {
        const { model, calls } = failing(claimed("provider", "circuit_open", 10))
        const result = yield* drive(
          Run.run({ goal: "x", tools: [], time: { run: "20 seconds" }, recovery: { maxRecoveries: 2 } })
        ).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, model), NodeServices.layer)))
        assert.strictEqual(calls(), 3)
        assert.strictEqual(result.stopReason, "recovery_exhausted")
        const replayed = yield* drive(
          Replay.replay(result.timeline, { tools: [], recovery: { maxRecoveries: 2 }, time: { run: "20 seconds" } })
        )
        assert.strictEqual(replayed._tag, "Matched", replayed._tag === "Diverged" ? replayed.detail : "")
      })
  )
})

describe("R3.9 R13 a refusal that ends its call's retries", () => {
  it.effect("R3.9 R13 is summarized as a refusal, and the run's recording replays (review 142)", () =>
    Effect.gen(function* () {
      const down = FailureBoundary.http({ status: 503, now: 0 })
      const save = (millis: number) =>
        Tool.make({
          name: "save",
          description: "Saves.",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          idempotent: true,
          maxRetries: 3,
          handler: () => Effect.andThen(Effect.sleep(millis), Effect.fail(down))
        })
      const script = () =>
        ScriptedModel.layer([ScriptedModel.toolCall("save", {}, "c1"), ScriptedModel.finalAnswer("done")])
      const recovery = { backoff: Recovery.backoff({ jitter: false }) }
      const b = yield* Effect.gen(function* () {
        // B's call fails first, then A's: the second failure opens the circuit for good, and B's retry is refused.
        const b = yield* Effect.forkChild(
          Run.run({ goal: "x", tools: [save(0)], recovery }).pipe(Effect.provide(script()))
        )
        const a = yield* Effect.forkChild(
          Run.run({ goal: "x", tools: [save(1)], recovery }).pipe(Effect.provide(script()))
        )
        for (let i = 0; i < 3000 && (a.pollUnsafe() === undefined || b.pollUnsafe() === undefined); i++)
          yield* TestClock.adjust("10 millis")
        return yield* Fiber.join(b)
      }).pipe(
        Effect.provide(
          Breakers.layerMemory({ tool: { tripPolicy: CircuitBreaker.consecutive(2), openDuration: Duration.infinity } })
        ),
        Effect.provide(NodeServices.layer)
      )
      const failed = b.timeline.find((e) => e._tag === "tool.failed")
      const summary = failed?._tag === "tool.failed" ? failed.error.failure : undefined
      // Before, its summary lost `refused` (the failure was rebuilt with its attempts), and the replay spent a retry on it.
      assert.deepStrictEqual([summary?.code, summary?.refused], ["circuit_open", true])
      const report = yield* Replay.replay(b.timeline, { tools: [save(0)], recovery })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})
