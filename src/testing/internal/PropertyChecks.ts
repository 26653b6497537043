/**
 * The invariants of a finished run (recovery, time layers, approvals, the state
 * machine): the `Budget` it was given, the `Violation`s it can commit, the invariant
 * names, the never-retried failure codes, and `check`.
 * Private to the testing kit; `Properties` is the public face.
 */
import * as Counters from "../../Counters.ts"
import type * as Event from "../../Event.ts"
import type * as Failure from "../../Failure.ts"
import type * as RunResult from "../../RunResult.ts"
import * as RunState from "../../RunState.ts"
import * as StopReason from "../../StopReason.ts"

/**
 * The limits a run was given, for {@link check}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Budget {
  readonly runTimeoutMillis: number
  readonly maxRecoveries: number
  /** Retries the schedule allows in one episode. */
  readonly scheduleRetries: number
  readonly correctionBudget?: number | undefined
  readonly maxIterations?: number | undefined
  readonly maxToolCalls?: number | undefined
  /** Each tool's `maxRetries`, by name. */
  readonly toolMaxRetries?: Readonly<Record<string, number>> | undefined
  /** Failure codes that are permanent or of unknown outcome: a retry caused by one is a violation. */
  readonly neverRetried?: ReadonlyArray<string> | undefined
  /** `limits.stepTimeout` in milliseconds; `undefined`: the run has no step layer. */
  readonly stepTimeoutMillis?: number | undefined
  /** `limits.attemptTimeout` in milliseconds; `undefined`: the run has no attempt layer. */
  readonly attemptTimeoutMillis?: number | undefined
  /** `limits.approvalTimeout` in milliseconds; `undefined`: the run has no approval layer. */
  readonly approvalTimeoutMillis?: number | undefined
  /** Each tool's own timeout in milliseconds, by name, for the tools that have one. */
  readonly toolTimeoutMillis?: Readonly<Record<string, number>> | undefined
}

/**
 * The failure codes of permanent and unknown-outcome results produced by `FaultyModel`,
 * `FaultyTools` and the tools of {@link toScenario}, plus the pipeline's own refusals.
 *
 * @category constructors
 * @since 0.1.0
 */
export const neverRetriedCodes: ReadonlyArray<string> = [
  "http_400",
  "http_401",
  "script_exhausted",
  "rejected",
  "connection_lost",
  "permission_denied",
  "input_validation_failed",
  "invalid_arguments",
  "unknown_tool"
]

/**
 * An invariant a run broke: which one (named by its SPEC id) and how.
 *
 * @category models
 * @since 0.1.0
 */
export interface Violation {
  readonly invariant: string
  readonly detail: string
}

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

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

const terminal: ReadonlySet<string> = new Set(["completed", "partial", "failed", "cancelled", "unknown_outcome"])

/**
 * The tool call each event belongs to: by the `callId` it names (recovery events of a
 * tool call name it, so this holds for concurrent batches too), or else the call last
 * started before it in the same iteration.
 */
const callOf = (timeline: ReadonlyArray<Event.Event>): Map<number, Event.Of<"tool.started">> => {
  const owner = new Map<number, Event.Of<"tool.started">>()
  const byId = new Map<string, Event.Of<"tool.started">>()
  let current: Event.Of<"tool.started"> | undefined
  for (const e of timeline) {
    if (e._tag === "tool.started") {
      current = e
      byId.set(e.callId, e)
    } else if (e._tag === "model.requested") current = undefined
    const named = "callId" in e && typeof e.callId === "string" ? byId.get(e.callId) : undefined
    const call = named ?? current
    if (call !== undefined) owner.set(e.seq, call)
  }
  return owner
}

