/**
 * How the loop decides that a run stops, private to the loop: the hard stops a tool result
 * forces, corrections, and the stop a model call that gave up ends in (the policies'
 * checkpoints are `Checkpoint`). Every decision is recorded (`termination.decided`) where
 * it is taken.
 */

import { Effect, Predicate } from "effect"
import type * as StopReason from "../../../events/StopReason.ts"
import * as Explain from "../../../explain/Explain.ts"
import type * as Failure from "../../../failure/Failure.ts"
import * as Recovery from "../../../recovery/Recovery.ts"
import * as Deadline from "../../../time/Deadline.ts"
import type * as ToolResult from "../../../tools/ToolResult.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type * as ApprovalWait from "../../pipeline/ApprovalWait.ts"
import * as ToolExecutor from "../../pipeline/ToolExecutor.ts"
import { decide, remind } from "./Checkpoint.ts"
import type { Config, Outcome } from "./LoopConfig.ts"

/**
 * Asks the model to correct itself (its arguments, an answer cut off, an output that does
 * not decode), spending one attempt of the run's correction budget (R3.5): `true` when the
 * correction is asked; `false` once the budget is spent, the give-up recorded unless
 * `recordSpent` is `false` (one record for several calls of a batch). The calls of one
 * batch share their `attempt`: the model corrects them all in one turn.
 */
export const correct = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  correction: {
    readonly kind: "tool_argument_correction" | "output_truncation" | "output_correction"
    readonly cause: string
    readonly scope: "call" | "run"
    readonly callId?: string | undefined
    readonly reminder?: { readonly kind: string; readonly text: string } | undefined
    readonly recordSpent?: boolean | undefined
    readonly attempt?: number | undefined
  }
) {
  const { kind, cause } = correction
  const call = correction.callId === undefined ? {} : { callId: correction.callId }
  const attempt = correction.attempt ?? ctx.log.counters.toolCorrectionAttempts + 1
  const made = attempt - 1
  if (made >= config.correctionBudget) {
    if (correction.recordSpent !== false) {
      RunContext.emit(ctx, ({ runId, seq, at }) => ({
        _tag: "recovery.failed",
        kind,
        ...call,
        attempts: made,
        scope: correction.scope,
        cause,
        runId,
        seq,
        at
      }))
    }
    return false
  }
  yield* RunContext.transition(ctx, "recovering")
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "recovery.started",
    kind,
    ...call,
    attempt,
    delayMillis: 0,
    cause,
    runId,
    seq,
    at
  }))
  if (correction.reminder !== undefined) remind(ctx, correction.reminder.kind, correction.reminder.text)
  return true
})

/**
 * An answer the output token limit cut off (R11): the model is asked to finish it,
 * shorter, as a correction within the run's correction budget; once the budget is spent,
 * the run stops `output_truncated`.
 */
export const askToFinish = Effect.fnUntraced(function* <R>(ctx: RunContext.RunContext, config: Config<R>) {
  const asked = yield* correct(ctx, config, {
    kind: "output_truncation",
    cause: "output_truncated",
    scope: "run",
    reminder: {
      kind: "output_truncated",
      text: "Your answer was cut off by the output token limit: finish it, shorter."
    }
  })
  if (asked) return undefined
  return decide(
    ctx,
    "runtime",
    "output_truncated",
    `the model's answer was cut off by its output token limit (finish_reason: length), and the correction budget of ${config.correctionBudget} is spent`
  )
})

/** The `recovery.completed` of the loop's own episode of `kind`, when one is open (`attempt`, its last). */
export const episodeEnded = (
  ctx: RunContext.RunContext,
  kind: "output_truncation" | "output_correction",
  attempt: number | undefined
): void => {
  if (attempt === undefined) return
  RunContext.emit(ctx, ({ runId, seq, at }) => ({ _tag: "recovery.completed", kind, attempt, runId, seq, at }))
}

/**
 * A final answer that does not decode with the run's output schema: the model is told
 * why and asked again, as a correction within the run's correction budget. Once the
 * budget is spent the answer stands as the candidate, and validation refutes it.
 */
