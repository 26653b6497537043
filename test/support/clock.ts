import { type Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"

/**
 * Runs `effect` in the background on the TestClock, moving the clock `step` at a time
 * until it ends (at most `maxSteps` moves), and returns its result.
 */
export const drive = <A, E, R>(effect: Effect.Effect<A, E, R>, step: Duration.Input = "10 millis", maxSteps = 3000) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(effect)
    for (let i = 0; i < maxSteps && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust(step)
    return yield* Fiber.join(fiber)
  })
