/**
 * The events of recovery episodes: retries, corrections and their ends. Re-exported from `Event`.
 */
import { Schema } from "effect"
import * as Recovery from "../../recovery/Recovery.ts"
import { base } from "./EventBase.ts"

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryKind = Recovery.Kind

/**
 * Whether a recovery asks the model to correct itself (see `Recovery.isCorrection`).
 *
 * @category predicates
 * @since 0.1.0
 */
export const isCorrection = Recovery.isCorrection

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryStarted = Schema.TaggedStruct("recovery.started", {
  ...base,
  /** The tool call being retried or corrected; absent for a model call. */
  callId: Schema.optional(Schema.String),
  kind: RecoveryKind,
  attempt: Schema.Int,
  delayMillis: Schema.Finite,
  cause: Schema.String,
  /**
   * Set when the call's circuit refused it, `open` or `half_open` (another call was its
   * trial): it never ran, and this wait for the circuit spends no retry (R3.9). Absent from
   * logs written before 0.3.0.
   */
  circuit: Schema.optional(Schema.Literals(["open", "half_open"]))
})

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryCompleted = Schema.TaggedStruct("recovery.completed", {
  ...base,
  /** The tool call being retried or corrected; absent for a model call. */
  callId: Schema.optional(Schema.String),
  kind: RecoveryKind,
  attempt: Schema.Int
})

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryFailed = Schema.TaggedStruct("recovery.failed", {
  ...base,
  /** The tool call being retried or corrected; absent for a model call. */
  callId: Schema.optional(Schema.String),
  kind: RecoveryKind,
  attempts: Schema.Int,
  cause: Schema.String,
  /** `run`: a budget the whole run shares is spent (the run stops); `call`: only this call gave up. */
  scope: Schema.Literals(["call", "run"])
})
