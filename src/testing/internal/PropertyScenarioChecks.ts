/**
 * The invariants only a scenario's tools can see (handler invocations, idempotency
 * keys, the ledger), checked on top of `check` by `checkScenario`.
 * Private to the testing kit; `Properties` is the public face.
 */
import type * as Event from "../../events/Event.ts"
import type * as RunResult from "../../run/RunResult.ts"
import { check, type Violation } from "./PropertyChecks.ts"
import type { Scenario } from "./PropertyScenario.ts"
import { ownEnding } from "./PropertyTimelineChecks.ts"

/** An answer's usage as `input+output`, or nothing when it used no token. */
const usageText = (usage: { readonly inputTokens: number; readonly outputTokens: number } | undefined) =>
  usage === undefined || usage.inputTokens + usage.outputTokens === 0
    ? []
    : [`${usage.inputTokens}+${usage.outputTokens}`]

/** R7: what the tools that need approval and the approval gate saw, against the timeline. */
const checkApprovals = (scenario: Scenario, result: RunResult.RunResult): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  const { tools, approvals } = scenario
  const timeline = result.timeline
  const requested = new Map<string, Event.Of<"approval.requested">>()
  const decided = new Map<string, Event.Of<"approval.decided">>()
  for (const e of timeline) {
    if (e._tag === "approval.requested") requested.set(e.callId, e)
    if (e._tag === "approval.decided") decided.set(e.callId, e)
  }
  const stops = timeline.filter((e): e is Event.Of<"termination.decided"> => e._tag === "termination.decided")
  for (const gated of [tools.transfer, tools.wire]) {
    for (const call of gated.unapproved) {
      violate("R7 approval first", `${call.callId}'s handler ran (at ${call.at}) before the gate approved it`)
    }
    for (const call of gated.calls.all) {
      const decision = decided.get(call.callId)
      if (decision?.decision !== "approved") {
        violate(
          "R7 approval first",
          `${call.callId}'s handler ran (at ${call.at}) though its approval was ${decision?.decision ?? "never decided"}`
        )
      } else if (decision.at > call.at) {
        violate(
          "R7 approval first",
          `${call.callId}'s handler ran at ${call.at}, before its approval at ${decision.at}`
        )
      }
    }
  }
  for (const [callId, decision] of decided) {
    if (decision.decision !== "approved") continue
    const ran = tools.transfer.calls.forCall(callId).length + tools.wire.calls.forCall(callId).length
    // Only a stop at the instant of the approval (a sibling's, or the deadline) may keep it from
    // running, or its step's deadline falling at that instant (cut off with no time left, R4.2).
    const cutOff = timeline.some(
      (e) =>
        e._tag === "tool.failed" &&
        e.callId === callId &&
        e.at === decision.at &&
        e.error.failure?.code === "step_timeout"
    )
    if (ran === 0 && !cutOff && !stops.some((e) => e.at === decision.at)) {
      violate("R7 approvals", `${callId} was approved at ${decision.at}, and its handler never ran`)
    }
  }
  for (const request of approvals.requests) {
    const event = requested.get(request.callId)
    if (event === undefined) violate("R7 approvals", `the gate got a request for ${request.callId} the timeline lacks`)
    else if (event.expiresAt !== request.expiresAt || event.at !== request.requestedAt) {
      violate(
        "R7 approvals",
        `${request.callId}: the gate got ${request.requestedAt}–${request.expiresAt}, the timeline says ${event.at}–${event.expiresAt}`
      )
    }
  }
  if (approvals.requests.length !== requested.size) {
    violate("R7 approvals", `the gate got ${approvals.requests.length} requests, the timeline has ${requested.size}`)
  }
  const started = timeline[0]
  const deadlineAt = started?._tag === "run.started" ? started.deadlineAt : Number.POSITIVE_INFINITY
  for (const delivered of approvals.delivered) {
    const decision = decided.get(delivered.callId)
    const expiresAt =
      approvals.requests.find((r) => r.callId === delivered.callId)?.expiresAt ?? Number.POSITIVE_INFINITY
    // A decision delivered at the deadline's instant may lose the race to the deadline, or at
    // the instant the run stopped waiting (its batch stopped, R3.11) to that stop; one
    // delivered at or after the call's expiry is no decision: the call expired (R7).
    if (
      decision?.decision !== delivered.decision &&
      !(delivered.at >= deadlineAt && decision?.decision === "withdrawn") &&
      !(decision?.decision === "withdrawn" && delivered.at >= decision.at) &&
      !(delivered.at >= expiresAt && decision?.decision === "expired")
    ) {
      violate(
        "R7 approvals",
        `the gate delivered ${delivered.decision} for ${delivered.callId} at ${delivered.at}, the timeline says ${decision?.decision ?? "nothing"}`
      )
    } else if (delivered.at >= expiresAt && decision?.decision === delivered.decision) {
      violate(
        "R7 approvals",
        `${delivered.callId}: the run took a decision delivered at ${delivered.at}, at or after its expiry (${expiresAt})`
      )
    }
  }
  for (const pending of approvals.pending) {
    violate("R7 approvals", `${pending.callId} is still waiting on the gate after the run ended`)
  }
  return violations
}

