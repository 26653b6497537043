/**
 * The defaults of the options a run resolves, shared by the resolution and the record
 * `run.started` makes of it. Private to `resolve/`.
 */

/** The default run deadline, `"10 minutes"`. */
export const defaultTimeoutMillis = 10 * 60 * 1000

/** The default `stopGrace`: past the default `Subprocess` grace (2 s) and its reaping. */
export const defaultStopGraceMillis = 5_000

/** The default correction budget (R3.5). */
export const defaultCorrectionBudget = 3