export const correctOutput = <R>(ctx: RunContext.RunContext, config: Config<R>, why: string) =>
  correct(ctx, config, {
    kind: "output_correction",
    cause: "output_validation_failed",
    scope: "call",
    reminder: { kind: "output_invalid", text: `${why}. Give your final answer again, as JSON that matches the schema.` }
  })

/**
 * A call of a response the output token limit cut off whose arguments do not parse: the
 * cut is named, so the model knows to send the call again, shorter (still a correctable
 * `invalid_arguments` result, R3.5).
 */
export const cutOffArguments = (prepared: ToolExecutor.Prepared): ToolExecutor.Prepared =>
  prepared.parsed._tag === "Invalid"
    ? {
        ...prepared,
        parsed: {
          _tag: "Invalid",
          reason: prepared.parsed.reason,
          message: `the response was cut off by the output token limit inside these arguments (send the call again, shorter): ${prepared.parsed.message}`
        }
      }
    : prepared

/** The stop of a model call that failed for good: its own reason for a filtered answer (R11). */
const permanentStop = (ctx: RunContext.RunContext, failure: Failure.Failure, detail: string): Outcome =>
  failure.category === "content_filter"
    ? decide(ctx, "runtime", "content_filtered", detail)
    : decide(ctx, "runtime", "model_error", detail)

/** Maps a model call recovery gave up on to the run's stop (R3.3). */
const giveUp = (ctx: RunContext.RunContext, exhausted: Recovery.Exhausted): Outcome => {
  const { failure, why, detail } = exhausted
  const what = `the model call failed with ${failure.code} (${failure.hint})`
  switch (why) {
    case "deadline":
      return decide(ctx, "run_timeout", "run_timeout", `${what}; ${detail}`)
    case "step_deadline":
      return decide(ctx, "step_timeout", "step_timeout", `${what}; ${detail}`)
    case "not_retryable":
    case "not_allowed":
    case "circuit_open":
      return permanentStop(ctx, failure, `${what}; ${detail}`)
    case "owner_retried":
    case "schedule_exhausted":
    case "run_budget":
    // Not reached by a model call: the policy that halted it decided the run's stop (`Checkpoint.afterPaidFailure`).
    case "halted":
      return decide(ctx, "recovery_exhausted", "recovery_exhausted", `${what}; ${detail}`)
  }
}

/** Hard stops a tool result forces, whatever the policies say (R3.7, R3.8, R6.4). */
/** Another process owns the run now (its journal fenced this one off): it stops, writing nothing more. */
export const fencedOff = (ctx: RunContext.RunContext): Outcome | undefined =>
  ctx.fenced === undefined ? undefined : decide(ctx, "runtime", "internal_error", ctx.fenced)

/** The stop one call of a batch calls for, ranked by how grave it is (higher first). */
interface BatchStop {
  readonly rank: number
  readonly policy: string
  readonly reason: StopReason.StopReason
  readonly detail: string
}

