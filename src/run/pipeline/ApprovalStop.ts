/**
 * The stop an approval decision forces on the run (R7). Private to the runtime.
 */
import { Predicate } from "effect"
import type * as StopReason from "../../events/StopReason.ts"

/**
 * A decision that ends the run: a rejection, or no decision in time. The executor
 * fails the batch with it (interrupting the rest of the batch), and the loop turns it
 * into the run's stop.
 */
export class Stop {
  readonly _tag = "ApprovalStop"
  readonly reason: Extract<StopReason.StopReason, "approval_rejected" | "approval_expired" | "step_timeout">
  readonly detail: string
  constructor(reason: Stop["reason"], detail: string) {
    this.reason = reason
    this.detail = detail
  }
}

export const isStop = (u: unknown): u is Stop => Predicate.isTagged(u, "ApprovalStop")
