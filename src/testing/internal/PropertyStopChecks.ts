/**
 * R2.5, R10: the stop reason a run ended with has its witness in its own log: a limit's
 * stop its counter at the limit, an error's stop the failure the run did not get past (the
 * last of its episode, with no `recovery.completed` and no model answer after it), a
 * deadline's stop the deadline (or a retry it refused), a cancel the cancel, an unknown
 * outcome a call in doubt, a defect the runtime's `internal_error` decision with nothing
 * validated after it. A relabelled ending (a `model_error` read as `max_iterations` at 1 of
 * 5 iterations, a completed run read as `run_timeout`) is a violation. Private to the
 * testing kit; `Properties` is the public face.
 */
import * as Counters from "../../events/Counters.ts"
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import type * as StopReason from "../../events/StopReason.ts"
import * as Explain from "../../explain/Explain.ts"
import type * as Failure from "../../failure/Failure.ts"
import * as Model from "../../model/Model.ts"
import type * as RunResult from "../../run/RunResult.ts"
import * as Termination from "../../termination/Termination.ts"
import { ofTag } from "./PropertyTimelineChecks.ts"
import { epsilon, type Violate } from "./PropertyViolation.ts"

type Timeline = ReadonlyArray<Event.Event>

/** The limits whose counter at the limit is the stop, by the built-in policy (named as its stop) that enforces them. */
const limitOf: Partial<Record<StopReason.StopReason, ReadonlyArray<string>>> = {
  max_iterations: ["maxIterations"],
  max_tool_calls: ["maxToolCalls"],
  repeated_tool_call: ["repeatedToolCall"],
  max_tool_errors: ["maxToolErrors"],
  empty_output: ["maxEmptyOutputs"],
  loop_detected: ["loopThreshold"],
  budget_exhausted: ["maxTokens", "maxCostUsd"]
}

/**
 * Whether a policy of the user's made the stop: one the run lists (`run.started`'s
 * `policies`) that the run recorded as the user's own (`termination.decided`'s `own`), or,
 * in a log written before it did, that is not built in or stops as no built-in does. Every other stop (`runtime`, `step_timeout`, `validation`, a built-in's) is
 * the runtime's, whose stop the log must witness.
 */
const usersOwn = (timeline: Timeline, policy: string, reason: StopReason.StopReason): boolean => {
  const started = timeline[0]
  const listed = started?._tag === "run.started" ? (started.policies ?? []) : []
  if (!listed.includes(policy) || runtimeNames.has(policy)) return false
  // The run records a policy of the user's that decided, even under a built-in's name.
  const decided = timeline.findLast(
    (e) => e._tag === "termination.decided" && e.policy === policy && e.reason === reason
  )
  return (decided?._tag === "termination.decided" && decided.own === true) || !Termination.isBuiltInStop(policy, reason)
}

/** The names the runtime decides its own stops by: a policy of the user's so named still has its stops checked. */
const runtimeNames: ReadonlySet<string> = new Set(["runtime", "step_timeout", "validation"])

/** The failures the log records: the model's, and those of tool calls that reached their handler. */
const failures = (timeline: Timeline): ReadonlyArray<Failure.Summary> =>
  timeline.flatMap((e) =>
    e._tag === "model.failed"
      ? [e.failure]
      : e._tag === "tool.failed" && e.error.failure !== undefined
        ? [e.error.failure]
        : []
  )

/** A failure event: the model's, or a tool call's. */
type Failed = Event.Of<"model.failed"> | Event.Of<"tool.failed">

const summaryOf = (e: Failed): Failure.Summary | undefined => (e._tag === "model.failed" ? e.failure : e.error.failure)

/**
 * The failures the run did not get past, which alone can witness a stop: each the last of its
 * episode (the model's, or a tool call's by its id), with no `recovery.completed` of that
 * episode, no success of that call and no model answer after it (a run that went on did not
 * stop on it).
 */
const unrecovered = (timeline: Timeline): ReadonlyArray<Failed> => {
  const open = new Map<string, Failed>()
  for (const e of timeline) {
    if (e._tag === "model.responded") open.clear()
    else if (e._tag === "model.failed") open.set("model", e)
    else if (e._tag === "tool.failed") open.set(`call ${e.callId}`, e)
    else if (e._tag === "recovery.completed") open.delete(e.callId === undefined ? "model" : `call ${e.callId}`)
    else if (e._tag === "tool.succeeded") open.delete(`call ${e.callId}`)
  }
  return [...open.values()]
}

