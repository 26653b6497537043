/**
 * The shape of the counters, apart from their fold so that the fold's helpers can name it.
 * Re-exported from `Counters`.
 */

import type { HashMap } from "effect"
import type * as RunState from "../RunState.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Counters {
  /** The run's current state: the target of the last `state.changed`. */
  readonly state: RunState.State
  /** Model responses received. */
  readonly iterations: number
  /** Tool calls requested by the model, counted when the response arrives. */
  readonly toolCalls: number
  readonly startedAt: number
  readonly lastEventAt: number
  /** `lastEventAt - startedAt`, by the run's `Clock`. */
  readonly elapsedMillis: number
  /**
   * Whether the model's latest word is a final answer: a response with text and no tool
   * calls, not cut off. A later response, a failed model call, or the answer sent back for
   * correction make it `false`.
   */
  readonly finalAnswerReceived: boolean
  /** The highest number of times any one tool-call signature was requested. */
  readonly repeatedToolCallCount: number
  /** The highest number of times any one failure signature (tool, code, message) occurred. */
  readonly repeatedFailureCount: number
  /** The most any failure signature went past its tool's `maxRetries` (0 when none did). */
  readonly repeatedFailureOverLimit: number
  /**
   * The failure that went furthest past its tool's `maxRetries` (the one
   * `repeatedFailureOverLimit` counts): its tool, code, the times it occurred and the
   * limit. `undefined` while none did.
   *
   * @since 0.3.0
   */
  readonly overLimitFailure:
    | { readonly name: string; readonly code: string; readonly times: number; readonly maxRetries: number }
    | undefined
  /** Failed and blocked tool results. */
  readonly toolErrors: number
  readonly emptyOutputs: number
  readonly recoveryAttempts: number
  readonly toolCorrectionAttempts: number
  readonly recoveryExhausted: boolean
  /** Tokens in, the cached ones included; `cachedInputTokens` of them read from a prompt cache. */
  readonly inputTokens: number
  /** Tokens out, the reasoning ones included (`reasoningTokens`). */
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
  readonly costUsd: number
  /** Successful calls whose tool, observation and world state had all been seen before. */
  readonly unchangedObservations: number
  /**
   * What `unchangedObservations` was when the model was last warned of a loop (its last
   * `loop_warning` reminder); 0 when it was not warned.
   */
  readonly unchangedWhenWarned: number
  /** Successful `write` or `external` calls: the "relevant state" version of R2.3. */
  readonly stateVersion: number
  /** Failures in a row sharing one error code, and that code. */
  readonly sameClassStreak: number
  readonly sameClassCode: string
  /**
   * What `sameClassStreak` was when the model was last reminded of it (its last
   * `same_class_errors` reminder); 0 when it was not, since the streak began.
   */
  readonly sameClassWhenWarned: number
  /**
   * The calls of the last model response (their ids as the run gave them, and their
   * arguments): a result that echoes its call's arguments is keyed without them.
   */
  readonly lastCalls: {
    readonly callIds: ReadonlyArray<string>
    readonly toolCalls: ReadonlyArray<{ readonly arguments: unknown }>
  }
  readonly reminders: HashMap.HashMap<string, number>
  readonly callSignatures: HashMap.HashMap<string, number>
  readonly failureSignatures: HashMap.HashMap<string, number>
  /**
   * The failure signatures of the calls of the last model response: one that fails the same
   * way several times in one response is counted once in `failureSignatures`, since the
   * model saw none of them before it asked (R2.3).
   */
  readonly failuresOfTurn: ReadonlyArray<string>
  readonly observationKeys: HashMap.HashMap<string, number>
}
