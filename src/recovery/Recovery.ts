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
 * Each retry moves the run to `recovering`, appends `recovery.started` (attempt, delay,
 * cause), sleeps on Effect's `Clock`, and returns to the phase it left. A success
 * after a retry appends `recovery.completed`, and giving up appends `recovery.failed`
 * with the reason.
 *
 * @since 0.1.0
 */
import { Cause, Duration, Effect, Exit, Predicate, Pull, Schedule } from "effect"
import type * as Event from "../events/Event.ts"
import type * as RunState from "../events/RunState.ts"
import * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
import * as RunContext from "../run/internal/RunContext.ts"

/**
 * The delays of one recovery episode, one per retry. The input is the failure being
 * retried, so a schedule can look at its code or category.
 *
 * @category models
 * @since 0.1.0
 */
export type Backoff = Schedule.Schedule<unknown, Failure.Retryable>

/**
 * Exponential backoff: `base × factor^n` for the n-th completed retry (by default
 * 0.05 s, then 0.10 s: two retries), jittered ×0.8–1.2 unless `jitter: false`, each
 * delay capped at `cap` (default 5 s).
 *
 * @category constructors
 * @since 0.1.0
 */
export const backoff = (
  options: {
    readonly base?: Duration.Input | undefined
    readonly factor?: number | undefined
    readonly retries?: number | undefined
    readonly cap?: Duration.Input | undefined
    readonly jitter?: boolean | undefined
  } = {}
): Backoff => {
  const retries = options.retries ?? 2
  if (!Number.isInteger(retries) || retries < 0) {
    throw new RangeError(`Recovery.backoff: retries must be an integer >= 0, got ${retries}`)
  }
  const factor = options.factor ?? 2
  if (!(factor >= 1)) throw new RangeError(`Recovery.backoff: factor must be >= 1, got ${factor}`)
  const cap = Duration.fromInputUnsafe(options.cap ?? "5 seconds")
  const exponential = Schedule.exponential(options.base ?? "50 millis", factor)
  const jittered = options.jitter === false ? exponential : Schedule.jittered(exponential)
  return jittered.pipe(
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, cap))),
    Schedule.upTo({ times: retries }),
    Schedule.setInputType<Failure.Retryable>()
  )
}

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
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const defaults: Settings = { schedule: backoff(), maxRecoveries: 8 }

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
export interface Episode {
  readonly kind: Event.Of<"recovery.started">["kind"]
  /** Where a defect in the attempt is attributed. */
  readonly source: Failure.Source
  readonly resume: Extract<RunState.Phase, "model_thinking" | "tool_executing">
  readonly schedule: Backoff
  /** The run's shared retry budget. */
  readonly maxRecoveries: number
  /** Retries this episode may make on top of the first attempt (a tool's `maxRetries`). */
  readonly maxRetries: number
  /** Whether this failure may be retried at all (e.g. only idempotent tools). */
  readonly allowed: boolean
  /**
   * Whether someone else can take over when the dependency's circuit is open (a
   * fallback model): then a call refused by an open circuit is handed over at once
   * instead of waiting for the circuit (R3.9). Default `false`.
   */
  readonly handOff?: boolean | undefined
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
}

/**
 * @category guards
 * @since 0.1.0
 */
export const isExhausted = (u: unknown): u is Exhausted => Predicate.isTagged(u, "Exhausted")

const callOf = (episode: Episode): { readonly callId?: string } =>
  episode.callId === undefined ? {} : { callId: episode.callId }

const exhausted = (failure: Failure.Failure, why: GiveUp, detail: string): Exhausted => ({
  _tag: "Exhausted",
  failure,
  why,
  detail
})

/**
 * Runs `attempt` and retries it as this module's rules allow. The failure that is
 * finally returned carries the total number of attempts, so no outer layer retries it
 * again (R3.4).
 *
 * @category combinators
 * @since 0.1.0
 */
export const retry = <A, R>(
  ctx: RunContext.RunContext,
  episode: Episode,
  attempt: (n: number) => Effect.Effect<A, Failure.Failure, R>
) =>
  // The first attempt runs bare: a call that succeeds pays nothing for recovery.
  Effect.catchCause(attempt(1), (cause) => recoverFrom(ctx, episode, attempt, cause))

