/**
 * The invariants of a finished run (recovery, time layers, approvals, the state
 * machine): `check`, which tests the recovery invariants (R3, R2.3) itself and hands
 * the rest to one check per concept (`PropertyTimelineChecks`, `PropertyStateChecks`,
 * `PropertyTimeChecks`, `PropertyApprovalChecks`), and the names of the invariants
 * `Properties` exports. The `Budget` it is given, the never-retried failure codes and
 * the `Violation`s it returns live in `PropertyBudget` and `PropertyViolation`, and are
 * re-exported here.
 * Private to the testing kit; `Properties` is the public face.
 */

import * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import type * as RunResult from "../../run/RunResult.ts"
import * as Deadline from "../../time/Deadline.ts"
import { checkApprovals } from "./PropertyApprovalChecks.ts"
import { type Budget, budgetProblem, neverRetriedCodes } from "./PropertyBudget.ts"
import { type CallRef, checkNeverRetried, checkSentOnce, refusalsBefore } from "./PropertyRetryChecks.ts"
import { checkSpend } from "./PropertySpendChecks.ts"
import { checkStates } from "./PropertyStateChecks.ts"
import { checkStopReason } from "./PropertyStopChecks.ts"
import { checkTimeLayers, lateResume, recordsLate } from "./PropertyTimeChecks.ts"
import { checkCalls, checkEnding, checkOvertaken, ofTag, ownEnding } from "./PropertyTimelineChecks.ts"
import { epsilon, roundingAt, type Violate, type Violation } from "./PropertyViolation.ts"

export { type Budget, neverRetriedCodes } from "./PropertyBudget.ts"
export type { Violation } from "./PropertyViolation.ts"

/**
 * The invariant an argument correction breaks when it spends the run's retry budget:
 * the budget is then declared spent before `maxRecoveries` retries were made.
 *
 * @category checks
 * @since 0.1.0
 */
export const correctionsSpendRetries = "R3.4 corrections do not spend the retry budget"

/**
 * The invariant a run breaks when a call of unknown outcome does not end it
 * `unknown_outcome` (R3.8): it ended with some other, guessed, stop reason.
 *
 * @category checks
 * @since 0.1.0
 */
export const unknownOutcomeEndsRun = "R3.8 an unknown outcome ends the run unknown_outcome"

/**
 * The tool call each event belongs to: by the `callId` it names (recovery events of a
 * tool call name it, so this holds for concurrent batches too), or else the call whose
 * attempt last started before it in the same iteration.
 */
const callOf = (timeline: ReadonlyArray<Event.Event>): Map<number, CallRef> => {
  const owner = new Map<number, CallRef>()
  const byId = new Map<string, CallRef>()
  let current: CallRef | undefined
  for (const e of timeline) {
    if (e._tag === "model.responded") {
      current = undefined
      for (const call of Event.callsOf(e)) byId.set(call.callId, call)
    } else if (e._tag === "tool.started") current = byId.get(e.callId)
    else if (e._tag === "model.requested") current = undefined
    const named = "callId" in e && typeof e.callId === "string" ? byId.get(e.callId) : undefined
    const call = named ?? current
    if (call !== undefined) owner.set(e.seq, call)
  }
  return owner
}

/**
 * R2.3: the batch that would take the run over `maxToolCalls` is rejected whole, counted
 * before a handler runs: none of its calls is taken up (review 147: a batch of three under a
 * limit of two, two of them run, passed as the limit was not passed in all).
 */
const checkBatchOverLimit = (timeline: RunResult.RunResult["timeline"], maxToolCalls: number, violate: Violate) => {
  let requested = 0
  for (const response of ofTag(timeline, "model.responded")) {
    requested += response.toolCalls.length
    if (requested <= maxToolCalls) continue
    const over = new Set(response.callIds)
    const taken = timeline.find((e) => e.seq > response.seq && over.has(Event.callIdOf(e) ?? ""))
    if (taken !== undefined) {
      violate(
        "R2.3 hard limits",
        `the batch at seq ${response.seq} takes the run to ${requested} tool calls, over maxToolCalls ${maxToolCalls}, and its call ${Event.callIdOf(taken)} was taken up (${taken._tag} at seq ${taken.seq})`
      )
    }
    return
  }
}

