/**
 * Waits in real time for supervised subprocesses (R5.2), private to `Subprocess`. A child
 * lives in real time, not on Effect's `Clock`: a `TestClock` that is never advanced must
 * not be able to stall the reclamation of a real process.
 */
import { Effect, type Exit, Option } from "effect"
import * as RealTime from "../../time/RealTime.ts"

/** How `effect` ended, if it did within `millis` of real time; it is interrupted otherwise. */
export const withinReal = <A, E>(
  effect: Effect.Effect<A, E>,
  millis: number
): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.raceFirst(Effect.map(Effect.exit(effect), Option.some), Effect.as(RealTime.sleep(millis), Option.none()))
