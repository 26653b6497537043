/**
 * The attempts of a tool call's handler (R3.3, R3.7, R3.8, R3.9): each run once
 * (`HandlerAttempt`), retried as recovery allows, and what is left reconciled. Private to
 * the runtime.
 */
import { Cause, Effect, Result } from "effect"
import * as RunLog from "../../../events/RunLog.ts"
import type * as RunState from "../../../events/RunState.ts"
import * as Explain from "../../../explain/Explain.ts"
import * as Failure from "../../../failure/Failure.ts"
import * as Recovery from "../../../recovery/Recovery.ts"
import * as Deadline from "../../../time/Deadline.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import type * as ToolResult from "../../../tools/ToolResult.ts"
import * as PhaseWaits from "../../internal/PhaseWaits.ts"
import * as Recover from "../../internal/Recover.ts"
import * as RunContext from "../../internal/RunContext.ts"
import { attempt } from "./HandlerAttempt.ts"
import * as Reconcile from "./Reconcile.ts"
import { type Call, failed, maskedObservation, mayHaveEffects } from "./ToolCall.ts"
import { recordInterruptedReconcile, recordInterruptedWait } from "./ToolInterruption.ts"

/** What a call's attempts came to: the handler's output, or the call's failed result. */
export type Settled =
  | { readonly _tag: "Output"; readonly output: unknown }
  | { readonly _tag: "Ended"; readonly result: ToolResult.ToolResult }

const episodeOf = <R>(c: Call<R>): Recovery.Episode => ({
  kind: "tool_retry",
  source: "tool",
  resume: "tool_executing",
  schedule: c.registry.recovery.schedule,
  maxRecoveries: c.registry.recovery.maxRecoveries,
  neverRetried: c.registry.recovery.neverRetried,
  maxRetries: c.tool.metadata.maxRetries,
  // Only an idempotent call is safe to send twice (R3.7).
  allowed: c.tool.metadata.idempotent,
  // Its attempts commit their intent anyway; a resend of a call found not applied is asked about again on resume.
  commitsWait: c.tool.metadata.idempotent && mayHaveEffects(c.tool),
  callId: c.call.id,
  onInterruptedWait: () => recordInterruptedWait(c)
})

/**
 * The `tool_failed` result of a call whose failure nothing recovered. Its hint is the
 * tool's own text, shown to the model: cut as an output is (`maxObservationChars`).
 */
const toolFailed = <R>(c: Call<R>, failure: Failure.Failure, why?: Recovery.GiveUp): ToolResult.ToolResult => {
  const hint = maskedObservation(failure.hint, c.secrets, c.registry.limits.maxObservationChars)
  return failed(
    c.ctx,
    c.call,
    {
      code: "tool_failed",
      message: hint,
      correctable: false,
      failure: { ...Redaction.maskSummary(Failure.summarize(failure), c.secrets), hint },
      ...(why === "deadline" || why === "step_deadline" || why === "run_budget" ? { notRetriedFor: why } : {})
    },
    c.tool.metadata.maxRetries
  )
}

/** The attempts' outcome: the handler's output, or, when they gave up, what that leaves. */
const settleFrom = <R>(
  c: Call<R>,
  attempts: Effect.Effect<unknown, Failure.Failure | Recovery.Exhausted | RunState.IllegalTransition, R>
): Effect.Effect<Settled, RunState.IllegalTransition, R> =>
  Effect.flatMap(Recover.settled("tool", attempts), (ran) =>
    Result.isSuccess(ran) ? Effect.succeed<Settled>({ _tag: "Output", output: ran.success }) : gaveUp(c, ran.failure)
  )

/**
 * What attempts that gave up leave: a failed result, or, for an unknown outcome of a
 * tool with a status query, the query's verdict (R3.8): applied records the real
 * result, not applied sends the call again under the same key as a retry of the same
 * episode (budget, backoff, deadline, `maxRetries` held across both), undecidable stays
 * unknown. Never a blind resend. An idempotent call whose retries gave up while one of
 * its attempts may have acted is asked about too ({@link askRetried}).
 */