/** A limit's stop: its counter, as `Explain` reads it against the limit in force, is at the limit. */
const atLimit = (timeline: Timeline, limits: ReadonlyArray<string>): string | undefined => {
  const gauges = Explain.explain(timeline).gauges.filter((g) => limits.includes(g.limit) && g.max !== undefined)
  if (gauges.length === 0) return `no ${limits.join(" or ")} is in force`
  if (gauges.some((g) => g.value >= (g.max ?? 0) - epsilon)) return undefined
  return gauges.map((g) => `${g.counter} ${g.value} of ${g.limit} ${g.max}`).join(", ")
}

/**
 * A step's deadline stopped the run: a wait cut off by the step layer (a timeout or an
 * approval naming it, a retry refused for the step's deadline); or, with a step timeout in
 * force, the run ended at its last step's deadline, or a retry the deadline refused (a
 * call's, said so; or a failure of the last step that would have been retried). The step
 * is measured under the limits in force at the end (`RunLog.limitsOf`): a resume may have
 * laid a step timeout the start did not have, or a longer one.
 */
const stepTimeoutWitness = (timeline: Timeline): string | undefined => {
  const stepMillis = RunLog.limitsOf(timeline)?.stepTimeoutMillis
  const requests = ofTag(timeline, "model.requested")
  const lastIteration = requests.at(-1)?.iteration
  const stepBegan = requests.find((e) => e.iteration === lastIteration)
  const finished = timeline.at(-1)
  const deadline =
    stepBegan === undefined || stepMillis === undefined ? Number.POSITIVE_INFINITY : stepBegan.at + stepMillis
  // Only failures the run did not get past: one whose episode then succeeded, or that the model
  // was given, stopped nothing.
  const open = unrecovered(timeline)
  const byStep =
    open.some((e) => summaryOf(e)?.timeout?.layer === "step") ||
    ofTag(timeline, "approval.decided").some((e) => e.layer === "step") ||
    open.some((e) => e._tag === "tool.failed" && e.error.notRetriedFor === "step_deadline")
  if (byStep) return undefined
  if (stepMillis === undefined) return "no step timeout is in force and no wait was cut off by the step layer"
  // Of the last step, a failure that would have been retried is a retry its deadline may have refused.
  const cutOff =
    (finished !== undefined && finished.at >= deadline - epsilon) ||
    open.some((e) => e._tag === "tool.failed" && e.error.notRetriedFor === "deadline") ||
    open.some(
      (e) => (stepBegan === undefined || e.seq >= stepBegan.seq) && summaryOf(e)?.classification === "retryable"
    )
  return cutOff
    ? undefined
    : `it ended at ${finished?.at}, before its step's deadline ${deadline}, with no wait cut off by it and no retry refused`
}

/**
 * A defect's stop: the runtime's own decision (`runtime`), its last, after which nothing was
 * validated (a run that ends `internal_error` is not assessed; validation that broke records no check).
 */
const internalErrorWitness = (timeline: Timeline): string | undefined => {
  const index = timeline.findLastIndex((e) => e._tag === "termination.decided")
  const decided = timeline[index]
  if (decided?._tag !== "termination.decided" || decided.reason !== "internal_error" || decided.policy !== "runtime") {
    return "its last termination.decided is no internal_error by the runtime"
  }
  const validated = timeline
    .slice(index + 1)
    .find((e) => e._tag === "validation.checked" || (e._tag === "state.changed" && e.to === "validating"))
  return validated === undefined ? undefined : `it was validated after its decision (seq ${validated.seq})`
}

/**
 * Whether the model's last answer before the run decided `goal_reached` is a final answer (R2.3,
 * R11): no tool calls, not cut off by its length nor saying it calls tools, and text that shows something (an empty
 * output is none). Review 147: every answer without calls, wherever it came, passed, a blank one or one
 * cut off included.
 */
const finalAnswerBefore = (timeline: Timeline): boolean => {
  const decided = timeline.findLastIndex((e) => e._tag === "termination.decided" && e.reason === "goal_reached")
  const answer = timeline
    .slice(0, decided === -1 ? timeline.length : decided)
    .findLast((e) => e._tag === "model.responded")
  return (
    answer?._tag === "model.responded" &&
    answer.toolCalls.length === 0 &&
    answer.finishReason !== "length" &&
    answer.finishReason !== "tool_calls" &&
    !Model.isBlank(answer.text)
  )
}

