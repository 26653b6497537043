/**
 * The ending of a run restored from its journal while a call of it waited for approval
 * (R1, R5.1, R6.3, R7): however it ends (its host's cancel, its deadline, the approval's
 * expiry), the wait its log left open ends first and the run leaves `awaiting_approval`,
 * then it is judged, with the same legal moves and the same plan report as the same run
 * ended live. Parked by `RunHost.drive`, on the `TestClock`.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../../src/events/Event.ts"
import * as RunState from "../../../src/events/RunState.ts"
import * as Journal from "../../../src/journal/Journal.ts"
import * as Run from "../../../src/run/Run.ts"
import * as RunHost from "../../../src/run/RunHost.ts"
import type * as RunResult from "../../../src/run/RunResult.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as Approval from "../../../src/tools/Approval.ts"
import * as Tool from "../../../src/tools/Tool.ts"
import * as Criterion from "../../../src/validation/Criterion.ts"
import * as Validation from "../../../src/validation/Validation.ts"

/** A lookup (a read) and a payment that needs approval, with what the payment did. */
const tools = () => {
  const paid: Array<number> = []
  const lookup = Tool.make({
    name: "lookup",
    description: "Looks the invoice up.",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "read",
    handler: () => Effect.succeed("invoice INV-9: 5 EUR")
  })
  const pay = Tool.make({
    name: "pay",
    description: "Pays an amount.",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.String,
    sideEffect: "external",
    needsApproval: true,
    handler: ({ amount }) =>
      Effect.sync(() => {
        paid.push(amount)
        return `paid ${amount}`
      })
  })
  return { paid, lookup, pay }
}

/** The invoice looked up, then paid, then the answer. */
const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1
    ? ScriptedModel.toolCall("lookup", {}, "l1")
    : request.iteration === 2
      ? ScriptedModel.toolCall("pay", { amount: 5 }, "p1")
      : ScriptedModel.finalAnswer("paid")
)

/** The run's options: the plan's first step is done with evidence before the payment waits. */
const optionsOf = (
  { lookup, pay }: ReturnType<typeof tools>,
  time: { readonly run: Duration.Input; readonly approval: Duration.Input }
) => ({
  goal: "pay INV-9",
  tools: [lookup, pay],
  time,
  validation: {
    plan: [
      Validation.step("lookup", "look the invoice up", [Criterion.toolSucceeded("lookup")]),
      Validation.step("pay", "pay it", [Criterion.toolSucceeded("pay")])
    ]
  }
})

/** Every move of the timeline, checked against the state table, with where the run was. */
const moves = (result: RunResult.RunResult): ReadonlyArray<string> =>
  result.timeline.flatMap((e) => {
    if (e._tag !== "state.changed") return []
    assert.isTrue(RunState.canTransition(e.from, e.to), `illegal ${e.from} -> ${e.to}`)
    return [`${e.from}->${e.to}`]
  })

/** The run's events from the stop on (`run.stopping`, or the request's decision), moves as `from->to`. */
const ending = (result: RunResult.RunResult, from: Event.Event["_tag"]): ReadonlyArray<string> => {
  const at = result.timeline.findIndex((e) => e._tag === from)
  return result.timeline.slice(at).map((e) => (e._tag === "state.changed" ? `${e.from}->${e.to}` : e._tag))
}

const finished = (outcome: RunHost.Outcome<never>): RunResult.RunResult => {
  assert.strictEqual(outcome._tag, "Finished")
  if (outcome._tag !== "Finished") throw new Error("not finished")
  return outcome.result
}

/** Parks the run `runId` on its payment's approval. */
const parked = (runId: string, options: ReturnType<typeof optionsOf>) =>
  Effect.map(RunHost.drive(runId, options), (outcome) => {
    assert.strictEqual(outcome._tag, "Parked")
    assert.deepStrictEqual(outcome._tag === "Parked" ? outcome.approvals.map((a) => a.callId) : [], ["p1"])
  })

describe("a restored run that waited for approval ends as a live one (R1, R5.1, R6.3, R7)", () => {
  it.effect(
    "R5.1 R6.3 a parked run cancelled by its host lists its completed plan steps, as a live one (review 125)",
    () =>
      Effect.gen(function* () {
        const world = tools()
        const options = optionsOf(world, { run: "1 hour", approval: "30 minutes" })
        // The same run cancelled live while its payment waits.
        const live = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ ...options, runId: "live" })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          return yield* handle.cancel
        }).pipe(Effect.scoped, Effect.provide(Approval.layerMemory))
        yield* parked("h1", options)
        const result = finished(yield* RunHost.drive("h1", options, { cancel: true }))
        for (const r of [live, result]) {
          assert.deepStrictEqual([r.status, r.stopReason], ["cancelled", "cancelled"], r.detail)
          assert.deepStrictEqual(
            r.completed.map((item) => item.id),
            ["lookup"]
          )
          assert.deepStrictEqual(
            r.unfinished.map((item) => item.id),
            ["pay"]
          )
          assert.deepStrictEqual(moves(r).slice(-3), [
            "awaiting_approval->tool_executing",
            "tool_executing->validating",
            "validating->cancelled"
          ])
        }
        // Before, the parked run was judged while still awaiting_approval: no validating, no checks, nothing listed.
        assert.deepStrictEqual(result.checks, live.checks)
        // The wait ends (withdrawn, the call never ran), the run leaves its phase, then it is judged.
        assert.deepStrictEqual(ending(result, "run.stopping"), ending(live, "run.stopping"))
        assert.deepStrictEqual(world.paid, [])
        // Its journal holds that ending, and no call is left on the approvals table.
        const journal = yield* Journal.Journal
        const stored = Option.getOrThrow(yield* journal.read("h1"))
        assert.strictEqual(stored.events.at(-1)?._tag, "run.finished")
        assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "h1" }), [])
      }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, model)))
  )

  it.effect(
    "R4.1 R7 R6.3 a parked run whose deadline or approval expiry passed meanwhile is judged by its plan when it goes on (review 125)",
    () =>
      Effect.gen(function* () {
        const world = tools()
        // The deadline first: run_timeout, judged by the plan alone.
        const late = optionsOf(world, { run: "1 hour", approval: "3 hours" })
        yield* parked("d1", late)
        // The expiry first: approval_expired, judged through validation.
        const expiring = optionsOf(world, { run: "1 day", approval: "1 hour" })
        yield* parked("e1", expiring)
        yield* TestClock.adjust("2 hours")
        const timedOut = finished(yield* RunHost.drive("d1", late))
        const expired = finished(yield* RunHost.drive("e1", expiring))
        // A cancel that comes after the deadline passed is the cancel's ending.
        yield* parked("d2", late)
        yield* TestClock.adjust("2 hours")
        const cancelled = finished(yield* RunHost.drive("d2", late, { cancel: true }))
        for (const [r, stop] of [
          [timedOut, "run_timeout"],
          [expired, "approval_expired"],
          [cancelled, "cancelled"]
        ] as const) {
          assert.strictEqual(r.stopReason, stop, r.detail)
          assert.strictEqual(r.status, stop === "cancelled" ? "cancelled" : "partial")
          assert.deepStrictEqual(
            r.completed.map((item) => item.id),
            ["lookup"]
          )
          assert.deepStrictEqual(moves(r).slice(-3), [
            "awaiting_approval->tool_executing",
            "tool_executing->validating",
            `validating->${r.status}`
          ])
        }
        assert.deepStrictEqual(world.paid, [])
      }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, model)))
  )
})