const gaveUp = <R>(
  c: Call<R>,
  reason: Failure.Failure | Recovery.Exhausted
): Effect.Effect<Settled, RunState.IllegalTransition, R> =>
  Effect.gen(function* () {
    const first = Failure.isFailure(reason) ? reason : reason.failure
    const why = Recovery.isExhausted(reason) ? reason.why : undefined
    if (c.tool.reconcile === undefined) return { _tag: "Ended", result: toolFailed(c, first, why) }
    if (first._tag !== "UnknownOutcome") {
      return RunContext.deadlinePassed(c.ctx) || !leftInDoubt(c)
        ? { _tag: "Ended", result: toolFailed(c, first, why) }
        : yield* askRetried(c, first, why)
    }
    // No status query starts past the deadline (R3.11): the outcome stays unknown.
    if (RunContext.deadlinePassed(c.ctx)) {
      recordInterruptedReconcile(c)
      return yield* RunContext.expire(c.ctx)
    }
    const reconciled = yield* Reconcile.reconcile(c, first).pipe(
      Effect.onInterrupt(() => Effect.sync(() => recordInterruptedReconcile(c)))
    )
    switch (reconciled._tag) {
      case "Applied":
        return { _tag: "Output", output: reconciled.output }
      case "NotApplied":
        return yield* settleFrom(
          c,
          Recover.recoverFrom(
            c.ctx,
            {
              ...episodeOf(c),
              allowed: true,
              // The query vouched for one resend: a call that may not be retried is not retried after it (R3.7).
              ...(c.tool.metadata.idempotent ? {} : { allowedUpTo: Math.max(1, first.attempts) }),
              attemptsMade: first.attempts
            },
            (n) => attempt(c, n),
            Cause.fail(reconciled.failure)
          )
        )
      case "Failed":
        return { _tag: "Ended", result: toolFailed(c, reconciled.failure) }
    }
  })

/**
 * Whether an attempt of the call left it in doubt and nothing settled it since (R3.8):
 * one cut off while it may have acted, as the log's `pendingActions` say. An idempotent
 * call's retries may all have failed since; they say nothing of that attempt.
 */
const leftInDoubt = <R>(c: Call<R>): boolean =>
  Explain.pendingActions(c.ctx.events).some((pending) => pending.callId === c.call.id)

/**
 * An idempotent call whose retries gave up (`last`, for `why`) while an attempt may have
 * acted: its status query settles the doubt (R3.8). Applied records the real result; not
 * applied ends the call, not sent again (its episode is over), now known not to have
 * acted; undecidable leaves the call as its retries did, in doubt and listed, and, being
 * safe to send again, not a stop of the run.
 */
const askRetried = <R>(
  c: Call<R>,
  last: Failure.Failure,
  why: Recovery.GiveUp | undefined
): Effect.Effect<Settled, never, R> =>
  Effect.map(
    Reconcile.reconcile(c, new Failure.UnknownOutcome(Failure.summarize(last)), Failure.summarize(last)).pipe(
      Effect.onInterrupt(() => Effect.sync(() => recordInterruptedReconcile(c)))
    ),
    (reconciled): Settled => {
      switch (reconciled._tag) {
        case "Applied":
          return { _tag: "Output", output: reconciled.output }
        case "NotApplied":
          return { _tag: "Ended", result: toolFailed(c, reconciled.failure, why) }
        case "Failed":
          return { _tag: "Ended", result: toolFailed(c, last, why) }
      }
    }
  )

/** The handler's first attempt: it runs bare, so that a call that succeeds pays nothing for recovery. */
export const firstAttempt = <R>(c: Call<R>): Effect.Effect<unknown, Failure.Failure, R> => attempt(c, 1)

/** After a failed first attempt: the retries recovery allows (R3.3, R3.7), then reconciliation of what is left (R3.8). */
export const settleFailed = <R>(
  c: Call<R>,
  cause: Cause.Cause<Failure.Failure>
): Effect.Effect<Settled, RunState.IllegalTransition, R> =>
  settleFrom(
    c,
    Recover.recoverFrom(c.ctx, episodeOf(c), (n) => attempt(c, n), cause)
  )

