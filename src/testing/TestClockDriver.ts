/**
 * Runs an effect that sleeps (a run with deadlines, backoff, approval expiry) on the
 * `TestClock`, moving the clock for it, so that a test of a 60-second scenario takes
 * milliseconds and never waits on the wall clock.
 *
 * @since 0.2.0
 */
import { Duration, Effect, Fiber, Schema } from "effect"
import { TestClock } from "effect/testing"

/**
 * The effect was still running after the driver had moved the clock as far as it was allowed.
 *
 * @category errors
 * @since 0.2.0
 */
export class StillRunning extends Schema.TaggedError<StillRunning>()("StillRunning", {
  movedMillis: Schema.Finite,
  steps: Schema.Int
}) {
  override get message(): string {
    return `the effect was still running after the TestClock moved ${this.movedMillis} ms in ${this.steps} steps`
  }
}

/**
 * @category models
 * @since 0.2.0
 */
export interface Options {
  /** How far the clock moves at a time. Default 10 ms. */
  readonly step?: Duration.Input | undefined
  /** The most the clock moves in all. Default 10 minutes. */
  readonly upTo?: Duration.Input | undefined
}

/**
 * Runs `effect` in a child fiber under the `TestClock` and moves the clock `step` at a time
 * until the effect ends; then returns what it returned. If it is still running once the
 * clock has moved `upTo`, it is interrupted and the driver fails with {@link StillRunning}.
 * Run it inside a test that provides the `TestClock` (every `it.effect` of `@effect/vitest` does).
 *
 * @category combinators
 * @since 0.2.0
 */
export const drive = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: Options = {}
): Effect.Effect<A, E | StillRunning, R> =>
  Effect.gen(function* () {
    const step = Duration.fromInputUnsafe(options.step ?? "10 millis")
    const upTo = Duration.fromInputUnsafe(options.upTo ?? "10 minutes")
    const stepMillis = Duration.toMillis(step)
    if (!(stepMillis > 0) || !Number.isFinite(stepMillis)) {
      return yield* Effect.die(new RangeError(`TestClockDriver.drive: step must be a finite duration > 0`))
    }
    const steps = Math.ceil(Duration.toMillis(upTo) / stepMillis)
    const fiber = yield* Effect.forkChild(effect, { startImmediately: true })
    for (let i = 0; i < steps && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust(step)
    if (fiber.pollUnsafe() === undefined) {
      yield* Fiber.interrupt(fiber)
      return yield* new StillRunning({ movedMillis: steps * stepMillis, steps })
    }
    return yield* Fiber.join(fiber)
  })
