/**
 * The effectful side of `Recovery`: runs attempts, asks `Recovery.decide` after each failure,
 * records the episode on the run's log and waits out each delay in the `recovering` phase.
 * Private to the runtime.
 */
import { Cause, Duration, Effect, Exit, Pull, Result, Schedule } from "effect"
import * as RunState from "../../events/RunState.ts"
import * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as Spans from "../../tracing/Spans.ts"
import * as Commit from "./Commit.ts"
import * as PhaseWaits from "./PhaseWaits.ts"
import * as RunContext from "./RunContext.ts"

const callOf = (episode: Recovery.Episode): { readonly callId?: string } =>
  episode.callId === undefined ? {} : { callId: episode.callId }

/** The retries the run has spent: argument corrections are the model's to spend (R3.5), not this budget (R3.4). */
const spent = (ctx: RunContext.RunContext): number =>
  ctx.log.counters.recoveryAttempts - ctx.log.counters.toolCorrectionAttempts

/**
 * A recovery episode once its first attempt has failed with `firstCause`: retries
 * `attempt` as `Recovery.decide` allows. The caller runs the first attempt itself, bare,
 * so a call that succeeds pays nothing for recovery; attempts from the second on come
 * from `attempt`. The failure that is finally returned carries the total number of
 * attempts, so no outer layer retries it again (R3.4).
 */
export const recoverFrom: <A, R>(
  ctx: RunContext.RunContext,
  episode: Recovery.Episode,
  attempt: (n: number) => Effect.Effect<A, Failure.Failure, R>,
  firstCause: Cause.Cause<Failure.Failure>
) => Effect.Effect<A, Failure.Failure | RunState.IllegalTransition | Recovery.Exhausted, R> = Effect.fnUntraced(
  function* <A, R>(
    ctx: RunContext.RunContext,
    episode: Recovery.Episode,
    attempt: (n: number) => Effect.Effect<A, Failure.Failure, R>,
    firstCause: Cause.Cause<Failure.Failure>
  ) {
    const step = yield* Schedule.toStep(episode.schedule)
    // The schedule may be the user's (`recovery.backoff`): a throw in it is that code's
    // defect, and ends the run `internal_error` naming it, never a failure of the call (R12).
    const stepped = (failure: Failure.Retryable): ReturnType<typeof step> =>
      Effect.catchDefect(
        Effect.suspend(() => step(RunContext.now(ctx), failure)),
        (defect) => Effect.die(UserCode.threw("the recovery schedule", defect))
      )
    const nextDelay = (failure: Failure.Retryable) =>
      Pull.matchEffect(stepped(failure), {
        // A delay that is no Duration (a hand-made step's) broke the schedule's contract, as a throw does.
        onSuccess: ([, delay]) =>
          Duration.isDuration(delay)
            ? Effect.succeed<number | undefined>(Duration.toMillis(delay))
            : Effect.die(
                new UserCode.UserCodeDefect(
                  `the recovery schedule gave a delay that is no Duration: ${UserCode.kindOf(delay)}`
                )
              ),
        // A schedule fails with nothing (its type says so): one that does broke its contract, as one that throws.
        onFailure: (cause) =>
          Cause.hasFails(cause)
            ? Effect.die(
                new UserCode.UserCodeDefect(
                  `the recovery schedule failed with ${Failure.safeDescription(Cause.squash(cause))}`
                )
              )
            : Effect.failCause(cause),
        onDone: () => Effect.succeed(undefined)
      }).pipe(
        // Stepping it is a wait of the step's like any other (its delay may come from an effect):
        // one that does not end within the step or the run is a delay that does not fit (R4.2).
        Deadline.withinOrElse({
          layer: "step",
          orElse: () => Effect.succeed<number | undefined>(Number.POSITIVE_INFINITY)
        })
      )
    // An attempt count below 1 (a tool's own failure saying `attempts: 0`) is the first attempt
    // (R3.4, R3.7); one past the retry limit (a tool's own count, `attempts: 1e9`) is the limit:
    // given up as at once, without stepping the schedule a billion times.
    // Attempts the process's stops cut off are no failures of the call: they count for nothing (R3.4).
    const restarts = Math.max(0, episode.restarts ?? 0)
    // Attempts its circuit refused (they never ran: no retry spent, R3.9), and the half-open ones in a row;
    // a resumed run's from its log (review 142: they were counted as spent retries).
    let refusals = Math.max(0, episode.refused?.count ?? 0)
    let polls = Math.max(0, episode.refused?.halfOpenInARow ?? 0)
    // Refusals of an open circuit in a row: a circuit that refuses again once its open time ended is polled.
    let opens = 0
    const made = Math.min(Math.max(1, episode.attemptsMade ?? 1), episode.maxRetries + 1 + restarts + refusals)
    // A continued episode resumes the schedule where the earlier one left it, or where it ended.
    if (made - restarts - refusals > 1) {
      const seed = Failure.fromCause(episode.source, firstCause)
      for (let i = 1; seed._tag === "Retryable" && i < made - restarts - refusals; i++) {
        if ((yield* Effect.orElseSucceed(nextDelay(seed), () => undefined)) === undefined) break
      }
    }
    let n = made
    let exit: Exit.Exit<A, Failure.Failure> = Exit.failCause(firstCause)
    // Whether the waits are committed before they begin: from the first failure that was paid for
    // on (review 155: one paid for after an unpaid one was not, and a resume lost what it cost).
    let commitsWait = episode.commitsWait === true
    while (true) {
      if (n > made) exit = yield* Effect.exit(attempt(n))
      if (Exit.isSuccess(exit)) {
        if (n > made) {
          RunContext.emit(ctx, ({ runId, seq, at }) => ({
            _tag: "recovery.completed",
            kind: episode.kind,
            attempt: n - 1,
            ...callOf(episode),
            runId,
            seq,
            at
          }))
        }
        return exit.value
      }
      if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
      const own = Failure.fromCause(episode.source, exit.cause)
      if (own.usage !== undefined) commitsWait = true
      // The schedule is stepped only for a failure that may be retried; `decide` refuses the others
      // (and says when nothing of the step or run was left anyway).
      const halted = episode.halted?.(own) === true
      const counted = n - restarts - refusals
      const refusal = Recovery.isRefusal(own)
      const refused = Recovery.refuse(episode, { failure: own, attempt: counted, recoveriesSpent: spent(ctx), halted })
      // A refused call waits for its circuit, the schedule left as it is.
      const nextDelayMillis =
        refused !== undefined || own._tag !== "Retryable"
          ? undefined
          : refusal
            ? Recovery.refusalDelay(own, own.category === "circuit_open" ? opens : polls)
            : yield* nextDelay(own)
      const timeLeft = yield* Deadline.left({ layer: "run" })
      // The budget is read, the retry decided and recorded in one synchronous step: the calls of a
      // batch failing together, whose schedules wait or yield, each see the retries recorded before
      // theirs, and together spend no more than the run's budget (R3.4).
      const decision = yield* Effect.suspend((): Effect.Effect<Recovery.Decision, RunState.IllegalTransition> => {
        const decided = Recovery.decide(episode, {
          failure: own,
          attempt: counted,
          recoveriesSpent: spent(ctx),
          nextDelayMillis,
          timeLeft,
          halted
        })
        if (decided._tag === "GiveUp") return Effect.succeed(decided)
        const held = PhaseWaits.holdNow(ctx, "recovering", episode.resume, ({ runId, seq, at }) => ({
          _tag: "recovery.started",
          kind: episode.kind,
          ...callOf(episode),
          attempt: n,
          delayMillis: decided.delayMillis,
          cause: own.code,
          ...(refusal ? { circuit: own.category === "circuit_open" ? "open" : "half_open" } : {}),
          runId,
          seq,
          at
        }))
        return Result.isFailure(held) ? Effect.fail(held.failure) : Effect.succeed(decided)
      })
      if (decision._tag === "GiveUp") {
        const failure = n > 1 ? FailureBoundary.withAttempts(own, n) : own
        if (Recovery.recordsGiveUp(decision.why, n)) {
          RunContext.emit(ctx, ({ runId, seq, at }) => ({
            _tag: "recovery.failed",
            kind: episode.kind,
            ...callOf(episode),
            attempts: n,
            cause: `${failure.code}: ${decision.detail}`,
            scope: decision.why === "run_budget" ? "run" : "call",
            runId,
            seq,
            at
          }))
        }
        const exhausted: Recovery.Exhausted = { _tag: "Exhausted", failure, why: decision.why, detail: decision.detail }
        return yield* Effect.fail(exhausted)
      }
      const owner = { owner: episode.callId ?? "" }
      const wait = { kind: episode.kind, attempt: n, delayMillis: decision.delayMillis, cause: own.code }
      // See `Recovery.Episode.commitsWait`: the sleep ends when the delay the log records ends.
      const waitFrom = RunContext.now(ctx)
      const sleep = commitsWait
        ? Effect.andThen(
            Commit.barrier(ctx),
            Effect.suspend(() =>
              Spans.backoff(Effect.sleep(Math.max(0, waitFrom + decision.delayMillis - RunContext.now(ctx))), wait)
            )
          )
        : Spans.backoff(Effect.sleep(decision.delayMillis), wait)
      yield* Effect.onInterrupt(sleep, () =>
        Effect.andThen(
          Effect.ignore(PhaseWaits.release(ctx, episode.resume, owner)),
          Effect.sync(() => episode.onInterruptedWait?.())
        )
      )
      yield* PhaseWaits.release(ctx, episode.resume, owner)
      if (refusal) refusals++
      polls = refusal && own.category === "circuit_half_open" ? polls + 1 : 0
      opens = refusal && own.category === "circuit_open" ? opens + 1 : 0
      n++
    }
  }
)

