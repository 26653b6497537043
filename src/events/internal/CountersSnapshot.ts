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
export interface Snapshot {
  readonly iterations: number
  readonly toolCalls: number
  readonly elapsedMillis: number
  readonly finalAnswerReceived: boolean
  readonly repeatedToolCallCount: number
  readonly repeatedFailureCount: number
  readonly toolErrors: number
  readonly emptyOutputs: number
  readonly recoveryAttempts: number
  readonly toolCorrectionAttempts: number
  readonly recoveryExhausted: boolean
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
  readonly costUsd: number
  readonly unchangedObservations: number
}

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
