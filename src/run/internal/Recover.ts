/**
 * The effectful side of `Recovery`: runs attempts, asks `Recovery.decide` after each failure,
 * records the episode on the run's log and waits out each delay in the `recovering` phase.
 * Private to the runtime.
 */
import { Cause, Duration, Effect, Exit, Pull, Schedule } from "effect"
import type * as RunState from "../../events/RunState.ts"
import * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import * as RunContext from "./RunContext.ts"

const callOf = (episode: Recovery.Episode): { readonly callId?: string } =>
  episode.callId === undefined ? {} : { callId: episode.callId }

/**
 * Runs `attempt` and retries it as `Recovery.decide` allows. The failure that is finally
 * returned carries the total number of attempts, so no outer layer retries it again (R3.4).
 */
export const retry = <A, R>(
  ctx: RunContext.RunContext,
  episode: Recovery.Episode,
  attempt: (n: number) => Effect.Effect<A, Failure.Failure, R>
) =>
  // The first attempt runs bare: a call that succeeds pays nothing for recovery.
  Effect.catchCause(attempt(1), (cause) => recoverFrom(ctx, episode, attempt, cause))

/**
 * What `retry` does once the first attempt has failed with `firstCause`: for a caller that
 * ran the first attempt itself (and saw it fail). Attempts from the second on come from `attempt`.
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
    const nextDelay = (failure: Failure.Retryable) =>
      Pull.matchEffect(step(RunContext.now(ctx), failure), {
        onSuccess: ([, delay]) => Effect.succeed<number | undefined>(Duration.toMillis(delay)),
        onFailure: (cause) => Effect.failCause(cause),
        onDone: () => Effect.succeed(undefined)
      })
    const made = episode.attemptsMade ?? 1
    // A continued episode resumes the schedule where the earlier one left it.
    if (made > 1) {
      const seed = Failure.fromCause(episode.source, firstCause)
      if (seed._tag === "Retryable") for (let i = 1; i < made; i++) yield* Effect.ignore(nextDelay(seed))
    }
    let n = made
    let exit: Exit.Exit<A, Failure.Failure> = Exit.failCause(firstCause)
    while (true) {
      if (n > made) exit = yield* Effect.exit(attempt(n))
      if (Exit.isSuccess(exit)) {
        if (n > made) {
          RunContext.emit(ctx, { _tag: "recovery.completed", kind: episode.kind, attempt: n - 1, ...callOf(episode) })
        }
        return exit.value
      }
      if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
      const own = Failure.fromCause(episode.source, exit.cause)
      const facts = {
        failure: own,
        attempt: n,
        // Argument corrections are the model's to spend (R3.5), not this retry budget (R3.4).
        recoveriesSpent: ctx.tally.recoveryAttempts - ctx.tally.toolCorrectionAttempts
      }
      // The schedule is stepped only for a failure that may be retried.
      const decision =
        Recovery.refuse(episode, facts) ??
        Recovery.decide(episode, {
          ...facts,
          nextDelayMillis: own._tag === "Retryable" ? yield* nextDelay(own) : undefined,
          timeLeft: RunContext.bound(ctx, undefined, "run")
        })
      if (decision._tag === "GiveUp") {
        const failure = n > 1 ? FailureBoundary.withAttempts(own, n) : own
        if (Recovery.recordsGiveUp(decision.why, n)) {
          RunContext.emit(ctx, {
            _tag: "recovery.failed",
            kind: episode.kind,
            ...callOf(episode),
            attempts: n,
            cause: `${failure.code}: ${decision.detail}`,
            scope: decision.why === "run_budget" ? "run" : "call"
          })
        }
        const exhausted: Recovery.Exhausted = { _tag: "Exhausted", failure, why: decision.why, detail: decision.detail }
        return yield* Effect.fail(exhausted)
      }
      const recovering = RunContext.hold(ctx, "recovering", episode.resume)
      if (recovering !== undefined) return yield* recovering
      RunContext.emit(ctx, {
        _tag: "recovery.started",
        kind: episode.kind,
        ...callOf(episode),
        attempt: n,
        delayMillis: decision.delayMillis,
        cause: own.code
      })
      yield* Effect.onInterrupt(Effect.sleep(decision.delayMillis), () =>
        Effect.sync(() => {
          RunContext.release(ctx, "recovering", episode.resume)
          episode.onInterruptedWait?.()
        })
      )
      const resumed = RunContext.release(ctx, "recovering", episode.resume)
      if (resumed !== undefined) return yield* resumed
      n++
    }
  }
)
