/**
 * The `Snapshot` of the counters: the run result's and JSON's plain view of them.
 * Re-exported from `Counters`.
 */
import type { Counters } from "./CountersShape.ts"

/**
 * The counters as plain data, for the run result and for JSON.
 *
 * @category models
 * @since 0.1.0
 */
export type Snapshot = Pick<
  Counters,
  | "iterations"
  | "toolCalls"
  | "elapsedMillis"
  | "finalAnswerReceived"
  | "repeatedToolCallCount"
  | "repeatedFailureCount"
  | "toolErrors"
  | "emptyOutputs"
  | "recoveryAttempts"
  | "toolCorrectionAttempts"
  | "recoveryExhausted"
  | "inputTokens"
  | "outputTokens"
  | "cachedInputTokens"
  | "reasoningTokens"
  | "costUsd"
  | "unchangedObservations"
>

/**
 * @category combinators
 * @since 0.1.0
 */
export const snapshot = (c: Counters): Snapshot => ({
  iterations: c.iterations,
  toolCalls: c.toolCalls,
  elapsedMillis: c.elapsedMillis,
  finalAnswerReceived: c.finalAnswerReceived,
  repeatedToolCallCount: c.repeatedToolCallCount,
  repeatedFailureCount: c.repeatedFailureCount,
  toolErrors: c.toolErrors,
  emptyOutputs: c.emptyOutputs,
  recoveryAttempts: c.recoveryAttempts,
  toolCorrectionAttempts: c.toolCorrectionAttempts,
  recoveryExhausted: c.recoveryExhausted,
  inputTokens: c.inputTokens,
  outputTokens: c.outputTokens,
  cachedInputTokens: c.cachedInputTokens,
  reasoningTokens: c.reasoningTokens,
  costUsd: c.costUsd,
  unchangedObservations: c.unchangedObservations
})
