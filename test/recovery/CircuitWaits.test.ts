import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Schema } from "effect"
import { CircuitBreaker } from "effect/persistence"
import * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Tool from "../../src/tools/Tool.ts"

// A call its circuit refused never ran (R3.9): whatever the call's own rules, the run waits
// for the circuit, as long as it resumes within the time left (review 189).

const drive = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  TestClockDriver.drive(effect, { step: "1 millis", upTo: "30 minutes" })

/** A model that answers after `millis`. */
const answersAfter = (millis: number): Model.Model["Service"] => ({
  generate: () => Effect.as(Effect.sleep(millis), ScriptedModel.finalAnswer("done"))
})

/** One run whose model fails once: with a breaker opening on one failure, the provider's circuit opens. */
const tripProvider = (modelName?: string) =>
  Effect.suspend(() =>
    Run.run({ goal: "g", tools: [], modelName, recovery: { maxRecoveries: 0 } }).pipe(
      Effect.provide(FaultyModel.layer(FaultyModel.make([FaultyModel.httpError(500)])))
    )
  )

/**
 * A run of `primary` that starts 10 ms into another run's trial call (the circuit half-open),
 * the trial answering after `trialMillis`; the second run has `time` and a `backup` model.
 */
const besideTrial = (trialMillis: number, backup: Model.Model["Service"], time?: Run.Options<never>["time"]) =>
  drive(
    Effect.gen(function* () {
      yield* tripProvider("primary")
      yield* Effect.sleep("1 second")
      const trial = yield* Effect.forkChild(
        Run.run({ goal: "g", tools: [], modelName: "primary" }).pipe(
          Effect.provideService(Model.Model, answersAfter(trialMillis))
        )
      )
      yield* Effect.sleep("10 millis")
      const second = yield* Run.run({
        goal: "g",
        tools: [],
        modelName: "primary",
        ...(time === undefined ? {} : { time }),
        recovery: { fallbackModels: [{ name: "backup", model: backup }] }
      }).pipe(Effect.provideService(Model.Model, answersAfter(0)))
      return [yield* Fiber.join(trial), second] as const
    }).pipe(
      Effect.provide(
        Breakers.layerMemory({ provider: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
      )
    )
  )

describe("R3.9 a call its circuit refused waits for the circuit (review 189)", () => {
  it.effect("R3.7 R3.8 a payment refused during its circuit's trial waits, and leaves its sibling, the trial, be", () =>
    Effect.gen(function* () {
      let calls = 0
      const paid: Array<string> = []
      const pay = Tool.make({
        name: "pay",
        description: "pays",
        input: Schema.Struct({ to: Schema.String }),
        output: Schema.String,
        sideEffect: "external",
        idempotent: false,
        handler: ({ to }) =>
          Effect.gen(function* () {
            if (calls++ === 0) {
              return yield* new Failure.Retryable({
                source: "tool",
                category: "unavailable",
                code: "down",
                attempts: 1,
                hint: "down"
              })
            }
            yield* Effect.sleep("2 seconds")
            paid.push(to)
            return `paid ${to}`
          })
      })
      const result = yield* drive(
        Effect.gen(function* () {
          // An earlier run trips the shared circuit; a second later it lets one trial through.
          yield* Run.run({ goal: "g", tools: [pay] }).pipe(
            Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("pay", { to: "x" })]))
          )
          yield* Effect.sleep("1 second")
          return yield* Run.run({ goal: "g", tools: [pay], concurrency: 2 }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ScriptedModel.toolCalls(["pay", { to: "alice" }, "c1"], ["pay", { to: "bob" }, "c2"]),
                ScriptedModel.finalAnswer("done")
              ])
            )
          )
        }).pipe(
          Effect.provide(
            Breakers.layerMemory({ tool: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
          )
        )
      )
      // Before, bob's refusal ended the run tool_error and cut off alice's payment, left in doubt.
      assert.strictEqual(result.stopReason, "goal_reached", result.detail)
      assert.deepStrictEqual(result.pendingActions, [])
      assert.sameMembers(paid, ["alice", "bob"])
    })
  )

  it.effect("R3.8 the resend a status query vouched for, met by an open circuit, waits for it and pays once", () =>
    Effect.gen(function* () {
      const pay = FaultyTools.ledgered({
        name: "pay",
        idempotent: false,
        sideEffect: "external",
        behaviour: ["lose_before_apply", "apply"],
        reconcile: true
      })
      const result = yield* drive(
        Run.run({ goal: "g", tools: [pay.tool], time: { run: "60 seconds" } }).pipe(
          Effect.provide(
            ScriptedModel.layer([ScriptedModel.toolCall("pay", { q: "1" }), ScriptedModel.finalAnswer("done")])
          ),
          Effect.provide(
            Breakers.layerMemory({ tool: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
          )
        )
      )
      // Before, the resend gave up "may not be retried automatically": tool_error, nothing paid.
      assert.strictEqual(result.stopReason, "goal_reached", result.detail)
      assert.strictEqual(pay.ledger.total, 1)
    })
  )

  for (const [name, time] of [
    ["the run", { run: 200 }],
    ["the step", { run: 60_000, step: 200 }]
  ] as const) {
    it.effect(`R4.2 an open circuit that resumes in 100 ms, with 200 ms left of ${name}, is waited for 100 ms`, () =>
      Effect.gen(function* () {
        const model = FaultyModel.make([FaultyModel.respond(ScriptedModel.finalAnswer("done"))])
        const result = yield* drive(
          Effect.andThen(
            tripProvider(),
            Run.run({ goal: "g", tools: [], time }).pipe(Effect.provide(FaultyModel.layer(model)))
          ).pipe(
            Effect.provide(
              Breakers.layerMemory({
                provider: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "100 millis" }
              })
            )
          )
        )
        // Before, the wait was floored to 250 ms, which did not fit: model_error at once.
        assert.strictEqual(result.stopReason, "goal_reached", result.detail)
        assert.strictEqual(result.elapsedMillis, 100)
      })
    )
  }

  it.effect(
    "R3.9 a run refused during another run's trial waits for it, and keeps its model: no fallback for good",
    () =>
      Effect.gen(function* () {
        const backup = FaultyModel.make([FaultyModel.respond(ScriptedModel.finalAnswer("from backup"))])
        const [trial, second] = yield* besideTrial(300, backup.service)
        assert.strictEqual(trial.stopReason, "goal_reached")
        // Before, it went over to the backup for the rest of the run while the trial was in flight.
        assert.strictEqual(second.stopReason, "goal_reached", second.detail)
        assert.strictEqual(second.model, "primary")
        assert.deepStrictEqual(second.fallbacks, [])
        assert.strictEqual(backup.calls.length, 0)
      })
  )

  it.effect("R3.9 R5 a trial call the run left behind frees its circuit: a later run is not refused for good", () =>
    Effect.gen(function* () {
      const later = FaultyModel.make([FaultyModel.respond(ScriptedModel.finalAnswer("done"))])
      const [left, healthy] = yield* drive(
        Effect.gen(function* () {
          yield* tripProvider()
          yield* Effect.sleep("2 seconds")
          // This run's call is the trial, and will not stop: the run leaves it behind after its grace.
          const left = yield* Run.run({
            goal: "g",
            tools: [],
            time: { run: "3 seconds", stopGrace: "50 millis" }
          }).pipe(Effect.provideService(Model.Model, { generate: () => Effect.uninterruptible(Effect.never) }))
          yield* Effect.sleep("1 minute")
          const healthy = yield* Run.run({ goal: "g", tools: [], time: { run: "30 seconds" } }).pipe(
            Effect.provide(FaultyModel.layer(later))
          )
          return [left, healthy] as const
        }).pipe(
          Effect.provide(
            Breakers.layerMemory({ provider: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
          )
        )
      )
      assert.strictEqual(left.stopReason, "run_timeout")
      // Before, the trial's slot stayed taken: refused half-open for its whole 30 s, the model never asked.
      assert.strictEqual(healthy.stopReason, "goal_reached", healthy.detail)
      assert.strictEqual(later.calls.length, 1)
    })
  )

  it.effect(
    "R3.9 R4.2 with a fallback, a trial that runs on past two polls hands the run over: the next model gets the time (review 191)",
    () =>
      Effect.gen(function* () {
        const backup = {
          generate: () => Effect.as(Effect.sleep("1500 millis"), ScriptedModel.finalAnswer("by the backup"))
        }
        const [, second] = yield* besideTrial(5_000, backup, { run: "3 seconds" })
        // Before, it polled 250, 500 and 1,000 ms and handed over at 1.75 s: the backup's 1.5 s did not fit.
        assert.strictEqual(second.stopReason, "goal_reached", second.detail)
        assert.strictEqual(second.model, "backup")
        assert.strictEqual(second.elapsedMillis, 750 + 1500)
      })
  )
})
