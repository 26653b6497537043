/**
 * What a check reports: the `Violation` of an invariant, and the `Violate` callback
 * through which each check of a finished run records one.
 * Private to the testing kit; `Properties` is the public face.
 */

/**
 * An invariant a run broke: which one (named by its SPEC id) and how.
 *
 * @category models
 * @since 0.1.0
 */
export interface Violation {
  readonly invariant: string
  readonly detail: string
}

/**
 * Jittered delays make the clock's times fractional, and the same instant reached by two
 * sums may differ in its last bits: times closer than this are the same.
 */
export const epsilon = 1e-6

/**
 * How far a duration taken between two instants near `at` may be off: `epsilon`, plus the
 * rounding of a subtraction at that magnitude (a few units in the last place: 1e-3 ms for an
 * instant since the epoch).
 */
export const roundingAt = (at: number): number => epsilon + 4 * Number.EPSILON * Math.abs(at)

/** Records that the invariant named `invariant` (by its SPEC id) was broken, and how. */
export type Violate = (invariant: string, detail: string) => void
