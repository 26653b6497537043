/**
 * A call whose result stops the run stops its batch at once, as a rejected approval does
 * (R3.11, R7, R3.8): the calls not begun never begin, a wait for a person is withdrawn, and
 * a handler still running is cut off (if it may have acted, the run ends `unknown_outcome`
 * with it pending). Before (review 77), a sequential batch of `[a tool error, a payment
 * needing approval]` asked a person after the run had failed, paid if they approved, and
 * waited out the run deadline if nobody decided.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Abortable from "../../../src/cancellation/Abortable.ts"
import type * as Event from "../../../src/events/Event.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as Journal from "../../../src/journal/Journal.ts"
import * as Run from "../../../src/run/Run.ts"
import type * as RunResult from "../../../src/run/RunResult.ts"
import * as FaultyJournal from "../../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"
import * as Approval from "../../../src/tools/Approval.ts"
import * as Tool from "../../../src/tools/Tool.ts"
import { hangingPay } from "../../support/tools.ts"

/** A tool that fails after `millis` with `failure` (its errors are not recovered: the run stops). */
const failing = (name: string, failure: Failure.Failure, millis = 0, recoverErrors = false) =>
  Tool.make({
    name,
    description: "fails",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "external",
    recoverErrors,
    handler: () => Effect.andThen(Effect.sleep(millis), Effect.fail(failure))
  })

const boom = new Failure.Permanent({ source: "tool", category: "defect", code: "boom", attempts: 1, hint: "boom" })
const reset = new Failure.UnknownOutcome({
  source: "tool",
  category: "connection",
  code: "reset",
  attempts: 1,
  hint: "the connection reset mid-transfer"
})

/** Payments, ledgered, taking `millis` each; `needsApproval` asks a person first. */
const payments = (
  options: { readonly needsApproval?: boolean; readonly millis?: number; readonly name?: string } = {}
) => {
  const ledger: Array<number> = []
  const tool = Tool.make({
    name: options.name ?? "pay",
    description: "pays",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.String,
    sideEffect: "external",
    needsApproval: options.needsApproval ?? false,
    handler: ({ amount }) =>
      Effect.andThen(
        Effect.sleep(options.millis ?? 0),
        Effect.sync(() => {
          ledger.push(amount)
          return "paid"
        })
      )
  })
  return { tool, ledger }
}

const batchOf = (...calls: ReadonlyArray<readonly [string, object]>) =>
  ScriptedModel.layer([
    ScriptedModel.toolCalls(...calls.map(([name, args], i) => [name, args, `c${i + 1}`] as const)),
    ScriptedModel.finalAnswer("done")
  ])

const of = <T extends Event.Event["_tag"]>(result: RunResult.RunResult, tag: T) =>
  result.timeline.filter((e): e is Event.Of<T> => e._tag === tag)

const neverStarted = (result: RunResult.RunResult, callId: string) =>
  !of(result, "tool.started").some((e) => e.callId === callId)

const services = Layer.mergeAll(NodeServices.layer, Approval.layerMemory)

