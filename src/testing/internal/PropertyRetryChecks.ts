/**
 * What is never retried (R3.1, R3.2, R3.6, R3.8), part of `check`: `checkNeverRetried`.
 * Private to the testing kit; `Properties` is the public face.
 */
import * as Event from "../../events/Event.ts"
import type * as Failure from "../../failure/Failure.ts"
import { isRetryableStatus } from "../../failure/FailureBoundary.ts"
import { ofTag } from "./PropertyTimelineChecks.ts"
import type { Violate } from "./PropertyViolation.ts"

/** A tool call, as its `model.responded` names it. */
export interface CallRef {
  readonly callId: string
  readonly name: string
}

/**
 * R3.1, R3.6, R3.8: no retry caused by a permanent or unknown-outcome failure.
 *
 * - A retry naming one of the `never` codes as its cause.
 * - A provider retry that does not follow a retryable `model.failed` of the same code, or
 *   whose code is an HTTP status R3.2 makes permanent (every status but 408, 409, 429, 5xx).
 * - A tool retry of a call after its refusal (blocked, or its arguments refused).
 * - A tool retry of a call whose cause is the code of the permanent or unknown-outcome
 *   failure the call ended with: the log keeps a retried attempt's failure only as the
 *   code its `recovery.started` names, so that retry followed a failure of that kind. A
 *   call's `failure.attempts` is no witness: it counts every attempt of the call, the
 *   retryable ones before its last included, and a tool's own retries (R3.4).
 *
 * A call its status query found not applied is sent again by the runtime (R3.8): no blind retry.
 */
export const checkNeverRetried = (
  timeline: ReadonlyArray<Event.Event>,
  retries: ReadonlyArray<Event.Of<"recovery.started">>,
  owner: ReadonlyMap<number, CallRef>,
  never: ReadonlySet<string>,
  violate: Violate
): void => {
  for (const e of retries) {
    if (never.has(e.cause)) violate("R3.1 never retried", `${e.kind} (seq ${e.seq}) retried a ${e.cause} failure`)
  }
  for (const e of retries.filter((r) => r.kind === "provider_retry")) {
    // R3.2 judges an HTTP status, not the log: a retried 404 the log calls retryable is still one (review 130).
    const status = httpStatus(e.cause)
    if (status !== undefined && !isRetryableStatus(status)) {
      violate("R3.1 never retried", `provider retry (seq ${e.seq}) of ${e.cause}, a status R3.2 makes permanent`)
    }
    const before = timeline
      .slice(0, e.seq)
      .reverse()
      .find((x) => x._tag !== "state.changed")
    if (before?._tag !== "model.failed" || before.failure.classification !== "retryable") {
      violate("R3.1 never retried", `provider retry (seq ${e.seq}) does not follow a retryable model failure`)
    } else if (before.failure.code !== e.cause) {
      violate(
        "R3.1 never retried",
        `provider retry (seq ${e.seq}) names ${e.cause}, the failure was ${before.failure.code}`
      )
    }
  }
  // Where each call was refused: a retry after it is one of a refused call (one before it, a resumed run's, is not).
  const refused = new Map<string, number>()
  for (const e of timeline) {
    if ((e._tag === "tool.blocked" || (e._tag === "tool.failed" && e.error.correctable)) && !refused.has(e.callId))
      refused.set(e.callId, e.seq)
  }
  for (const e of retries) {
    const call = owner.get(e.seq)
    if (
      e.kind === "tool_retry" &&
      call !== undefined &&
      e.seq > (refused.get(call.callId) ?? Number.POSITIVE_INFINITY)
    ) {
      violate("R3.1 never retried", `${call.name} (${call.callId}) was refused, then retried (seq ${e.seq})`)
    }
  }
  const resent = new Set(
    timeline.flatMap((e) => (e._tag === "tool.reconciled" && e.verdict === "not_applied" ? [e.callId] : []))
  )
  // The permanent or unknown-outcome failure each call ended with.
  const ended = new Map<string, Failure.Summary>()
  for (const e of ofTag(timeline, "tool.failed")) {
    const failure = e.error.failure
    if (failure !== undefined && failure.classification !== "retryable" && !resent.has(e.callId))
      ended.set(e.callId, failure)
  }
  for (const e of retries) {
    const call = owner.get(e.seq)
    const final = call === undefined ? undefined : ended.get(call.callId)
    if (e.kind === "tool_retry" && call !== undefined && final !== undefined && e.cause === final.code) {
      violate(
        "R3.1 never retried",
        `${call.name} (${call.callId}) was retried (seq ${e.seq}) after a ${final.code} failure, which is ${final.classification === "unknown" ? "of unknown outcome" : "permanent"}`
      )
    }
  }
}

/**
 * R3.7, R3.8: a call of a tool that may not be sent twice (the budget's `mayActTwice`) is never
 * retried: the runtime sends it again only once its status query found it not applied
 * (review 175: a payment wrongly declared idempotent, retried after it charged, passed).
 */
export const checkSentOnce = (
  timeline: ReadonlyArray<Event.Event>,
  retries: ReadonlyArray<Event.Of<"recovery.started">>,
  owner: ReadonlyMap<number, CallRef>,
  mayActTwice: ReadonlyArray<string> | undefined,
  violate: Violate
): void => {
  if (mayActTwice === undefined) return
  // Where each call was found not applied: a resend after it is the runtime's own.
  const notApplied = new Map<string, Array<number>>()
  for (const e of ofTag(timeline, "tool.reconciled")) {
    if (e.verdict === "not_applied") notApplied.set(e.callId, [...(notApplied.get(e.callId) ?? []), e.seq])
  }
  const resends = new Map<string, number>()
  for (const e of retries) {
    const call = owner.get(e.seq)
    if (e.kind !== "tool_retry" || call === undefined || !mayActTwice.includes(call.name)) continue
    const found = (notApplied.get(call.callId) ?? []).filter((seq) => seq < e.seq).length
    const sent = (resends.get(call.callId) ?? 0) + 1
    resends.set(call.callId, sent)
    if (sent > found) {
      violate(
        "R3.7 idempotent only",
        `${call.name} (${call.callId}) may not be sent twice, and was retried (seq ${e.seq}) after a ${e.cause} failure with no status query finding it not applied`
      )
    }
  }
}

/** The HTTP status an `http_<status>` failure code names (as `FailureBoundary.http` makes it), else `undefined`. */
const httpStatus = (code: string): number | undefined => {
  const found = /^http_(\d{1,15})$/.exec(code)
  return found?.[1] === undefined ? undefined : Number(found[1])
}

/**
 * For each retry (a `recovery.started` with no `circuit`), the waits for its circuit before
 * it in the same episode of the same owner (the model, or a tool call by its id): a call its
 * circuit refused never ran, so those attempts are no retries (R3.9), and the retry's attempt
 * number counts them.
 */
export const refusalsBefore = (timeline: ReadonlyArray<Event.Event>): ReadonlyMap<number, number> => {
  const counts = new Map<string, number>()
  const before = new Map<number, number>()
  for (const e of timeline) {
    if (e._tag === "recovery.started" && !Event.isCorrection(e.kind)) {
      const owner = e.callId ?? "model"
      if (e.circuit !== undefined) counts.set(owner, (counts.get(owner) ?? 0) + 1)
      else before.set(e.seq, counts.get(owner) ?? 0)
    } else if ((e._tag === "recovery.completed" || e._tag === "recovery.failed") && !Event.isCorrection(e.kind)) {
      counts.delete(e.callId ?? "model")
    }
  }
  return before
}
