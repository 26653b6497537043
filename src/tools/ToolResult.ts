/**
 * The outcome of one tool call, keyed by the model's `tool_call_id`.
 *
 * - `succeeded`: the handler ran and its output matched the tool's output schema.
 * - `failed`: the call was malformed, its arguments did not match the schema
 *   (`correctable`: the model may fix them), or the handler failed.
 * - `blocked`: the permission policy refused the call (R3.6). Never retried, never
 *   spends the correction budget, never bypassed by recovery.
 * - `inconsistent`: the handler reported success but the tool's postcondition
 *   contradicted it (R6.4).
 *
 * Every status carries the `observation` text the model sees next turn.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as Failure from "../failure/Failure.ts"

/**
 * Stable codes of tool results that are not successes.
 *
 * @category models
 * @since 0.1.0
 */
export const ErrorCode = Schema.Literals([
  "unknown_tool",
  "invalid_arguments",
  "input_validation_failed",
  "permission_denied",
  "approval_rejected",
  "approval_expired",
  "tool_failed",
  "output_validation_failed",
  "inconsistent_result"
])

/**
 * @category models
 * @since 0.1.0
 */
export type ErrorCode = typeof ErrorCode.Type

/**
 * @category models
 * @since 0.1.0
 */
export const ToolError = Schema.Struct({
  code: ErrorCode,
  message: Schema.String,
  /** The model can fix this by sending corrected arguments (R3.5). */
  correctable: Schema.Boolean,
  /** For schema errors: the paths of the offending fields, e.g. `arguments.content`. */
  fieldPaths: Schema.optional(Schema.Array(Schema.String)),
  /** For handler failures: the safe summary of the failure algebra value. */
  failure: Schema.optional(Failure.Summary),
  /**
   * For a failure recovery would have retried but for the run: its retry would have ended
   * past the run deadline (`deadline`) or the step deadline (`step_deadline`), or the run's
   * recovery budget was spent (`run_budget`). The run's stop says so (R3.3).
   */
  notRetriedFor: Schema.optional(Schema.Literals(["deadline", "step_deadline", "run_budget"]))
})

/**
 * @category models
 * @since 0.1.0
 */
export type ToolError = typeof ToolError.Type

/**
 * @category models
 * @since 0.1.0
 */
export const ToolResult = Schema.Struct({
  callId: Schema.String,
  name: Schema.String,
  status: Schema.Literals(["succeeded", "failed", "blocked", "inconsistent"]),
  /** The encoded output of a success. */
  output: Schema.optional(Schema.Unknown),
  error: Schema.optional(ToolError),
  observation: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export type ToolResult = typeof ToolResult.Type

/**
 * The observation the model is sent for a call that did not succeed: what the timeline's
 * `tool.failed` or `tool.blocked` record recomputes it from.
 *
 * @category constructors
 * @since 0.3.0
 */
export const refusalObservation = (error: ToolError, blocked: boolean): string =>
  `${blocked ? "Blocked" : "Error"} (${error.code}): ${error.message}`

/**
 * @category constructors
 * @since 0.1.0
 */
export const failed = (
  callId: string,
  name: string,
  error: ToolError,
  status: "failed" | "blocked" | "inconsistent" = "failed"
): ToolResult => ({
  callId,
  name,
  status,
  error,
  observation: refusalObservation(error, status === "blocked")
})
