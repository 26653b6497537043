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

/** Records that the invariant named `invariant` (by its SPEC id) was broken, and how. */
export type Violate = (invariant: string, detail: string) => void