const stopOfCall = (result: ToolResult.ToolResult, recovers: boolean): BatchStop | undefined => {
  const named = `${result.name} (${result.callId})`
  if (result.status === "inconsistent") {
    // A postcondition the step deadline cut off contradicted nothing: the step's stop (R4.2).
    const cut = result.error?.failure?.timeout?.layer === "step"
    const detail = `${named}: ${result.error?.message}`
    return cut
      ? { rank: 4, policy: "step_timeout", reason: "step_timeout", detail }
      : { rank: 3, policy: "runtime", reason: "inconsistent_result", detail }
  }
  const failure = result.error?.failure
  // A tool that hands its errors to the model lets it go on (with a fresh step). So does a
  // business conflict of the tool's own, whatever the tool: the model re-reads the state and
  // decides (R3.10). Not the journal's (another process owns the run): that one stops it.
  if (failure === undefined || recovers || (failure.category === "conflict" && failure.source === "tool")) {
    return undefined
  }
  // A call the step deadline cut off ends the step.
  if (failure.timeout?.layer === "step") {
    return { rank: 4, policy: "step_timeout", reason: "step_timeout", detail: `${named}: ${failure.hint}` }
  }
  // A retry the run's own limits refused: the stop is theirs, as for a model call (R3.3).
  const what = `${named} failed with ${failure.code} (${failure.hint})`
  switch (result.error?.notRetriedFor) {
    case "deadline":
      return {
        rank: 5,
        policy: "run_timeout",
        reason: "run_timeout",
        detail: `${what}; its retry would have ended past the run deadline`
      }
    case "step_deadline":
      return {
        rank: 4,
        policy: "step_timeout",
        reason: "step_timeout",
        detail: `${what}; its retry would have ended past the step deadline`
      }
    case "run_budget":
      return {
        rank: 2,
        policy: "recovery_exhausted",
        reason: "recovery_exhausted",
        detail: `${what}; the run's recovery budget is spent`
      }
    case undefined:
      return {
        rank: 1,
        policy: "runtime",
        reason: "tool_error",
        detail: `${named} failed with ${failure.code}: ${failure.hint}; the tool does not opt in to recovering its errors`
      }
  }
}

/**
 * A call's result that stops the run whatever the rest of its batch does: an unknown
 * outcome, or a stop of the call's own (a tool error the tool does not recover, a
 * contradicted tool, a retry the run's limits refused). It stops the batch at once, as a
 * rejected approval does (R3.11: a run that has failed takes no new action): the calls
 * not begun never begin, waits for a person are withdrawn, and the rest is interrupted.
 */
export class CallStop {
  readonly _tag = "CallStop"
  readonly result: ToolResult.ToolResult
  constructor(result: ToolResult.ToolResult) {
    this.result = result
  }
}

export const isCallStop = (u: unknown): u is CallStop => Predicate.isTagged(u, "CallStop")

/** The {@link CallStop} `result` makes, or `undefined` when the batch goes on. */
export const callStop = <R>(config: Config<R>, result: ToolResult.ToolResult): CallStop | undefined => {
  if (result.error?.failure?.classification === "unknown") return new CallStop(result)
  const recovers = config.registry.tools.get(result.name)?.metadata.recoverErrors === true
  return stopOfCall(result, recovers) === undefined ? undefined : new CallStop(result)
}

export const hardStop = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  results: ReadonlyArray<ToolResult.ToolResult>
): Outcome | undefined => {
  const fenced = fencedOff(ctx)
  if (fenced !== undefined) return fenced
  // An unknown outcome anywhere in the batch outranks any other stop: it must be reconciled.
  for (const result of results) {
    const failure = result.error?.failure
    if (failure?.classification === "unknown") {
      return decide(ctx, "runtime", "unknown_outcome", `${result.name} (${result.callId}): ${failure.hint}`)
    }
  }
  // The deadline is a hard stop (R3.11): a batch that ended past it, however it ended, is its stop.
  if (RunContext.deadlinePassed(ctx)) {
    return decide(ctx, "run_timeout", "run_timeout", "the run deadline passed during the tool batch")
  }
  // The batch's stop is the gravest of its calls', whatever their order (R2.5): the deadline's,
  // then the step's, a contradicted tool, the recovery budget, a tool error.
  let stop: BatchStop | undefined
  for (const result of results) {
    const recovers = config.registry.tools.get(result.name)?.metadata.recoverErrors === true
    const candidate = stopOfCall(result, recovers)
    if (candidate !== undefined && (stop === undefined || candidate.rank > stop.rank)) stop = candidate
  }
  return stop === undefined ? undefined : decide(ctx, stop.policy, stop.reason, stop.detail)
}

/** A model call that ended after its step's deadline (it blocked past it): its answer is not accepted (R4.2). */
export const stepLate = (ctx: RunContext.RunContext, detail: string): Outcome =>
  decide(ctx, "step_timeout", "step_timeout", detail)

/**
 * `then`, told whether the step's own deadline has passed (code that blocked past it): the
 * run's is checked apart. A run without a step layer has none to pass.
 */
