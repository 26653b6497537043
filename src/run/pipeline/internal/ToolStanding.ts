/**
 * Where each call of a resumed run's last batch stands in its log (R9, R3.8): what the
 * pipeline still has to do for it, read from the events alone. Re-exported from
 * `ToolExecutor`. Private to the runtime.
 */
import type * as Event from "../../../events/Event.ts"
import type * as Failure from "../../../failure/Failure.ts"
import * as ToolResult from "../../../tools/ToolResult.ts"

/**
 * - `New`: nothing of the call is in the log but its `model.responded`: it runs as every
 *   call does (its checks run again if they had begun, since they leave no record).
 * - `Checked`: a person decided on its approval and no handler ran: `approved` when the
 *   person approved it, so nobody is asked twice.
 * - `Waiting`: a person was asked and has not answered: the request is put back with its
 *   original expiry.
 * - `InDoubt`: an attempt of its handler began and nothing says how it ended: whether
 *   it took effect is unknown.
 * - `Retrying`: an attempt failed and the call was waiting to retry until `wakeAt`: the
 *   rest of the wait, then the next attempt.
 * - `Done`: it has its result, which is not run again.
 *
 * @category models
 * @since 0.3.0
 */
export type Standing =
  | { readonly _tag: "New" }
  | { readonly _tag: "Checked"; readonly approved: boolean }
  | {
      readonly _tag: "Waiting"
      readonly requestedAt: number
      readonly expiresAt: number
      readonly layer?: Failure.TimeoutLayer | undefined
    }
  | {
      readonly _tag: "InDoubt"
      readonly attempt: number
      /** Whether the attempt's interruption is in the log already (its `tool.interrupted`). */
      readonly recorded: boolean
      /** Whether the attempt was a retry: its episode is open, its end still to be recorded. */
      readonly retry: boolean
    }
  | { readonly _tag: "Retrying"; readonly attempt: number; readonly wakeAt: number }
  | { readonly _tag: "Done"; readonly result: ToolResult.ToolResult }

export const fresh: Standing = { _tag: "New" }

/** The standing of the call `callId` from the events of its batch (those after its `model.responded`). */
export const standingOf = (events: ReadonlyArray<Event.Event>, callId: string): Standing => {
  let standing: Standing = fresh
  for (const e of events) {
    if (!("callId" in e) || e.callId !== callId) continue
    switch (e._tag) {
      case "approval.requested":
        standing = { _tag: "Waiting", requestedAt: e.at, expiresAt: e.expiresAt, layer: e.layer }
        break
      case "approval.decided":
        // A rejection or an expiry ends the call with its `tool.blocked`, which follows.
        standing = { _tag: "Checked", approved: e.decision === "approved" }
        break
      case "tool.started":
        // A retry, or the attempt that ran again for one in doubt (its episode still open).
        standing = {
          _tag: "InDoubt",
          attempt: e.attempt,
          recorded: false,
          retry: standing._tag === "Retrying" || (standing._tag === "InDoubt" && standing.retry)
        }
        break
      case "tool.interrupted":
        // The attempt's interruption was recorded before the log stopped: it is still in doubt, said once.
        if (standing._tag === "InDoubt" && e.attempt === standing.attempt)
          standing = { _tag: "InDoubt", attempt: standing.attempt, recorded: true, retry: standing.retry }
        break
      case "recovery.started":
        if (standing._tag === "InDoubt") {
          standing = { _tag: "Retrying", attempt: standing.attempt, wakeAt: e.at + e.delayMillis }
        }
        break
      case "tool.succeeded":
        return {
          _tag: "Done",
          result: { callId, name: e.name, status: "succeeded", output: e.output, observation: e.observation }
        }
      case "tool.failed":
        return {
          _tag: "Done",
          result: ToolResult.failed(
            callId,
            e.name,
            e.error,
            e.error.code === "inconsistent_result" ? "inconsistent" : "failed"
          )
        }
      case "tool.blocked":
        return { _tag: "Done", result: ToolResult.failed(callId, e.name, e.error, "blocked") }
    }
  }
  return standing
}
