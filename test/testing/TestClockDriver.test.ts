import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Tool from "../../src/tools/Tool.ts"

const slow = Tool.make({
  name: "slow",
  description: "takes a minute",
  input: Schema.Struct({}),
  output: Schema.String,
  handler: () => Effect.as(Effect.sleep("1 minute"), "done")
})

describe("TestClockDriver", () => {
  it.effect("R4.1 a run deadline of 5 s fires on the TestClock while a tool sleeps a minute", () =>
    Effect.gen(function* () {
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "wait", tools: [slow], limits: { runTimeout: "5 seconds" } })
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.isAtLeast(result.elapsedMillis, 5000)
      assert.isBelow(result.elapsedMillis, 5100)
    }).pipe(
      Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.toolCall("slow", {})]), NodeServices.layer))
    )
  )

  it.effect("returns what the effect returns once the clock has moved past its sleeps", () =>
    Effect.gen(function* () {
      const value = yield* TestClockDriver.drive(Effect.as(Effect.sleep("3 minutes"), 42), { step: "1 second" })
      assert.strictEqual(value, 42)
    })
  )

  it.effect("an effect still running after upTo is interrupted and the driver fails with StillRunning", () =>
    Effect.gen(function* () {
      let interrupted = false
      const error = yield* Effect.flip(
        TestClockDriver.drive(
          Effect.onInterrupt(Effect.never, () =>
            Effect.sync(() => {
              interrupted = true
            })
          ),
          { step: "1 second", upTo: "30 seconds" }
        )
      )
      assert.strictEqual(error._tag, "StillRunning")
      if (error._tag === "StillRunning") assert.strictEqual(error.movedMillis, 30_000)
      assert.isTrue(interrupted)
    })
  )

  it.effect("the effect's own failure comes through as it is", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        TestClockDriver.drive(Effect.andThen(Effect.sleep("2 seconds"), Effect.fail("boom")))
      )
      assert.strictEqual(error, "boom")
    })
  )
})
