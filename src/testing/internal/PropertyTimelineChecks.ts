/**
 * The shape of a finished run's timeline (R8, R5.2, R2.5): `checkCalls` (each tool call
 * starts once, ends at most once, or is recorded interrupted) and `checkEnding` (one
 * `run.finished`, last, agreeing with the result; `seq` without gaps; the counters its
 * fold), both part of `check`; and `ofTag`, the events of one tag.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Record as Rec } from "effect"
import * as Counters from "../../events/Counters.ts"
import * as Event from "../../events/Event.ts"
import * as StopReason from "../../events/StopReason.ts"
import type * as RunResult from "../../run/RunResult.ts"
import type { Violate } from "./PropertyViolation.ts"

/** The events of `timeline` tagged `tag`, in order. */
export const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

/**
 * The run as its own log ends it. A process fenced off at its last commit (another one
 * resumed the run meanwhile) gives `failed`/`internal_error` by the `runtime`
 * (`unknown_outcome`/`internal_error` while it left a call in doubt), with `unrecorded` set, while its timeline keeps its own `run.finished` (`Closing`'s
 * `overtaken`). Such a result is checked against that `run.finished` instead: its status,
 * its stop reason and the policy that decided it (the log's last decision of that reason).
 * Every other result is returned as it is.
 */
export const ownEnding = (result: RunResult.RunResult): RunResult.RunResult => {
  const finished = result.timeline.at(-1)
  const relabelled =
    result.unrecorded !== undefined &&
    (result.status === "failed" || result.status === "unknown_outcome") &&
    result.stopReason === "internal_error" &&
    result.policy === "runtime" &&
    finished?._tag === "run.finished" &&
    (finished.status !== result.status || finished.stopReason !== result.stopReason)
  if (!relabelled) return result
  const decided = result.timeline.findLast((e) => e._tag === "termination.decided" && e.reason === finished.stopReason)
  const policy =
    decided?._tag === "termination.decided"
      ? decided.policy
      : finished.stopReason === "validation_failed"
        ? "validation"
        : "runtime"
  return { ...result, status: finished.status, stopReason: finished.stopReason, policy }
}

const terminal: ReadonlySet<string> = new Set(["completed", "partial", "failed", "cancelled", "unknown_outcome"])

/**
 * R8: each tool call is asked for once (its `model.responded`), every event of it comes
 * after, its attempts (`tool.started`) are numbered upwards, and it ends (succeeded, failed
 * or blocked) at most once. R5.2: a call begun (an event of its own) that never ended has
 * a `tool.interrupted`, and no attempt of a call is settled twice.
 */
export const checkCalls = (result: RunResult.RunResult, violate: Violate): void => {
  const timeline = result.timeline
  const asked = new Set<string>()
  const begun = new Set<string>()
  const attempts = new Map<string, number>()
  const ends = new Map<string, number>()
  for (const e of timeline) {
    if (e._tag === "model.responded")
      for (const callId of e.callIds) {
        if (asked.has(callId)) violate("R8 timeline", `${callId} asked for twice (seq ${e.seq})`)
        asked.add(callId)
      }
    const callId = Event.callIdOf(e)
    if (callId === undefined) continue
    if (!asked.has(callId))
      violate("R8 timeline", `${e._tag} for ${callId} before the model.responded that asked for it`)
    begun.add(callId)
    if (e._tag === "tool.started") {
      const last = attempts.get(callId) ?? 0
      if (e.attempt < last) violate("R8 timeline", `${callId} attempt ${e.attempt} started after its attempt ${last}`)
      attempts.set(callId, e.attempt)
    }
    if (Event.isResult(e)) {
      ends.set(callId, (ends.get(callId) ?? 0) + 1)
    }
  }
  // R5.2: a call begun that did not end was interrupted, and the timeline says what became of it.
  const interrupted = new Set(ofTag(timeline, "tool.interrupted").map((e) => e.callId))
  for (const callId of begun) {
    if (!ends.has(callId) && !interrupted.has(callId)) {
      const last = timeline.findLast((e) => "callId" in e && e.callId === callId)
      violate(
        "R5.2 calls accounted for",
        `${callId} began and neither ended nor was recorded interrupted (its last event: ${last?._tag} at seq ${last?.seq}); the run ended ${result.stopReason}`
      )
    }
  }
  for (const [callId, n] of ends) if (n > 1) violate("R8 timeline", `${callId} ended ${n} times`)
  // R5.2: each attempt of a call is settled at most once, and so is the call between its attempts.
  const settled = new Set<string>()
  for (const e of ofTag(timeline, "tool.interrupted")) {
    const key = `${e.callId}#${e.attempt}`
    if (settled.has(key)) violate("R5.2 one settlement per attempt", `${e.callId} attempt ${e.attempt} settled twice`)
    settled.add(key)
  }
}

