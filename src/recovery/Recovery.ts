/**
 * How a run recovers from a retryable failure (R3.3, R3.4, R3.7): one retry owner, a
 * `Schedule` for the delays, and one budget of attempts and time shared by the run.
 *
 * A failure is retried here only when all of these hold:
 *
 * - it is `Retryable` (never `Permanent`, never `UnknownOutcome`, never a permission denial);
 * - its owner has not already retried it (`attempts` is 1: R3.4, no retry storms);
 * - the caller allows it (for tools: only idempotent ones, up to their `maxRetries`);
 * - the episode's schedule has a next delay;
 * - the run's shared budget (`maxRecoveries` retries) is not spent;
 * - the delay, or the failure's `Retry-After` if longer, ends before the run deadline
 *   and before the step deadline.
 *   Otherwise it stops early and says why, rather than sleeping past the deadline.
 *
 * A call its circuit refused (open, or half-open while another call is the trial) never
 * ran: it waits for the circuit ({@link refusalDelay}) within the deadlines, and the wait
 * steps no schedule and spends no retry of the call nor of the run (R3.9).
 *
 * These rules are one pure function, {@link decide}. The run applies it: each retry moves
 * the run to `recovering`, appends `recovery.started` (attempt, delay, cause), sleeps on
 * Effect's `Clock`, and returns to the phase it left. A success after a retry appends
 * `recovery.completed`, and giving up appends `recovery.failed` with the reason
 * ({@link recordsGiveUp}).
 *
 * @since 0.1.0
 */
import { Predicate, Schema } from "effect"
import type * as Failure from "../failure/Failure.ts"
import { type Backoff, backoff } from "./internal/Backoff.ts"
import { isRefusal, trialPollMillis } from "./internal/Refusal.ts"

export { type Backoff, backoff } from "./internal/Backoff.ts"
export { isRefusal, refusalDelay, trialPollCapMillis, trialPollMillis } from "./internal/Refusal.ts"

/**
 * The recovery settings of a run.
 *
 * @category models
 * @since 0.1.0
 */
