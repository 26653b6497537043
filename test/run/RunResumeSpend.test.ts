/**
 * What a run's failed answers cost, across a crash (R2.1, R9): an answer the provider stopped
 * unfinished and billed is in the journal before the run waits to retry it or asks another model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"

const layers = Layer.mergeAll(Journal.layerMemory, Approval.layerMemory)

/** An answer the provider stopped unfinished, `inputTokens` billed. */
const unfinished = (inputTokens: number) =>
  FaultyModel.toFailure({ kind: "unfinished", usage: { inputTokens, outputTokens: 0 } }, 0)

const answered = Model.response({ text: "done", usage: { inputTokens: 10, outputTokens: 0 } })

describe("what failed answers cost, across a crash (R2.1, R9)", () => {
  it.effect(
    "R2.1 R9 an answer billed after an unbilled failure is committed before its retry's wait (review 155)",
    () =>
      Effect.gen(function* () {
        let calls = 0
        const model = Layer.succeed(Model.Model, {
          generate: () =>
            Effect.suspend(() => {
              calls++
              if (calls === 1) return Effect.fail(FailureBoundary.http({ status: 429, now: 0 }))
              return calls === 2 ? Effect.fail(unfinished(400)) : Effect.succeed(answered)
            })
        })
        const faulty = FaultyJournal.make(yield* Journal.Journal, {})
        const first = yield* Effect.forkChild(
          Run.run({ goal: "x", tools: [], runId: "s1" }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(model)
          )
        )
        // The 429's wait runs out; the billed answer comes; the process dies in its retry's wait.
        while (calls < 1) yield* Effect.yieldNow
        for (let i = 0; i < 2000 && calls < 2; i++) {
          yield* TestClock.adjust("1 millis")
          yield* Effect.yieldNow
        }
        assert.strictEqual(calls, 2)
        for (let i = 0; i < 50; i++) yield* Effect.yieldNow
        faulty.crash()
        yield* Fiber.interrupt(first)
        const resumed = yield* TestClockDriver.drive(
          Run.resume("s1", { tools: [] }, "restart").pipe(Effect.provide(model))
        )
        // Before: 10, the billed answer's 400 lost with the wait that was never committed.
        assert.strictEqual(resumed.counters.inputTokens, 410)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R2.1 R3.9 R9 a switch to a fallback is committed before the fallback is asked, with what was billed (review 155)",
    () =>
      Effect.gen(function* () {
        let crashed = false
        let fallbackCalls = 0
        const primary: Model.Model["Service"] = {
          generate: () => Effect.suspend(() => (crashed ? Effect.succeed(answered) : Effect.fail(unfinished(400))))
        }
        const fallback: Model.Model["Service"] = {
          generate: () =>
            Effect.suspend(() => {
              fallbackCalls++
              return crashed ? Effect.succeed(answered) : Effect.never
            })
        }
        const options = {
          goal: "x",
          tools: [],
          recovery: { backoff: Recovery.backoff({ retries: 0 }), fallbackModels: [{ name: "b", model: fallback }] }
        }
        const faulty = FaultyJournal.make(yield* Journal.Journal, {})
        const first = yield* Effect.forkChild(
          Run.run({ ...options, runId: "s2" }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(Layer.succeed(Model.Model, primary))
          )
        )
        // The process dies while the fallback answers.
        while (fallbackCalls < 1) yield* Effect.yieldNow
        for (let i = 0; i < 50; i++) yield* Effect.yieldNow
        faulty.crash()
        crashed = true
        yield* Fiber.interrupt(first)
        const resumed = yield* TestClockDriver.drive(
          Run.resume("s2", options, "restart").pipe(Effect.provide(Layer.succeed(Model.Model, primary)))
        )
        // Before: 10 tokens, the primary asked again, and no fallback in the result.
        assert.strictEqual(resumed.counters.inputTokens, 410)
        assert.strictEqual(resumed.model, "b")
        assert.strictEqual(fallbackCalls, 2)
      }).pipe(Effect.provide(layers))
  )
  it.effect(
    "R3.9 R9 a run resumed in its model's wait for an open circuit spends no retry on the refusal, as the live run (review 156)",
    () =>
      Effect.gen(function* () {
        // Billed and unfinished, then a 429, then the answer; the circuit opens after each failure.
        const modelOf = (asked: { n: number }) =>
          Layer.succeed(Model.Model, {
            generate: () =>
              Effect.suspend(() => {
                const n = asked.n++
                if (n === 0) return Effect.fail(unfinished(100))
                return n === 1 ? Effect.fail(FailureBoundary.http({ status: 429, now: 0 })) : Effect.succeed(answered)
              })
          })
        const breakers = () =>
          Breakers.layerMemory({
            provider: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" },
            tool: false
          })
        // Two retries: the billed answer's, the 429's; the refusal between them spends none.
        const options = { goal: "x", tools: [], recovery: { backoff: Recovery.backoff({ jitter: false, retries: 2 }) } }
        const live = yield* TestClockDriver.drive(
          Run.run({ ...options, runId: "live" }).pipe(Effect.provide([breakers(), modelOf({ n: 0 })]))
        )
        assert.strictEqual(live.status, "completed", live.detail)

        const asked = { n: 0 }
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, {})
        const first = yield* Effect.forkChild(
          Run.run({ ...options, runId: "r156" }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide([breakers(), modelOf(asked)])
          )
        )
        // The process dies in the wait for the open circuit, that wait committed.
        const inRefusal = Effect.map(store.read("r156"), (stored) =>
          Option.match(stored, {
            onNone: () => false,
            onSome: ({ events }) => events.some((e) => e._tag === "recovery.started" && e.circuit !== undefined)
          })
        )
        for (let i = 0; i < 500 && !(yield* inRefusal); i++) yield* TestClock.adjust("10 millis")
        assert.isTrue(yield* inRefusal)
        faulty.crash()
        yield* Fiber.interrupt(first)
        const resumed = yield* TestClockDriver.drive(
          Run.resume("r156", options, "restart").pipe(Effect.provide([breakers(), modelOf(asked)]))
        )
        // Before: recovery_exhausted after the 429, the refusal counted as a spent retry.
        assert.strictEqual(resumed.status, "completed", `${resumed.stopReason}: ${resumed.detail}`)
        assert.strictEqual(resumed.counters.inputTokens, 110)
      }).pipe(Effect.provide(layers))
  )
})
