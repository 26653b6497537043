/**
 * A wait of the run's ending bounded in real time, as the stop grace is: a `TestClock`
 * nobody moves cannot stall it (R12). Private to the lifecycle.
 */
import { Effect, Fiber } from "effect"
import * as RealTime from "../../../time/RealTime.ts"

/**
 * Runs `effect` for `millis` of real time at most (told to the `RealTime.Waits` in context).
 * Run apart and awaited, not raced: a race waits for its loser to stop, and an effect that
 * cannot be interrupted would hold the result for good. Past the wait it is told to stop,
 * and left. Started at once: one that ends at once is done before the run goes on.
 */
export const withinRealTime = (effect: Effect.Effect<void>, millis: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkDetach(effect, { startImmediately: true })
    yield* Effect.raceFirst(Fiber.await(fiber), RealTime.sleep(millis))
    fiber.interruptUnsafe()
  })
