/**
 * The approval gate of a scenario: `Approvals`, what it saw and did, and
 * `makeApprovals`, which builds one that decides each call as the case's plan says.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Effect } from "effect"
import * as Approval from "../../tools/Approval.ts"
import type { ToolOutcome } from "./PropertyCase.ts"

/**
 * What the scenario's approval gate saw and did. It decides each call as the call's
 * plan says, from the fiber that waits: `afterMillis` after the request was made it delivers the
 * decision (on `TestClock`, so exactly then), or never.
 *
 * @category models
 * @since 0.1.0
 */
export interface Approvals {
  /** The gate the run is given (`Layer.succeed(Approval.ApprovalGate, gate)`). */
  readonly gate: Approval.Gate
  /** Every request the run put on the gate, in order. */
  readonly requests: ReadonlyArray<Approval.Request>
  /** Every decision the gate delivered, when it delivered it. */
  readonly delivered: ReadonlyArray<{
    readonly callId: string
    readonly decision: "approved" | "rejected"
    readonly at: number
  }>
  /** Requests whose wait was interrupted before a decision (expiry, a deadline, a sibling's stop). */
  readonly withdrawn: ReadonlyArray<{ readonly callId: string; readonly at: number }>
  /** The requests waiting now: none once the run has ended. */
  readonly pending: ReadonlyArray<Approval.Request>
}

/**
 * The approval gate of a scenario: decides each call as `plan` says, `afterMillis` after
 * the call's request was made (a request a resumed run puts back keeps its time, so a
 * gate made anew after a restart decides it when the first would have). `approved`, the
 * calls approved so far, is the world's: a restarted process's gate adds to it.
 */
export const makeApprovals = (
  plan: ReadonlyMap<string, ToolOutcome>,
  approved: Set<string> = new Set()
): Approvals & { readonly approved: Set<string> } => {
  const requests: Array<Approval.Request> = []
  const delivered: Array<Approvals["delivered"][number]> = []
  const withdrawn: Array<Approvals["withdrawn"][number]> = []
  const waiting = new Map<string, Approval.Request>()
  const at = Effect.clockWith((clock) => clock.currentTimeMillis)
  const gate: Approval.Gate = {
    request: (request) =>
      Effect.suspend(() => {
        const callId = request.callId
        requests.push(request)
        waiting.set(callId, request)
        const outcome = plan.get(callId)
        const script = outcome?._tag === "NeedsApproval" ? outcome : undefined
        // As every gate must, it takes no decision at or after the call's expiry (R7).
        const wait: Effect.Effect<Approval.Decision> =
          script === undefined || script.decision === "never"
            ? Effect.never
            : Effect.gen(function* () {
                yield* Effect.sleep(Math.max(0, request.requestedAt + script.afterMillis - (yield* at)))
                if ((yield* at) >= request.expiresAt) return yield* Effect.never
                return script.decision === "approve"
                  ? Approval.approved("property")
                  : Approval.rejected("the scripted decision", "property")
              })
        return wait.pipe(
          Effect.tap((decision) =>
            Effect.map(at, (now) => {
              waiting.delete(callId)
              if (decision._tag === "Approved") approved.add(callId)
              delivered.push({ callId, decision: decision._tag === "Approved" ? "approved" : "rejected", at: now })
            })
          ),
          Effect.onInterrupt(() =>
            Effect.map(at, (now) => {
              waiting.delete(callId)
              withdrawn.push({ callId, at: now })
            })
          )
        )
      }),
    decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
    pending: Effect.sync(() => [...waiting.values()])
  }
  return {
    gate,
    requests,
    delivered,
    withdrawn,
    get pending() {
      return [...waiting.values()]
    },
    approved
  }
}
