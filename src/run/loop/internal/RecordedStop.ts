/**
 * The stop a resumed batch's log holds already (R3.11, R7, R9): a call's result that stops
 * the run, or a call a person turned down (rejected, or left to expire) whose stop the
 * process died before committing. The batch stops at once, as it did live: the calls it left
 * waiting are let go, never taken up. Private to the loop.
 */
import type * as Event from "../../../events/Event.ts"
import type * as ToolResult from "../../../tools/ToolResult.ts"
import { Stop } from "../../pipeline/ApprovalStop.ts"
import type * as ToolExecutor from "../../pipeline/ToolExecutor.ts"
import type { Config } from "./LoopConfig.ts"
import { type CallStop, callStop } from "./LoopStops.ts"

/** The stop a person's answer recorded as `result` made: the step's when the step deadline expired the wait. */
const turnedDown = (tail: ReadonlyArray<Event.Event>, result: ToolResult.ToolResult): Stop | undefined => {
  const code = result.error?.code
  if (result.status !== "blocked" || (code !== "approval_rejected" && code !== "approval_expired")) return undefined
  const message = result.error?.message ?? code
  if (code === "approval_rejected") return new Stop("approval_rejected", message)
  const decided = tail.findLast((e) => e._tag === "approval.decided" && e.callId === result.callId)
  const step = decided?._tag === "approval.decided" && decided.layer === "step"
  return new Stop(step ? "step_timeout" : "approval_expired", message)
}

/** The first stop among the results of `standings` (the batch's calls, as its log `tail` has them). */
export const recordedStop = <R>(
  config: Config<R>,
  tail: ReadonlyArray<Event.Event>,
  standings: ReadonlyArray<ToolExecutor.Standing>
): Stop | CallStop | undefined => {
  for (const standing of standings) {
    if (standing._tag !== "Done") continue
    const stop = turnedDown(tail, standing.result) ?? callStop(config, standing.result)
    if (stop !== undefined) return stop
  }
  return undefined
}

/** Whether a resumed batch's log (`tail`, its calls' `standings`) holds its stop already. */
export const holdsStop = <R>(
  config: Config<R>,
  tail: ReadonlyArray<Event.Event>,
  standings: ReadonlyArray<ToolExecutor.Standing>
): boolean => recordedStop(config, tail, standings) !== undefined
