/**
 * Comparing instants on a `Clock` (R4.2): the one tolerance of every "has it passed" and
 * "how much is left" of the runtime.
 *
 * effect measures a sleep or a timeout in whole nanoseconds. On a clock that stands at a
 * fractional millisecond (a `TestClock` moved on by jittered backoffs), a timer set for
 * `at - now` ends up to half a nanosecond, plus a rounding of the floating point sum,
 * before or after `at`. Compared exactly, a deadline that has come reads as not yet
 * passed: a loop sleeps again for what rounds to no time at all and spins, or a retry
 * finds a sliver of its step left. Less than a nanosecond left is nothing left. The
 * live clock reads whole milliseconds, where this changes nothing.
 */

/** effect's resolution of time, one nanosecond: less than this left is nothing left. */
export const resolutionMillis = 1e-6

/** What is left from `now` until `at`: 0 once less than the resolution is. */
export const remaining = (at: number, now: number): number => {
  const left = at - now
  return left < resolutionMillis ? 0 : left
}

/** Whether `at` has come at `now`, to within the resolution. */
export const reached = (at: number, now: number): boolean => at - now < resolutionMillis