/**
 * What `retry` does once the first attempt has failed with `firstCause`: for a caller
 * that ran the first attempt itself (and saw it fail) and wants the same recovery.
 * Attempts from the second on come from `attempt`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const recoverFrom: <A, R>(
  ctx: RunContext.RunContext,
  episode: Episode,
  attempt: (n: number) => Effect.Effect<A, Failure.Failure, R>,
  firstCause: Cause.Cause<Failure.Failure>
) => Effect.Effect<A, Failure.Failure | RunState.IllegalTransition | Exhausted, R> = Effect.fnUntraced(function* <A, R>(
  ctx: RunContext.RunContext,
  episode: Episode,
  attempt: (n: number) => Effect.Effect<A, Failure.Failure, R>,
  firstCause: Cause.Cause<Failure.Failure>
) {
  const step = yield* Schedule.toStep(episode.schedule)
  const made = episode.attemptsMade ?? 1
  // A continued episode resumes the schedule where the earlier one left it.
  if (made > 1) {
    const seed = Failure.fromCause(episode.source, firstCause)
    if (seed._tag === "Retryable") {
      for (let i = 1; i < made; i++) yield* Effect.ignore(step(RunContext.now(ctx), seed))
    }
  }
  let n = made
  let exit: Exit.Exit<A, Failure.Failure> = Exit.failCause(firstCause)
  let first = true
  while (true) {
    if (!first) exit = yield* Effect.exit(attempt(n))
    first = false
    if (Exit.isSuccess(exit)) {
      if (n > made) {
        RunContext.emit(ctx, { _tag: "recovery.completed", kind: episode.kind, attempt: n - 1, ...callOf(episode) })
      }
      return exit.value
    }
    if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
    const squashed = Failure.fromCause(episode.source, exit.cause)
    const failure = n > 1 ? FailureBoundary.withAttempts(squashed, n) : squashed
    const giveUp = (why: GiveUp, detail: string) => {
      if (
        n > 1 ||
        why === "schedule_exhausted" ||
        why === "run_budget" ||
        why === "deadline" ||
        why === "step_deadline" ||
        why === "circuit_open"
      ) {
        RunContext.emit(ctx, {
          _tag: "recovery.failed",
          kind: episode.kind,
          ...callOf(episode),
          attempts: n,
          cause: `${failure.code}: ${detail}`,
          scope: why === "run_budget" ? "run" : "call"
        })
      }
      return Effect.fail(exhausted(failure, why, detail))
    }
    if (failure._tag !== "Retryable") {
      return yield* giveUp(
        "not_retryable",
        `${failure._tag === "Permanent" ? "a permanent" : "an unknown-outcome"} failure is never retried`
      )
    }
    // A business conflict (the version changed) is resolved by re-reading, not by resending (R3.10).
    if (failure.category === "conflict") {
      return yield* giveUp("not_retryable", "a conflict is handed to the model to re-read the current state")
    }
    // On every attempt, not only the first: a failure its owner retried is not retried again (R3.4).
    if (squashed.attempts > 1) {
      return yield* giveUp("owner_retried", `already retried ${squashed.attempts - 1} times by its owner`)
    }
    if (!episode.allowed) return yield* giveUp("not_allowed", "this call may not be retried automatically")
    // A call an open (or probing) circuit refused never ran (R3.9).
    const refused = failure.category === "circuit_open" || failure.category === "circuit_half_open"
    if (refused && episode.handOff === true) {
      return yield* giveUp("circuit_open", `${failure.hint}; handed over instead of waiting`)
    }
    if (n > episode.maxRetries)
      return yield* giveUp("schedule_exhausted", `retry limit of ${episode.maxRetries} reached`)
    // Argument corrections are the model's to spend (R3.5), not this retry budget (R3.4).
    if (ctx.tally.recoveryAttempts - ctx.tally.toolCorrectionAttempts >= episode.maxRecoveries) {
      return yield* giveUp("run_budget", `the run's recovery budget of ${episode.maxRecoveries} retries is spent`)
    }
    const retryable = squashed as Failure.Retryable
    const next = yield* Pull.matchEffect(step(RunContext.now(ctx), retryable), {
      onSuccess: ([, delay]) => Effect.succeed(Duration.toMillis(delay)),
      onFailure: (cause) => Effect.failCause(cause),
      onDone: () => Effect.succeed(undefined)
    })
    if (next === undefined) return yield* giveUp("schedule_exhausted", `the schedule allows no retry ${n}`)
    const delay = Math.max(next, retryable.retryAfterMillis ?? 0)
    // The retry must also fit in the step (R4.2): the tighter of the two deadlines decides.
    const { millis: left, layer } = RunContext.bound(ctx, undefined, "run")
    // A circuit that stays open past the deadline is the circuit's stop, not the deadline's.
    if (refused && delay >= left) {
      return yield* giveUp("circuit_open", `${failure.hint}, past what is left of the ${layer} (${left} ms)`)
    }
    if (delay >= left) {
      return yield* giveUp(
        layer === "step" ? "step_deadline" : "deadline",
        `retry ${n} would wait ${Math.round(delay)} ms but only ${left} ms of the ${layer} are left`
      )
    }
    const recovering = RunContext.hold(ctx, "recovering", episode.resume)
    if (recovering !== undefined) return yield* recovering
    RunContext.emit(ctx, {
      _tag: "recovery.started",
      kind: episode.kind,
      ...callOf(episode),
      attempt: n,
      delayMillis: delay,
      cause: failure.code
    })
    yield* Effect.onInterrupt(Effect.sleep(delay), () =>
      Effect.sync(() => {
        RunContext.release(ctx, "recovering", episode.resume)
        episode.onInterruptedWait?.()
      })
    )
    const resumed = RunContext.release(ctx, "recovering", episode.resume)
    if (resumed !== undefined) return yield* resumed
    n++
  }
})
