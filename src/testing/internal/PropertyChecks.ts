/**
 * The recovery invariants of a finished run: the `Budget` it was given, the `Violation`s
 * it can commit, the invariant names, the never-retried failure codes, and `check`.
 * Private to the testing kit; `Properties` is the public face.
 */
import * as Counters from "../../Counters.ts"
import type * as Event from "../../Event.ts"
import type * as RunResult from "../../RunResult.ts"
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
 * The invariants of R3 (and R2.5, R8) a result violates, or `[]`:
 *
 * - `R3.4 run budget`: provider and tool retries ≤ `maxRecoveries`, and
 *   `counters.recoveryAttempts` ≤ `maxRecoveries` + the argument corrections made; and
 *   ({@link correctionsSpendRetries}) the run budget is never declared spent before
 *   `maxRecoveries` retries were made.
 * - `R3.5 correction budget`: argument corrections ≤ `correctionBudget`.
 * - `R3.3 episode`: every retry's attempt number ≤ the schedule's retries, and a tool's ≤
 *   its `maxRetries`.
 * - `R3.3 deadline`: every retry's wait ends before the deadline; the waits add up to
 *   no more than the run timeout; `elapsedMillis` ≤ the run timeout; no event after the
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
 *   most once, after its start.
 * - `R2.5 ending`: `run.started` first, exactly one `run.finished`, last, agreeing with
 *   the result; a terminal status and a `StopReason` from `StopReason.all`; `completed`
 *   exactly when `goal_reached`; `seq` numbered without gaps.
 * - `R8 counters`: the result's counters equal `Counters.snapshot(Counters.fold(timeline))`.
 *
 * Tool retries are attributed to the call started last, so a run with `concurrency` > 1
 * should not use the per-call checks.
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
  const slept = retries.reduce((sum, e) => sum + e.delayMillis, 0)
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
  for (const [callId, n] of ends) if (n > 1) violate("R8 timeline", `${callId} ended ${n} times`)

  // R3.3: every episode that retried ends with recovery.completed or recovery.failed,
  // unless the run was stopped from outside (deadline, cancel) while it was in it.
  let open: Event.Of<"recovery.started"> | undefined
  const closeOpen = (e: Event.Event) => {
    if (open !== undefined)
      violate("R3.3 episode", `the ${open.kind} episode of seq ${open.seq} never closed before seq ${e.seq}`)
  }
  for (const e of timeline) {
    if (e._tag === "recovery.started" && e.kind !== "tool_argument_correction") {
      if (e.attempt === 1) closeOpen(e)
      open = e
    } else if (
      (e._tag === "recovery.completed" || e._tag === "recovery.failed") &&
      e.kind !== "tool_argument_correction"
    ) {
      if (open === undefined && e._tag === "recovery.completed") {
        violate("R3.3 episode", `recovery.completed (seq ${e.seq}) without a retry`)
      }
      open = undefined
    } else if (e._tag === "termination.decided" && open !== undefined) {
      if (e.reason !== "run_timeout" && e.reason !== "cancelled") closeOpen(e)
      open = undefined
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
  return violations
}