/**
 * The invariants of R3 (and R1, R2.5, R4, R7, R8) a result violates, or `[]`.
 *
 * Checked here (recovery and hard limits):
 *
 * - `R3.4 run budget`: provider and tool retries ≤ `maxRecoveries`, and
 *   `counters.recoveryAttempts` ≤ `maxRecoveries` + the argument corrections made; and
 *   ({@link correctionsSpendRetries}) the run budget is never declared spent before
 *   `maxRecoveries` retries were made.
 * - `R3.5 correction budget`: argument corrections ≤ `correctionBudget`.
 * - `R3.3 episode`: every retry's attempt number ≤ the schedule's retries, and a tool's ≤
 *   its `maxRetries`.
 * - `R3.3 deadline`: every retry's wait ends before the deadline; the time some retry
 *   was asleep (the waits' union: calls of a concurrent batch sleep side by side) is no
 *   more than the run timeout; the deadline `run.started` records is no later than the
 *   run timeout after its start, and `elapsedMillis` ≤ the run timeout whatever deadline
 *   the run recorded (both to the rounding of a duration between two instants,
 *   `roundingAt`: 1e-3 ms since the epoch; a run resumed past its deadline took the time
 *   it was down too); no event after the deadline.
 * - `R3.1 never retried`: no retry caused by a permanent or unknown-outcome failure
 *   (a provider retry must follow a retryable `model.failed`; a tool retry must not name
 *   the code of the permanent or unknown-outcome failure its call ended with), no retry
 *   of a blocked or argument-refused call (`PropertyRetryChecks.ts`).
 * - `R2.3 hard limits`: model responses ≤ `maxIterations`, tool calls started ≤ `maxToolCalls`.
 * - `R2.1 usage counted`: the token counters sum the usage of every answer on the
 *   timeline, failed ones included; `R2.1 token budget`: once those answers used more
 *   than `maxTokens`, no model request and no tool call starts (`PropertySpendChecks.ts`).
 * - `R3.3 episode` also: every episode that retried ends with `recovery.completed` or
 *   `recovery.failed`, unless the deadline or a cancel stopped the run inside it, or (a
 *   tool call's) its batch was stopped by another call's approval or failure.
 * - `R3.8 unknown outcome`: a tool result of unknown outcome ends the run
 *   `unknown_outcome` (or the deadline or a cancel ended it first), the model is not
 *   asked again, and the call is among the result's `pendingActions`.
 *
 * The timeline's shape, in `PropertyTimelineChecks.ts` ({@link checkCalls}, {@link checkEnding}):
 *
 * - `R8 timeline`: each tool call starts once and ends (succeeded, failed or blocked) at
 *   most once, after its start. `R5.2 calls accounted for`: a call that started and never
 *   ended has a `tool.interrupted` saying what became of it.
 * - `R2.5 ending`: `run.started` first, exactly one `run.finished`, last, agreeing with
 *   the result; a terminal status and a `StopReason` from `StopReason.all`; `completed`
 *   exactly when `goal_reached`; `seq` numbered without gaps. A result fenced off at its
 *   last commit is checked as its own `run.finished` ends it (`ownEnding`).
 * - `R8 counters`: the result's counters equal `Counters.snapshot(Counters.fold(timeline))`.
 *
 * The state machine, in `PropertyStateChecks.ts` ({@link checkStates}):
 *
 * - `R1.2 state machine`: every `state.changed` moves from the state the run was in,
 *   along an edge of `RunState.table` (a concurrent batch must not race the phase into
 *   an illegal move), and the last state is terminal and the result's status.
 * - `R1.3 phase`: the run is `awaiting_approval` exactly while some call waits for a
 *   decision, and `recovering` (or `awaiting_approval`) when a retry starts.
 *
 * The time layers, in `PropertyTimeChecks.ts` ({@link checkTimeLayers}):
 *
 * - `R4.2 time layers`: every timeout (`model.failed`, `tool.failed` with
 *   `failure.timeout`, `approval.decided` expired) names a layer the run has (a
 *   `step_timeout` only with a step timeout, an `attempt_timeout` only with an attempt
 *   timeout, a `tool_timeout` only for a tool with its own) and reports an
 *   `elapsedMillis` within that layer's limit; the run ends `step_timeout` only with a
 *   step timeout. An attempt timeout a provider reports itself (`FaultyModel.timeout`:
 *   30 s, at the instant of its request) is the provider's, not the run's layer.
 * - `R4.3 timeout report`: a step, attempt or tool timeout's `elapsedMillis` is the time
 *   since the attempt it cut off began (a model call's request, a tool handler's start,
 *   its `tool.started`); 0 for a tool attempt its step left no time to start.
 * - `R4.2 step deadline`: with a step timeout, each step starts at the first
 *   `model.requested` of its iteration; every retry's wait ends before its step's
 *   deadline, and no model answer or failure, tool result, attempt settled
 *   (`tool.interrupted`) or approval decision of the step comes after it: code that
 *   cannot be interrupted holds its step (README, Guarantees), reported whether it ends
 *   or the run deadline leaves it behind.
 * - `R4.2 approval wait`: an approval request expires at min(its request + the approval
 *   timeout, the step's deadline, the run's deadline), and an expiry comes exactly then.
 *
 * Approvals, in `PropertyApprovalChecks.ts` ({@link checkApprovals}):
 *
 * - `R7 approvals`: each call's approval is requested once, after the `model.responded` that asked for the call,
 *   and decided exactly once; a call rejected or expired ends `tool.blocked` with that code.
 * - `R7 approval first`: nothing of a call's handler (its result, a retry, a
 *   reconciliation, an interruption) shows before its approval, nor ever for a call
 *   rejected, expired or withdrawn.
 * - `R7 approval stop`: the first rejection ends the run `approval_rejected`, the first
 *   expiry `approval_expired` (approval layer) or `step_timeout` (step layer), unless a
 *   harder stop came first (an unknown outcome, R3.8; the run deadline at that instant);
 *   and no run ends `approval_rejected` or `approval_expired` without such a decision.
 * - `R7 no guess`: once a call was rejected, expired or withdrawn, no model request and
 *   no tool call starts: the model never sees a guessed decision.
 *
 * Recovery events name the tool call they retry, so the per-call checks hold for
 * concurrent batches (`concurrency` > 1) too.
 *
 * @category checks
 * @since 0.1.0
 */
