/**
 * The facts of a run's log an explanation is made of: the work in flight at a moment, the
 * actions of unknown outcome, the failure that mattered, approvals and the plan as
 * validation left it (what repeated: `ExplainRepetition`). Pure functions of the timeline.
 * Private to `explain/`.
 */
import * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import type { ApprovalSeen, FailureSeen, InFlight, PendingAction, PlanItem, ValidationSeen } from "./ExplainModel.ts"

type Timeline = ReadonlyArray<Event.Event>

const startOf = (timeline: Timeline): number => timeline[0]?.at ?? 0

/**
 * The actions that may or may not have taken effect (R3.8, R5.2): a call is pending when
 * something left its outcome unknown (an attempt cut off while it may have acted, a
 * failure of unknown outcome) and nothing later settled it (a success, or a status query
 * that found it applied or not applied). A later failure does not settle it: an attempt
 * that fails says nothing of an earlier one that may have acted.
 */
export const pendingActions = (timeline: Timeline): ReadonlyArray<PendingAction> => {
  // One entry per call; the latest word that leaves it unknown stands.
  const pending = new Map<string, PendingAction>()
  const unknown = (e: Event.Event & { readonly callId: string; readonly name: string }, detail: string) =>
    pending.set(e.callId, {
      callId: e.callId,
      name: e.name,
      idempotencyKey: `${e.runId}:${e.callId}`,
      detail,
      seq: e.seq
    })
  for (const e of timeline) {
    if (e._tag === "tool.succeeded") pending.delete(e.callId)
    else if (e._tag === "tool.reconciled" && e.verdict !== "undecidable") pending.delete(e.callId)
    else if (e._tag === "tool.interrupted" && e.settlement === "outcome_unknown") unknown(e, e.detail)
    else if (e._tag === "tool.failed" && e.error.failure?.classification === "unknown") unknown(e, e.error.failure.hint)
  }
  return Array.from(pending.values())
}

type Open = { -readonly [K in keyof InFlight]: InFlight[K] }

/** The last word on a call after the moment: how it ended, or how its interruption settled. */
const endingOf = (e: Event.Event): string | undefined => {
  switch (e._tag) {
    case "tool.succeeded":
      return "succeeded"
    case "tool.failed":
      return `failed: ${e.error.failure?.code ?? e.error.code}`
    case "tool.blocked":
      return `blocked: ${e.error.code}`
    case "tool.interrupted":
      return e.settlement
    case "approval.decided":
      return e.decision
    case "model.failed":
      return `failed: ${e.failure.code}`
    case "model.responded":
      return "responded"
    default:
      return undefined
  }
}

/**
 * The work the run had going just before event `index` (the whole log when `index` is its
 * length): the model attempt waiting for its answer, the calls without their ending, the
 * approvals waiting and the retries sleeping; and, from the events after, what became of each.
 */
