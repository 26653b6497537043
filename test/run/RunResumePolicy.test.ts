/**
 * A run resumed under a policy that now refuses a call its process had begun (R3.6, R9):
 * recovery never sends it again. Before (review 77), a payment found not applied after a
 * restart was resent although the policy in force denied `pay`: the one time it really
 * happened was under a policy that forbade it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Permission from "../../src/tools/Permission.ts"
import type * as Tool from "../../src/tools/Tool.ts"
import { acting, dies, layers, ofTag, pay, payThenAnswer } from "../support/restart.ts"

/** A policy that now refuses `name`. */
const refusing = (name: string) =>
  Layer.succeed(Permission.Permission, {
    check: (request) =>
      Effect.succeed(
        request.tool.name === name
          ? Permission.deny("tool_not_allowed", `${name}: no longer allowed`)
          : Permission.allow
      )
  })

const resumedUnder = (tools: ReadonlyArray<Tool.Any<never>>, model: typeof payThenAnswer) =>
  TestClockDriver.drive(Run.resume("r1", { tools }, "restart")).pipe(
    Effect.provide(refusing(tools[0]?.name ?? "")),
    Effect.provide(model)
  )

const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2, correctionBudget: 3 }

describe("a run resumed under a policy that now refuses a call it had begun (R3.6)", () => {
  it.effect(
    "R5.2 R3.8 a call that ran, cut off by the deadline while the policy decides again, is not said never to have run",
    () =>
      Effect.gen(function* () {
        const payment = pay(false)
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        // A policy that never answers: the run's deadline comes first.
        const silent = Layer.succeed(Permission.Permission, { check: () => Effect.never })
        const resumed = yield* TestClockDriver.drive(
          Run.resume("r1", { tools: [payment.tool], time: { run: "1 second" } }, "restart")
        ).pipe(Effect.provide(silent), Effect.provide(payThenAnswer))
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.isFalse(
          ofTag(resumed.timeline, "tool.interrupted").some((e) => e.callId === "c1" && /never ran/.test(e.detail)),
          "a call whose handler ran recorded as never run"
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.6 R3.8 a payment found not applied is blocked, never resent", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      // Commit 3 holds the payment's intent; the process dies before the handler runs.
      yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
      const resumed = yield* resumedUnder([payment.tool], payThenAnswer)
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
        ["not_applied"]
      )
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.blocked").map((e) => [e.callId, e.error.code]),
        [["c1", "permission_denied"]]
      )
      assert.strictEqual(payment.ledger.total, 0)
    }).pipe(Effect.provide(layers))
  )

  it.effect("R3.6 R3.8 a payment found applied keeps its result: a policy does not undo what happened", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      // Commit 4, the payment's result, is lost: it paid, and is in doubt.
      yield* dies({ crashAt: { commit: 4, when: "before" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
      const resumed = yield* resumedUnder([payment.tool], payThenAnswer)
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
        ["applied"]
      )
      assert.lengthOf(ofTag(resumed.timeline, "tool.blocked"), 0)
      assert.deepStrictEqual([resumed.status, payment.ledger.total], ["completed", 1])
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.6 R3.8 an idempotent write in doubt is not run again: without a status query its outcome stays unknown",
    () =>
      Effect.gen(function* () {
        const put = acting("put", { idempotent: true, sideEffect: "write" })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCall("put", { amount: 10 }, "c1")
            : ScriptedModel.finalAnswer("put")
        )
        // Commit 3 holds the write's intent; the process dies then.
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "put", tools: [put.tool] }, model)
        const resumed = yield* resumedUnder([put.tool], model)
        assert.deepStrictEqual([resumed.stopReason, put.ledger.total], ["unknown_outcome", 0])
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.6 R3.3 a call waiting to retry when its process died is blocked, not retried", () =>
    Effect.gen(function* () {
      // An idempotent write whose first attempt the service refuses before doing anything.
      const put = acting("put", { idempotent: true, sideEffect: "write", behaviour: ["fail_before_apply", "apply"] })
      const flaky = put.tool
      const attempts = () => put.calls.count
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCall("put", { amount: 1 }, "c1")
          : ScriptedModel.finalAnswer("stored")
      )
      // The failure and its wait are committed before the wait (an idempotent write); the process dies in it.
      yield* dies({ crashAt: { commit: 4, when: "after" } }, { goal: "put", tools: [flaky] }, model)
      assert.strictEqual(attempts(), 1)
      const resumed = yield* resumedUnder([flaky], model)
      assert.strictEqual(attempts(), 1, "retried under a policy that refuses it")
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.blocked").map((e) => e.callId),
        ["c1"]
      )
      assert.notStrictEqual(resumed.status, "failed")
      // Its retry episode ends, given up (review 78), and the property kit finds nothing wrong.
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "recovery.failed").map((e) => [e.callId, e.kind]),
        [["c1", "tool_retry"]]
      )
      assert.deepStrictEqual(Properties.check(resumed, budget), [])
    }).pipe(Effect.provide(layers))
  )
})
