import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"

/** A payment's connection broken after the request was sent, after `attempts` of its own. */
const lostAfter = (attempts: number) =>
  new Failure.UnknownOutcome({
    source: "tool",
    category: "connection",
    code: "connection_lost",
    attempts,
    hint: "the connection broke after the request was sent"
  })

/** A payment API whose answer gets lost after it charged: the side effect happened once. */
const makePayments = (answer: "applied" | "not_applied" | "undecidable" | "none") => {
  const charges: Array<string> = []
  const sends: Array<string> = []
  const keys: Array<string> = []
  const lost = lostAfter(1)
  const pay = Tool.make({
    name: "pay",
    description: "charge a card",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.Struct({ receipt: Schema.String }),
    sideEffect: "external",
    idempotent: false,
    handler: (_, context) =>
      Effect.suspend(() => {
        sends.push(context.idempotencyKey)
        // "not_applied": the first request is lost before it charges; a resend charges.
        if (answer === "not_applied") {
          if (sends.length === 1) return Effect.fail(lost)
          charges.push(context.idempotencyKey)
          return Effect.succeed({ receipt: `r-${context.idempotencyKey}` })
        }
        charges.push(context.idempotencyKey)
        return Effect.fail(lost)
      }),
    ...(answer === "none"
      ? {}
      : {
          reconcile: (_: { readonly amount: number }, context: Tool.CallContext) =>
            Effect.sync((): Tool.Reconciliation<{ readonly receipt: string }> => {
              keys.push(context.idempotencyKey)
              switch (answer) {
                case "applied":
                  return { _tag: "Applied", output: { receipt: `r-${context.idempotencyKey}` } }
                case "not_applied":
                  return { _tag: "NotApplied" }
                case "undecidable":
                  return { _tag: "Undecidable", detail: "the payment provider has no record yet" }
              }
            })
        })
  })
  return { pay, charges, sends, keys }
}

const run = (tool: Tool.Any<never>) =>
  Run.run({ goal: "pay 10", tools: [tool], runId: "run-1" }).pipe(
    Effect.provide(
      Layer.mergeAll(
        ScriptedModel.layer([
          ScriptedModel.toolCall("pay", { amount: 10 }, "call-1"),
          ScriptedModel.finalAnswer("paid")
        ]),
        NodeServices.layer
      )
    )
  )

const reconciled = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.flatMap((e) => (e._tag === "tool.reconciled" ? [e.verdict] : []))

