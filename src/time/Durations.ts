/**
 * Durations as options give them: what a `Duration.Input` from a caller, typed or not,
 * stands for in milliseconds. Each option then checks its own range (positive, finite,
 * at least 0) and says so in its own error.
 *
 * @since 0.3.0
 */
import { Duration, Option, Predicate } from "effect"

/**
 * The milliseconds `input` stands for, or `undefined` when it is no duration. A bare
 * `NaN`, which effect reads as 0 ms, is no duration.
 *
 * @category conversions
 * @since 0.3.0
 */
export const millisOf = (input: unknown): number | undefined => {
  if (input === undefined || (Predicate.isNumber(input) && Number.isNaN(input))) return undefined
  // `fromInput` gives `None` for a value that is no input, whatever a caller without types passed.
  const parsed = Duration.fromInput(input as Duration.Input)
  return Option.isSome(parsed) ? Duration.toMillis(parsed.value) : undefined
}