/**
 * The invariants of R3 (and R1, R2.5, R4, R7, R8) a result violates, or `[]`:
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
 *   more than the run timeout; `elapsedMillis` ≤ the run timeout; no event after the
 *   deadline.
 * - `R3.1 never retried`: no retry caused by a permanent or unknown-outcome failure
 *   (a provider retry must follow a retryable `model.failed`), no retry of a blocked or
 *   argument-refused call.
 * - `R2.3 hard limits`: model responses ≤ `maxIterations`, tool calls started ≤ `maxToolCalls`.
 * - `R3.3 episode` also: every episode that retried ends with `recovery.completed` or
 *   `recovery.failed`, unless the deadline or a cancel stopped the run inside it.
 * - `R3.8 unknown outcome`: a tool result of unknown outcome ends the run
 *   `unknown_outcome` (or the deadline or a cancel ended it first), the model is not
 *   asked again, and the call is among the result's `pendingActions`.
 * - `R8 timeline`: each tool call starts once and ends (succeeded, failed or blocked) at
 *   most once, after its start. `R5.2 calls accounted for`: a call that started and never
 *   ended has a `tool.interrupted` saying what became of it.
 * - `R2.5 ending`: `run.started` first, exactly one `run.finished`, last, agreeing with
 *   the result; a terminal status and a `StopReason` from `StopReason.all`; `completed`
 *   exactly when `goal_reached`; `seq` numbered without gaps.
 * - `R8 counters`: the result's counters equal `Counters.snapshot(Counters.fold(timeline))`.
 * - `R1.2 state machine`: every `state.changed` moves from the state the run was in,
 *   along an edge of `RunState.table` (a concurrent batch must not race the phase into
 *   an illegal move), and the last state is terminal and the result's status.
 * - `R1.3 phase`: the run is `awaiting_approval` exactly while some call waits for a
 *   decision, and `recovering` (or `awaiting_approval`) when a retry starts.
 * - `R4.2 time layers`: every timeout (`model.failed`, `tool.failed` with
 *   `failure.timeout`, `approval.decided` expired) names a layer the run has (a
 *   `step_timeout` only with a step timeout, an `attempt_timeout` only with an attempt
 *   timeout, a `tool_timeout` only for a tool with its own) and reports an
 *   `elapsedMillis` within that layer's limit; the run ends `step_timeout` only with a
 *   step timeout. An attempt timeout a provider reports itself (`FaultyModel.timeout`:
 *   30 s, at the instant of its request) is the provider's, not the run's layer.
 * - `R4.3 timeout report`: a step, attempt or tool timeout's `elapsedMillis` is the time
 *   since the attempt it cut off began (its request, its start, its approval, or the
 *   end of its retry's wait).
 * - `R4.2 step deadline`: with a step timeout, each step starts at the first
 *   `model.requested` of its iteration; every retry's wait ends before its step's
 *   deadline, and no model answer or failure, tool result or approval decision of the
 *   step comes after it.
 * - `R4.2 approval wait`: an approval request expires at min(its request + the approval
 *   timeout, the step's deadline, the run's deadline), and an expiry comes exactly then.
 * - `R7 approvals`: each call's approval is requested once, after its `tool.started`,
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
export const check = (result: RunResult.RunResult, budget: Budget): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  const timeline = result.timeline
  const retries = ofTag(timeline, "recovery.started").filter((e) => e.kind !== "tool_argument_correction")
  const corrections = ofTag(timeline, "recovery.started").filter((e) => e.kind === "tool_argument_correction")

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
    if (e.scope !== "run" || e.kind === "tool_argument_correction") continue
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

  // R3.3: per episode, per tool.
  const owner = callOf(timeline)
  for (const e of retries) {
    if (e.attempt > budget.scheduleRetries) {
      violate(
        "R3.3 episode",
        `${e.kind} attempt ${e.attempt} (seq ${e.seq}) past the schedule's ${budget.scheduleRetries}`
      )
    }
    if (e.kind === "tool_retry") {
      const call = owner.get(e.seq)
      const limit = call === undefined ? undefined : budget.toolMaxRetries?.[call.name]
      if (call === undefined) violate("R3.3 episode", `tool retry (seq ${e.seq}) outside any tool call`)
      else if (limit !== undefined && e.attempt > limit) {
        violate("R3.3 episode", `${call.name} (${call.callId}) retry ${e.attempt}, past its maxRetries ${limit}`)
      }
    }
  }

  // R3.3, R4: the run deadline.
  const started = timeline[0]
  const deadlineAt = started?._tag === "run.started" ? started.deadlineAt : undefined
  if (deadlineAt !== undefined) {
    for (const e of retries) {
      if (e.at + e.delayMillis >= deadlineAt) {
        violate(
          "R3.3 deadline",
          `${e.kind} at ${e.at} waits ${e.delayMillis} ms, to or past the deadline ${deadlineAt}`
        )
      }
    }
    const late = timeline.find((e) => e.at > deadlineAt)
    if (late !== undefined)
      violate("R3.3 deadline", `${late._tag} (seq ${late.seq}) at ${late.at}, after the deadline ${deadlineAt}`)
  }
  // The run's time spent with a retry asleep: calls of a concurrent batch sleep side by side.
  let slept = 0
  let until = Number.NEGATIVE_INFINITY
  for (const [from, to] of retries.map((e) => [e.at, e.at + e.delayMillis] as const).sort((a, b) => a[0] - b[0])) {
    slept += Math.max(0, to - Math.max(from, until))
    until = Math.max(until, to)
  }
  if (slept > budget.runTimeoutMillis) {
    violate("R3.3 deadline", `retries slept ${slept} ms in all, over the run timeout of ${budget.runTimeoutMillis} ms`)
  }
  if (result.elapsedMillis > budget.runTimeoutMillis) {
    violate(
      "R3.3 deadline",
      `the run took ${result.elapsedMillis} ms, over its timeout of ${budget.runTimeoutMillis} ms`
    )
  }

  // R3.1, R3.6, R3.8: what is never retried.
  const never = new Set(budget.neverRetried ?? neverRetriedCodes)
  for (const e of retries) {
    if (never.has(e.cause)) violate("R3.1 never retried", `${e.kind} (seq ${e.seq}) retried a ${e.cause} failure`)
  }
  for (const e of ofTag(retries, "recovery.started").filter((r) => r.kind === "provider_retry")) {
    const before = timeline
      .slice(0, e.seq)
      .reverse()
      .find((x) => x._tag !== "state.changed")
    if (before?._tag !== "model.failed" || before.failure.classification !== "retryable") {
      violate("R3.1 never retried", `provider retry (seq ${e.seq}) does not follow a retryable model failure`)
    } else if (before.failure.code !== e.cause) {
      violate(
        "R3.1 never retried",
        `provider retry (seq ${e.seq}) names ${e.cause}, the failure was ${before.failure.code}`
      )
    }
  }
  const refused = new Set(
    timeline.flatMap((e) =>
      e._tag === "tool.blocked" || (e._tag === "tool.failed" && e.error.correctable) ? [e.callId] : []
    )
  )
  for (const e of retries) {
    const call = owner.get(e.seq)
    if (e.kind === "tool_retry" && call !== undefined && refused.has(call.callId)) {
      violate("R3.1 never retried", `${call.name} (${call.callId}) was refused, then retried (seq ${e.seq})`)
    }
  }
  // A call its status query found not applied is sent again by the runtime (R3.8): that is no blind retry.
  const resent = new Set(
    timeline.flatMap((e) => (e._tag === "tool.reconciled" && e.verdict === "not_applied" ? [e.callId] : []))
  )
  for (const e of ofTag(timeline, "tool.failed")) {
    const failure = e.error.failure
    if (
      failure !== undefined &&
      failure.classification !== "retryable" &&
      failure.attempts > 1 &&
      !resent.has(e.callId)
    ) {
      violate(
        "R3.1 never retried",
        `${e.name} (${e.callId}) ended ${failure.classification} after ${failure.attempts} attempts`
      )
    }
  }

  // R8: each call starts once and ends once.
  const starts = new Map<string, number>()
  const ends = new Map<string, number>()
  for (const e of timeline) {
    if (e._tag === "tool.started") starts.set(e.callId, (starts.get(e.callId) ?? 0) + 1)
    if (e._tag === "tool.succeeded" || e._tag === "tool.failed" || e._tag === "tool.blocked") {
      ends.set(e.callId, (ends.get(e.callId) ?? 0) + 1)
      if (!starts.has(e.callId)) violate("R8 timeline", `${e._tag} for ${e.callId} before its tool.started`)
    }
  }
  for (const [callId, n] of starts) if (n > 1) violate("R8 timeline", `${callId} started ${n} times`)
  // R5.2: a call that started and did not end was interrupted, and the timeline says what became of it.
  const interrupted = new Set(ofTag(timeline, "tool.interrupted").map((e) => e.callId))
  for (const callId of starts.keys()) {
    if (!ends.has(callId) && !interrupted.has(callId)) {
      const last = timeline.findLast((e) => "callId" in e && e.callId === callId)
      violate(
        "R5.2 calls accounted for",
        `${callId} started and neither ended nor was recorded interrupted (its last event: ${last?._tag} at seq ${last?.seq}); the run ended ${result.stopReason}`
      )
    }
  }
  for (const [callId, n] of ends) if (n > 1) violate("R8 timeline", `${callId} ended ${n} times`)

  // R3.3: every episode that retried ends with recovery.completed or recovery.failed,
  // unless the run was stopped from outside (deadline, cancel) while it was in it, or
  // (a tool call's) its batch was stopped by another call's approval (R7). Episodes
  // are kept per owner (the model, or a tool call by its id): calls of a concurrent
  // batch retry side by side.
  const open = new Map<string, Event.Of<"recovery.started">>()
  const ownerOf = (e: { readonly callId?: string | undefined }) => e.callId ?? "model"
  const closeOpen = (episode: Event.Of<"recovery.started">, e: Event.Event) =>
    violate("R3.3 episode", `the ${episode.kind} episode of seq ${episode.seq} never closed before seq ${e.seq}`)
  let approvalStop: Event.Of<"approval.decided"> | undefined
  for (const e of timeline) {
    if (e._tag === "recovery.started" && e.kind !== "tool_argument_correction") {
      const before = open.get(ownerOf(e))
      if (e.attempt === 1 && before !== undefined) closeOpen(before, e)
      open.set(ownerOf(e), e)
    } else if (
      (e._tag === "recovery.completed" || e._tag === "recovery.failed") &&
      e.kind !== "tool_argument_correction"
    ) {
      if (!open.has(ownerOf(e)) && e._tag === "recovery.completed") {
        violate("R3.3 episode", `recovery.completed (seq ${e.seq}) without a retry`)
      }
      open.delete(ownerOf(e))
    } else if (e._tag === "approval.decided" && (e.decision === "rejected" || e.decision === "expired")) {
      approvalStop ??= e
    } else if (e._tag === "termination.decided") {
      for (const episode of open.values()) {
        const outside = e.reason === "run_timeout" || e.reason === "cancelled"
        const stoppedBatch = episode.callId !== undefined && approvalStop !== undefined
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
  const calls = ofTag(timeline, "tool.started").length
  if (budget.maxToolCalls !== undefined && calls > budget.maxToolCalls) {
    violate("R2.3 hard limits", `${calls} tool calls started, over maxToolCalls ${budget.maxToolCalls}`)
  }

  // R2.5, R8: the ending.
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
  if ((result.status === "unknown_outcome") !== (result.stopReason === "unknown_outcome")) {
    violate("R2.5 ending", `status ${result.status} with stop reason ${result.stopReason}`)
  }
  const gap = timeline.findIndex((e, i) => e.seq !== i)
  if (gap >= 0) violate("R8 timeline", `event ${gap} has seq ${timeline[gap]?.seq}`)
  const folded = Counters.snapshot(Counters.fold(timeline))
  for (const key of Object.keys(folded) as Array<keyof Counters.Snapshot>) {
    if (folded[key] !== result.counters[key]) {
      violate("R8 counters", `${key}: the result says ${result.counters[key]}, the timeline folds to ${folded[key]}`)
    }
  }
  checkStates(result, violate)
  checkTimeLayers(result, budget, violate)
  checkApprovals(result, violate)
  return violations
}

type Violate = (invariant: string, detail: string) => void

/**
 * Jittered delays make the clock's times fractional, and the same instant reached by
 * two sums may differ in its last bits: times closer than this are the same.
 */
