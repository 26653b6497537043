/**
 * Why a run stopped, from its log alone (R13): `explain` reads a timeline (a result's
 * `timeline`, or a journal's log) and gives a typed {@link Explanation}; `format` gives
 * it as text for people.
 *
 * It says the status and stop reason, the policy that decided and its detail; each
 * counter beside its limit (as `run.started` recorded them); what repeated (the call's
 * signature, the unchanged observation, the failure); for a timeout, the layer that fired,
 * its deadline, the state the run was in and what it had in flight; the actions of
 * unknown outcome; the checks that failed and the plan steps done and not done; the
 * approval decided and by whom; a cancel and what it cut off; and the next safe step. A
 * log without `run.finished` is a run still going, or one that stopped without an
 * ending (a crash): what was in flight when the log stops is then listed.
 *
 * ```ts
 * const result = yield* Run.run(options)
 * console.log(Explain.format(Explain.explain(result.timeline)))
 * ```
 *
 * @since 0.3.0
 */
import * as Counters from "../events/Counters.ts"
import type * as Event from "../events/Event.ts"
import * as RunLog from "../events/RunLog.ts"
import * as StopReason from "../events/StopReason.ts"
import * as Termination from "../termination/Termination.ts"
import * as Facts from "./internal/ExplainFacts.ts"
import * as Limits from "./internal/ExplainLimits.ts"
import type * as M from "./internal/ExplainModel.ts"
import * as Repetitions from "./internal/ExplainRepetition.ts"
import { format } from "./internal/ExplainText.ts"

export type {
  ApprovalSeen,
  Cancellation,
  Deadline,
  Decision,
  Explanation,
  FailureSeen,
  Gauge,
  InFlight,
  NextStep,
  PendingAction,
  PlanItem,
  Repetition,
  ValidationSeen
} from "./internal/ExplainModel.ts"

export {
  /**
   * An explanation as text, one fact a line, for a terminal or a log.
   *
   * @category formatting
   * @since 0.3.0
   */
  format
}

/**
 * The actions of a timeline that may or may not have taken effect, still to reconcile
 * (R3.8, R5.2): what a result's `pendingActions` lists.
 *
 * @category getters
 * @since 0.3.0
 */
export const pendingActions: (
  timeline: ReadonlyArray<Event.Event>
) => ReadonlyArray<M.Explanation["pendingActions"][number]> = Facts.pendingActions

/**
 * The first call of a timeline whose reported success its postcondition contradicted (R6.4):
 * the check answered no (or not a boolean), failed, or did not answer within its tool's
 * timeout. One the step deadline cut off contradicted nothing: the step ended first. The
 * run does not build on such a call, and its world is to be checked first.
 *
 * @category getters
 * @since 0.3.0
 */
export const contradicted = (timeline: ReadonlyArray<Event.Event>): Event.Of<"tool.failed"> | undefined =>
  timeline.find(
    (e): e is Event.Of<"tool.failed"> =>
      e._tag === "tool.failed" && e.error.code === "inconsistent_result" && e.error.failure?.timeout?.layer !== "step"
  )

type Timeline = ReadonlyArray<Event.Event>

const last = <Tag extends Event.Event["_tag"]>(timeline: Timeline, tag: Tag): Event.Of<Tag> | undefined =>
  timeline.findLast((e): e is Event.Of<Tag> => e._tag === tag)

const indexOf = (timeline: Timeline, event: Event.Event | undefined): number =>
  event === undefined ? timeline.length : timeline.indexOf(event)