/**
 * The attempts of a call of a resumed run whose handler had run (R9, R3.8). Waiting to
 * retry, it waits out the rest of its delay, then goes on with its next attempt, in the
 * same episode. In doubt (its attempt began and the log said nothing more until the
 * resumed run recorded the process's stop), a call that cannot have acted, or may
 * safely act twice, runs again at once, spending no retry (the restart is not its
 * failure); any other call is never sent again blindly: its status query decides
 * (applied; not applied, and sent again at once under the same key, spending no retry
 * either; or undecidable), and without one its outcome stays unknown. An attempt in doubt
 * that was itself a retry is given up by its episode first, as the live run would.
 */
export const settleResumed = <R>(
  c: Call<R>,
  standing:
    | { readonly _tag: "InDoubt"; readonly attempt: number; readonly retry: boolean }
    | { readonly _tag: "Retrying"; readonly attempt: number; readonly wakeAt: number },
  refused?: () => Effect.Effect<ToolResult.ToolResult>
): Effect.Effect<Settled, RunState.IllegalTransition, R> => {
  const made = standing.attempt
  // The process's stops during the call's attempts (each resume that found one in doubt) are
  // not the call's failures: the attempts they cost spend no retry (R3.4), whatever their number.
  const restarts = RunLog.restartsOf(c.ctx.events, c.call.id)
  // So are the attempts its circuit refused: they never ran (R3.9).
  const episode = { ...episodeOf(c), restarts, refused: RunLog.refusalsOf(c.ctx.events, c.call.id) }
  // Refused by the policy in force now: no further attempt (R3.6). A call that cannot have
  // acted is blocked; one that may have stays in doubt, unless its status query decides.
  const blocked =
    refused === undefined
      ? undefined
      : Effect.suspend(() => Effect.map(refused(), (result): Settled => ({ _tag: "Ended", result })))
  const again = (n: number) => attempt(c, n)
  // The attempts the log holds were made: the next handler call is attempt `made + 1`.
  c.attempt = made
  // That next attempt, ending the episode it is a retry of (`retries` so far) when it succeeds;
  // when it fails, the episode goes on as every other does.
  const next = (retries: number | undefined) =>
    Effect.catchCause(
      retries === undefined
        ? again(made + 1)
        : Effect.tap(again(made + 1), () =>
            Effect.sync(() => {
              RunContext.emit(c.ctx, ({ runId, seq, at }) => ({
                _tag: "recovery.completed",
                kind: episode.kind,
                attempt: retries,
                callId: c.call.id,
                runId,
                seq,
                at
              }))
            })
          ),
      (cause) => Recover.recoverFrom(c.ctx, { ...episode, attemptsMade: made + 1 }, again, cause)
    )
  if (standing._tag === "Retrying") {
    const owner = { owner: c.call.id }
    // Its last attempt failed, as a retry may follow: refused, none does, the wait ends now, and so does its episode.
    if (blocked !== undefined) {
      const episodeEnds = Effect.sync(() =>
        endEpisode(c, made, "permission_denied: the permission policy in force refuses another attempt")
      )
      return Effect.andThen(Effect.andThen(episodeEnds, PhaseWaits.release(c.ctx, episode.resume, owner)), blocked)
    }
    // The rest of the wait the log left, its end, then the next attempt, as `Recover.recoverFrom` goes on.
    const wait = Effect.onInterrupt(Deadline.sleepUntil(standing.wakeAt), () =>
      Effect.andThen(
        Effect.ignore(PhaseWaits.release(c.ctx, episode.resume, owner)),
        Effect.sync(() => episode.onInterruptedWait?.())
      )
    )
    return settleFrom(
      c,
      wait.pipe(Effect.andThen(PhaseWaits.release(c.ctx, episode.resume, owner)), Effect.andThen(next(made)))
    )
  }
  // The stop of the process was recorded when the run resumed (its `tool.interrupted`).
  const effects = mayHaveEffects(c.tool)
  if (blocked !== undefined && !effects) return blocked
  if (blocked === undefined && (!effects || c.tool.metadata.idempotent)) {
    // Run again at once: the restart is not the call's failure, so it spends no retry (R3.4); a
    // success ends the episode the attempt in doubt was a retry of, as it would have (R3.3).
    return settleFrom(c, next(standing.retry ? made - 1 : undefined))
  }
  const unknown = stoppedDuring(c, made)
  // As if the attempt had answered so: a retry's episode gives up on it, recorded as the live run records it.
  const inDoubt = settleFrom(
    c,
    Recover.recoverFrom(c.ctx, { ...episode, attemptsMade: made }, again, Cause.fail(unknown))
  )
  // A retry's episode gives up on the attempt as the live run does, then its status query
  // decides. Without a query, or past the deadline (R3.11), the outcome stays unknown.
  if (standing.retry || c.tool.reconcile === undefined || RunContext.deadlinePassed(c.ctx)) return inDoubt
  // An idempotent call the policy now refuses may have acted: its status query decides, as for every other call.
  return Effect.flatMap(
    Reconcile.reconcile(c, unknown).pipe(Effect.onInterrupt(() => Effect.sync(() => recordInterruptedReconcile(c)))),
    (reconciled): Effect.Effect<Settled, RunState.IllegalTransition, R> => {
      switch (reconciled._tag) {
        case "Applied":
          return Effect.succeed({ _tag: "Output", output: reconciled.output })
        case "NotApplied":
          // Found not applied: sent again at once under the same key, and, as for a call that
          // cannot act twice, the process's stop spends no retry (R3.4); unless the policy now refuses it.
          return blocked ?? settleFrom(c, next(undefined))
        case "Failed":
          return Effect.succeed({ _tag: "Ended", result: toolFailed(c, reconciled.failure) })
      }
    }
  )
}