/**
 * R3.8: what a process fenced off at its last commit was given ({@link ownEnding}) is held to
 * its calls in doubt all the same: `unknown_outcome` exactly while a call of `mayActTwice` is
 * pending (review 168: the kit checked only the log's own ending).
 */
export const checkOvertaken = (
  given: RunResult.RunResult,
  violate: Violate,
  mayActTwice: ReadonlyArray<string> | undefined
): void => {
  if (mayActTwice === undefined) return
  const doubted = given.pendingActions.filter((p) => mayActTwice.includes(p.name)).map((p) => p.name)
  if (doubted.length > 0 !== (given.status === "unknown_outcome")) {
    const pending = doubted.length > 0 ? `${doubted.join(", ")} pending` : "no call that may not be sent twice pending"
    violate("R3.8 unknown outcome", `fenced off, the process was given ${given.status} with ${pending}`)
  }
}

/**
 * R2.5: `run.started` first, exactly one `run.finished`, last, agreeing with the result;
 * a terminal status and a `StopReason` from `StopReason.all`. R8: `seq` numbered without
 * gaps, and the result's counters equal to the timeline's fold.
 */
export const checkEnding = (
  result: RunResult.RunResult,
  violate: Violate,
  /** The tools whose calls may not be sent twice, when the budget names them (`Budget.mayActTwice`). */
  mayActTwice?: ReadonlyArray<string>
): void => {
  const timeline = result.timeline
  const started = timeline[0]
  if (started?._tag !== "run.started") violate("R2.5 ending", `the first event is ${started?._tag ?? "missing"}`)
  const finished = ofTag(timeline, "run.finished")
  const last = timeline[timeline.length - 1]
  if (finished.length !== 1) violate("R2.5 ending", `${finished.length} run.finished events`)
  if (last?._tag !== "run.finished") violate("R2.5 ending", `the last event is ${last?._tag ?? "missing"}`)
  else if (last.status !== result.status || last.stopReason !== result.stopReason) {
    violate(
      "R2.5 ending",
      `run.finished says ${last.status}/${last.stopReason}, the result ${result.status}/${result.stopReason}`
    )
  }
  if (!terminal.has(result.status)) violate("R2.5 ending", `status ${result.status} is not terminal`)
  if (!StopReason.all.includes(result.stopReason))
    violate("R2.5 ending", `stop reason ${result.stopReason} is not in StopReason.all`)
  if ((result.status === "completed") !== (result.stopReason === "goal_reached")) {
    violate("R2.5 ending", `status ${result.status} with stop reason ${result.stopReason}`)
  }
  if ((result.status === "cancelled") !== (result.stopReason === "cancelled")) {
    violate("R2.5 ending", `status ${result.status} with stop reason ${result.stopReason}`)
  }
  // An unknown outcome is its own status; a run another stop ended while an action that may not
  // be sent twice was in doubt has it too, and only then, the action pending (R3.8). Without the
  // budget's names of such tools, an action pending of whatever tool allows it.
  const inDoubt = result.pendingActions.some((p) => mayActTwice?.includes(p.name) ?? true)
  const own = result.stopReason === "unknown_outcome"
  const other = !own && result.stopReason !== "goal_reached" && result.stopReason !== "cancelled"
  if (own ? result.status !== "unknown_outcome" : result.status === "unknown_outcome" && !(other && inDoubt)) {
    violate("R2.5 ending", `status ${result.status} with stop reason ${result.stopReason}`)
  } else if (
    mayActTwice !== undefined &&
    inDoubt &&
    (other ? result.status !== "unknown_outcome" : result.status === "completed")
  ) {
    // A final answer given while such an action is pending is never `completed` (review 165).
    const names = result.pendingActions.map((p) => p.name).join(", ")
    violate("R3.8 unknown outcome", `status ${result.status} while ${names} may or may not have taken effect`)
  }
  const gap = timeline.findIndex((e, i) => e.seq !== i)
  if (gap >= 0) violate("R8 timeline", `event ${gap} has seq ${timeline[gap]?.seq}`)
  const folded = Counters.snapshot(Counters.fold(timeline))
  for (const key of Rec.keys(folded)) {
    if (folded[key] !== result.counters[key]) {
      violate("R8 counters", `${key}: the result says ${result.counters[key]}, the timeline folds to ${folded[key]}`)
    }
  }
  // The result's own elapsed time too, not only its counters' (review 175: one that lied passed).
  if (result.elapsedMillis !== folded.elapsedMillis) {
    violate(
      "R8 counters",
      `elapsedMillis: the result says ${result.elapsedMillis}, the timeline folds to ${folded.elapsedMillis}`
    )
  }
}