export const afterStepCheck = <R, A, E, R2>(
  config: Config<R>,
  then: (late: boolean) => Effect.Effect<A, E, R2>
): Effect.Effect<A, E, R2> =>
  config.registry.time.stepMillis === undefined
    ? then(false)
    : Effect.flatMap(Deadline.left({ layer: "step" }), (left) => then(left.layer === "step" && left.millis <= 0))

/**
 * The stop of a model call that ended without a response: the step's when it failed once
 * its step's deadline had passed (it blocked past it), unless its stop is a deadline's
 * already; else as {@link modelStop} maps it.
 */
export const modelGaveUp = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  reason: Recovery.Exhausted | Failure.Failure
): Effect.Effect<Outcome> => {
  const failure = Recovery.isExhausted(reason) ? reason.failure : reason
  // The step's own stop already: its timeout, or a retry its time could not hold.
  const byTime =
    failure.timeout?.layer === "step" ||
    (Recovery.isExhausted(reason) && (reason.why === "step_deadline" || reason.why === "deadline"))
  return afterStepCheck(config, (late) =>
    Effect.sync(() =>
      late && !byTime && !RunContext.deadlinePassed(ctx)
        ? stepLate(ctx, `the model call failed after its step's deadline: ${failure.hint}`)
        : modelStop(ctx, reason)
    )
  )
}

/**
 * Maps a model call that ended without a response to the run's stop: the deadline's, when it
 * passed while the call was failing (R3.11), as for a response or a batch past it.
 */
export const modelStop = (ctx: RunContext.RunContext, reason: Recovery.Exhausted | Failure.Failure): Outcome => {
  if (RunContext.deadlinePassed(ctx)) {
    return decide(ctx, "run_timeout", "run_timeout", "the run deadline passed during the model call")
  }
  return Recovery.isExhausted(reason)
    ? giveUp(ctx, reason)
    : permanentStop(ctx, reason, `the model call failed: ${reason.hint}`)
}

/**
 * The stop of a batch an approval ended (rejected or expired, R7), or a call's result
 * ({@link CallStop}): unless a call of the same batch (its events from `from` on) of a
 * tool that is not idempotent ended with an unknown outcome, or was cut off by the stop
 * while its action may have taken effect, which outranks every other stop (R3.8), as in
 * {@link hardStop}.
 */
export const batchStop = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  stop: ApprovalWait.Stop | CallStop,
  from: number
): Outcome => {
  // Another process owns the run: nothing of this batch is its stop.
  const fenced = stop._tag === "CallStop" ? fencedOff(ctx) : undefined
  if (fenced !== undefined) return fenced
  // The batch's first call left pending (its outcome unknown, nothing later settled it),
  // but a call the stop cut off that is safe to send again (idempotent, or a read), as when
  // the stop cuts it off in a batch with no approval (review 165: a read outranked a
  // rejection). Its own unknown outcome (it answered so) stands.
  const [first] = Explain.pendingActions(ctx.events.slice(from)).filter((pending) => {
    const tool = config.registry.tools.get(pending.name)
    return !(
      ctx.events[pending.seq]?._tag === "tool.interrupted" &&
      tool !== undefined &&
      !ToolExecutor.mayActTwice(tool)
    )
  })
  if (first !== undefined) {
    const cutOff = ctx.events[first.seq]?._tag === "tool.interrupted"
    const why = stop._tag === "CallStop" ? `${stop.result.name} (${stop.result.callId})'s failure` : stop.reason
    const detail = cutOff
      ? `${first.name} (${first.callId}) was cut off while ${why} stopped the batch: ${first.detail}`
      : `${first.name} (${first.callId}): ${first.detail}`
    return decide(ctx, "runtime", "unknown_outcome", detail)
  }
  if (stop._tag === "CallStop") {
    const named = `${stop.result.name} (${stop.result.callId})`
    return hardStop(ctx, config, [stop.result]) ?? decide(ctx, "runtime", "tool_error", `${named} stopped the batch`)
  }
  return decide(ctx, stop.reason === "step_timeout" ? "step_timeout" : "approval", stop.reason, stop.detail)
}
