/**
 * A run this process drives is driven by one fiber (R9, R3.8). Before, `Run.resume` of a
 * run still going in the same process (a second request to an API, `Run.recover` at the
 * wrong time) found the payment its handler was making in doubt; the status query said
 * "not applied yet", the payment was sent again, and the first run then failed, taken for
 * another process's. The run is now held while its fiber lives, and a second driver is
 * refused with `ResumeError` `running`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, References, Result, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunHost from "../../src/run/RunHost.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { payThenAnswer } from "../support/restart.ts"

/** A payment that takes `millis` and answers "not applied" to a status query until it has. */
const slowPayment = (millis: number, options: { readonly uninterruptible?: boolean } = {}) => {
  const ledger = new Map<string, number>()
  const paying = (key: string) =>
    Effect.andThen(
      Effect.sleep(millis),
      Effect.sync(() => {
        ledger.set(key, (ledger.get(key) ?? 0) + 1)
        return "receipt"
      })
    )
  const tool = Tool.make({
    name: "pay",
    description: "pays",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.String,
    idempotent: false,
    sideEffect: "external",
    reconcile: (_input, context) =>
      Effect.sync(() =>
        ledger.has(context.idempotencyKey)
          ? ({ _tag: "Applied", output: "receipt" } as const)
          : ({ _tag: "NotApplied" } as const)
      ),
    handler: (_input, context) =>
      options.uninterruptible === true
        ? Effect.uninterruptible(paying(context.idempotencyKey))
        : paying(context.idempotencyKey)
  })
  return { tool, paid: () => [...ledger.values()].reduce((a, b) => a + b, 0) }
}

const layers = Layer.mergeAll(Journal.layerMemory, Approval.layerMemory, payThenAnswer)

/** Lets the forked run reach its handler. */
const settle = Effect.repeat(Effect.yieldNow, { times: 50 })

