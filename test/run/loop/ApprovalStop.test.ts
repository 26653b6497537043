import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../../src/events/Event.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as Recovery from "../../../src/recovery/Recovery.ts"
import * as Run from "../../../src/run/Run.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"
import * as Approval from "../../../src/tools/Approval.ts"
import * as Tool from "../../../src/tools/Tool.ts"

describe("approvalStop: approval stop after a sibling's timed-out attempt was retried", () => {
  it.effect(
    "R7 R3.8 a rejection ends approval_rejected when the sibling's cut-off attempt was retried and succeeded",
    () =>
      Effect.gen(function* () {
        let n = 0
        const put = Tool.make({
          name: "put",
          description: "an idempotent write whose first attempt hangs",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          idempotent: true,
          maxRetries: 2,
          timeout: "1 second",
          handler: () => Effect.suspend(() => (++n === 1 ? Effect.never : Effect.succeed("stored")))
        })
        const pay = Tool.make({
          name: "pay",
          description: "pay",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          needsApproval: true,
          handler: () => Effect.succeed("paid")
        })
        const handle = yield* Run.start({
          goal: "x",
          tools: [put, pay],
          concurrency: 2,
          recovery: { backoff: Recovery.backoff({ jitter: false }) }
        }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls(["put", {}, "c_put"], ["pay", {}, "c_pay"])]))
        )
        const requested = yield* Stream.runHead(
          Stream.filter(handle.events, (e): e is Event.Of<"approval.requested"> => e._tag === "approval.requested")
        )
        // The put's first attempt times out (1 s), its retry succeeds.
        yield* TestClock.adjust("5 seconds")
        yield* handle.reject(Option.getOrThrow(requested).callId, "no")
        const result = yield* handle.result
        assert.isTrue(result.timeline.some((e) => e._tag === "tool.succeeded" && e.name === "put"))
        assert.lengthOf(result.pendingActions, 0)
        assert.deepStrictEqual([result.stopReason, result.status], ["approval_rejected", "failed"])
      }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )

  for (const idempotent of [true, false]) {
    it.effect(
      `R4.1 R3.8 the step deadline in a batch that waits for an approval: a cut-off ${idempotent ? "idempotent" : "non-idempotent"} write ends ${idempotent ? "step_timeout" : "unknown_outcome"}`,
      () =>
        Effect.gen(function* () {
          const store = Tool.make({
            name: "store",
            description: "a write that hangs",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "write",
            idempotent,
            handler: () => Effect.never
          })
          const pay = Tool.make({
            name: "pay",
            description: "pay",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "external",
            needsApproval: true,
            handler: () => Effect.succeed("paid")
          })
          const result = yield* TestClockDriver.drive(
            Run.run({ goal: "x", tools: [store, pay], concurrency: 2, time: { run: "1 minute", step: "2 seconds" } }),
            { upTo: "1 hour" }
          ).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls(["store", {}], ["pay", {}])])))
          // Alone, or beside another write, the same cut-off call ends step_timeout: an approval beside it changes nothing.
          assert.strictEqual(result.stopReason, idempotent ? "step_timeout" : "unknown_outcome")
          assert.strictEqual(result.elapsedMillis, 2_000)
        }).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
    )
  }

  it.effect("R3.8 R7 an idempotent call that answered an unknown outcome outranks a rejection beside it", () =>
    Effect.gen(function* () {
      const sync = Tool.make({
        name: "sync",
        description: "an idempotent write that cannot tell what it did",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "write",
        idempotent: true,
        handler: () =>
          Effect.fail(
            new Failure.UnknownOutcome({ source: "tool", category: "timeout", code: "lost", attempts: 1, hint: "lost" })
          )
      })
      const pay = Tool.make({
        name: "pay",
        description: "pay",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "external",
        needsApproval: true,
        handler: () => Effect.succeed("paid")
      })
      const handle = yield* Run.start({ goal: "x", tools: [sync, pay], concurrency: 2 }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls(["pay", {}, "c_pay"], ["sync", {}, "c_sync"])]))
      )
      // The unknown outcome stops the batch at once (R3.11): the payment's wait is withdrawn
      // before anyone decides, or, decided first, the rejection stands below it.
      const requested = yield* Stream.runHead(
        Stream.filter(handle.events, (e): e is Event.Of<"approval.requested"> => e._tag === "approval.requested")
      )
      if (Option.isSome(requested)) yield* Effect.ignore(handle.reject(requested.value.callId, "no"))
      const result = yield* handle.result
      assert.strictEqual(result.stopReason, "unknown_outcome")
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )
})
