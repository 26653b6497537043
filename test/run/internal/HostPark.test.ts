/**
 * Whether a drive's interruption delivers a cancel (R5.1, R12): the host's check, asked as the
 * drive is interrupted, where nothing can be interrupted. A check that fails, dies or gives no
 * answer in 2 s of real time says no; one that takes the Clock's time answers, under a
 * test-clock driver too (review 163: the driver held its clock still for the bound's timer).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as HostPark from "../../../src/run/internal/HostPark.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"

describe("HostPark.isCancel (R5.1, R12)", () => {
  it.effect(
    "R5.1 a check that takes a little of the Clock's time answers, under a test-clock driver (review 163)",
    () =>
      Effect.gen(function* () {
        const answered = yield* TestClockDriver.drive(HostPark.isCancel(Effect.as(Effect.sleep("50 millis"), true)))
        assert.isTrue(answered)
      })
  )

  it.live("R12 a check that fails, dies or never answers says no, within 2 s of real time (review 161)", () =>
    Effect.gen(function* () {
      const started = performance.now()
      for (const check of [Effect.fail("down"), Effect.die(new Error("down")), Effect.never] as const) {
        assert.isFalse(yield* HostPark.isCancel(check as Effect.Effect<boolean>))
      }
      assert.isBelow(performance.now() - started, 4_000)
      assert.isTrue(yield* HostPark.isCancel(Effect.succeed(true)))
      assert.isFalse(yield* HostPark.isCancel(undefined))
    })
  )
})