export const inFlightAt = (timeline: Timeline, index: number): ReadonlyArray<InFlight> => {
  const start = startOf(timeline)
  let state = RunLog.fold([])
  let model: Open | undefined
  const tools = new Map<string, Open>()
  const retries = new Map<string, Open>()
  const ended = new Set<string>()
  // When each call's first attempt started (a retry is the same call, in flight since then), and its tool.
  const firstStarted = new Map<string, number>()
  const toolOf = new Map<string, string>()
  let batchFrom = -1
  for (const [i, e] of timeline.entries()) {
    if (i >= index) break
    state = RunLog.step(state, e)
    const since = e.at - start
    switch (e._tag) {
      case "model.requested":
        model = {
          kind: "model_call",
          name: state.model,
          callId: undefined,
          attempt: e.attempt,
          sinceMillis: since,
          deadlineAt: e.deadlineAt,
          layer: e.layer,
          became: undefined
        }
        break
      case "model.responded":
        model = undefined
        batchFrom = i
        break
      case "model.failed":
        model = undefined
        break
      case "tool.started":
        // A retry is the same call in flight since its first attempt, now on its next.
        if (!firstStarted.has(e.callId)) firstStarted.set(e.callId, since)
        toolOf.set(e.callId, e.name)
        tools.set(e.callId, {
          kind: "tool_call",
          name: e.name,
          callId: e.callId,
          attempt: e.attempt,
          sinceMillis: firstStarted.get(e.callId) ?? since,
          deadlineAt: e.deadlineAt,
          layer: e.layer,
          became: undefined
        })
        break
      case "tool.succeeded":
      case "tool.failed":
      case "tool.blocked":
        tools.delete(e.callId)
        ended.add(e.callId)
        break
      case "tool.interrupted":
        // Settled with no attempt running: the call no longer holds its place in the batch. One
        // whose attempt was cut off stays in flight: its status query may run next (R3.8).
        if (e.attempt === 0 && !tools.has(e.callId)) ended.add(e.callId)
        break
      case "run.resumed":
        // No attempt of the process that stopped runs in this one.
        tools.clear()
        break
      case "recovery.started":
        retries.set(e.callId ?? "", {
          kind: "retry",
          name: e.callId === undefined ? state.model : (toolOf.get(e.callId) ?? e.kind),
          callId: e.callId,
          attempt: e.attempt,
          sinceMillis: since,
          deadlineAt: e.at + e.delayMillis,
          layer: undefined,
          became: undefined
        })
        // Its attempt failed: the call waits for its retry (above), no attempt of it runs.
        if (e.callId !== undefined) tools.delete(e.callId)
        break
    }
  }
  // The calls the last batch had taken up and not yet attempted (in their checks): in call
  // order, as many at a time as the run's concurrency (a queued call is not in flight).
  if (batchFrom >= 0) {
    const response = timeline[batchFrom]
    const names = new Map(
      response?._tag === "model.responded" ? Event.callsOf(response).map((c) => [c.callId, c.name]) : []
    )
    const taken = RunLog.takenUp(timeline.slice(batchFrom, index), RunLog.concurrencyOf(timeline.slice(0, batchFrom)))
    for (const [callId, at] of taken) {
      // Begun: running (above), waiting for its retry, or cut off: not a call still in its checks.
      if (ended.has(callId) || firstStarted.has(callId)) continue
      tools.set(callId, {
        kind: "tool_call",
        name: names.get(callId) ?? "",
        callId,
        attempt: undefined,
        sinceMillis: at - start,
        deadlineAt: undefined,
        layer: undefined,
        became: undefined
      })
    }
  }
  const approvals: Array<Open> = state.approvals.map((callId) => {
    const request = timeline.find(
      (e): e is Event.Of<"approval.requested"> => e._tag === "approval.requested" && e.callId === callId
    )
    return {
      kind: "approval",
      name: request?.name ?? tools.get(callId)?.name ?? "",
      callId,
      attempt: undefined,
      sinceMillis: (request?.at ?? start) - start,
      deadlineAt: request?.expiresAt,
      layer: request?.layer,
      became: undefined
    }
  })
  const sleeping = state.retries.flatMap((owner) => {
    const retry = retries.get(owner)
    return retry === undefined ? [] : [retry]
  })
  const open: Array<Open> = [...(model === undefined ? [] : [model]), ...approvals, ...tools.values(), ...sleeping]
  // What became of each: the last word after the moment (an approval's decision, a call's ending).
  for (const [i, e] of timeline.entries()) {
    if (i < index) continue
    const ending = endingOf(e)
    if (ending === undefined) continue
    const callId = "callId" in e ? e.callId : undefined
    for (const work of open) {
      const about =
        work.kind === "model_call"
          ? e._tag === "model.failed" || e._tag === "model.responded"
          : work.kind === "approval"
            ? e._tag === "approval.decided" && callId === work.callId
            : work.kind === "tool_call" && e._tag !== "approval.decided" && callId === work.callId
      // A call's last word stands (cut off, then failed); a model call's or an approval's first.
      if (about && (work.became === undefined || work.kind === "tool_call")) work.became = ending
    }
  }
  return open
}

