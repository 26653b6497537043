/**
 * One attempt of a tool call's handler (R3.11, R4.2, R5.2, R3.8, R3.9): recorded with its
 * deadline, committed first when it may act twice, then the handler run once, written here
 * once: defects caught, interruption recorded, one time bound for the record and the
 * handler, the circuit breaker. Its retries are `ToolAttempt`'s. Private to the runtime.
 */
import { Cause, Effect, Result } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as Model from "../../../model/Model.ts"
import * as Deadline from "../../../time/Deadline.ts"
import * as Spans from "../../../tracing/Spans.ts"
import * as Commit from "../../internal/Commit.ts"
import * as RunContext from "../../internal/RunContext.ts"
import { type Call, callHandler, mayHaveEffects, ownTimeout } from "./ToolCall.ts"
import {
  lateDetail,
  recordIntentInterrupted,
  recordInterrupt,
  recordInterruptedWait,
  recordNeverRan,
  recordNotStarted
} from "./ToolInterruption.ts"

/**
 * Runs the handler once: never past the run deadline (R3.11); recorded with its deadline
 * (R4.2); a defect is the tool's failure, never a crash of the run; an interruption is
 * recorded with what it may have left behind (R5.2); bounded by min(the tool's own
 * timeout, what is left of the step, what is left of the run), a call cut off being a
 * timeout naming the layer, or an `UnknownOutcome` for a tool that may have acted and is
 * not idempotent (R3.8); and seen by the tool's circuit breaker, timeout inside (R3.9).
 */
export const attempt = <R>(c: Call<R>, n: number): Effect.Effect<unknown, Failure.Failure, R> =>
  Effect.suspend(() => {
    const { ctx } = c
    if (RunContext.deadlinePassed(ctx)) {
      if (n === 1) recordNeverRan(ctx, c.call, lateDetail)
      else recordInterruptedWait(c)
      return RunContext.expire(ctx)
    }
    const own = { layer: "tool", millis: ownTimeout(c.tool) } as const
    return Effect.flatMap(Deadline.left(own), (limit) => start(c, n, own, limit))
  })

/**
 * The attempt once its bound is known: recorded, committed when it may act twice, then the
 * handler run once. One bound for both, read once (R4.2): the tool's own limit ends where
 * it ended when the attempt began, however long its intent record took.
 */
const start = <R>(
  c: Call<R>,
  n: number,
  own: { readonly layer: "tool"; readonly millis: number | undefined },
  limit: { readonly millis: number; readonly layer: Deadline.Layer; readonly at: number; readonly now: number }
): Effect.Effect<unknown, Failure.Failure, R> => {
  const { ctx, tool } = c
  // Nothing is left of its step (an approval that came as the step ended): the handler does not start,
  // so the call times out knowing nothing happened (R4.2, R3.8).
  if (limit.millis <= 0 && limit.layer !== "run") return Effect.fail(timeoutOf(tool, limit.layer, 0, tool.name, false))
  recordAttempt(ctx, c.call, n, limit)
  // One bound for the attempt: its own limit ends where it did when the attempt began.
  const attemptBound = { tool, until: own.millis === undefined ? undefined : limit.now + own.millis, began: limit.now }
  const once = Effect.suspend(() => callHandler(c)).pipe(
    Effect.matchCauseEffect({
      // Returned: its action took place, whatever becomes of the call before its result is recorded.
      onSuccess: (output) => {
        c.settled ??= returned
        return Effect.succeed(output)
      },
      onFailure: (cause) => handlerEnded(tool.name, cause)
    }),
    // A layer's timeout interrupted the handler: what it left behind is recorded here. Cut off
    // from outside (a cancel, the run's deadline), the call's own guard records it (`ToolExecutor`).
    bounded(
      attemptBound,
      tool.name,
      mayHaveEffects(tool),
      () => recordInterrupt(c),
      (layer) =>
        recordNotStarted(c, n, `nothing was left of its ${layer} time when its handler was to start; it never ran`)
    )
  )
  const guarded = Spans.toolAttempt(ctx.breakers === undefined ? once : ctx.breakers.guard("tool", tool.name, once), {
    tool: { name: tool.name, sideEffect: tool.metadata.sideEffect },
    callId: c.call.id,
    attempt: n,
    arguments: c.args
  })
  if (!mayHaveEffects(tool)) return guarded
  // The intent record (R9.2): a call that may change the world runs only once the journal holds
  // its attempt; an idempotent one too, so that a resumed run knows it may have acted. Its wait
  // for a store out of reach is bounded as the handler is (R4.2), and cut off, nothing ran.
  const intent = Commit.intent(ctx, `${tool.name} (${c.call.id})`).pipe(
    bounded(attemptBound, `${tool.name}'s intent record`, false),
    Effect.onInterrupt(() => Effect.sync(() => recordIntentInterrupted(c, n)))
  )
  return Effect.andThen(intent, afterIntent(c, n, guarded))
}

