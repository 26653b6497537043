/**
 * What every run ends with (R6.5): its status, the stable stop reason, the validation
 * checks and the evidence behind them, the counters, the elapsed time and the whole
 * timeline. A partial run (R6.3) also lists what was completed, what was not and why,
 * the side effects already made, the next safe step and a checkpoint.
 *
 * @since 0.1.0
 */
import { Data, Schema } from "effect"
import * as Event from "../events/Event.ts"
import * as RunState from "../events/RunState.ts"
import * as StopReason from "../events/StopReason.ts"
import * as Explain from "../explain/Explain.ts"
import * as Failure from "../failure/Failure.ts"
import * as Tool from "../tools/Tool.ts"
import * as Validation from "../validation/Validation.ts"

/**
 * @category models
 * @since 0.1.0
 */
export const CountersSnapshot = Schema.Struct({
  iterations: Schema.Int,
  toolCalls: Schema.Int,
  elapsedMillis: Schema.Finite,
  finalAnswerReceived: Schema.Boolean,
  repeatedToolCallCount: Schema.Int,
  repeatedFailureCount: Schema.Int,
  toolErrors: Schema.Int,
  emptyOutputs: Schema.Int,
  recoveryAttempts: Schema.Int,
  toolCorrectionAttempts: Schema.Int,
  recoveryExhausted: Schema.Boolean,
  inputTokens: Schema.Finite,
  outputTokens: Schema.Finite,
  cachedInputTokens: Schema.Finite,
  reasoningTokens: Schema.Finite,
  costUsd: Schema.Finite,
  unchangedObservations: Schema.Int
})

/**
 * A side effect the run made: a successful call of a `write` or `external` tool.
 *
 * @category models
 * @since 0.1.0
 */
export const SideEffectRecord = Schema.Struct({
  callId: Schema.String,
  name: Schema.String,
  sideEffect: Tool.SideEffect,
  seq: Schema.Int
})

/**
 * An action that may or may not have taken effect: reconcile it by its idempotency key,
 * or reclaim it, before acting on the same thing again (R3.8, R5.2).
 *
 * @category models
 * @since 0.1.0
 */
export const PendingAction = Schema.Struct({
  callId: Schema.String,
  name: Schema.String,
  idempotencyKey: Schema.String,
  detail: Schema.String,
  seq: Schema.Int
})

/**
 * A switch to a fallback model (R3.9): at which iteration, from which model to which,
 * and the failure that caused it.
 *
 * @category models
 * @since 0.1.0
 */
export const ModelSwitch = Schema.Struct({
  iteration: Schema.Int,
  from: Schema.String,
  to: Schema.String,
  failure: Failure.Summary,
  seq: Schema.Int
})

/**
 * @category models
 * @since 0.1.0
 */
export const RunResult = Schema.Struct({
  runId: Schema.String,
  status: RunState.Status,
  stopReason: StopReason.StopReason,
  /** The policy that stopped the loop (`runtime` for hard stops, `validation` when validation decided). */
  policy: Schema.String,
  detail: Schema.String,
  finalAnswer: Schema.optional(Schema.String),
  /** The final answer decoded with the run's output schema (`Run.Options.output`), when the run completed. */
  output: Schema.optional(Schema.Unknown),
  checks: Schema.Array(Event.Check),
  evidence: Schema.Array(Validation.Evidence),
  completed: Schema.Array(Validation.Item),
  unfinished: Schema.Array(Validation.Item),
  sideEffects: Schema.Array(SideEffectRecord),
  /** Actions of unknown outcome, still to reconcile or reclaim. */
  pendingActions: Schema.Array(PendingAction),
  /** The model in use when the run ended: the one it started with unless it fell back (R3.9). */
  model: Schema.String,
  /** Every switch to a fallback model, in order. */
  fallbacks: Schema.Array(ModelSwitch),
  /** The first unfinished required step, when there is one: where a resumed run should start. */
  nextStep: Schema.optional(Schema.String),
  /** The sequence number of the last event: the point a resume would replay up to (R9). */
  checkpoint: Schema.Int,
  /**
   * Why the run's journal does not hold this ending, when it does not: its last commit did
   * not get through (a store out of reach past the stop grace, or one that refused it). The
   * journal holds the run up to its last commit; a later `Run.resume` or `Run.recover`
   * goes on from there, and may ask the model again. Absent for a run without a journal.
   */
  unrecorded: Schema.optional(Schema.String),
  counters: CountersSnapshot,
  elapsedMillis: Schema.Finite,
  timeline: Schema.Array(Event.Event)
})

/**
 * @category models
 * @since 0.1.0
 */
export type RunResult = typeof RunResult.Type

/**
 * The result of a run with a typed output (`Run.Options.output`): `output` is the decoded
 * final answer when the run completed.
 *
 * @category models
 * @since 0.3.0
 */
export type Typed<O> = [O] extends [never] ? RunResult : Omit<RunResult, "output"> & { readonly output?: O | undefined }

/**
 * Whether a run ended `completed`: validation agreed with the final answer (R6).
 *
 * @category guards
 * @since 0.2.0
 */
export const isCompleted = <A extends RunResult>(result: A): result is A & { readonly status: "completed" } =>
  result.status === "completed"

/**
 * Why the run stopped, from its timeline (`Explain.explain(result.timeline)`), and with the
 * ending the result holds when its log does not (a run another process took over before its
 * last commit); `Explain.format` gives it as text.
 *
 * @category getters
 * @since 0.3.0
 */
export const explain = (
  result: Pick<RunResult, "timeline"> & Partial<Pick<RunResult, "status" | "stopReason">>
): Explain.Explanation =>
  Explain.explain(
    result.timeline,
    result.status === undefined || result.stopReason === undefined
      ? undefined
      : { status: result.status, stopReason: result.stopReason }
  )

/**
 * A run that ended in any status but `completed`, as a typed error carrying its whole
 * result (see `Run.runOrFail`), for `Effect.catchTag("RunStopped", ...)`.
 *
 * @category errors
 * @since 0.2.0
 */
export class RunStopped extends Data.TaggedError("RunStopped")<{ readonly result: RunResult }> {
  // A plain error, not a Schema class: building it must never check (and so never reject,
  // nor spend time on) the result, which is handed over as the run produced it.
  override get message(): string {
    const { runId, status, stopReason, detail } = this.result
    return `run ${runId} ended ${status} (${stopReason}): ${detail}`
  }
}
