/**
 * The approval invariants of a finished run (R7): `checkApprovals`, part of `check`.
 * Private to the testing kit; `Properties` is the public face.
 */
import type * as Event from "../../events/Event.ts"
import type * as StopReason from "../../events/StopReason.ts"
import type * as RunResult from "../../run/RunResult.ts"
import type { Violate } from "./PropertyViolation.ts"

/** The stop a decision that ends the run must give (R7, R4.2). */
const stopOf = (e: Event.Of<"approval.decided">): StopReason.StopReason =>
  e.decision === "rejected"
    ? "approval_rejected"
    : e.layer === "approval"
      ? "approval_expired"
      : e.layer === "step"
        ? "step_timeout"
        : "run_timeout"

/** R7: a call that needs approval runs only once approved; a rejection or an expiry ends the run. */
export const checkApprovals = (result: RunResult.RunResult, violate: Violate): void => {
  const timeline = result.timeline
  const started = timeline[0]
  const runDeadline = started?._tag === "run.started" ? started.deadlineAt : Number.POSITIVE_INFINITY
  const asked = new Set<string>()
  const requested = new Map<string, Event.Of<"approval.requested">>()
  const decided = new Map<string, Event.Of<"approval.decided">>()
  let ending: Event.Of<"approval.decided"> | undefined
  // A resumed run lets go of a call put back for approval that a check refuses before its wait
  // (the policy in force now): withdrawn, then blocked for its refusal, and the run goes on.
  const refused = new Set(
    timeline.flatMap((e) =>
      e._tag === "tool.blocked" && e.error.code !== "approval_rejected" && e.error.code !== "approval_expired"
        ? [e.callId]
        : []
    )
  )
  // Once the run is being stopped, a decision recorded is what the gate held as the run let go
  // of the call (R5.1, R7; review 141): the call never ran, and the stop is the stop's.
  let stopping = false
  for (const e of timeline) {
    if (e._tag === "run.stopping") stopping = true
    if (e._tag === "model.responded") for (const callId of e.callIds) asked.add(callId)
    if (e._tag === "approval.requested") {
      if (!asked.has(e.callId))
        violate("R7 approvals", `${e.callId}'s approval was requested before the model.responded that asked for it`)
      if (requested.has(e.callId)) violate("R7 approvals", `${e.callId}'s approval was requested twice (seq ${e.seq})`)
      requested.set(e.callId, e)
      continue
    }
    if (e._tag === "approval.decided") {
      if (!requested.has(e.callId)) violate("R7 approvals", `${e.callId} was decided (seq ${e.seq}) without a request`)
      if (decided.has(e.callId)) violate("R7 approvals", `${e.callId} was decided twice (seq ${e.seq})`)
      const taken = stopping && e.decision !== "expired" ? ({ ...e, decision: "withdrawn" } as const) : e
      decided.set(e.callId, taken)
      if (taken.decision !== "approved" && !(taken.decision === "withdrawn" && refused.has(e.callId))) ending ??= taken
      continue
    }
    // Nothing new starts once a decision ended the run: the model never guesses the decision.
    if (ending !== undefined && (e._tag === "model.requested" || e._tag === "tool.started")) {
      violate("R7 no guess", `${e._tag} (seq ${e.seq}) after ${ending.callId}'s approval was ${ending.decision}`)
    }
    // What the handler does shows only after an approval; a call refused shows only its ending.
    if ("callId" in e && typeof e.callId === "string" && requested.has(e.callId)) {
      const decision = decided.get(e.callId)
      const handled =
        e._tag === "tool.started" ||
        e._tag === "tool.succeeded" ||
        e._tag === "tool.failed" ||
        e._tag === "tool.reconciled" ||
        e._tag === "recovery.started" ||
        e._tag === "recovery.completed" ||
        e._tag === "recovery.failed" ||
        (e._tag === "tool.interrupted" && decision?.decision !== "withdrawn")
      if (handled && decision?.decision !== "approved") {
        violate(
          "R7 approval first",
          `${e._tag} of ${e.callId} (seq ${e.seq}) while its approval is ${decision?.decision ?? "pending"}`
        )
      }
    }
  }
  for (const [callId, request] of requested) {
    const decision = decided.get(callId)
    if (decision === undefined) violate("R7 approvals", `${request.name} (${callId}) was never decided`)
    // A refused call ends blocked, with the code of its refusal.
    const code =
      decision?.decision === "rejected"
        ? "approval_rejected"
        : decision?.decision === "expired"
          ? "approval_expired"
          : undefined
    if (
      code !== undefined &&
      !timeline.some((e) => e._tag === "tool.blocked" && e.callId === callId && e.error.code === code)
    ) {
      violate("R7 approvals", `${callId}'s approval was ${decision?.decision}, and it did not end blocked ${code}`)
    }
  }
  // The first decision that ends the run decides its stop, unless a harder stop came
  // first: an unknown outcome in the batch (R3.8), or the run deadline at that instant.
  const first = [...decided.values()].find((e) => e.decision === "rejected" || e.decision === "expired")
  if (first !== undefined) {
    const expected = stopOf(first)
    const preempted =
      result.stopReason === "unknown_outcome" || (result.stopReason === "run_timeout" && first.at >= runDeadline)
    if (result.stopReason !== expected && !preempted) {
      violate(
        "R7 approval stop",
        `${first.callId}'s approval was ${first.decision}${first.layer === undefined ? "" : ` (${first.layer})`}, the run ended ${result.stopReason}`
      )
    }
  } else if (result.stopReason === "approval_rejected" || result.stopReason === "approval_expired") {
    violate("R7 approval stop", `the run ended ${result.stopReason} without such a decision`)
  }
}
