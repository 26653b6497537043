/**
 * What the approvals table keeps of a decision: the checks of one before it is written, and
 * a row read back as one. Private to the journal.
 */
import { Option } from "effect"
import * as Text from "../../failure/Text.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Approval from "../../tools/Approval.ts"
import type { ApprovalDecision } from "./Models.ts"
import type { ApprovalRow } from "./Store.ts"

const decisions: ReadonlyArray<string> = ["approve", "reject"]

/** Epoch milliseconds a store gives back as it took them: at most the largest a number holds exactly (review 182). */
export const isTime = (value: unknown): value is number =>
  typeof value === "number" && Number.isFinite(value) && Math.abs(value) <= Number.MAX_SAFE_INTEGER

/**
 * A time as every store keeps it: whole milliseconds, the fraction cut (PostgreSQL's `BIGINT`
 * rounded it, and an expiry read back differed from the log's: review 184).
 */
export const stored = (time: number): number => Math.floor(time)

/** What {@link isTime} asks, said of `what`. */
export const timeRule = (what: string): string => `${what} must be epoch milliseconds (finite, of at most 2^53 - 1)`

/** Why the table cannot keep `decision` on a call of `runId`, or `undefined` when it can. */
export const decisionIssue = (runId: string, decision: ApprovalDecision): string | undefined => {
  if (!decisions.includes(decision.decision)) {
    return `a decision is approve or reject, got ${UserCode.shown(decision.decision)}`
  }
  if (!isTime(decision.at)) return timeRule("the decision's time")
  // What a store keeps as text must come back as it was given: no NUL, no half of a surrogate pair.
  for (const [field, text] of [
    ["reason", decision.reason],
    ["by", decision.by]
  ] as const) {
    if (text !== undefined && (typeof text !== "string" || text.includes("\u0000") || !Text.wellFormed(text))) {
      return `the decision's ${field} must be text without a NUL or half of a surrogate pair`
    }
  }
  // What a run waiting on the call would refuse to read (a `by` too long or blank, a reason too
  // long) is not written: the run would end `internal_error` on it (review 182).
  const kept =
    decision.decision === "approve"
      ? Approval.approved(decision.by)
      : Approval.rejected(decision.reason ?? "rejected", decision.by)
  const refused = Approval.checkDecision(runId, decision.callId, kept)
  return refused?._tag === "InvalidDecision" ? refused.message : undefined
}

/** The decision a row holds, if it holds one (not pending, not withdrawn). */
export const toDecision = (row: ApprovalRow): Option.Option<ApprovalDecision> =>
  row.decision === "approve" || row.decision === "reject"
    ? Option.some({
        runId: row.runId,
        callId: row.callId,
        decision: row.decision,
        ...(row.reason === null ? {} : { reason: row.reason }),
        ...(row.decidedBy === null ? {} : { by: row.decidedBy }),
        at: row.decidedAt ?? 0
      })
    : Option.none()