describe("Reconciliation", () => {
  it.effect("R3.8 an unknown outcome that the status query finds applied yields the real result, charged once", () =>
    Effect.gen(function* () {
      const payments = makePayments("applied")
      const result = yield* run(payments.pay)
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(payments.charges, ["run-1:call-1"])
      assert.deepStrictEqual(payments.keys, ["run-1:call-1"])
      assert.deepStrictEqual(reconciled(result.timeline), ["applied"])
      const success = result.timeline.find((e) => e._tag === "tool.succeeded")
      assert.deepStrictEqual(success?._tag === "tool.succeeded" ? success.output : undefined, {
        receipt: "r-run-1:call-1"
      })
    })
  )

  it.effect("R3.8 without a status query an unknown outcome ends the run unknown_outcome, never retried", () =>
    Effect.gen(function* () {
      const payments = makePayments("none")
      const result = yield* run(payments.pay)
      assert.strictEqual(result.status, "unknown_outcome")
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.deepStrictEqual(payments.charges, ["run-1:call-1"])
      assert.strictEqual(result.counters.recoveryAttempts, 0)
    })
  )

  it.effect("R3.8 an undecidable status ends the run unknown_outcome, saying why", () =>
    Effect.gen(function* () {
      const payments = makePayments("undecidable")
      const result = yield* run(payments.pay)
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.include(result.detail, "the payment provider has no record yet")
      assert.deepStrictEqual(reconciled(result.timeline), ["undecidable"])
      assert.deepStrictEqual(payments.charges, ["run-1:call-1"])
    })
  )

  it.effect(
    "R3.8 a status query that finds nothing applied: the runtime resends under the same key, charged once",
    () =>
      Effect.gen(function* () {
        const payments = makePayments("not_applied")
        const result = yield* drive(run(payments.pay))
        assert.deepStrictEqual(reconciled(result.timeline), ["not_applied"])
        assert.strictEqual(result.status, "completed")
        // Two sends, one key, one charge: the resend is the runtime's, not a new call of the model.
        assert.deepStrictEqual(payments.sends, ["run-1:call-1", "run-1:call-1"])
        assert.deepStrictEqual(payments.charges, ["run-1:call-1"])
        assert.strictEqual(result.counters.recoveryAttempts, 1)
      })
  )

  /** A write that hangs past its timeout, whose status query answers `answer` (or never, for `hang`). */
  const makeHangingPay = (answer: "applied" | "not_applied" | "hang") => {
    const sends: Array<string> = []
    const pay = Tool.make({
      name: "pay",
      description: "charge a card",
      input: Schema.Struct({ amount: Schema.Number }),
      output: Schema.Struct({ receipt: Schema.String }),
      sideEffect: "external",
      timeout: "1 second",
      handler: (_, context) =>
        Effect.suspend(() => {
          sends.push(context.idempotencyKey)
          // The first send hangs (its outcome unknown); a resend answers.
          return sends.length === 1 ? Effect.never : Effect.succeed({ receipt: "r-2" })
        }),
      reconcile: () =>
        answer === "hang"
          ? Effect.never
          : Effect.succeed<Tool.Reconciliation<{ readonly receipt: string }>>(
              answer === "applied" ? { _tag: "Applied", output: { receipt: "r-1" } } : { _tag: "NotApplied" }
            )
    })
    return { pay, sends }
  }

  it.effect("R3.8 R6.3 a call settled by its status query, or resent and answered, is not pending at the end", () =>
    Effect.gen(function* () {
      for (const answer of ["applied", "not_applied"] as const) {
        const { pay, sends } = makeHangingPay(answer)
        const result = yield* drive(run(pay))
        assert.strictEqual(result.status, "completed")
        // The first attempt was cut off while it may have acted: recorded, then settled.
        assert.isTrue(result.timeline.some((e) => e._tag === "tool.interrupted" && e.settlement === "outcome_unknown"))
        assert.deepStrictEqual(result.pendingActions, [])
        assert.strictEqual(sends.length, answer === "applied" ? 1 : 2)
      }
    })
  )

  it.effect("R4.2 R3.8 a status query that hangs is bounded by the tool timeout, not the run deadline", () =>
    Effect.gen(function* () {
      const { pay } = makeHangingPay("hang")
      const result = yield* drive(
        Run.run({ goal: "pay", tools: [pay], runId: "run-1", time: { step: "3 seconds" } }).pipe(
          Effect.provide(
            Layer.mergeAll(
              ScriptedModel.layer([
                ScriptedModel.toolCall("pay", { amount: 10 }, "call-1"),
                ScriptedModel.finalAnswer("paid")
              ]),
              NodeServices.layer
            )
          )
        ),
        "100 millis"
      )
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.include(result.detail, "the status query did not answer within the tool timeout of 1000 ms")
      // One second for the attempt, one for the query: far below the step's 3 s and the run's 10 minutes.
      assert.isAtMost(result.elapsedMillis, 2100)
      assert.deepStrictEqual(
        result.pendingActions.map((p) => p.idempotencyKey),
        ["run-1:call-1"]
      )
    })
  )
})

describe("Reconciliation: the resend a status query allows", () => {
  const busy = new Failure.Retryable({
    source: "tool",
    category: "unavailable",
    code: "gateway_busy",
    attempts: 1,
    hint: "the payment gateway is busy"
  })
  /** A payment that is not idempotent, whose sends fail as `script` says (then succeed), and that is never found applied. */
  const scripted = (script: ReadonlyArray<Failure.Failure>) => {
    const state = { sends: 0, queries: 0 }
    const pay = Tool.make({
      name: "pay",
      description: "charge a card",
      input: Schema.Struct({ amount: Schema.Number }),
      output: Schema.Struct({ receipt: Schema.String }),
      sideEffect: "external",
      idempotent: false,
      maxRetries: 5,
      handler: () =>
        Effect.suspend(() => {
          const failure = script[state.sends++]
          return failure === undefined ? Effect.succeed({ receipt: "r" }) : Effect.fail(failure)
        }),
      reconcile: () =>
        Effect.sync((): Tool.Reconciliation<{ readonly receipt: string }> => {
          state.queries++
          return { _tag: "NotApplied" }
        })
    })
    return { pay, state }
  }

  it.effect("R3.7 R3.8 a failure of that resend is not retried: the query vouched for one send, not for more", () =>
    Effect.gen(function* () {
      const { pay, state } = scripted([lostAfter(1), busy])
      const result = yield* drive(run(pay))
      assert.deepStrictEqual([result.stopReason, state.sends, state.queries], ["tool_error", 2, 1])
      // A resend that is lost again is asked about again, and resent once more.
      const twice = scripted([lostAfter(1), lostAfter(1)])
      const again = yield* drive(run(twice.pay))
      assert.deepStrictEqual([again.status, twice.state.sends, twice.state.queries], ["completed", 3, 2])
    })
  )

  it.effect("R3.4 R12 a tool's own count of its retries, however large, is past the limit at once: no resend", () =>
    Effect.gen(function* () {
      for (const attempts of [6, 1e9]) {
        const { pay, state } = scripted([lostAfter(attempts)])
        const result = yield* drive(run(pay))
        // Before, a count of 1e9 stepped the schedule a billion times: the run spun until its deadline.
        assert.deepStrictEqual([result.stopReason, state.sends, state.queries], ["tool_error", 1, 1])
        assert.isBelow(result.elapsedMillis, 1_000)
      }
    })
  )
})

