/**
 * Deadlines on a `TestClock` that stands at fractional milliseconds (R4.2, R3.11), as
 * jittered backoffs leave it. effect measures timers in whole nanoseconds, so a timer set
 * for a deadline ends up to a nanosecond before or after it; the runtime counts that as
 * the deadline (`Deadline.hasPassed`). Each case runs from many fractional starts: the
 * run stops by the layer that cut it, at its time, whatever the start.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { TestClock } from "effect/testing"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Deadline from "../../src/time/Deadline.ts"
import { drive } from "../support/clock.ts"

const silent: ScriptedModel.Step = () => Effect.never

/** Fractional starts, the same every run: 0, then spread over a second with odd fractions. */
const starts = Array.from({ length: 40 }, (_, k) => (k === 0 ? 0 : 1000 * Math.sin(k) ** 2 + k * 0.000123456789))

/** `run()` from each start on the TestClock; what each run stopped by, and when. */
const fromEachStart = (run: () => Effect.Effect<RunResult.RunResult, never, never>) =>
  Effect.forEach(starts, (start) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const result = yield* drive(run(), "10 millis")
      return `${result.stopReason} after ${Math.round(result.elapsedMillis)} ms`
    })
  )

const model = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

describe("deadlines on a TestClock at fractional times", () => {
  it.effect("R4.2 a model call the step cuts off ends step_timeout, not recovery_exhausted, from any start", () =>
    Effect.gen(function* () {
      // Attempts of 400.3 ms and backoffs of 50.0001 ms: the step's timer fires a hair
      // before 1000 ms, with the schedule's last retry spent.
      const stops = yield* fromEachStart(() =>
        Run.run({
          goal: "g",
          tools: [],
          time: { run: 10_000, step: 1000, attempt: 400.3 },
          recovery: { backoff: Recovery.backoff({ jitter: false, base: "50.0001 millis" }) }
        }).pipe(Effect.provide(model([silent, silent, silent, silent])))
      )
      assert.deepStrictEqual(new Set(stops), new Set(["step_timeout after 1000 ms"]))
    })
  )

  it.effect("R4.2 retries without delay never run in a spent step, from any start", () =>
    Effect.gen(function* () {
      const stops = yield* fromEachStart(() =>
        Run.run({
          goal: "g",
          tools: [],
          time: { run: 10_000, step: 1000, attempt: 123.456789 },
          recovery: { backoff: Schedule.recurs(12), maxRecoveries: 20 }
        }).pipe(Effect.provide(model(Array.from({ length: 20 }, () => silent))))
      )
      assert.deepStrictEqual(new Set(stops), new Set(["step_timeout after 1000 ms"]))
    })
  )

  it.effect("R4.2 a step deadline that falls on the run deadline is the run's (on a tie the run names it)", () =>
    Effect.gen(function* () {
      // The first step takes exactly 500 ms (a model of `a` ms, a tool of 500 - a), so the
      // second step's deadline is the run's.
      for (const a of [323.831511, 267.105103, 399.933052]) {
        const slow = FaultyTools.slow({ name: "slow", millis: 500 - a })
        const stops = yield* fromEachStart(() =>
          Run.run({ goal: "g", tools: [slow.tool], time: { run: 1000, step: 500 } }).pipe(
            Effect.provide(model([() => Effect.as(Effect.sleep(a), ScriptedModel.toolCall("slow", {})), silent]))
          )
        )
        assert.deepStrictEqual(new Set(stops), new Set(["run_timeout after 1000 ms"]), `a model of ${a} ms`)
      }
    })
  )
})

describe("Deadline.bound and hasPassed", () => {
  it("R4.2 less than a nanosecond left is nothing left, and instants a nanosecond apart tie", () => {
    assert.isTrue(Deadline.hasPassed(1000, 999.9999999999998))
    assert.isFalse(Deadline.hasPassed(1000, 999.99999))
    const budget = { runAt: 1000, stepAt: 999.9999999999998 }
    assert.deepStrictEqual(Deadline.bound(budget, 999.9999999999995, { layer: "attempt", millis: 400 }), {
      millis: 0,
      layer: "run"
    })
    assert.deepStrictEqual(Deadline.bound({ runAt: 1000.0000000000002, stepAt: 1000 }, 500, { layer: "attempt" }), {
      millis: 500.0000000000002,
      layer: "run"
    })
    // Between the step and the wait's own limit, a tie is the wait's.
    assert.strictEqual(
      Deadline.bound({ runAt: 10_000, stepAt: 600.0000000000001 }, 200, { layer: "tool", millis: 400 }).layer,
      "tool"
    )
  })
})
