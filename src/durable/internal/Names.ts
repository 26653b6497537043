/**
 * The durable names of a run's workflow: each carries the identity of what it stands for (a
 * call id is unique in its run), since the engine memoizes by name alone and a second wait
 * under a used name would get the first one's result. Private to `durable/`.
 */
import { DurableDeferred } from "effect/workflow"
import type * as Approval from "../../tools/Approval.ts"

/** Completed by a user's cancel; the run's body is preempted by it wherever it is. */
export const cancel = DurableDeferred.make("cancel")

/** Completed once the call `callId` is decided (the decision itself is on the journal's approvals table). */
export const approval = (callId: string) => DurableDeferred.make(`approval/${callId}`)

/**
 * The durable timer of the call `callId`'s expiry at `expiresAt`: a resume that brings the expiry
 * closer (a runner's closer deadline or step) gets a timer of its own (review 170: under one name
 * the engine kept the first park's, and the run woke an hour late).
 */
export const expiry = (callId: string, expiresAt: number): string => `approval-expiry/${callId}@${expiresAt}`

/** The wait of a run parked on `approvals`: the first of their decisions, the earliest expiry, a cancel. */
export const parked = (approvals: ReadonlyArray<Approval.Request>): string =>
  `parked/${approvals
    .map((a) => a.callId)
    .sort()
    .join(",")}`

/** The durable timer of a parked run's `round`-th read of the approvals table (see `Body`). */
export const recheck = (parked: string, round: number): string => `${parked}/recheck/${round}`