const decisionOf = (
  timeline: Timeline,
  reason: StopReason.StopReason | undefined,
  start: number
): M.Decision | undefined => {
  if (reason === "validation_failed") {
    // The checks that fail the validation, as the run's report lists them: an optional step's does not.
    const fails = Facts.failsValidation(timeline)
    const failed = timeline.flatMap((e) => (e._tag === "validation.checked" && fails(e.check) ? [e.check.detail] : []))
    const finished = last(timeline, "run.finished")
    return {
      policy: "validation",
      reason,
      detail: `the final answer is not backed: ${failed.join("; ")}`,
      own: false,
      seq: undefined,
      atMillis: finished === undefined ? undefined : finished.at - start
    }
  }
  const decided =
    timeline.findLast(
      (e): e is Event.Of<"termination.decided"> => e._tag === "termination.decided" && e.reason === reason
    ) ?? last(timeline, "termination.decided")
  if (decided === undefined) return undefined
  const listed = last(timeline, "run.started")?.policies ?? []
  return {
    policy: decided.policy,
    reason: decided.reason,
    detail: decided.detail,
    // Recorded by the run; in a log written before it was, a policy of the run's list that
    // stops as no built-in does (a built-in's name with another reason included).
    own:
      decided.own === true ||
      (listed.includes(decided.policy) && !Termination.isBuiltInStop(decided.policy, decided.reason)),
    seq: decided.seq,
    atMillis: decided.at - start
  }
}

/** The attempt's deadline the failure at `index` ran against, and the layer that set it. */
const attemptBefore = (timeline: Timeline, index: number): Event.Of<"model.requested" | "tool.started"> | undefined => {
  const failed = timeline[index]
  for (let i = index - 1; i >= 0; i--) {
    const e = timeline[i]
    if (e === undefined) continue
    if (failed?._tag === "model.failed" && e._tag === "model.requested") return e
    if (failed?._tag === "tool.failed" && e._tag === "tool.started" && e.callId === failed.callId) return e
  }
  return undefined
}

const limitOfLayer = (limits: Readonly<Record<string, number>> | undefined, layer: string): number | undefined =>
  limits?.[`${layer}TimeoutMillis`]

/** The step a run's decision at `index` ended (R4.2): where it began, where its last model attempt did, its deadline. */
interface Step {
  readonly began: Event.Of<"model.requested">
  readonly lastRequest: number
  readonly deadlineAt: number
}

const stepBefore = (
  timeline: Timeline,
  index: number,
  limits: Readonly<Record<string, number>> | undefined
): Step | undefined => {
  const lastRequest = timeline.slice(0, index).findLastIndex((e) => e._tag === "model.requested")
  const request = timeline[lastRequest]
  if (request?._tag !== "model.requested") return undefined
  // The step began at its iteration's first model request, and keeps its deadline across retries and resumes.
  const requests = timeline.filter(
    (e): e is Event.Of<"model.requested"> => e._tag === "model.requested" && e.iteration === request.iteration
  )
  const began = requests[0] ?? request
  const bounded = requests.find((e) => e.layer === "step")
  const limit = limitOfLayer(limits, "step")
  const deadlineAt = bounded?.deadlineAt ?? (limit === undefined ? undefined : began.at + limit)
  return deadlineAt === undefined ? undefined : { began, lastRequest, deadlineAt }
}

