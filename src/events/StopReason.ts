/**
 * Why a run stopped: a finite enumeration, stable across versions (R2.5).
 *
 * Programs, dashboards and alerts branch on these values. Display text may change
 * between versions; the values and what they mean never do, and no classification
 * ever depends on matching natural-language text.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * @category models
 * @since 0.1.0
 */
export const StopReason = Schema.Literals([
  "goal_reached",
  "validation_failed",
  "run_timeout",
  "step_timeout",
  "max_tool_calls",
  "max_iterations",
  "repeated_tool_call",
  "repeated_tool_failure",
  "recovery_exhausted",
  "max_tool_errors",
  "empty_output",
  "loop_detected",
  "budget_exhausted",
  "tool_error",
  "model_error",
  "output_truncated",
  "content_filtered",
  "inconsistent_result",
  "unknown_outcome",
  "approval_rejected",
  "approval_expired",
  "cancelled",
  "internal_error"
])

/**
 * @category models
 * @since 0.1.0
 */
export type StopReason = typeof StopReason.Type

/**
 * Every stop reason, in the order of the README's table.
 *
 * @category models
 * @since 0.1.0
 */
export const all: ReadonlyArray<StopReason> = Object.freeze([...StopReason.literals])

/**
 * Human-readable text for each reason. For display only: never parse it.
 *
 * @category models
 * @since 0.1.0
 */
export const describe: { readonly [K in StopReason]: string } = Object.freeze({
  goal_reached: "The model gave a final answer and every validation check passed.",
  validation_failed: "The model gave a final answer but a validation check failed.",
  run_timeout: "The run deadline was reached, or a wait (a retry's delay) would have passed it.",
  step_timeout: "A step (one model call and its tool batch, with their retries) ran out of its time.",
  max_tool_calls: "A tool batch would have exceeded the run's tool-call limit; none of it ran.",
  max_iterations: "The run used all its model responses.",
  repeated_tool_call: "The same tool call (name and canonical arguments) was requested too many times.",
  repeated_tool_failure: "The same tool failure (tool, code and message) repeated past the tool's retry limit.",
  recovery_exhausted:
    "The run's recovery or argument-correction budget was spent, or the failure's owner (the provider's client) had retried it already.",
  max_tool_errors: "The run's tool error budget was spent.",
  empty_output: "The model returned empty responses past their budget.",
  loop_detected: "The same action kept producing an unchanged observation.",
  budget_exhausted: "The run's token or cost budget was spent.",
  tool_error: "A tool failed and it does not opt in to recovering its errors as observations.",
  model_error: "The model call failed permanently.",
  output_truncated:
    "The model's answer was cut off by its output token limit, and still was after the corrections the run allows.",
  content_filtered: "The provider's content filter withheld the model's answer.",
  inconsistent_result: "A tool reported success but its postcondition check contradicted it.",
  unknown_outcome: "A side effect may or may not have happened and could not be reconciled.",
  approval_rejected: "A person rejected an action that needed approval.",
  approval_expired: "An action that needed approval was not decided in time.",
  cancelled: "The run was cancelled.",
  internal_error: "A defect in the runtime or in user code outside a tool handler."
})