/**
 * {@link check}, plus what only the scenario's tools saw:
 *
 * - `R1.2`: the run never ends `internal_error` (a defect);
 * - `R2.1 paid`: the timeline records the usage of every answer the model gave, answer by
 *   answer and in order, those it stopped unfinished too;
 * - `R3.8`: every handler invocation carried its call's key, `runId:callId`;
 * - `R3.6`: the refused tool's handler never ran;
 * - `R3.8`: each payment key was applied at most once, and sent once (never retried
 *   blindly), or twice when the status query found the first send not applied and the
 *   runtime sent it again under the same key; such a key was applied only by that resend;
 * - `R3.7`: a non-idempotent call was sent once, a permanent failure once, and an
 *   idempotent call at most 1 + min(schedule retries, `maxRetries`) times;
 * - `R7 approval first`: the handler of a tool that needs approval ran only for a call the
 *   gate had approved before, and after its `approval.decided` approved; the handler of a
 *   call rejected, expired or withdrawn never ran; `R7 approvals`: an approved call's
 *   handler ran (unless the run stopped at that very instant), every request the gate got
 *   is the timeline's `approval.requested` (same call, same expiry), every decision the
 *   gate delivered is on the timeline, and no request is left waiting on the gate once
 *   the run has ended (an interrupted wait withdraws it).
 *
 * @category checks
 * @since 0.1.0
 */