/**
 * What an episode came to: its value, or what it gave up on (`Exhausted`, or a failure
 * nothing retried, a defect of `source` included). Interruption passes through, and so
 * does a broken invariant (an illegal transition): it is not the call's failure.
 */
export const settled = <A, R>(
  source: Failure.Source,
  self: Effect.Effect<A, Failure.Failure | Recovery.Exhausted | RunState.IllegalTransition, R>
): Effect.Effect<Result.Result<A, Failure.Failure | Recovery.Exhausted>, RunState.IllegalTransition, R> =>
  Effect.catchCause(
    Effect.map(self, (a): Result.Result<A, Failure.Failure | Recovery.Exhausted> => Result.succeed(a)),
    (cause): Effect.Effect<Result.Result<A, Failure.Failure | Recovery.Exhausted>, RunState.IllegalTransition> => {
      // Only interruptions: no error of any type is in it.
      if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      const squashed = Cause.squash(cause)
      if (Recovery.isExhausted(squashed)) return Effect.succeed(Result.fail(squashed))
      if (RunState.isIllegalTransition(squashed)) return Effect.fail(squashed)
      // User code of the run's own (its recovery schedule) broke: the run's defect, not the call's failure.
      if (UserCode.isUserCodeDefect(squashed)) return Effect.die(squashed)
      return Effect.succeed(Result.fail(Failure.fromCause(source, cause)))
    }
  )