/** The time layer that fired, from the stop the deadline recorded or the failure it caused. */
const deadlineOf = (
  timeline: Timeline,
  reason: StopReason.StopReason | undefined,
  failure: M.FailureSeen | undefined,
  approval: M.ApprovalSeen | undefined,
  limits: Readonly<Record<string, number>> | undefined,
  step: Step | undefined
): M.Deadline | undefined => {
  const start = timeline[0]?.at ?? 0
  const started = last(timeline, "run.started")
  // The run's deadline: its start's, or the closer one a resume set.
  const runDeadlineAt = started === undefined ? undefined : RunLog.deadlineOf(timeline)
  const stopping = last(timeline, "run.stopping")
  if (reason === "run_timeout" && stopping?.by === "deadline") {
    return {
      layer: "run",
      firedAtMillis: stopping.at - start,
      deadlineAt: runDeadlineAt,
      limitMillis: limitOfLayer(limits, "run"),
      elapsedMillis: undefined,
      state: stopping.state,
      inFlight: Facts.inFlightAt(timeline, indexOf(timeline, stopping))
    }
  }
  if (
    approval !== undefined &&
    approval.decision === "expired" &&
    (reason === "approval_expired" || reason === "step_timeout")
  ) {
    const decided = timeline.findLast((e) => e._tag === "approval.decided" && e.callId === approval.callId)
    const layer = approval.layer ?? "approval"
    return {
      layer,
      firedAtMillis: approval.decidedAtMillis,
      deadlineAt: approval.expiresAt,
      limitMillis: limitOfLayer(limits, layer),
      elapsedMillis: approval.decidedAtMillis - approval.requestedAtMillis,
      state: undefined,
      inFlight: Facts.inFlightAt(timeline, indexOf(timeline, decided))
    }
  }
  const timeout = failure?.timeout
  if (reason === "run_timeout" && timeout?.layer !== "run") {
    const decided = last(timeline, "termination.decided")
    // A policy of the user's that stopped with `run_timeout` is no deadline that fired: it says so
    // itself; nor is a retry refused because it would have ended past the deadline (R3.3).
    if (decided !== undefined && decided.policy !== "run_timeout") return undefined
    if (timeline.some((e) => e._tag === "tool.failed" && e.error.notRetriedFor === "deadline")) return undefined
    // Nor is a stop decided before the deadline: a model retry that would have waited past it.
    if (decided !== undefined && runDeadlineAt !== undefined && decided.at < runDeadlineAt) return undefined
    return {
      layer: "run",
      firedAtMillis: decided === undefined ? undefined : decided.at - start,
      deadlineAt: runDeadlineAt,
      limitMillis: limitOfLayer(limits, "run"),
      elapsedMillis: undefined,
      state: undefined,
      inFlight: []
    }
  }
  const stopDecided = last(timeline, "termination.decided")
  // The step's own deadline, passed when the stop was decided with no timeout of the step's to
  // show for it: an answer, or a failure, that came after it (code that blocked past it).
  if (
    reason === "step_timeout" &&
    step !== undefined &&
    stopDecided !== undefined &&
    stopDecided.at >= step.deadlineAt &&
    timeout?.layer !== "step"
  ) {
    const passedAt = timeline.findIndex((e, i) => i > step.lastRequest && e.at >= step.deadlineAt)
    return {
      layer: "step",
      firedAtMillis: stopDecided.at - start,
      deadlineAt: step.deadlineAt,
      limitMillis: limitOfLayer(limits, "step"),
      elapsedMillis: stopDecided.at - step.began.at,
      state: undefined,
      inFlight: Facts.inFlightAt(timeline, passedAt === -1 ? indexOf(timeline, stopDecided) : passedAt)
    }
  }
  if (failure === undefined || timeout === undefined) return undefined
  const at = timeline.findIndex((e) => e.seq === failure.seq)
  const attempt = attemptBefore(timeline, at)
  return {
    layer: timeout.layer,
    firedAtMillis: (timeline[at]?.at ?? start) - start,
    deadlineAt: attempt?.layer === timeout.layer ? attempt.deadlineAt : undefined,
    limitMillis: limitOfLayer(limits, timeout.layer),
    elapsedMillis: timeout.elapsedMillis,
    state: undefined,
    inFlight: Facts.inFlightAt(timeline, at)
  }
}

/** The stops whose explanation names the failure behind them, and which source it came from. */
const failureSources: Partial<Record<StopReason.StopReason, "model" | "tool" | "either">> = {
  tool_error: "tool",
  inconsistent_result: "tool",
  unknown_outcome: "tool",
  max_tool_errors: "tool",
  model_error: "model",
  content_filtered: "model",
  recovery_exhausted: "either",
  step_timeout: "either",
  run_timeout: "either"
}

const repetitions: Partial<Record<StopReason.StopReason, M.Repetition["_tag"]>> = {
  repeated_tool_call: "call",
  loop_detected: "observation",
  repeated_tool_failure: "failure"
}

const cancellationOf = (timeline: Timeline, start: number): M.Cancellation => {
  const stopping = last(timeline, "run.stopping")
  const finished = last(timeline, "run.finished")
  const cancel = stopping?.by === "cancel" ? stopping : undefined
  return {
    atMillis: ((cancel ?? finished)?.at ?? start) - start,
    state: cancel?.state,
    by: undefined,
    inFlight: cancel === undefined ? [] : Facts.inFlightAt(timeline, indexOf(timeline, cancel))
  }
}

/**
 * Why the run of this timeline stopped, or that its log has no ending. With `given`, the
 * ending the run's caller was given, where it differs from the one its log ends with: a run
 * another process took over before its last commit ends `internal_error`, its own ending
 * never recorded (review 151: it was explained as completed, nothing to do).
 *
 * @category constructors
 * @since 0.3.0
 */