/** What in the log says the run stopped for `reason`; `undefined` when nothing does (the violation's detail otherwise). */
const unwitnessed = (result: RunResult.RunResult): string | undefined => {
  const timeline = result.timeline
  const reason = result.stopReason
  // A stop a policy of the user's made is theirs to explain.
  if (usersOwn(timeline, result.policy, reason)) return undefined
  const limits = limitOf[reason]
  if (limits !== undefined) return atLimit(timeline, limits)
  switch (reason) {
    case "goal_reached":
      return finalAnswerBefore(timeline)
        ? undefined
        : "its last answer before the decision is no final answer (text with no tool calls, not cut off by its length)"
    case "validation_failed":
      return ofTag(timeline, "validation.checked").some((e) => !e.check.passed) ? undefined : "no check failed"
    case "cancelled":
      return ofTag(timeline, "run.stopping").some((e) => e.by === "cancel") ? undefined : "no run.stopping by a cancel"
    case "model_error":
      // Retryable or not: an open circuit, or a recovery that allows no retry, stops on a retryable one
      // too. Not one the model got past (a retry that was answered).
      return unrecovered(timeline).some((e) => e._tag === "model.failed")
        ? undefined
        : "no model.failed that the model did not get past"
    case "repeated_tool_failure":
      return Counters.fold(timeline).repeatedFailureOverLimit > 0
        ? undefined
        : "no failure repeated past its tool's retry limit"
    case "tool_error":
      return unrecovered(timeline).some((e) => e._tag === "tool.failed")
        ? undefined
        : "no tool.failed that the run did not get past"
    case "recovery_exhausted": {
      // An episode that gave up, a retry the run's budget refused, or a failure its owner had
      // already retried (a provider's own client): none is retried again (R3.4).
      const spent =
        ofTag(timeline, "recovery.failed").length > 0 ||
        ofTag(timeline, "tool.failed").some((e) => e.error.notRetriedFor === "run_budget") ||
        failures(timeline).some((f) => f.attempts > 1)
      return spent
        ? undefined
        : "no recovery.failed, no retry refused for the run's budget, and no failure already retried"
    }
    case "run_timeout": {
      const finished = timeline.at(-1)
      const passed = finished !== undefined && finished.at >= RunLog.deadlineOf(timeline) - epsilon
      // Before the deadline, only a retry the deadline refused ends a run so: the last failure is one that
      // would have been retried (a wait past the deadline), or says the deadline refused it.
      // Never one the run got past: its retry answered, or the model was given it.
      const open = unrecovered(timeline)
      const lastFailed = timeline.findLast(
        (e): e is Failed => e._tag === "model.failed" || (e._tag === "tool.failed" && e.error.failure !== undefined)
      )
      const last = lastFailed !== undefined && open.includes(lastFailed) ? summaryOf(lastFailed) : undefined
      const refused =
        last !== undefined &&
        (last.classification === "retryable" || last.timeout?.layer === "run" || last.code === "run_timeout")
      const refusedCall = open.some((e) => e._tag === "tool.failed" && e.error.notRetriedFor === "deadline")
      return passed || refused || refusedCall || ofTag(timeline, "run.stopping").some((e) => e.by === "deadline")
        ? undefined
        : `it ended at ${finished?.at}, before the deadline ${RunLog.deadlineOf(timeline)}, with no retry refused for it`
    }
    case "output_truncated":
      return ofTag(timeline, "model.responded").some((e) => e.finishReason === "length")
        ? undefined
        : "no response cut off by its length"
    case "content_filtered":
      return ofTag(timeline, "model.responded").some((e) => e.finishReason === "content_filter") ||
        failures(timeline).some((f) => f.code === "content_filtered")
        ? undefined
        : "no response or failure says a content filter refused"
    case "step_timeout":
      return stepTimeoutWitness(timeline)
    case "inconsistent_result":
      // A success whose postcondition contradicted it: the call failed `inconsistent_result`.
      return ofTag(timeline, "tool.failed").some((e) => e.error.code === "inconsistent_result")
        ? undefined
        : "no call whose postcondition contradicted its success"
    case "unknown_outcome":
      // A call whose outcome is in doubt: a failure of unknown outcome, or an action still pending.
      return ofTag(timeline, "tool.failed").some((e) => e.error.failure?.classification === "unknown") ||
        Explain.pendingActions(timeline).length > 0
        ? undefined
        : "no call of unknown outcome and no pending action"
    case "internal_error":
      return internalErrorWitness(timeline)
    default:
      // approvals: checked where their own invariants are.
      return undefined
  }
}

/** R2.5, R10: the stop reason is witnessed by the log. */
export const checkStopReason = (result: RunResult.RunResult, violate: Violate): void => {
  const missing = unwitnessed(result)
  if (missing !== undefined) violate("R2.5 stop witnessed", `the run ended ${result.stopReason}, but ${missing}`)
}