const epsilon = 1e-6

/**
 * R1: every move is an edge of `RunState.table` from the state the run was in; it ends
 * terminal. R1.3: the state shows the phase: `awaiting_approval` exactly while a call
 * waits for a decision, and `recovering` (or `awaiting_approval`) when a retry starts.
 */
const checkStates = (result: RunResult.RunResult, violate: Violate): void => {
  let state: RunState.State = "created"
  const waiting = new Set<string>()
  for (const e of result.timeline) {
    if (e._tag === "approval.requested") waiting.add(e.callId)
    if (e._tag === "approval.decided") waiting.delete(e.callId)
    if (e._tag === "state.changed") {
      if (e.from !== state) {
        violate("R1.2 state machine", `state.changed (seq ${e.seq}) moves from ${e.from}, but the run was ${state}`)
      }
      if (!RunState.canTransition(e.from, e.to)) {
        violate("R1.2 state machine", `state.changed (seq ${e.seq}) ${e.from} → ${e.to} is not an edge of the table`)
      }
      state = e.to
      continue
    }
    // A decision is recorded just before the run leaves the phase (a withdrawn call also records its interruption).
    if (e._tag === "approval.decided" || e._tag === "tool.interrupted" || RunState.isTerminal(state)) continue
    if ((state === "awaiting_approval") !== waiting.size > 0) {
      violate(
        "R1.3 phase",
        `the run is ${state} at ${e._tag} (seq ${e.seq}) while ${waiting.size} calls wait for approval`
      )
    }
    if (e._tag === "recovery.started" && state !== "recovering" && state !== "awaiting_approval") {
      violate("R1.3 phase", `recovery.started (seq ${e.seq}) while the run is ${state}`)
    }
  }
  if (!RunState.isTerminal(state)) violate("R1.2 state machine", `the run ended in ${state}, not a terminal status`)
  else if (state !== result.status) {
    violate("R1.2 state machine", `the last state is ${state}, the result says ${result.status}`)
  }
}

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
const checkTimeLayers = (result: RunResult.RunResult, budget: Budget, violate: Violate): void => {
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
  /** When the current attempt of each tool call began: its start, its approval, or its retry's wake-up. */
  const attemptAt = new Map<string, number>()
  const requests = new Map<string, Event.Of<"approval.requested">>()
  for (const e of timeline) {
    if (e._tag === "model.requested") {
      requested = e
      if (e.iteration !== iteration) {
        iteration = e.iteration
        stepDeadline = stepMillis === undefined ? Number.POSITIVE_INFINITY : e.at + stepMillis
      }
    }
    if (e._tag === "tool.started") attemptAt.set(e.callId, e.at)
    if (e._tag === "approval.decided" && e.decision === "approved") attemptAt.set(e.callId, e.at)
    if (e._tag === "recovery.started" && e.callId !== undefined) attemptAt.set(e.callId, e.at + e.delayMillis)

    // A retry's wait ends before the deadline of its step (R4.2, R3.3).
    if (
      e._tag === "recovery.started" &&
      e.kind !== "tool_argument_correction" &&
      e.delayMillis >= stepDeadline - e.at
    ) {
      violate(
        "R4.2 step deadline",
        `${e.kind} at ${e.at} waits ${e.delayMillis} ms, to or past its step's deadline ${stepDeadline}`
      )
    }
    // No answer, result or decision of a step arrives after the step's deadline: every wait is bounded by it.
    if (
      (e._tag === "model.responded" ||
        e._tag === "model.failed" ||
        e._tag === "tool.succeeded" ||
        e._tag === "tool.failed" ||
        e._tag === "tool.blocked" ||
        e._tag === "approval.decided") &&
      e.at > stepDeadline + epsilon
    ) {
      violate("R4.2 step deadline", `${e._tag} (seq ${e.seq}) at ${e.at}, after its step's deadline ${stepDeadline}`)
    }

    if (e._tag === "model.failed" && e.failure.timeout !== undefined) {
      const own = requested?.iteration === e.iteration ? requested : undefined
      if (!reportedByProvider(e, own)) timedOut(e, e.failure.timeout, undefined, own?.at)
    }
    if (e._tag === "tool.failed" && e.error.failure?.timeout !== undefined) {
      timedOut(e, e.error.failure.timeout, e.name, attemptAt.get(e.callId))
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

/** The stop a decision that ends the run must give (R7, R4.2). */
const stopOf = (e: Event.Of<"approval.decided">): StopReason.StopReason =>
  e.decision === "rejected"
    ? "approval_rejected"
    : e.layer === "approval"
      ? "approval_expired"
      : e.layer === "step"
        ? "step_timeout"
        : "run_timeout"

/** R7: a call that needs approval runs only once approved; a rejection or an expiry ends the run. */
const checkApprovals = (result: RunResult.RunResult, violate: Violate): void => {
  const timeline = result.timeline
  const started = timeline[0]
  const runDeadline = started?._tag === "run.started" ? started.deadlineAt : Number.POSITIVE_INFINITY
  const starts = new Set<string>()
  const requested = new Map<string, Event.Of<"approval.requested">>()
  const decided = new Map<string, Event.Of<"approval.decided">>()
  let ending: Event.Of<"approval.decided"> | undefined
  for (const e of timeline) {
    if (e._tag === "tool.started") starts.add(e.callId)
    if (e._tag === "approval.requested") {
      if (!starts.has(e.callId)) violate("R7 approvals", `${e.callId}'s approval was requested before its tool.started`)
      if (requested.has(e.callId)) violate("R7 approvals", `${e.callId}'s approval was requested twice (seq ${e.seq})`)
      requested.set(e.callId, e)
      continue
    }
    if (e._tag === "approval.decided") {
      if (!requested.has(e.callId)) violate("R7 approvals", `${e.callId} was decided (seq ${e.seq}) without a request`)
      if (decided.has(e.callId)) violate("R7 approvals", `${e.callId} was decided twice (seq ${e.seq})`)
      decided.set(e.callId, e)
      if (e.decision !== "approved") ending ??= e
      continue
    }
    // Nothing new starts once a decision ended the run: the model never guesses the decision.
    if (ending !== undefined && (e._tag === "model.requested" || e._tag === "tool.started")) {
      violate("R7 no guess", `${e._tag} (seq ${e.seq}) after ${ending.callId}'s approval was ${ending.decision}`)
    }
    // What the handler does shows only after an approval; a call refused shows only its ending.
    if ("callId" in e && typeof e.callId === "string" && requested.has(e.callId)) {
      const decision = decided.get(e.callId)
      const handled =
        e._tag === "tool.succeeded" ||
        e._tag === "tool.failed" ||
        e._tag === "tool.reconciled" ||
        e._tag === "recovery.started" ||
        e._tag === "recovery.completed" ||
        e._tag === "recovery.failed" ||
        (e._tag === "tool.interrupted" && decision?.decision !== "withdrawn")
      if (handled && decision?.decision !== "approved") {
        violate(
          "R7 approval first",
          `${e._tag} of ${e.callId} (seq ${e.seq}) while its approval is ${decision?.decision ?? "pending"}`
        )
      }
    }
  }
  for (const [callId, request] of requested) {
    const decision = decided.get(callId)
    if (decision === undefined) violate("R7 approvals", `${request.name} (${callId}) was never decided`)
    // A refused call ends blocked, with the code of its refusal.
    const code =
      decision?.decision === "rejected"
        ? "approval_rejected"
        : decision?.decision === "expired"
          ? "approval_expired"
          : undefined
    if (
      code !== undefined &&
      !timeline.some((e) => e._tag === "tool.blocked" && e.callId === callId && e.error.code === code)
    ) {
      violate("R7 approvals", `${callId}'s approval was ${decision?.decision}, and it did not end blocked ${code}`)
    }
  }
  // The first decision that ends the run decides its stop, unless a harder stop came
  // first: an unknown outcome in the batch (R3.8), or the run deadline at that instant.
  const first = [...decided.values()].find((e) => e.decision === "rejected" || e.decision === "expired")
  if (first !== undefined) {
    const expected = stopOf(first)
    const preempted =
      result.stopReason === "unknown_outcome" || (result.stopReason === "run_timeout" && first.at >= runDeadline)
    if (result.stopReason !== expected && !preempted) {
      violate(
        "R7 approval stop",
        `${first.callId}'s approval was ${first.decision}${first.layer === undefined ? "" : ` (${first.layer})`}, the run ended ${result.stopReason}`
      )
    }
  } else if (result.stopReason === "approval_rejected" || result.stopReason === "approval_expired") {
    violate("R7 approval stop", `the run ended ${result.stopReason} without such a decision`)
  }
}
