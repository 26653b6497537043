/**
 * The records of a model call that are not its answer or its failure: its request, with its
 * attempt and deadline, and the failure of one the run's deadline cut off. Private to the loop.
 */
import * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import type * as Model from "../../../model/Model.ts"
import type * as Deadline from "../../../time/Deadline.ts"
import * as RunContext from "../../internal/RunContext.ts"

/**
 * The request's record, with its attempt and deadline (R4.2). A function of its own, so
 * that what it is built from is not kept by the closures of the call while it waits.
 */
export const recordRequest = (
  ctx: RunContext.RunContext,
  iteration: number,
  n: number,
  limit: { readonly layer: Deadline.Layer; readonly at: number }
): void => {
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "model.requested",
    iteration,
    attempt: n,
    deadlineAt: limit.at,
    layer: limit.layer,
    runId,
    seq,
    at
  }))
}

/**
 * Records the model call the run's deadline or cancel cut off, once the run has stopped: a
 * request its log leaves unanswered when the deadline stopped the run is failed by that
 * deadline (R4.1), with what the answer cost so far when the model reported it (`paid`,
 * recorded as the attempt is interrupted); else at the run's end. A cancel's is recorded
 * only when the model reported what the answer cost (R2.1): a cancel is not the call's failure.
 */
export const recordCutOff = (ctx: RunContext.RunContext, paid?: Model.Usage): void => {
  const by = ctx.log.stopping?.by
  if (by === undefined || (by === "cancel" && paid === undefined)) return
  // A request a resumed run found unanswered was not this process's call: it is asked again.
  const last = ctx.events.findLast(
    (e) =>
      e._tag === "model.requested" ||
      e._tag === "model.responded" ||
      e._tag === "model.failed" ||
      e._tag === "run.resumed"
  )
  if (last?._tag !== "model.requested") return
  // How long the call waited, as every layer's timeout says (R4.3): from its request to the
  // deadline, or to now when code that held the event loop kept the deadline from firing on time.
  const bound = Math.max(0, ctx.deadlineAt - last.at)
  const waited = RunContext.now(ctx) - last.at
  const afterMillis = waited >= bound + 1 ? waited : bound
  const failure = FailureBoundary.withUsage(
    by === "deadline"
      ? FailureBoundary.timeout({ source: "provider", layer: "run", afterMillis })
      : FailureBoundary.cancelled({ source: "provider", afterMillis: waited }),
    paid
  )
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "model.failed",
    iteration: last.iteration,
    failure: Failure.summarize(failure),
    ...(failure.usage === undefined ? {} : { usage: failure.usage }),
    runId,
    seq,
    at
  }))
}