/** The failure a process's stop during attempt `made` leaves: an unknown outcome (R3.8). */
const stoppedDuring = <R>(c: Call<R>, made: number): Failure.UnknownOutcome =>
  new Failure.UnknownOutcome({
    source: "tool",
    category: "crash",
    code: "process_stopped",
    attempts: made,
    hint: `the process running ${c.tool.name} stopped during attempt ${made}; whether it took effect is unknown`
  })

/** Records that the retry episode of the call ends after attempt `made`, for `cause`. */
const endEpisode = <R>(c: Call<R>, made: number, cause: string): void => {
  RunContext.emit(c.ctx, ({ runId, seq, at }) => ({
    _tag: "recovery.failed",
    kind: "tool_retry",
    callId: c.call.id,
    attempts: made,
    cause,
    scope: "call",
    runId,
    seq,
    at
  }))
}

/**
 * A call in doubt of a run resumed past its deadline (R3.8, R3.11): recording the truth is
 * not waiting, so its status query is asked, within what the run gives it; nothing of the
 * call is sent again. Applied records the real result; not applied ends the call, not sent
 * again for the deadline; undecidable, or a query that fails, leaves its outcome unknown.
 * An attempt in doubt that was a retry ends its episode first: no attempt follows it.
 */
export const settleLate = <R>(
  c: Call<R>,
  standing: { readonly attempt: number; readonly retry: boolean }
): Effect.Effect<Settled, never, R> =>
  Effect.suspend(() => {
    const made = standing.attempt
    c.attempt = made
    const unknown = stoppedDuring(c, made)
    if (standing.retry) endEpisode(c, made, `${unknown.code}: the run deadline had passed; no attempt follows`)
    return Effect.map(
      Reconcile.reconcile(c, unknown).pipe(Effect.onInterrupt(() => Effect.sync(() => recordInterruptedReconcile(c)))),
      (reconciled): Settled => {
        switch (reconciled._tag) {
          case "Applied":
            return { _tag: "Output", output: reconciled.output }
          case "NotApplied":
            return { _tag: "Ended", result: toolFailed(c, reconciled.failure, "deadline") }
          case "Failed":
            return { _tag: "Ended", result: toolFailed(c, reconciled.failure) }
        }
      }
    )
  })
