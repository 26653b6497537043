/**
 * User code that interrupts itself (an `Effect.interrupt` of its own, a join of a fiber
 * that was interrupted) is that code's failure, never a cancel (R5.1, R12): `cancelled`
 * is the stop reason of a run someone cancelled.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Validation from "../../src/validation/Validation.ts"

/** Joins a fiber it interrupted: the join fails with that interruption. */
const joinsInterrupted = Effect.gen(function* () {
  const fiber = yield* Effect.forkChild(Effect.never)
  yield* Fiber.interrupt(fiber)
  return yield* Fiber.join(fiber)
})

const callsThenAnswers = ScriptedModel.layer([ScriptedModel.toolCall("t", {}), ScriptedModel.finalAnswer("done")])

const tags = (result: RunResult.RunResult) => result.timeline.map((e) => e._tag)

describe("user code that interrupts itself (R5.1, R12)", () => {
  it.effect("R5.1 a tool handler that interrupts itself fails as that tool's defect; the model goes on", () =>
    Effect.gen(function* () {
      const t = Tool.make({
        name: "t",
        description: "joins an interrupted fiber",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "none",
        recoverErrors: true,
        handler: () => joinsInterrupted
      })
      const result = yield* Run.run({ goal: "x", tools: [t] }).pipe(Effect.provide(callsThenAnswers))
      assert.strictEqual(result.stopReason, "goal_reached", result.detail)
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.failure?.code : undefined, "tool_defect")
      assert.include(failed?._tag === "tool.failed" ? failed.error.message : "", "interrupted itself")
      assert.notInclude(tags(result), "tool.interrupted")
    })
  )

  it.effect("R5.1 a model that interrupts itself is a model error, not a cancel", () =>
    Effect.gen(function* () {
      const model = Layer.succeed(Model.Model, { generate: () => Effect.interrupt })
      const result = yield* Run.run({ goal: "x", tools: [], recovery: { maxRecoveries: 0 } }).pipe(
        Effect.provide(model)
      )
      assert.notStrictEqual(result.stopReason, "cancelled")
      assert.strictEqual(result.status, "failed")
      assert.include(JSON.stringify(result.timeline), "interrupted itself")
      assert.notInclude(tags(result), "run.stopping")
    })
  )

  it.effect("R6 a stop hook that interrupts itself is a failed check", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "x",
        tools: [],
        validation: { stopHooks: [Validation.stopHook("selfish", () => Effect.interrupt)] }
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))
      assert.strictEqual(result.stopReason, "validation_failed", result.detail)
      const check = result.checks.find((c) => c.name === "hook:selfish")
      assert.isFalse(check?.passed)
      assert.include(check?.detail ?? "", "interrupted itself")
    })
  )

  it.effect("R7 an approval gate that interrupts itself ends the run internal_error naming it", () =>
    Effect.gen(function* () {
      const gate: Approval.Gate = {
        request: () => Effect.interrupt,
        decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
        pending: Effect.succeed([])
      }
      const t = Tool.make({
        name: "t",
        description: "needs a person",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "none",
        needsApproval: true,
        handler: () => Effect.succeed("ok")
      })
      const result = yield* Run.run({ goal: "x", tools: [t] }).pipe(
        Effect.provide(callsThenAnswers),
        Effect.provideService(Approval.ApprovalGate, gate)
      )
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "the approval gate interrupted itself")
    })
  )

  it.live(
    "R5.1 R3.11 a handler whose cleanup dies as it is stopped: the cancel and the deadline still decide the stop",
    () =>
      Effect.gen(function* () {
        const dies = Tool.make({
          name: "t",
          description: "its cleanup dies",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "none",
          handler: () => Effect.onInterrupt(Effect.as(Effect.sleep("1 hour"), "late"), () => Effect.die("cleanup"))
        })
        const timedOut = yield* Run.run({ goal: "x", tools: [dies], time: { run: "100 millis" } }).pipe(
          Effect.provide(callsThenAnswers)
        )
        assert.strictEqual(timedOut.stopReason, "run_timeout", timedOut.detail)
        const cancelled = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "x", tools: [dies] })
          yield* Effect.sleep("50 millis")
          return yield* handle.cancel
        }).pipe(Effect.scoped, Effect.provide(callsThenAnswers))
        assert.strictEqual(cancelled.stopReason, "cancelled", cancelled.detail)
      })
  )
})
