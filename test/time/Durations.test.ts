import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Durations from "../../src/time/Durations.ts"

describe("Durations", () => {
  it("R4 R12 a Duration effect made of a positive amount under half a nanosecond is below its resolution, as the number is", () => {
    // effect keeps `Duration.millis(4e-7)` as 0 nanoseconds: the amount is gone, its rounding is not.
    for (const input of [4e-7, "0.4 nanos", Duration.millis(4e-7), Duration.seconds(4e-10)])
      assert.isTrue(Durations.belowResolution(input), String(input))
    // None at all is not below the resolution: it is not positive.
    for (const input of [0, "0 nanos", Duration.zero, Duration.nanos(0n), Duration.millis(0), Duration.millis(6e-7)])
      assert.isFalse(Durations.belowResolution(input), String(input))
  })

  it.effect(
    "R4 R12 a run's time option given as such a Duration is refused as too fine to count, not as not positive",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "g", tools: [], time: { attempt: Duration.millis(4e-7) } }).pipe(
          Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.finalAnswer("x")]), NodeServices.layer))
        )
        assert.strictEqual(result.stopReason, "internal_error")
        // Before: "Expected a positive, finite duration (...), got an object".
        assert.include(
          result.detail,
          "time.attempt: Expected a duration of at least 1 nanosecond (effect counts time in whole nanoseconds)"
        )
      })
  )
})