describe("a batch stopped by one of its calls (R3.11)", () => {
  it.effect("R3.11 R7 after a tool error, the next call of a sequential batch never runs and no person is asked", () =>
    Effect.gen(function* () {
      const pay = payments({ needsApproval: true })
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay", tools: [pay.tool, failing("boom", boom)] }).pipe(
          Effect.provide(batchOf(["boom", {}], ["pay", { amount: 500 }]))
        )
      )
      assert.deepStrictEqual([result.stopReason, pay.ledger], ["tool_error", []])
      assert.lengthOf(of(result, "approval.requested"), 0)
      assert.isTrue(neverStarted(result, "c2"))
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "R3.8 R3.11 after a call in doubt, the next payment is not asked for: unknown_outcome, the payment never ran",
    () =>
      Effect.gen(function* () {
        const pay = payments({ needsApproval: true })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "pay", tools: [pay.tool, failing("transfer", reset)] }).pipe(
            Effect.provide(batchOf(["transfer", {}], ["pay", { amount: 500 }]))
          )
        )
        assert.deepStrictEqual([result.stopReason, pay.ledger], ["unknown_outcome", []])
        assert.deepStrictEqual(
          result.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        assert.isTrue(neverStarted(result, "c2"))
      }).pipe(Effect.provide(services))
  )

  it.effect(
    "R3.11 R7 a wait for a person beside a call that fails is withdrawn: the run stops then, not at its deadline",
    () =>
      Effect.gen(function* () {
        const pay = payments({ needsApproval: true })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "pay", tools: [pay.tool, failing("boom", boom, 1_000)], concurrency: 2 }).pipe(
            Effect.provide(batchOf(["pay", { amount: 500 }], ["boom", {}]))
          )
        )
        assert.deepStrictEqual([result.stopReason, pay.ledger], ["tool_error", []])
        assert.isBelow(result.elapsedMillis, 2_000)
        assert.deepStrictEqual(
          of(result, "approval.decided").map((e) => [e.callId, e.decision]),
          [["c1", "withdrawn"]]
        )
        assert.isTrue(neverStarted(result, "c1"))
        assert.lengthOf(yield* (yield* Approval.ApprovalGate).pending, 0)
      }).pipe(Effect.provide(services))
  )

  it.effect("R3.11 R3.8 a payment in its handler is cut off, as by a rejection: unknown_outcome, it pending", () =>
    Effect.gen(function* () {
      const pay = payments({ millis: 2_000 })
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay", tools: [pay.tool, failing("boom", boom, 1_000)], concurrency: 2 }).pipe(
          Effect.provide(batchOf(["pay", { amount: 500 }], ["boom", {}]))
        )
      )
      assert.deepStrictEqual([result.stopReason, pay.ledger], ["unknown_outcome", []])
      assert.deepStrictEqual(
        result.pendingActions.map((p) => p.callId),
        ["c1"]
      )
      assert.include(result.detail, "boom (c2)'s failure stopped the batch")
      assert.isBelow(result.elapsedMillis, 2_000)
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "R9 R3.11 a call fenced off by another process (journal_conflict) stops its batch: no person is asked (review 80)",
    () =>
      Effect.gen(function* () {
        const pay = payments()
        const transfer = payments({ needsApproval: true, name: "transfer" })
        const store = yield* Journal.Journal
        // Another process takes the run over from the third commit on: the payment's intent is refused.
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n >= 3 })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "pay", runId: "f1", tools: [pay.tool, transfer.tool] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(batchOf(["pay", { amount: 1 }], ["transfer", { amount: 2 }]))
          )
        )
        assert.lengthOf(of(result, "approval.requested"), 0)
        assert.include(result.detail, "another process owns this run")
        assert.isBelow(result.elapsedMillis, 1_000)
      }).pipe(Effect.provide(Layer.mergeAll(services, Journal.layerMemory)))
  )

  it.effect("R3.11 a failure the tool hands to the model stops nothing: the batch goes on", () =>
    Effect.gen(function* () {
      const pay = payments()
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay", tools: [pay.tool, failing("boom", boom, 0, true)] }).pipe(
          Effect.provide(batchOf(["boom", {}], ["pay", { amount: 500 }]))
        )
      )
      assert.deepStrictEqual([result.status, pay.ledger], ["completed", [500]])
    }).pipe(Effect.provide(services))
  )

  // A read (the default, not idempotent) whose promise ignores its abort signal, as a `fetch` wrapper that does not pass it on.
  const lookup = Tool.make({
    name: "lookup",
    description: "reads a page",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "read",
    handler: Abortable.handler(() => new Promise<string>((resolve) => setTimeout(() => resolve("page"), 3_000).unref()))
  })

  it.live(
    "R3.8 R7 a read cut off by a rejection in its batch: failed, approval_rejected, the read listed (review 165)",
    () =>
      Effect.gen(function* () {
        const pay = payments({ needsApproval: true })
        const gate: Approval.Gate = {
          ...Approval.makeMemory(),
          request: () => Effect.as(Effect.sleep("300 millis"), Approval.rejected("no"))
        }
        const result = yield* Run.run({ goal: "x", tools: [lookup, pay.tool], concurrency: 2 }).pipe(
          Effect.provideService(Approval.ApprovalGate, gate),
          Effect.provide(batchOf(["lookup", {}], ["pay", { amount: 5 }]))
        )
        assert.deepStrictEqual(
          result.pendingActions.map((p) => p.name),
          ["lookup"]
        )
        // Before: unknown_outcome / unknown_outcome, a read outranking the rejection.
        assert.deepStrictEqual([result.status, result.stopReason], ["failed", "approval_rejected"], result.detail)
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("R3.8 a read cut off by a sibling's tool error: failed, tool_error, the read listed (review 165)", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [lookup, failing("boom", boom, 300)], concurrency: 2 }).pipe(
        Effect.provide(batchOf(["lookup", {}], ["boom", {}]))
      )
      assert.deepStrictEqual(
        result.pendingActions.map((p) => p.name),
        ["lookup"]
      )
      assert.deepStrictEqual([result.status, result.stopReason], ["failed", "tool_error"], result.detail)
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "R3.8 R9.4 a run whose last commit another process fenced off, a payment in doubt: unknown_outcome, internal_error (review 165)",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        // Commits: the start, the model's answer, the payment's intent; the fourth (the ending) is fenced off.
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n >= 4 })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "x", runId: "f2", tools: [hangingPay], time: { run: "1 second" } }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(batchOf(["pay", {}]))
          )
        )
        assert.strictEqual(result.stopReason, "internal_error")
        assert.include(result.detail, "another process owns this run now")
        assert.deepStrictEqual(
          result.pendingActions.map((p) => p.name),
          ["pay"]
        )
        // Before: failed, as though nothing had been paid.
        assert.strictEqual(result.status, "unknown_outcome")
      }).pipe(Effect.provide(Layer.mergeAll(services, Journal.layerMemory)))
  )

  it.live(
    "R3.8 R9.4 a cancelled run fenced off at its last commit, a payment in doubt: unknown_outcome, internal_error (review 168)",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n >= 4 })
        const result = yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "x", runId: "f3", tools: [hangingPay] }).pipe(
              Effect.provideService(Journal.Journal, faulty.journal),
              Effect.provide(batchOf(["pay", {}]))
            )
            yield* Effect.sleep("200 millis")
            return yield* handle.cancel
          })
        )
        assert.include(result.detail, "another process owns this run now")
        assert.deepStrictEqual(
          result.pendingActions.map((p) => p.name),
          ["pay"]
        )
        // Before: failed, from the run's own status (cancelled), as though nothing had been paid.
        assert.deepStrictEqual([result.status, result.stopReason], ["unknown_outcome", "internal_error"])
      }).pipe(Effect.provide(Layer.mergeAll(services, Journal.layerMemory)))
  )

  it.effect(
    "R3.8 R9.4 a run fenced off at its last commit with only an idempotent call in doubt: failed, internal_error (review 168)",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const idempotent = Tool.make({
          name: "put",
          description: "writes, idempotently",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          idempotent: true,
          handler: () => Effect.fail(reset)
        })
        const faulty = FaultyJournal.make(store, { conflictOn: (n) => n >= 4 })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "x", runId: "f5", tools: [idempotent] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(batchOf(["put", {}]))
          )
        )
        assert.include(result.detail, "another process owns this run now")
        // Before: unknown_outcome, from the run's own (an unknown outcome the tool answered).
        assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"])
      }).pipe(Effect.provide(Layer.mergeAll(services, Journal.layerMemory)))
  )
})