export interface Settings {
  /** Delays of one episode. Default {@link backoff}: 50 ms, 100 ms, jittered. */
  readonly schedule: Backoff
  /** Retries the whole run may make, provider and tools together. Default 8. */
  readonly maxRecoveries: number
  /**
   * Categories of retryable failures that are never retried. Default `["conflict"]`: a
   * business conflict (the version changed) is resolved by re-reading, not by resending (R3.10).
   */
  readonly neverRetried: ReadonlyArray<Failure.Category>
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const defaults: Settings = Object.freeze({
  schedule: backoff(),
  maxRecoveries: 8,
  neverRetried: Object.freeze(["conflict"] as const)
})

/**
 * What a recovery episode retries (or, for `tool_argument_correction`, what the model corrects).
 *
 * @category models
 * @since 0.2.0
 */
export const Kind = Schema.Literals([
  "tool_argument_correction",
  "output_truncation",
  "output_correction",
  "provider_retry",
  "tool_retry"
])

/**
 * @category models
 * @since 0.2.0
 */
export type Kind = typeof Kind.Type

/**
 * Whether a recovery asks the model to correct itself (its tool arguments, an answer cut
 * off by its output token limit, or a final answer that does not decode with the run's
 * output schema): it spends the correction budget, not the retry budget.
 *
 * @category predicates
 * @since 0.2.0
 */
export const isCorrection = (kind: Kind): boolean =>
  kind === "tool_argument_correction" || kind === "output_truncation" || kind === "output_correction"

/**
 * The limits one episode's retries are decided by.
 *
 * @category models
 * @since 0.2.0
 */
export interface Rules {
  /** The run's shared retry budget. */
  readonly maxRecoveries: number
  /** Retries this episode may make on top of the first attempt (a tool's `maxRetries`). */
  readonly maxRetries: number
  /** Whether this failure may be retried at all (e.g. only idempotent tools). */
  readonly allowed: boolean
  /**
   * When set, only the failure of an attempt up to this number may be retried: a call that
   * may not be retried is sent again once, after its status query found it not applied
   * (R3.8), and a failure of that resend is not retried (R3.7).
   */
  readonly allowedUpTo?: number | undefined
  /**
   * Whether someone else can take over when the dependency's circuit is open (a
   * fallback model): then a call refused by an open circuit is handed over at once
   * instead of waiting for the circuit (R3.9). Default `false`.
   */
  readonly handOff?: boolean | undefined
  /** Categories never retried (`Settings.neverRetried`). */
  readonly neverRetried: ReadonlyArray<Failure.Category>
}

/**
 * Why recovery gave up.
 *
 * @category models
 * @since 0.1.0
 */
export type GiveUp =
  | "not_retryable"
  | "owner_retried"
  | "not_allowed"
  | "schedule_exhausted"
  | "run_budget"
  | "deadline"
  | "step_deadline"
  | "circuit_open"
  /** The run's own policies stopped it after this failure: a token or cost budget the failed answer spent (R2.1). */
  | "halted"

/**
 * A failure recovery did not (or could no longer) retry, with the attempts made in total.
 *
 * @category models
 * @since 0.1.0
 */
export interface Exhausted {
  readonly _tag: "Exhausted"
  readonly failure: Failure.Failure
  readonly why: GiveUp
  readonly detail: string
}

/**
 * One recovery episode: what is retried, and the phase the run returns to.
 *
 * @category models
 * @since 0.1.0
 */
export interface Episode extends Rules {
  readonly kind: Kind
  /** Where a defect in the attempt is attributed. */
  readonly source: Failure.Source
  /** The phase the run returns to after a retry's wait. */
  readonly resume: "model_thinking" | "tool_executing"
  readonly schedule: Backoff
  /** The tool call retried, for the events; absent for a model call. */
  readonly callId?: string | undefined
  /**
   * Called when the run interrupts the wait between two attempts (cancel, deadline,
   * another call's stop), when no attempt is running: so the call can record what
   * became of it (R5.2).
   */
  readonly onInterruptedWait?: (() => void) | undefined
  /**
   * How many attempts of this call were already made when the episode starts: its
   * first cause is the failure of attempt number `attemptsMade` (default 1). An episode
   * that continues an earlier one (a resend after a status query found the call not
   * applied, R3.8) keeps its count, so `maxRetries` and the schedule's growing delays
   * hold across both.
   */
  readonly attemptsMade?: number | undefined
  /**
   * The number of the attempts made that the process's stops cut off (a resumed run's
   * attempts in doubt, run again), not failures of the call: they spend no retry, and the
   * schedule is not stepped for them (R3.4). Default 0.
   *
   * @since 0.3.0
   */
  readonly restarts?: number | undefined
  /**
   * Of the attempts made, those the call's circuit refused (a resumed run's, from its log:
   * `RunLog.refusalsOf`), and the half-open ones among the last in a row: they never ran,
   * spend no retry and step no schedule (R3.9); the next half-open wait doubles on from them.
   * Default none.
   *
   * @since 0.3.0
   */
  readonly refused?: { readonly count: number; readonly halfOpenInARow: number } | undefined
  /**
   * Whether each failure and the retry it waits for are committed to the journal before
   * the wait (R9, R3.4): for a call whose attempts commit their intent anyway (an
   * idempotent write), so that a process that dies in the wait is resumed waiting, its
   * budget spent. The commit's time counts in the wait. A failure that carries what it cost
   * (`usage`: an answer paid for) commits its wait, and every wait after it, whatever this says.
   */
  readonly commitsWait?: boolean | undefined
  /** Asked after each failure, with it: whether the run's own policies stopped it since ({@link Facts.halted}). */
  readonly halted?: ((failure: Failure.Failure) => boolean) | undefined
}

/**
 * @category guards
 * @since 0.1.0
 */
export const isExhausted = (u: unknown): u is Exhausted => Predicate.isTagged(u, "Exhausted")

/**
 * What is known when an attempt has failed: everything the retry decision depends on.
 *
 * @category models
 * @since 0.2.0
 */
export interface Facts {
  /** The failure of attempt number `attempt`, as the attempt returned it (its own `attempts`). */
  readonly failure: Failure.Failure
  /** Attempts made so far in this episode (1 after the first). */
  readonly attempt: number
  /** Retries the run has already spent from its shared budget. */
  readonly recoveriesSpent: number
  /**
   * The schedule's next delay in milliseconds, or `undefined` when it allows no more; for a
   * call its circuit refused, its wait ({@link refusalDelay}): the schedule is not stepped.
   */
  readonly nextDelayMillis: number | undefined
  /** What is left of the tighter of the step and run deadlines. */
  readonly timeLeft: { readonly millis: number; readonly layer: Failure.TimeoutLayer }
  /**
   * Whether the run's own policies stopped it after this failure (an answer that failed but
   * was paid for, whose tokens spent the run's budget, R2.1): nothing more is asked.
   */
  readonly halted?: boolean | undefined
}

/**
 * Retry after a delay, or give up and say why.
 *
 * @category models
 * @since 0.2.0
 */
export type Decision =
  | { readonly _tag: "Retry"; readonly delayMillis: number }
  | { readonly _tag: "GiveUp"; readonly why: GiveUp; readonly detail: string }

const giveUp = (why: GiveUp, detail: string): Extract<Decision, { _tag: "GiveUp" }> => ({ _tag: "GiveUp", why, detail })

/**
 * The checks of {@link decide} that need neither the schedule nor the clock: why this
 * failure is not retried whatever the delay, or `undefined` when it may be. The run asks
 * it first, so that the schedule is stepped only for a failure that may be retried.
 *
 * @category combinators
 * @since 0.2.0
 */
export const refuse = (
  rules: Rules,
  facts: Pick<Facts, "failure" | "attempt" | "recoveriesSpent" | "halted">
): Extract<Decision, { _tag: "GiveUp" }> | undefined => {
  const { failure, attempt } = facts
  if (facts.halted === true) return giveUp("halted", "the run's policies stopped it after this failure")
  if (failure._tag !== "Retryable") {
    return giveUp(
      "not_retryable",
      `${failure._tag === "Permanent" ? "a permanent" : "an unknown-outcome"} failure is never retried`
    )
  }
  if (rules.neverRetried.includes(failure.category)) {
    return giveUp(
      "not_retryable",
      failure.category === "conflict"
        ? "a conflict is handed to the model to re-read the current state"
        : `a ${failure.category} failure is never retried`
    )
  }
  // On every attempt, not only the first: a failure its owner retried is not retried again (R3.4).
  if (failure.attempts > 1) return giveUp("owner_retried", `already retried ${failure.attempts - 1} times by its owner`)
  // Before the call's own rules: a refused call never ran, so even one that may not be sent
  // twice waits for its circuit (review 189: a refused payment ended the run `tool_error`, and
  // cut off its sibling, the circuit's trial, in doubt).
  if (isRefusal(failure)) {
    // Only an open circuit hands over at once: a half-open one is another call's trial, often
    // over in moments (review 189: every run that began during a trial went to its fallback for
    // good). It is polled twice, and hands over then, or once a poll does not fit (see `decide`).
    if (rules.handOff === true && failure.category === "circuit_open")
      return giveUp("circuit_open", `${failure.hint}; handed over instead of waiting`)
    // Open for ever: there is no time to wait for.
    if (failure.category === "circuit_open" && failure.retryAfterMillis === undefined)
      return giveUp("circuit_open", failure.hint)
    // It never ran: its wait spends no retry of the call nor of the run (R3.9).
    return undefined
  }
  if (!rules.allowed || (rules.allowedUpTo !== undefined && attempt > rules.allowedUpTo)) {
    return giveUp("not_allowed", "this call may not be retried automatically")
  }
  if (attempt > rules.maxRetries) return giveUp("schedule_exhausted", `retry limit of ${rules.maxRetries} reached`)
  if (facts.recoveriesSpent >= rules.maxRecoveries) {
    return giveUp("run_budget", `the run's recovery budget of ${rules.maxRecoveries} retries is spent`)
  }
  return undefined
}

/**
 * The retry decision, as a pure function of the episode's rules and the facts of a failed
 * attempt: {@link refuse}, then the schedule's delay (or the failure's `Retry-After`, if
 * longer) against what is left of the step and the run.
 *
 * @category combinators
 * @since 0.2.0
 */
export const decide = (rules: Rules, facts: Facts): Decision => {
  const refused = refuse(rules, facts)
  const { failure, attempt } = facts
  // Nothing left of the step (or the run): that is why, whatever limit says no too (R4.2).
  const limited =
    refused === undefined
      ? facts.nextDelayMillis === undefined
      : refused.why === "schedule_exhausted" || refused.why === "run_budget"
  // An open circuit stays the circuit's stop: it may hand over to a fallback model.
  if (facts.timeLeft.millis <= 0 && limited && !isRefusal(failure)) {
    const layer = facts.timeLeft.layer
    return giveUp(
      layer === "step" ? "step_deadline" : "deadline",
      `nothing of the ${layer} is left for a retry after attempt ${attempt}`
    )
  }
  if (refused !== undefined) return refused
  if (facts.nextDelayMillis === undefined)
    return giveUp("schedule_exhausted", `the schedule allows no retry after attempt ${attempt}`)
  const retryAfter = failure._tag === "Retryable" ? (failure.retryAfterMillis ?? 0) : 0
  // Whole milliseconds, as a clock counts them: a jittered delay's fraction would turn every
  // later instant of the run, and the timeouts measured from them, into 999.9999999999998 ms.
  const delayMillis = Math.ceil(Math.max(facts.nextDelayMillis, retryAfter))
  // The retry must also fit in the step (R4.2): the tighter of the two deadlines decides.
  const { millis: left, layer } = facts.timeLeft
  // With a next model, a trial that runs on past two polls (750 ms) hands over: waiting for it
  // longer would leave the next model the rest of the time (review 191: a 5 s trial left it too little).
  if (
    isRefusal(failure) &&
    rules.handOff === true &&
    failure.category === "circuit_half_open" &&
    delayMillis > 2 * trialPollMillis
  ) {
    return giveUp("circuit_open", `${failure.hint}; handed over after two polls of the trial`)
  }
  // A circuit that stays open past the deadline is the circuit's stop, not the deadline's.
  if (isRefusal(failure) && delayMillis >= left) {
    return giveUp("circuit_open", `${failure.hint}, past what is left of the ${layer} (${left} ms)`)
  }
  if (delayMillis >= left) {
    return giveUp(
      layer === "step" ? "step_deadline" : "deadline",
      `retry ${attempt} would wait ${Number.isFinite(delayMillis) ? `${Math.round(delayMillis)} ms` : "without end"} but only ${left} ms of the ${layer} are left`
    )
  }
  return { _tag: "Retry", delayMillis }
}

/**
 * Whether giving up is recorded as `recovery.failed`: always after a retry, and on the first
 * attempt when a retry was possible in kind but a limit (schedule, budget, deadline, circuit)
 * stopped it; a failure that is simply not retryable is not a recovery that failed.
 *
 * @category combinators
 * @since 0.2.0
 */
export const recordsGiveUp = (why: GiveUp, attempt: number): boolean =>
  attempt > 1 ||
  why === "schedule_exhausted" ||
  why === "run_budget" ||
  why === "deadline" ||
  why === "step_deadline" ||
  why === "circuit_open"