export const explain = (
  timeline: ReadonlyArray<Event.Event>,
  given?: Pick<Event.Of<"run.finished">, "status" | "stopReason">
): M.Explanation => {
  const start = timeline[0]?.at ?? 0
  const started = last(timeline, "run.started")
  const limits = RunLog.limitsOf(timeline)
  const logged = last(timeline, "run.finished")
  // This process's ending, which its log holds and the run's journal does not.
  const unrecorded =
    logged !== undefined &&
    given !== undefined &&
    (given.status !== logged.status || given.stopReason !== logged.stopReason)
      ? logged
      : undefined
  const finished = unrecorded !== undefined && given !== undefined ? { ...unrecorded, ...given } : logged
  const reason = finished?.stopReason
  const counters = Counters.fold(timeline)
  const decision = decisionOf(timeline, reason, start)
  const source = reason === undefined ? undefined : failureSources[reason]
  const decidedAt = decision?.seq === undefined ? timeline.length : timeline.findIndex((e) => e.seq === decision.seq)
  // A step's stop is explained by the step that ended: a failure of an earlier step, or of an
  // attempt of this one that was retried, was recovered from.
  const step = reason === "step_timeout" ? stepBefore(timeline, decidedAt, limits) : undefined
  const failure =
    source === undefined
      ? undefined
      : Facts.lastFailure(timeline, decidedAt, source === "either" ? undefined : source, step?.lastRequest)
  const approval =
    reason === "approval_rejected"
      ? Facts.approvalOf(timeline, ["rejected"])
      : reason === "approval_expired" || reason === "step_timeout"
        ? Facts.approvalOf(timeline, ["expired"])
        : undefined
  const repetition = reason === undefined ? undefined : repetitions[reason]
  const facts: Omit<M.Explanation, "next"> = {
    runId: timeline[0]?.runId ?? "",
    ended: finished !== undefined,
    status: finished?.status,
    stopReason: reason,
    state: counters.state,
    summary:
      reason === undefined
        ? "The log has no run.finished: the run is still running, or it stopped without an ending (a crash)."
        : decision?.own === true
          ? `The run's own policy "${decision.policy}" stopped it (${reason}).`
          : StopReason.describe[reason],
    decision,
    elapsedMillis: counters.elapsedMillis,
    startedAt: start,
    resumes: timeline.filter((e) => e._tag === "run.resumed").length,
    // A policy of the run's own passed a limit of its own, not the built-in one of its reason.
    gauges: Limits.gauges(started, limits, counters, decision?.own === true ? undefined : reason),
    repetition: repetition === undefined ? undefined : Repetitions.repetitionOf(timeline, repetition),
    failure,
    deadline: deadlineOf(timeline, reason, failure, approval, limits, step),
    approval,
    cancellation: reason === "cancelled" ? cancellationOf(timeline, start) : undefined,
    inFlight: finished === undefined ? Facts.inFlightAt(timeline, timeline.length) : [],
    pendingActions: Facts.pendingActions(timeline),
    validation: Facts.validationOf(timeline)
  }
  // A success its postcondition contradicted stays the first thing to check, even when a cancel
  // or the deadline then cut the run's validation short (R6.4).
  const gaveUp = reason === "recovery_exhausted" ? Limits.gaveUpOn(timeline, decidedAt) : undefined
  if (unrecorded !== undefined) return overtaken(facts, unrecorded)
  return { ...facts, next: Limits.nextStep(facts, contradicted(timeline), gaveUp) }
}

/** The explanation of a run another process took over before this process's ending was recorded. */
const overtaken = (facts: Omit<M.Explanation, "next">, unrecorded: Event.Of<"run.finished">): M.Explanation => ({
  ...facts,
  summary: `Another process took the run over before this process's ending (${unrecorded.status}, ${unrecorded.stopReason}) was recorded: the run is that process's.`,
  decision: undefined,
  next: {
    kind: "none",
    limit: undefined,
    callIds: [],
    text: "nothing here: the run's ending is the other process's, in its journal (DurableRuns.result, or the stored result Run.resume gives)"
  }
})