export const check = (given: RunResult.RunResult, budget: Budget): ReadonlyArray<Violation> => {
  // A budget whose limits are NaN or missing would pass every comparison: refused, naming the field.
  const problem = budgetProblem(budget)
  if (problem !== undefined) throw new RangeError(`Properties.check: ${problem}`)
  // A process fenced off at its last commit is told so; its log is checked against its own ending.
  const result = ownEnding(given)
  const violations: Array<Violation> = []
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  if (result !== given) checkOvertaken(given, violate, budget.mayActTwice)
  const timeline = result.timeline
  const waits = ofTag(timeline, "recovery.started").filter((e) => !Event.isCorrection(e.kind))
  // A wait for the circuit that refused a call (it never ran) is no retry: it spends none (R3.9).
  const retries = waits.filter((e) => e.circuit === undefined)
  const corrections = ofTag(timeline, "recovery.started").filter((e) => Event.isCorrection(e.kind))

  // R3.4: one run budget of attempts.
  if (retries.length > budget.maxRecoveries) {
    violate("R3.4 run budget", `${retries.length} retries, over maxRecoveries ${budget.maxRecoveries}`)
  }
  if (result.counters.recoveryAttempts > budget.maxRecoveries + corrections.length) {
    violate(
      "R3.4 run budget",
      `counters.recoveryAttempts is ${result.counters.recoveryAttempts}, over maxRecoveries ${budget.maxRecoveries} plus ${corrections.length} corrections`
    )
  }
  // A budget of retries is spent by retries: an argument correction is not one (R3.5 has its own budget).
  for (const e of ofTag(timeline, "recovery.failed")) {
    if (e.scope !== "run" || Event.isCorrection(e.kind)) continue
    const made = retries.filter((r) => r.seq < e.seq).length
    if (made < budget.maxRecoveries) {
      violate(
        correctionsSpendRetries,
        `${e.kind} gave up (seq ${e.seq}) on a spent run budget after ${made} of ${budget.maxRecoveries} retries`
      )
    }
  }
  if (budget.correctionBudget !== undefined && result.counters.toolCorrectionAttempts > budget.correctionBudget) {
    violate(
      "R3.5 correction budget",
      `${result.counters.toolCorrectionAttempts} corrections, over the budget of ${budget.correctionBudget}`
    )
  }

  // R3.3: per episode, per tool. An attempt the process's stops cut off, run again on resume
  // (the call listed in doubt by its `run.resumed`), is no failure of the call: it spends no retry (R3.4).
  const owner = callOf(timeline)
  const restartsBefore = (callId: string | undefined, seq: number): number =>
    callId === undefined ? 0 : RunLog.restartsOf(timeline, callId, seq)
  const refused = refusalsBefore(timeline)
  for (const e of retries) {
    const counted = e.attempt - restartsBefore(e.callId, e.seq) - (refused.get(e.seq) ?? 0)
    if (counted > budget.scheduleRetries) {
      violate(
        "R3.3 episode",
        `${e.kind} attempt ${e.attempt} (seq ${e.seq}) past the schedule's ${budget.scheduleRetries}`
      )
    }
    if (e.kind === "tool_retry") {
      const call = owner.get(e.seq)
      const limit = call === undefined ? undefined : budget.toolMaxRetries?.[call.name]
      if (call === undefined) violate("R3.3 episode", `tool retry (seq ${e.seq}) outside every tool call`)
      else if (limit !== undefined && counted > limit) {
        violate("R3.3 episode", `${call.name} (${call.callId}) retry ${e.attempt}, past its maxRetries ${limit}`)
      }
    }
  }

  // R3.3, R4: the run deadline. Resumed past it, the run records what its status queries found:
  // only work started counts.
  const started = timeline[0]
  const deadlineAt = started?._tag === "run.started" ? started.deadlineAt : undefined
  const resumed = timeline.find(
    (e): e is Event.Of<"run.resumed"> => e._tag === "run.resumed" && lateResume(timeline, e)
  )
  if (deadlineAt !== undefined) {
    for (const e of waits) {
      if (Deadline.hasPassed(deadlineAt, e.at + e.delayMillis)) {
        violate(
          "R3.3 deadline",
          `${e.kind} at ${e.at} waits ${e.delayMillis} ms, to or past the deadline ${deadlineAt}`
        )
      }
    }
    // The deadline fires at the first instant the clock reaches it (fractional sums may pass it by a hair).
    const from = resumed === undefined ? timeline.length : timeline.indexOf(resumed)
    const late = timeline.find(
      (e, i) => e.at > deadlineAt + epsilon && !(resumed !== undefined && i >= from && recordsLate(e, resumed))
    )
    if (late !== undefined)
      violate("R3.3 deadline", `${late._tag} (seq ${late.seq}) at ${late.at}, after the deadline ${deadlineAt}`)
  }
  // The deadline the run recorded is the budget's, never later: the runtime's record is checked, not trusted.
  if (
    started?._tag === "run.started" &&
    started.deadlineAt - started.at > budget.runTimeoutMillis + roundingAt(started.deadlineAt)
  ) {
    violate(
      "R3.3 deadline",
      `run.started records the deadline ${started.deadlineAt}, ${started.deadlineAt - started.at} ms after its start, past the run timeout of ${budget.runTimeoutMillis} ms`
    )
  }
  // The run's time spent with a retry asleep: calls of a concurrent batch sleep side by side.
  let slept = 0
  let until = Number.NEGATIVE_INFINITY
  for (const [from, to] of waits.map((e) => [e.at, e.at + e.delayMillis] as const).sort((a, b) => a[0] - b[0])) {
    slept += Math.max(0, to - Math.max(from, until))
    until = Math.max(until, to)
  }
  if (slept > budget.runTimeoutMillis) {
    violate("R3.3 deadline", `retries slept ${slept} ms in all, over the run timeout of ${budget.runTimeoutMillis} ms`)
  }
  // Whatever deadline the run recorded. A duration taken between two epoch instants carries their
  // rounding (`roundingAt`); a run resumed past its deadline took longer by the time it was down.
  const startedAt = started?._tag === "run.started" ? started.at : 0
  if (resumed === undefined && result.elapsedMillis > budget.runTimeoutMillis + roundingAt(startedAt)) {
    violate(
      "R3.3 deadline",
      `the run took ${result.elapsedMillis} ms, over its timeout of ${budget.runTimeoutMillis} ms`
    )
  }

  // R3.1, R3.6, R3.8: what is never retried.
  checkNeverRetried(timeline, waits, owner, new Set(budget.neverRetried ?? neverRetriedCodes), violate)
  checkSentOnce(timeline, waits, owner, budget.mayActTwice, violate)

  // R8, R5.2: each call starts once and ends once, or is recorded interrupted.
  checkCalls(result, violate)

  // R3.3: every episode that retried ends with recovery.completed or recovery.failed,
  // unless the run was stopped from outside (deadline, cancel) while it was in it, or
  // (a tool call's) its batch was stopped by another call's approval (R7) or failure
  // (R3.11). Episodes are kept per owner (the model, or a tool call by its id): calls of
  // a concurrent batch retry side by side.
  const open = new Map<string, Event.Of<"recovery.started">>()
  const ownerOf = (e: { readonly callId?: string | undefined }) => e.callId ?? "model"
  const closeOpen = (episode: Event.Of<"recovery.started">, e: Event.Event) =>
    violate("R3.3 episode", `the ${episode.kind} episode of seq ${episode.seq} never closed before seq ${e.seq}`)
  let approvalStop: Event.Of<"approval.decided"> | undefined
  // The calls of the current batch that failed: one that stopped the run stopped its batch.
  let failedCalls = new Set<string>()
  for (const e of timeline) {
    if (e._tag === "model.responded") failedCalls = new Set()
    if (e._tag === "tool.failed" && !e.error.correctable) failedCalls.add(e.callId)
    if (e._tag === "recovery.started" && !Event.isCorrection(e.kind)) {
      const before = open.get(ownerOf(e))
      if (e.attempt === 1 && before !== undefined) closeOpen(before, e)
      open.set(ownerOf(e), e)
    } else if ((e._tag === "recovery.completed" || e._tag === "recovery.failed") && !Event.isCorrection(e.kind)) {
      if (!open.has(ownerOf(e)) && e._tag === "recovery.completed") {
        violate("R3.3 episode", `recovery.completed (seq ${e.seq}) without a retry`)
      }
      open.delete(ownerOf(e))
    } else if (e._tag === "approval.decided" && (e.decision === "rejected" || e.decision === "expired")) {
      approvalStop ??= e
    } else if (e._tag === "termination.decided") {
      for (const episode of open.values()) {
        const outside = e.reason === "run_timeout" || e.reason === "cancelled"
        const stoppedBatch =
          episode.callId !== undefined &&
          (approvalStop !== undefined || [...failedCalls].some((callId) => callId !== episode.callId))
        if (!outside && !stoppedBatch) closeOpen(episode, e)
      }
      open.clear()
    }
  }

  // R3.8: an unknown outcome that was not reconciled ends the run, never guessed away.
  const unknown = ofTag(timeline, "tool.failed").find((e) => e.error.failure?.classification === "unknown")
  if (unknown !== undefined) {
    if (
      result.stopReason !== "unknown_outcome" &&
      result.stopReason !== "run_timeout" &&
      result.stopReason !== "cancelled"
    ) {
      violate(
        unknownOutcomeEndsRun,
        `${unknown.name} (${unknown.callId}) had an unknown outcome, the run ended ${result.stopReason}`
      )
    }
    const later = timeline.find((e) => e.seq > unknown.seq && e._tag === "model.requested")
    if (later !== undefined)
      violate(
        "R3.8 unknown outcome",
        `the model was asked again (seq ${later.seq}) after ${unknown.callId}'s unknown outcome`
      )
    if (!result.pendingActions.some((a) => a.callId === unknown.callId)) {
      violate("R3.8 unknown outcome", `${unknown.callId} is not among the result's pending actions`)
    }
  }

  // R2.3: hard limits.
  const responses = ofTag(timeline, "model.responded").length
  if (budget.maxIterations !== undefined && responses > budget.maxIterations) {
    violate("R2.3 hard limits", `${responses} model responses, over maxIterations ${budget.maxIterations}`)
  }
  // The calls taken up: each with an event of its own (an attempt, a refusal, an approval).
  const calls = new Set(timeline.flatMap((e) => Event.callIdOf(e) ?? [])).size
  if (budget.maxToolCalls !== undefined && calls > budget.maxToolCalls) {
    violate("R2.3 hard limits", `${calls} tool calls taken up, over maxToolCalls ${budget.maxToolCalls}`)
  }
  if (budget.maxToolCalls !== undefined) checkBatchOverLimit(timeline, budget.maxToolCalls, violate)

  // R2.5, R8: the ending.
  checkEnding(result, violate, budget.mayActTwice)
  checkStopReason(result, violate)
  checkStates(result, violate)
  checkTimeLayers(result, budget, violate)
  checkApprovals(result, violate)
  checkSpend(result, budget, violate)
  return violations
}