/**
 * The handler once its intent record is in: the record may have held the event loop (a
 * SQLite store waiting out another process's lock), so the run's deadline may have passed
 * meanwhile, and the handler does not start then (R3.11); nor when the record took all of
 * the attempt's time (`bounded`, R4.2). A function of its own: a closure in `start` would
 * keep the attempt's effects for as long as its handler runs (a parked run's heap).
 */
const afterIntent = <A, R>(
  c: Call<R>,
  n: number,
  handler: Effect.Effect<A, Failure.Failure, R>
): Effect.Effect<A, Failure.Failure, R> =>
  Effect.suspend(() => {
    if (!RunContext.deadlinePassed(c.ctx)) return handler
    recordNotStarted(c, n, lateDetail)
    return RunContext.expire(c.ctx)
  })

/**
 * Bounded by the rest of the attempt (R4.2): its own limit ends where it did when the
 * attempt began (`until`), and its timeout counts from then. With nothing left (its intent
 * record, or its circuit's store, took it all), `self` does not start. A function of its
 * own, as {@link afterIntent} is.
 */
const bounded =
  (
    attempt: { readonly tool: Call<unknown>["tool"]; readonly until: number | undefined; readonly began: number },
    what: string,
    mayHaveSideEffects: boolean,
    onTimeout?: () => void,
    onNoTime?: (layer: Deadline.Layer) => void
  ) =>
  <A, R>(self: Effect.Effect<A, Failure.Failure, R>): Effect.Effect<A, Failure.Failure, R> =>
    Deadline.withinOrElse(self, {
      layer: "tool",
      until: attempt.until,
      orElse: ({ layer, afterMillis }) => {
        onTimeout?.()
        return Effect.flatMap(sinceStart(attempt.began, afterMillis), (after) =>
          Effect.fail(timeoutOf(attempt.tool, layer, after, what, mayHaveSideEffects))
        )
      },
      ifNoTime: ({ layer }) => {
        onNoTime?.(layer)
        return Effect.flatMap(sinceStart(attempt.began, 0), (after) =>
          Effect.fail(timeoutOf(attempt.tool, layer, after, what, false))
        )
      }
    })

/** A tool attempt's timeout. */
const timeoutOf = (
  tool: Call<unknown>["tool"],
  layer: Deadline.Layer,
  afterMillis: number,
  what: string,
  mayHaveSideEffects: boolean
): Failure.Failure =>
  FailureBoundary.actionTimeout({
    source: "tool",
    layer,
    afterMillis,
    what,
    mayHaveSideEffects,
    idempotent: tool.metadata.idempotent
  })

/** How long since an attempt began at `began`, at least `afterMillis` (a wait's own count). */
const sinceStart = (began: number, afterMillis: number): Effect.Effect<number> =>
  Effect.clockWith((clock) => Effect.succeed(Math.max(afterMillis, clock.currentTimeMillisUnsafe() - began)))

const returned = { settlement: "completed", detail: "its handler had returned; its result was not recorded" } as const

/**
 * What a handler's attempt ends with, besides its typed failure: a defect is the tool's
 * failure, and so is an interruption of its own (R5.1); one from outside (a cancel, a
 * deadline, the tool's timeout) is sticky and never gets here.
 */
const handlerEnded = (name: string, cause: Cause.Cause<Failure.Failure>): Effect.Effect<never, Failure.Failure> => {
  if (Cause.hasInterruptsOnly(cause)) {
    return Effect.fail(UserCode.selfInterrupted("tool", `the handler of ${name}`, "tool_defect"))
  }
  const defect = Cause.findDefect(cause)
  return Result.isSuccess(defect)
    ? Effect.fail(Failure.fromDefect("tool", defect.success, "tool_defect"))
    : Effect.failCause(cause)
}

/**
 * The attempt's record, with its deadline (R4.2). A function of its own, so that what the
 * record is built from is not kept by the closures of the attempt while its handler runs.
 */
const recordAttempt = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  n: number,
  limit: { readonly layer: Deadline.Layer; readonly at: number }
): void => {
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "tool.started",
    callId: call.id,
    name: call.name,
    attempt: n,
    deadlineAt: limit.at,
    layer: limit.layer,
    runId,
    seq,
    at
  }))
}