export const checkScenario = (scenario: Scenario, result: RunResult.RunResult): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = [...check(result, scenario.budget)]
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  const { tools, plan } = scenario
  // A process another took the run from (fenced off, its ending unrecorded) ended as its log
  // says, at its last commit or at once before it: no defect of the runtime.
  if (ownEnding(result).stopReason === "internal_error" && result.unrecorded === undefined)
    violate("R1.2 no defect", `the run ended internal_error: ${result.detail}`)
  // Answer by answer, in order: a usage moved from one answer to another is no record of either.
  const billed = scenario.model.paid.flatMap(usageText)
  const recorded = result.timeline.flatMap((e) =>
    e._tag === "model.responded" || e._tag === "model.failed" ? usageText(e.usage) : []
  )
  if (billed.join(", ") !== recorded.join(", ")) {
    violate(
      "R2.1 paid",
      `the model was paid for answers of ${billed.join(", ") || "no"} tokens, the timeline records ${recorded.join(", ") || "none"}`
    )
  }
  const handles = [
    tools.lookup,
    tools.submit.calls,
    tools.pay.calls,
    tools.payChecked.calls,
    tools.payUndecidable.calls,
    tools.transfer.calls,
    tools.wire.calls
  ]
  for (const calls of handles) {
    for (const call of calls.all) {
      if (call.idempotencyKey !== `${result.runId}:${call.callId}`) {
        violate("R3.8 idempotency key", `${call.callId} was sent with key ${call.idempotencyKey}`)
      }
    }
  }
  if (tools.forbidden.calls.count > 0) {
    violate("R3.6 permission", `the refused tool ran ${tools.forbidden.calls.count} times`)
  }
  const notApplied = new Set(
    result.timeline.flatMap((e) =>
      e._tag === "tool.reconciled" && e.verdict === "not_applied" ? [e.idempotencyKey] : []
    )
  )
  for (const ledgered of [tools.pay, tools.payChecked, tools.payUndecidable]) {
    for (const key of ledgered.calls.keys) {
      const sent = ledgered.calls.forKey(key).length
      const allowed = notApplied.has(key) ? 2 : 1
      if (sent < 1 || sent > allowed) {
        violate("R3.8 unknown outcome", `${ledgered.tool.name} ${key} was sent ${sent} times`)
      }
      if (ledgered.ledger.count(key) > 1) {
        violate("R3.8 unknown outcome", `${ledgered.tool.name} ${key} was applied ${ledgered.ledger.count(key)} times`)
      }
    }
  }
  for (const call of tools.payChecked.calls.all) {
    const outcome = plan.get(call.callId)
    const applied = tools.payChecked.ledger.count(call.idempotencyKey)
    const lost = outcome?._tag === "UnknownOutcome" && outcome.reconcile === "not_applied"
    if (lost && call.attempt === 1 && applied > 0 && tools.payChecked.calls.forKey(call.idempotencyKey).length < 2) {
      violate(
        "R3.8 unknown outcome",
        `pay_checked ${call.idempotencyKey} was lost before applying and never resent, yet applied ${applied} times`
      )
    }
  }
  for (const calls of [tools.submit.calls, tools.wire.calls]) {
    for (const key of calls.keys) {
      const sent = calls.forKey(key).length
      const name = calls === tools.wire.calls ? "wire" : "submit"
      if (sent !== 1) violate("R3.7 idempotent only", `${name} (not idempotent) ${key} was sent ${sent} times`)
    }
  }
  violations.push(...checkApprovals(scenario, result))
  violations.push(...checkRetries(scenario))
  return violations
}

/**
 * How often each idempotent call was sent, against its limits: `maxRetries` and the
 * schedule's (R3.7), once for a permanent failure (R3.1). Of a resumed run, process by
 * process: an attempt the dead process had not committed runs again (R9; review 175: the
 * two processes' sends were held to one limit).
 */
const checkRetries = (scenario: Scenario): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const { tools, plan, budget } = scenario
  const limit = 1 + Math.min(budget.scheduleRetries, scenario.case.toolMaxRetries)
  const restarts = scenario.restartedAfter ?? []
  // The calls of each process: between one restart's count and the next.
  const processes = <A>(all: ReadonlyArray<A>, at: ReadonlyArray<number>) =>
    [0, ...at].map((from, i) => all.slice(from, at[i] ?? all.length))
  for (const [name, all, at] of [
    ["lookup", tools.lookup.all, restarts.map((r) => r.lookup)],
    ["transfer", tools.transfer.calls.all, restarts.map((r) => r.transfer)]
  ] as const) {
    for (const calls of processes<{ readonly idempotencyKey: string; readonly callId: string }>(all, at)) {
      const byKey = new Map<string, { readonly callId: string; sent: number }>()
      for (const call of calls) {
        const known = byKey.get(call.idempotencyKey) ?? { callId: call.callId, sent: 0 }
        known.sent++
        byKey.set(call.idempotencyKey, known)
      }
      for (const [key, { callId, sent }] of byKey) {
        if (name === "lookup" && plan.get(callId)?._tag === "Permanent" && sent > 1) {
          violations.push({
            invariant: "R3.1 never retried",
            detail: `lookup ${key} failed permanently and was sent ${sent} times`
          })
        }
        if (sent > limit) {
          violations.push({
            invariant: "R3.7 maxRetries",
            detail: `${name} ${key} was sent ${sent} times, over ${limit}`
          })
        }
      }
    }
  }
  return violations
}
