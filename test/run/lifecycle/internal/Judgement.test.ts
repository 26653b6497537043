/**
 * A run's status while an action it took is in doubt (R3.8): never a guessed failure. A run
 * stopped for another reason (its deadline, a limit) while a call that may not be sent twice
 * may or may not have taken effect ends `unknown_outcome`, its stop reason kept; a call that
 * is safe to send again (idempotent, or a read) stays listed and leaves the status as it is.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Run from "../../../../src/run/Run.ts"
import type * as RunResult from "../../../../src/run/RunResult.ts"
import * as ScriptedModel from "../../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../../src/testing/TestClockDriver.ts"
import * as Approval from "../../../../src/tools/Approval.ts"
import * as Tool from "../../../../src/tools/Tool.ts"
import * as Criterion from "../../../../src/validation/Criterion.ts"
import { assertRoundTrips } from "../../../support/schema.ts"

/** A tool whose handler never answers, of the side-effect class and idempotence given. */
const hanging = (
  sideEffect: Tool.SideEffect,
  idempotent: boolean,
  handler: () => Effect.Effect<string> = () => Effect.never
) =>
  Tool.make({
    name: "pay",
    description: "charges a card",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect,
    idempotent,
    handler
  })

const look = Tool.make({
  name: "look",
  description: "looks",
  input: Schema.Struct({}),
  output: Schema.String,
  sideEffect: "none",
  handler: () => Effect.succeed("seen")
})

const script = (...steps: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(steps), NodeServices.layer)

const pending = (result: RunResult.RunResult) => result.pendingActions.map((p) => p.name)

describe("R3.8 a run that stops while an action is in doubt", () => {
  it.effect("R3.8 R4.3 the run deadline cuts off a payment: unknown_outcome, its stop reason run_timeout", () =>
    Effect.gen(function* () {
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "x", tools: [hanging("external", false)], time: { run: "1 second", step: "1001 millis" } })
      ).pipe(Effect.provide(script(ScriptedModel.toolCall("pay", {}), ScriptedModel.finalAnswer("ok"))))
      // Before: failed, as though nothing had been paid.
      assert.strictEqual(result.status, "unknown_outcome")
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.deepStrictEqual(pending(result), ["pay"])
      const finished = result.timeline.at(-1)
      assert.deepInclude(finished, { _tag: "run.finished", status: "unknown_outcome", stopReason: "run_timeout" })
      assertRoundTrips(result)
    })
  )

  it.effect("R3.8 an idempotent payment, or a read, cut off by the run deadline: failed, the call listed", () =>
    Effect.gen(function* () {
      for (const tool of [hanging("external", true), hanging("read", false)]) {
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "x", tools: [tool], time: { run: "1 second" } })
        ).pipe(Effect.provide(script(ScriptedModel.toolCall("pay", {}), ScriptedModel.finalAnswer("ok"))))
        assert.strictEqual(result.status, "failed")
        assert.strictEqual(result.stopReason, "run_timeout")
      }
    })
  )

  it.effect("R3.8 R6.3 with a plan step done: unknown_outcome still, the plan's steps listed", () =>
    Effect.gen(function* () {
      const plan = [
        { id: "look", description: "look", required: true, criteria: [Criterion.toolSucceeded("look")] },
        { id: "pay", description: "pay", required: true, criteria: [Criterion.toolSucceeded("pay")] }
      ]
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "x", tools: [look, hanging("write", false)], validation: { plan }, time: { run: "1 second" } })
      ).pipe(
        Effect.provide(
          script(ScriptedModel.toolCall("look", {}), ScriptedModel.toolCall("pay", {}), ScriptedModel.finalAnswer("ok"))
        )
      )
      assert.strictEqual(result.status, "unknown_outcome")
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.deepStrictEqual(
        result.completed.map((c) => c.id),
        ["look"]
      )
      // Nothing is proposed while the action is pending.
      assert.isUndefined(result.nextStep)
    })
  )

  it.live("R3.8 R12 a payment left behind past the deadline and its stop grace: unknown_outcome", () =>
    Effect.gen(function* () {
      const stuck = hanging("external", false, () => Effect.uninterruptible(Effect.as(Effect.sleep("1 hour"), "paid")))
      const result = yield* Run.run({
        goal: "x",
        tools: [stuck],
        time: { run: "200 millis", stopGrace: "200 millis" }
      }).pipe(Effect.provide(script(ScriptedModel.toolCall("pay", {}), ScriptedModel.finalAnswer("ok"))))
      assert.strictEqual(result.status, "unknown_outcome")
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.include(result.detail, "stop grace")
      assert.deepStrictEqual(pending(result), ["pay"])
    })
  )
  it.effect(
    "R3.8 R12 a gate that dies while a payment runs beside its call: internal_error, status unknown_outcome",
    () =>
      Effect.gen(function* () {
        const ask = Tool.make({
          name: "ask",
          description: "needs a person",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          needsApproval: true,
          handler: () => Effect.succeed("asked")
        })
        const memory = Approval.makeMemory()
        const gate: Approval.Gate = {
          ...memory,
          request: () => Effect.andThen(Effect.sleep("500 millis"), Effect.die("gone"))
        }
        const pay = hanging("external", false, () => Effect.as(Effect.sleep("2 seconds"), "paid"))
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "x", tools: [pay, ask], concurrency: 2 }).pipe(
            Effect.provideService(Approval.ApprovalGate, gate)
          )
        ).pipe(
          Effect.provide(
            script(ScriptedModel.toolCalls(["pay", {}, "c1"], ["ask", {}, "c2"]), ScriptedModel.finalAnswer("ok"))
          )
        )
        assert.strictEqual(result.stopReason, "internal_error", result.detail)
        // Before: failed, the payment in pendingActions.
        assert.strictEqual(result.status, "unknown_outcome")
        assert.deepStrictEqual(pending(result), ["pay"])
      })
  )
})
