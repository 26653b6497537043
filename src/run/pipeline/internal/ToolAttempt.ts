/**
 * The attempts of a tool call's handler (R3.3, R3.7, R3.8, R3.9): one attempt in its
 * whole wrapper (defects caught, interruption recorded, time bound, circuit breaker),
 * the recovery of a first attempt that failed, and reconciliation of what is left; and
 * the cheaper paths of a first attempt that ran bare. Private to the runtime.
 */
import { Cause, Effect, Exit, Result } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as Recovery from "../../../recovery/Recovery.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import * as Recover from "../../internal/Recover.ts"
import * as RunContext from "../../internal/RunContext.ts"
import * as Reconcile from "./Reconcile.ts"
import { type Call, callHandler, failed, type Ran } from "./ToolCall.ts"
import { recordInterrupt, recordInterruptedReconcile, recordInterruptedWait } from "./ToolInterruption.ts"
import { afterHandler } from "./ToolOutput.ts"
import { within, withinWait } from "./ToolTimeout.ts"

/** A defect in the handler is a failure of the tool, never a crash of the run. */
const defectToFailure = (defect: unknown) => Effect.fail(Failure.fromDefect("tool", defect, "tool_defect"))

/** One attempt with the whole wrapper: defects caught, interruption recorded, the tool's own timeout. */
export const attempt = (c: Call): Effect.Effect<unknown, Failure.Failure> => {
  const wrapped = Effect.suspend(() => callHandler(c)).pipe(
    Effect.catchDefect(defectToFailure),
    Effect.onInterrupt(() => Effect.sync(() => recordInterrupt(c))),
    within(c)
  ) as Effect.Effect<unknown, Failure.Failure>
  // The tool's circuit breaker (R3.9) sees one outcome per attempt, its timeout inside it.
  const breakers = c.ctx.breakers
  const guarded = breakers === undefined ? wrapped : breakers.guard("tool", c.tool.name, wrapped)
  // A retry never starts once the deadline has passed (R3.11), even if its timer could not fire yet.
  return Effect.suspend(() => {
    if (!RunContext.deadlinePassed(c.ctx)) return guarded
    recordInterruptedWait(c)
    return RunContext.expire(c.ctx)
  })
}

const episodeOf = (c: Call): Recovery.Episode => ({
  kind: "tool_retry",
  source: "tool",
  resume: "tool_executing",
  schedule: c.registry.recovery.schedule,
  maxRecoveries: c.registry.recovery.maxRecoveries,
  neverRetried: c.registry.recovery.neverRetried,
  maxRetries: c.tool.metadata.maxRetries,
  // Only an idempotent call is safe to send twice (R3.7).
  allowed: c.tool.metadata.idempotent,
  callId: c.call.id,
  onInterruptedWait: () => recordInterruptedWait(c)
})

/** The recovery of a first attempt that failed (R3.3, R3.7), then reconciliation of what is left (R3.8). */
export const recover = (c: Call, cause: Cause.Cause<Failure.Failure>): Ran => recoverIn(c, episodeOf(c), cause)

const recoverIn = (c: Call, episode: Recovery.Episode, cause: Cause.Cause<Failure.Failure>): Ran =>
  Effect.matchCauseEffect(
    Recover.recoverFrom(c.ctx, episode, () => attempt(c), cause),
    {
      onSuccess: (output) => afterHandler(c, output),
      onFailure: (cause): Ran => {
        if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
        const squashed = Cause.squash(cause)
        // A broken invariant (an illegal transition) is not the tool's failure: it goes on up.
        if (Cause.hasFails(cause) && !Failure.isFailure(squashed) && !Recovery.isExhausted(squashed)) {
          return Effect.failCause(cause) as Ran
        }
        const first = Recovery.isExhausted(squashed) ? squashed.failure : Failure.fromCause("tool", cause)
        // No status query starts past the deadline (R3.11): the outcome stays unknown.
        if (first._tag === "UnknownOutcome" && c.tool.reconcile !== undefined && RunContext.deadlinePassed(c.ctx)) {
          recordInterruptedReconcile(c)
          return RunContext.expire(c.ctx)
        }
        const asked = Reconcile.reconcile(c.ctx, c.tool, c.input, c.context, first, withinWait(c))
        // Only a status query can be waiting here; its call's outcome stays unknown if it is cut off.
        const query =
          first._tag === "UnknownOutcome" && c.tool.reconcile !== undefined
            ? Effect.onInterrupt(asked, () => Effect.sync(() => recordInterruptedReconcile(c)))
            : asked
        return Effect.flatMap(query, (reconciled): Ran => {
          switch (reconciled._tag) {
            case "Applied":
              return afterHandler(c, reconciled.output)
            case "NotApplied":
              // It did not take effect: the runtime sends it again itself, with the same
              // idempotency key, as a retry of its own (budget, backoff, deadline) (R3.8).
              // One episode with the attempts before it: maxRetries and the backoff hold across both.
              return recoverIn(
                c,
                { ...episodeOf(c), allowed: true, attemptsMade: first.attempts },
                Cause.fail(reconciled.failure)
              )
            case "Failed": {
              const failure = reconciled.failure
              return Exit.succeed(
                failed(
                  c.ctx,
                  c.call,
                  {
                    code: "tool_failed",
                    message: Redaction.maskText(failure.hint, c.secrets),
                    correctable: false,
                    failure: Redaction.maskSummary(Failure.summarize(failure), c.secrets)
                  },
                  c.tool.metadata.maxRetries
                )
              )
            }
          }
        })
      }
    }
  )

/**
 * A first attempt that ended before anyone waited on it (the handler returned a
 * finished `Exit`): what the wrapper of `attempt` would have made of its failure.
 */
export const recoverFinished = (c: Call, cause: Cause.Cause<Failure.Failure>): Ran => {
  const defect = Cause.findDefect(cause)
  if (Result.isSuccess(defect)) return recover(c, Cause.fail(Failure.fromDefect("tool", defect.success, "tool_defect")))
  if (Cause.hasInterrupts(cause)) recordInterrupt(c)
  return recover(c, cause)
}

/** The interruption observer of a handler that is still running when the executor waits on it. */
const observe =
  (c: Call) =>
  (exit: Exit.Exit<unknown, Failure.Failure>): undefined => {
    if (exit._tag === "Failure" && Cause.hasInterrupts(exit.cause)) recordInterrupt(c)
    return undefined
  }

/** `Effect.catchDefect(defectToFailure)`, as one handler of the whole cause. */
const catchDefects = (cause: Cause.Cause<Failure.Failure>): Effect.Effect<never, Failure.Failure> => {
  const defect = Cause.findDefect(cause)
  return Result.isSuccess(defect) ? defectToFailure(defect.success) : Effect.failCause(cause)
}

/**
 * A first attempt still running: `attempt`'s wrapper without the suspension and the
 * timeout (defects caught, then interruption observed), and no recovery unless it fails.
 */
export const awaitHandler = (c: Call, running: Effect.Effect<unknown, Failure.Failure, unknown>): Ran =>
  Effect.matchCauseEffect(Effect.onExitPrimitive(Effect.catchCause(running, catchDefects), observe(c)), {
    onSuccess: (output) => afterHandler(c, output),
    onFailure: (cause) => recover(c, cause)
  }) as Ran
