/**
 * The time-layer invariants of a finished run (R4.1–R4.3): `checkTimeLayers`, part of
 * `check`.
 * Private to the testing kit; `Properties` is the public face.
 */

import * as Event from "../../events/Event.ts"
import type * as Failure from "../../failure/Failure.ts"
import type * as RunResult from "../../run/RunResult.ts"
import * as Deadline from "../../time/Deadline.ts"
import type { Budget } from "./PropertyBudget.ts"
import { epsilon, type Violate } from "./PropertyViolation.ts"

/**
 * A model failure whose attempt timeout the provider reported itself (as
 * `FaultyModel.timeout` does: 30 s claimed at the instant of the request), not the
 * run's attempt layer: no time passed on the run's clock between the request and the
 * failure, and the run's attempt timer only fires after a positive wait (with nothing
 * left of the step or the run, the step or run layer is the one that fires).
 */
const reportedByProvider = (failed: Event.Of<"model.failed">, requested: Event.Of<"model.requested"> | undefined) =>
  requested !== undefined &&
  failed.at === requested.at &&
  failed.failure.timeout?.layer === "attempt" &&
  failed.failure.timeout.elapsedMillis > 0

/** R4.1–R4.3: each timeout names a layer the run has, within its limit; nothing waits past its step. */
/**
 * Whether `resumed` came past the run's deadline (its process was down when it passed): the
 * run then only records, before its `run_timeout`, what its status queries find of its calls
 * in doubt (recording the truth is not waiting). Nothing may start.
 */
export const lateResume = (timeline: ReadonlyArray<Event.Event>, resumed: Event.Of<"run.resumed">): boolean => {
  const started = timeline[0]
  return started?._tag === "run.started" && resumed.at > started.deadlineAt + epsilon
}

/**
 * What a run resumed past its deadline may record after its resume (`resumed`): the results
 * its status queries found for its calls in doubt, the withdrawals of the rest, and its
 * ending. All else past the deadline (work started, an answer, a reminder) is late.
 */
export const recordsLate = (e: Event.Event, resumed: Event.Of<"run.resumed">): boolean => {
  switch (e._tag) {
    case "tool.succeeded":
    case "tool.failed":
    case "tool.reconciled":
    case "recovery.failed":
      return e.callId !== undefined && resumed.inDoubt.includes(e.callId)
    case "run.resumed":
    case "run.stopping":
    case "tool.interrupted":
    case "approval.decided":
    case "termination.decided":
    case "state.changed":
    case "validation.checked":
    case "run.finished":
      return true
    default:
      return false
  }
}

