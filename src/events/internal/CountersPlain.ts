/**
 * The counters as plain data: `plain`, every field an own property, for code that
 * copies or serializes them, and the `Snapshot` of the run result and JSON.
 * Re-exported from `Counters`.
 */
import type { Counters } from "./CountersShape.ts"

/**
 * The counters as a plain object, every field an own property (as `step` and `fold`
 * make them): for code that copies or serializes the counters it is given. Counters
 * that already are one are returned as they are.
 *
 * @category combinators
 * @since 0.1.0
 */
export const plain = (counters: Counters): Counters =>
  Object.getPrototypeOf(counters) === Object.prototype
    ? counters
    : {
        state: counters.state,
        iterations: counters.iterations,
        toolCalls: counters.toolCalls,
        startedAt: counters.startedAt,
        lastEventAt: counters.lastEventAt,
        elapsedMillis: counters.elapsedMillis,
        finalAnswerReceived: counters.finalAnswerReceived,
        repeatedToolCallCount: counters.repeatedToolCallCount,
        repeatedFailureCount: counters.repeatedFailureCount,
        repeatedFailureOverLimit: counters.repeatedFailureOverLimit,
        toolErrors: counters.toolErrors,
        emptyOutputs: counters.emptyOutputs,
        recoveryAttempts: counters.recoveryAttempts,
        toolCorrectionAttempts: counters.toolCorrectionAttempts,
        recoveryExhausted: counters.recoveryExhausted,
        inputTokens: counters.inputTokens,
        outputTokens: counters.outputTokens,
        cachedInputTokens: counters.cachedInputTokens,
        reasoningTokens: counters.reasoningTokens,
        costUsd: counters.costUsd,
        unchangedObservations: counters.unchangedObservations,
        stateVersion: counters.stateVersion,
        sameClassStreak: counters.sameClassStreak,
        sameClassCode: counters.sameClassCode,
        reminders: counters.reminders,
        callSignatures: counters.callSignatures,
        failureSignatures: counters.failureSignatures,
        observationKeys: counters.observationKeys
      }

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
