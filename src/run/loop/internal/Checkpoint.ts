/**
 * The policies' checkpoints, private to the loop (R2.2): after every model response and
 * every tool batch, and the stop-only looks between (a paid failure, before corrections).
 * Every decision is recorded (`termination.decided`) where it is taken.
 */
import type * as StopReason from "../../../events/StopReason.ts"
import * as Termination from "../../../termination/Termination.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type { Config, Outcome } from "./LoopConfig.ts"

export const decide = (
  ctx: RunContext.RunContext,
  policy: string,
  reason: StopReason.StopReason,
  detail: string,
  finalAnswer?: string,
  own = false
): Outcome => {
  RunContext.decided(ctx, policy, reason, detail, own)
  return { reason, policy, detail, finalAnswer, ...(own ? { own } : {}) }
}

/** A reminder to the model: the log's fold puts it in the conversation (see `RunLog`). */
export const remind = (ctx: RunContext.RunContext, kind: string, text: string): void => {
  RunContext.emit(ctx, ({ runId, seq, at }) => ({ _tag: "reminder.injected", kind, text, runId, seq, at }))
}

/** The policies' verdict on the run's counters now. */
const verdictOf = <R>(
  ctx: RunContext.RunContext,
  config: Pick<Config<R>, "policies">,
  phase: Termination.Checkpoint["phase"],
  notFinal: boolean
) =>
  // Policies are user code: they are handed a frozen checkpoint with a frozen copy of the
  // counters, which none can change for the others, the checks of their stops or the run (R12).
  Termination.evaluate(
    config.policies,
    Object.freeze({
      phase,
      counters: Object.freeze(notFinal ? { ...ctx.log.counters, finalAnswerReceived: false } : { ...ctx.log.counters }),
      now: RunContext.now(ctx),
      deadlineAt: ctx.deadlineAt
    })
  )

/**
 * The policies' look at the run now (R2.2): `warn`ing, as at a checkpoint, or taking only a
 * stop, which it returns unrecorded. The deadline is a hard stop (R3.11): no policy outranks
 * it, before or after they run (a policy is user code, and may have blocked past it).
 */
const look = <R>(
  ctx: RunContext.RunContext,
  config: Pick<Config<R>, "policies">,
  phase: Termination.Checkpoint["phase"],
  warn: boolean,
  finalAnswer?: string,
  /** Whether the answer is looked at as one that is not final (it goes back for correction). */
  notFinal = false
): Outcome | undefined => {
  const late = (): Outcome => ({
    reason: "run_timeout",
    policy: "run_timeout",
    detail: `the run deadline passed at the ${phase} checkpoint`,
    finalAnswer: undefined
  })
  if (RunContext.deadlinePassed(ctx)) return late()
  const verdict = verdictOf(ctx, config, phase, notFinal)
  if (RunContext.deadlinePassed(ctx)) return late()
  if (warn) for (const warning of verdict.warnings) remind(ctx, warning.kind, warning.text)
  if (verdict.stop === undefined) return undefined
  const { policy, reason, detail, own } = verdict.stop
  return { reason, policy, detail, finalAnswer: reason === "goal_reached" ? finalAnswer : undefined, own }
}

/** Records the stop a look took (`termination.decided`). */
export const record = (ctx: RunContext.RunContext, outcome: Outcome): Outcome =>
  decide(ctx, outcome.policy, outcome.reason, outcome.detail, outcome.finalAnswer, outcome.own === true)

const recorded = (ctx: RunContext.RunContext, outcome: Outcome | undefined): Outcome | undefined =>
  outcome === undefined ? undefined : record(ctx, outcome)

/** The policies at a checkpoint: after every model response and every tool batch. */
export const checkpoint = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  phase: Termination.Checkpoint["phase"],
  finalAnswer?: string
): Outcome | undefined => recorded(ctx, look(ctx, config, phase, true, finalAnswer))

/**
 * After a model call that failed but was paid for (an answer the provider stopped
 * unfinished, its usage counted, R2.1): the policies see the counters again, so that a token
 * or cost budget it spent stops the run before another request, a retry or a fallback's, is
 * paid for. Only a stop is taken: nothing else changed since the last checkpoint's warnings.
 * It is asked inside the recovery episode, and returned unrecorded: the caller {@link record}s
 * it once the episode has closed, so that no episode is open when a stop is decided.
 */
export const afterPaidFailure = <R>(
  ctx: RunContext.RunContext,
  config: Pick<Config<R>, "policies">
): Outcome | undefined => look(ctx, config, "after_model", false)

/**
 * Before the corrections a batch's calls need (R3.5): a stop the policies take already (a
 * repeated failure) is taken first, so that no correction is announced for a turn the model
 * is never given. The checkpoint after the corrections says the rest.
 */
export const beforeCorrections = <R>(ctx: RunContext.RunContext, config: Config<R>): Outcome | undefined =>
  recorded(ctx, look(ctx, config, "after_tools", false))

/**
 * Before a final answer that does not decode goes back to be corrected (R6.1, R3.5): a stop
 * the policies take for an answer that is not final (the last iteration, a spent budget) is
 * taken first, so that no correction is announced for a turn the model is never given.
 */
export const beforeOutputCorrection = <R>(ctx: RunContext.RunContext, config: Config<R>): Outcome | undefined =>
  recorded(ctx, look(ctx, config, "after_model", false, undefined, true))
