/**
 * The defaults and the validation of the options of a supervised subprocess (R5.2),
 * private to `Subprocess`, which re-exports the defaults: a grace period and an output
 * limit that cannot work are refused before anything is spawned.
 */

/**
 * @category constants
 * @since 0.1.0
 */
export const defaultGraceMillis = 2000

/**
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxOutputBytes = 1024 * 1024

/**
 * The longest grace a subprocess may be given: a day, far within what a timer can wait
 * (a longer `setTimeout` fires at once, which would take the grace away).
 */
const maxGraceMillis = 24 * 60 * 60 * 1000

/** Why the options cannot work, or `undefined` when they can. */
export const validateOptions = (options: {
  readonly graceMillis?: number | undefined
  readonly maxOutputBytes?: number | undefined
}): string | undefined => {
  const grace = options.graceMillis ?? defaultGraceMillis
  if (!(grace >= 0 && grace <= maxGraceMillis)) {
    return `graceMillis must be a number from 0 to ${maxGraceMillis} (a day), got ${grace}`
  }
  const max = options.maxOutputBytes ?? defaultMaxOutputBytes
  if (!Number.isInteger(max) || max < 1) return `maxOutputBytes must be an integer >= 1, got ${max}`
  return undefined
}