describe("a run driven by one fiber of its process (R9)", () => {
  it.effect("R9 R3.8 Run.resume of a run this process drives is refused (running): the payment runs once", () =>
    Effect.gen(function* () {
      const payment = slowPayment(10_000)
      const first = yield* Effect.forkChild(Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }))
      yield* settle
      const refused = yield* Effect.flip(Run.resume("r1", { tools: [payment.tool] }))
      assert.deepStrictEqual([refused._tag, refused.reason], ["ResumeError", "running"])
      assert.match(refused.message, /this process drives the run now/)
      // Run.recover says so of that run, and resumes nothing.
      const recovered = yield* Run.recover({ tools: [payment.tool] })
      assert.deepStrictEqual(
        recovered.map((r) => (Result.isFailure(r) ? r.failure.reason : r.success.status)),
        ["running"]
      )
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(first)
      assert.deepStrictEqual([result.status, payment.paid()], ["completed", 1])
      // Once the run has stopped, a resume gives its stored result.
      const again = yield* Run.resume("r1", { tools: [payment.tool] })
      assert.deepStrictEqual(
        [again.status, again.timeline.length, payment.paid()],
        ["completed", result.timeline.length, 1]
      )
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 a run started in the background is held until its fiber ends, and two resumes at once drive it once",
    () =>
      Effect.gen(function* () {
        const payment = slowPayment(10_000)
        const handle = yield* Run.start({ goal: "pay 10", runId: "r1", tools: [payment.tool] })
        yield* settle
        const refused = yield* Effect.flip(Run.resume("r1", { tools: [payment.tool] }))
        assert.strictEqual(refused.reason, "running")
        yield* TestClock.adjust("10 seconds")
        const result = yield* handle.result
        assert.deepStrictEqual([result.status, payment.paid()], ["completed", 1])
      }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R9 R3.8 two resumes of a run at once: one drives it, the other is refused, the payment runs once", () =>
    Effect.gen(function* () {
      const payment = slowPayment(10_000)
      const store = yield* Journal.Journal
      // A process that dies in the payment: its run is left with the call in doubt.
      const faulty = FaultyJournal.make(store, {})
      const first = yield* Effect.forkChild(
        Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal)
        )
      )
      yield* settle
      faulty.crash()
      yield* Fiber.interrupt(first)
      const both = yield* Effect.forkChild(
        Effect.all(
          [Run.resume("r1", { tools: [payment.tool] }), Run.resume("r1", { tools: [payment.tool] })].map(Effect.result),
          { concurrency: "unbounded" }
        )
      )
      yield* settle
      yield* TestClock.adjust("10 seconds")
      const outcomes = (yield* Fiber.join(both))
        .map((r) => (Result.isFailure(r) ? r.failure.reason : r.success.status))
        .sort()
      assert.deepStrictEqual(outcomes, ["completed", "running"])
      // The dead process's payment was cut off before it paid; the resumed run paid once.
      assert.strictEqual(payment.paid(), 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 R5.2 a cancelled run whose handler ignores interruption is held until the handler returns, not past it",
    () =>
      Effect.gen(function* () {
        const payment = slowPayment(60_000, { uninterruptible: true })
        const handle = yield* Run.start({
          goal: "pay 10",
          runId: "r1",
          tools: [payment.tool],
          time: { stopGrace: "1 second" }
        })
        yield* settle
        const cancelled = yield* Effect.forkChild(handle.cancel)
        yield* TestClock.adjust("2 seconds")
        const result = yield* Fiber.join(cancelled)
        assert.strictEqual(result.status, "cancelled")
        // The handler still pays: the run is not driven again meanwhile.
        assert.strictEqual((yield* Effect.flip(Run.resume("r1", { tools: [payment.tool] }))).reason, "running")
        yield* TestClock.adjust("60 seconds")
        yield* settle
        const stored = yield* Run.resume("r1", { tools: [payment.tool] })
        assert.deepStrictEqual([stored.status, payment.paid()], ["cancelled", 1])
      }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R9 R3.8 a host does not drive a run this process drives: running, the payment runs once (review 78)", () =>
    Effect.gen(function* () {
      const payment = slowPayment(10_000)
      const first = yield* Effect.forkChild(Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }))
      yield* settle
      const refused = yield* Effect.flip(RunHost.drive("r1", { goal: "pay 10", tools: [payment.tool] }))
      assert.strictEqual(refused._tag === "ResumeError" ? refused.reason : refused._tag, "running")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual((yield* Fiber.join(first)).status, "completed")
      assert.strictEqual(payment.paid(), 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 R3.8 a host's drive taken while its handler ignores interruption is not driven again until the handler ends",
    () =>
      Effect.gen(function* () {
        const payment = slowPayment(60_000, { uninterruptible: true })
        const options = { goal: "pay 10", tools: [payment.tool], time: { stopGrace: "1 second" } } as const
        const hosted = yield* Effect.forkChild(RunHost.drive("r1", options))
        yield* settle
        // The host takes the run away (its shard moves): the drive stops; the handler goes on paying.
        yield* Fiber.interrupt(hosted)
        const again = yield* Effect.flip(RunHost.drive("r1", options))
        assert.strictEqual(again._tag === "ResumeError" ? again.reason : again._tag, "running")
        yield* TestClock.adjust("60 seconds")
        yield* settle
        const outcome = yield* RunHost.drive("r1", options)
        assert.strictEqual(outcome._tag === "Finished" ? outcome.result.status : outcome._tag, "completed")
        assert.strictEqual(payment.paid(), 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect("R9 R12 a Run.resume interrupted at any point lets the run go (review 78)", () =>
    Effect.gen(function* () {
      const payment = slowPayment(0)
      const journal = yield* Journal.Journal
      for (let k = 0; k < 40; k++) yield* Run.run({ goal: "pay 10", runId: `r${k}`, tools: [payment.tool] })
      const held: Array<number> = []
      for (let k = 0; k < 40; k++) {
        // Yielding every few steps, so that the interruption can come between any two of them.
        const fiber = yield* Effect.forkChild(
          Run.resume(`r${k}`, { tools: [payment.tool] }).pipe(Effect.provideService(References.MaxOpsBeforeYield, 2)),
          { startImmediately: false }
        )
        for (let i = 0; i < k; i++) yield* Effect.yieldNow
        yield* Fiber.interrupt(fiber)
        const release = journal.live.hold(`r${k}`)
        if (release === undefined) held.push(k)
        else release()
      }
      assert.deepStrictEqual(held, [])
    }).pipe(Effect.provide(layers))
  )

  it.effect("R9 a run its host drives is not resumed beside it; the host drives a run freed by its last driver", () =>
    Effect.gen(function* () {
      const payment = slowPayment(10_000)
      const hosted = yield* Effect.forkChild(RunHost.drive("r1", { goal: "pay 10", tools: [payment.tool] }))
      yield* settle
      assert.strictEqual((yield* Effect.flip(Run.resume("r1", { tools: [payment.tool] }))).reason, "running")
      yield* TestClock.adjust("10 seconds")
      const outcome = yield* Fiber.join(hosted)
      assert.strictEqual(outcome._tag === "Finished" ? outcome.result.status : outcome._tag, "completed")
      assert.strictEqual(payment.paid(), 1)
      const exit = yield* Effect.exit(RunHost.drive("r1", { goal: "pay 10", tools: [payment.tool] }))
      assert.isTrue(Exit.isSuccess(exit))
    }).pipe(Effect.provide(layers))
  )
})