/** The last failed model call, or failed or blocked tool call, before `index` (and from `from` on). */
export const lastFailure = (
  timeline: Timeline,
  index: number,
  source?: "model" | "tool",
  from = 0
): FailureSeen | undefined => {
  for (let i = Math.min(index, timeline.length) - 1; i >= from; i--) {
    const e = timeline[i]
    if (e === undefined) continue
    if (e._tag === "model.failed" && source !== "tool") {
      const { code, classification, hint, timeout } = e.failure
      return { source: "model", name: "model", callId: undefined, code, classification, hint, timeout, seq: e.seq }
    }
    if ((e._tag === "tool.failed" || e._tag === "tool.blocked") && source !== "model") {
      const failure = e.error.failure
      return {
        source: "tool",
        name: e.name,
        callId: e.callId,
        code: failure?.code ?? e.error.code,
        classification: failure?.classification,
        hint: failure?.hint ?? e.error.message,
        timeout: failure?.timeout,
        seq: e.seq
      }
    }
  }
  return undefined
}

/** The last decision on an approval, with its request. */
export const approvalOf = (
  timeline: Timeline,
  decisions: ReadonlyArray<ApprovalSeen["decision"]>
): ApprovalSeen | undefined => {
  const decided = timeline.findLast(
    (e): e is Event.Of<"approval.decided"> => e._tag === "approval.decided" && decisions.includes(e.decision)
  )
  if (decided === undefined) return undefined
  const request = timeline.findLast(
    (e): e is Event.Of<"approval.requested"> =>
      e._tag === "approval.requested" && e.callId === decided.callId && e.seq < decided.seq
  )
  const start = startOf(timeline)
  return {
    callId: decided.callId,
    name: decided.name,
    arguments: request?.arguments,
    decision: decided.decision,
    by: decided.by,
    reason: decided.reason,
    layer: decided.layer,
    requestedAtMillis: (request?.at ?? start) - start,
    expiresAt: request?.expiresAt ?? Number.NaN,
    decidedAtMillis: decided.at - start
  }
}

/**
 * Whether a check fails the validation, as the run's report counts it: a failed check, but
 * not an optional plan step's (that step is only unfinished).
 */
export const failsValidation = (timeline: Timeline): ((check: Event.Check) => boolean) => {
  const plan = timeline.findLast((e): e is Event.Of<"plan.set"> => e._tag === "plan.set")
  const optional = new Set((plan?.steps ?? []).flatMap((step) => (step.required ? [] : [`plan:${step.id}`])))
  return (check) => !check.passed && !(check.kind === "plan_step" && optional.has(check.name))
}

/** The checks that failed the validation, and the plan's steps done and not done, as validation recorded them. */
export const validationOf = (timeline: Timeline): ValidationSeen | undefined => {
  const plan = timeline.findLast((e): e is Event.Of<"plan.set"> => e._tag === "plan.set")
  const checks = timeline.flatMap((e) => (e._tag === "validation.checked" ? [e.check] : []))
  if (plan === undefined && checks.length === 0) return undefined
  const completed: Array<PlanItem> = []
  const unfinished: Array<PlanItem> = []
  for (const step of plan?.steps ?? []) {
    const check = checks.findLast((c) => c.kind === "plan_step" && c.name === `plan:${step.id}`)
    // Completed means done with evidence, as in the result (R6.3); a log written before `backed` says only whether it held.
    if (check?.passed === true && check.backed !== false) completed.push({ ...step, detail: check.detail })
    else
      unfinished.push({
        ...step,
        detail:
          check === undefined
            ? "not checked: validation did not run on this step"
            : check.passed
              ? `${check.detail}; no tool result of this run backs it`
              : check.detail
      })
  }
  return { failed: checks.filter(failsValidation(timeline)), completed, unfinished }
}
