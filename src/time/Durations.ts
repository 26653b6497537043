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

/**
 * Whether `input` is a positive amount of time that effect counts as none: it counts time in
 * whole nanoseconds, and reads a positive amount under half of one (`1e-9` milliseconds) as
 * 0. An option that refuses it says so, not that the amount is not positive (R12). A
 * `Duration` effect made of such an amount (`Duration.millis(4e-7)`) no longer holds it, but
 * shows its rounding: it is 0 nanoseconds, where no time at all is 0 milliseconds (so is
 * one made of a negative amount that small: its sign is lost with it).
 *
 * @category predicates
 * @since 0.3.0
 */
export const belowResolution = (input: unknown): boolean => {
  if (millisOf(input) !== 0) return false
  if (Duration.isDuration(input)) return input.value._tag === "Nanos" && input.value.nanos === 0n
  const amount = Predicate.isNumber(input) ? input : Predicate.isString(input) ? Number.parseFloat(input) : 0
  return amount > 0
}

/**
 * How an option that must be positive says what it expected of a positive amount effect
 * counts as none (see {@link belowResolution}).
 *
 * @category constants
 * @since 0.3.0
 */
export const atLeastOneNanosecond = "at least 1 nanosecond (effect counts time in whole nanoseconds)"