export const checkTimeLayers = (result: RunResult.RunResult, budget: Budget, violate: Violate): void => {
  const timeline = result.timeline
  const started = timeline[0]
  const runDeadline = started?._tag === "run.started" ? started.deadlineAt : Number.POSITIVE_INFINITY
  const stepMillis = budget.stepTimeoutMillis
  const limitOf = (layer: Failure.TimeoutLayer, tool: string | undefined): number | undefined => {
    switch (layer) {
      case "run":
        return budget.runTimeoutMillis
      case "step":
        return stepMillis
      case "attempt":
        return budget.attemptTimeoutMillis
      case "approval":
        return budget.approvalTimeoutMillis
      case "tool":
        return tool === undefined ? undefined : budget.toolTimeoutMillis?.[tool]
      default:
        return undefined
    }
  }
  const timedOut = (
    e: Event.Event,
    timeout: Failure.Timeout,
    tool: string | undefined,
    attemptStart: number | undefined
  ) => {
    const limit = limitOf(timeout.layer, tool)
    const what = `${e._tag}${tool === undefined ? "" : ` of ${tool}`} (seq ${e.seq})`
    if (limit === undefined) {
      violate("R4.2 time layers", `${what} timed out by the ${timeout.layer} layer, which the run does not have`)
    } else if (timeout.elapsedMillis > limit + epsilon) {
      violate(
        "R4.2 time layers",
        `${what} says the ${timeout.layer} layer fired after ${timeout.elapsedMillis} ms, past its limit of ${limit} ms`
      )
    }
    // The run layer reports the run's time; every other layer the wait it cut off.
    // (Jittered delays are fractional: the clock's sums may differ in the last bits.)
    if (
      timeout.layer !== "run" &&
      attemptStart !== undefined &&
      Math.abs(timeout.elapsedMillis - (e.at - attemptStart)) > epsilon
    ) {
      violate(
        "R4.3 timeout report",
        `${what} says ${timeout.elapsedMillis} ms elapsed; the attempt it cut off began ${e.at - attemptStart} ms before`
      )
    }
  }

  // Each step starts at the first model request of its iteration; the run's clock moves forward only.
  let stepDeadline = Number.POSITIVE_INFINITY
  let iteration: number | undefined
  let requested: Event.Of<"model.requested"> | undefined
  /**
   * When the current attempt of each call reached its handler (`tool.started`): at its
   * start, its approval or its retry's wake-up, or later when a restart delayed it. An
   * attempt that never began (its step left it no time) was cut off after 0 ms.
   */
  const begun = new Map<string, number>()
  const requests = new Map<string, Event.Of<"approval.requested">>()
  let resumedLate: Event.Of<"run.resumed"> | undefined
  for (const e of timeline) {
    if (e._tag === "model.requested") {
      requested = e
      if (e.iteration !== iteration) {
        iteration = e.iteration
        stepDeadline = stepMillis === undefined ? Number.POSITIVE_INFINITY : e.at + stepMillis
      }
    }
    // A new attempt is due (its start, its approval, its retry); a restart ends every attempt running.
    if (e._tag === "approval.decided" || e._tag === "recovery.started") {
      if (e.callId !== undefined) begun.delete(e.callId)
    }
    if (e._tag === "run.resumed") {
      begun.clear()
      // Resumed past the run's deadline: what it records of its calls in doubt is the truth
      // its status queries found, not a wait of the step (see `lateResume`).
      resumedLate = lateResume(timeline, e) ? e : undefined
    }
    if (e._tag === "tool.started") begun.set(e.callId, e.at)

    // A retry's wait ends before the deadline of its step (R4.2, R3.3).
    if (
      e._tag === "recovery.started" &&
      !Event.isCorrection(e.kind) &&
      Deadline.hasPassed(stepDeadline, e.at + e.delayMillis)
    ) {
      violate(
        "R4.2 step deadline",
        `${e.kind} at ${e.at} waits ${e.delayMillis} ms, to or past its step's deadline ${stepDeadline}`
      )
    }
    // No answer, result or decision of a step arrives after the step's deadline: every wait is bounded by it.
    // Nor is an attempt settled after it: one that held its step (code that cannot be interrupted),
    // whether it then ended by itself or the run deadline left it behind.
    if (
      (e._tag === "model.responded" ||
        e._tag === "model.failed" ||
        e._tag === "tool.succeeded" ||
        e._tag === "tool.failed" ||
        e._tag === "tool.blocked" ||
        e._tag === "tool.interrupted" ||
        e._tag === "approval.decided") &&
      e.at > stepDeadline + epsilon &&
      !(resumedLate !== undefined && recordsLate(e, resumedLate))
    ) {
      violate("R4.2 step deadline", `${e._tag} (seq ${e.seq}) at ${e.at}, after its step's deadline ${stepDeadline}`)
    }

    if (e._tag === "model.failed" && e.failure.timeout !== undefined) {
      const own = requested?.iteration === e.iteration ? requested : undefined
      if (!reportedByProvider(e, own)) timedOut(e, e.failure.timeout, undefined, own?.at)
    }
    if (e._tag === "tool.failed" && e.error.failure?.timeout !== undefined) {
      timedOut(e, e.error.failure.timeout, e.name, begun.get(e.callId) ?? e.at)
    }
    if (e._tag === "termination.decided" && e.reason === "step_timeout" && stepMillis === undefined) {
      violate("R4.2 time layers", `a step_timeout stop (seq ${e.seq}) without a step timeout`)
    }

    // An approval waits min(its own limit, what is left of the step, of the run) (R4.2).
    if (e._tag === "approval.requested") {
      requests.set(e.callId, e)
      const own =
        budget.approvalTimeoutMillis === undefined ? Number.POSITIVE_INFINITY : e.at + budget.approvalTimeoutMillis
      const expected = Math.min(own, stepDeadline, runDeadline)
      if (Math.abs(e.expiresAt - expected) > epsilon) {
        violate(
          "R4.2 approval wait",
          `${e.name} (${e.callId}) expires at ${e.expiresAt}; min(approval, step, run) is ${expected}`
        )
      }
    }
    if (e._tag === "approval.decided" && e.decision === "expired") {
      const request = requests.get(e.callId)
      const limit = e.layer === undefined ? undefined : limitOf(e.layer, undefined)
      if (limit === undefined) {
        violate(
          "R4.2 time layers",
          `${e.callId}'s approval expired (seq ${e.seq}) by the ${e.layer} layer, which the run does not have`
        )
      } else if (request !== undefined && e.layer !== "run" && e.at - request.at > limit + epsilon) {
        violate(
          "R4.2 time layers",
          `${e.callId}'s approval expired after ${e.at - request.at} ms, past the ${e.layer} limit of ${limit} ms`
        )
      }
      if (request !== undefined && Math.abs(e.at - request.expiresAt) > epsilon) {
        violate("R4.2 approval wait", `${e.callId}'s approval expired at ${e.at}, its expiry was ${request.expiresAt}`)
      }
    }
  }
  if (result.stopReason === "step_timeout" && stepMillis === undefined) {
    violate("R4.2 time layers", "the run ended step_timeout without a step timeout")
  }
}