describe("Reconciliation: an idempotent call its retries left in doubt", () => {
  const busy = new Failure.Retryable({
    source: "tool",
    category: "unavailable",
    code: "gateway_busy",
    attempts: 1,
    hint: "the payment gateway is busy"
  })
  /**
   * An idempotent payment under a 1 s timeout and one retry: each send does as `sends`
   * says (`hang`: cut off by its timeout, so it may have paid), and its status query
   * answers `answer`.
   */
  const makeIdempotentPay = (
    sends: ReadonlyArray<"hang" | "busy">,
    answer: "applied" | "not_applied" | "undecidable"
  ) => {
    const state = { sends: 0, queries: 0 }
    const pay = Tool.make({
      name: "pay",
      description: "charge a card",
      input: Schema.Struct({ amount: Schema.Number }),
      output: Schema.Struct({ receipt: Schema.String }),
      sideEffect: "external",
      idempotent: true,
      maxRetries: 1,
      timeout: "1 second",
      handler: () => Effect.suspend(() => (sends[state.sends++] === "busy" ? Effect.fail(busy) : Effect.never)),
      reconcile: () =>
        Effect.sync((): Tool.Reconciliation<{ readonly receipt: string }> => {
          state.queries++
          switch (answer) {
            case "applied":
              return { _tag: "Applied", output: { receipt: "r-1" } }
            case "not_applied":
              return { _tag: "NotApplied" }
            case "undecidable":
              return { _tag: "Undecidable", detail: "the gateway has no record yet" }
          }
        })
    })
    return { pay, state }
  }

  it.effect("R3.8 R3.7 retries spent while a send may have acted: the status query decides, found applied", () =>
    Effect.gen(function* () {
      for (const sends of [
        ["hang", "hang"],
        ["hang", "busy"]
      ] as const) {
        const { pay, state } = makeIdempotentPay(sends, "applied")
        const result = yield* drive(run(pay))
        assert.strictEqual(result.status, "completed", result.detail)
        assert.deepStrictEqual([state.sends, state.queries], [2, 1])
        assert.deepStrictEqual(reconciled(result.timeline), ["applied"])
        assert.deepStrictEqual(result.pendingActions, [])
        const success = result.timeline.find((e) => e._tag === "tool.succeeded")
        assert.deepStrictEqual(success?._tag === "tool.succeeded" ? success.output : undefined, { receipt: "r-1" })
      }
    })
  )

  it.effect("R3.8 R3.7 found not applied after its retries: the call failed, no longer in doubt, not sent again", () =>
    Effect.gen(function* () {
      const { pay, state } = makeIdempotentPay(["hang", "hang"], "not_applied")
      const result = yield* drive(run(pay))
      assert.deepStrictEqual([state.sends, state.queries], [2, 1])
      assert.deepStrictEqual(reconciled(result.timeline), ["not_applied"])
      assert.deepStrictEqual(result.pendingActions, [])
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.include(failed?._tag === "tool.failed" ? failed.error.message : "", "did not take effect")
    })
  )

  it.effect(
    "R3.8 R3.7 undecidable after its retries: the call stays listed, and, safe to send again, stops nothing",
    () =>
      Effect.gen(function* () {
        const { pay, state } = makeIdempotentPay(["hang", "hang"], "undecidable")
        const result = yield* drive(run(pay))
        assert.deepStrictEqual([state.sends, state.queries], [2, 1])
        assert.deepStrictEqual(reconciled(result.timeline), ["undecidable"])
        assert.deepStrictEqual(
          result.pendingActions.map((p) => p.callId),
          ["call-1"]
        )
        // As without a status query: the call's failure goes as its retries left it, not an unknown outcome's stop.
        assert.strictEqual(result.stopReason, "tool_error", result.detail)
        const said = result.timeline.find((e) => e._tag === "tool.reconciled")
        assert.include(said?._tag === "tool.reconciled" ? said.detail : "", "the gateway has no record yet")
      })
  )

  it.effect("R3.8 a call whose sends all failed before acting is not asked about", () =>
    Effect.gen(function* () {
      const { pay, state } = makeIdempotentPay(["busy", "busy"], "applied")
      const result = yield* drive(run(pay))
      assert.deepStrictEqual([state.sends, state.queries], [2, 0])
      assert.deepStrictEqual(result.pendingActions, [])
    })
  )
})
