/**
 * The invariants only a scenario's tools can see (handler invocations, idempotency
 * keys, the ledger), checked on top of `check` by `checkScenario`.
 * Private to the testing kit; `Properties` is the public face.
 */
import type * as RunResult from "../../RunResult.ts"
import { check, type Violation } from "./PropertyChecks.ts"
import type { Scenario } from "./PropertyScenario.ts"

/**
 * {@link check}, plus what only the scenario's tools saw:
 *
 * - `R1.2`: the run never ends `internal_error` (a defect);
 * - `R3.8`: every handler invocation carried its call's key, `runId:callId`;
 * - `R3.6`: the refused tool's handler never ran;
 * - `R3.8`: each payment key was applied at most once, and sent once (never retried
 *   blindly), or twice when the status query found the first send not applied and the
 *   runtime sent it again under the same key; such a key was applied only by that resend;
 * - `R3.7`: a non-idempotent call was sent once, a permanent failure once, and an
 *   idempotent call at most 1 + min(schedule retries, `maxRetries`) times.
 *
 * @category checks
 * @since 0.1.0
 */
export const checkScenario = (scenario: Scenario, result: RunResult.RunResult): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = [...check(result, scenario.budget)]
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  const { tools, plan, budget } = scenario
  if (result.stopReason === "internal_error")
    violate("R1.2 no defect", `the run ended internal_error: ${result.detail}`)
  const handles = [
    tools.lookup,
    tools.submit.calls,
    tools.pay.calls,
    tools.payChecked.calls,
    tools.payUndecidable.calls
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
  for (const key of tools.submit.calls.keys) {
    const sent = tools.submit.calls.forKey(key).length
    if (sent !== 1) violate("R3.7 idempotent only", `submit (not idempotent) ${key} was sent ${sent} times`)
  }
  const limit = 1 + Math.min(budget.scheduleRetries, scenario.case.toolMaxRetries)
  for (const key of tools.lookup.keys) {
    const sent = tools.lookup.forKey(key)
    const outcome = plan.get(sent[0]?.callId ?? "")
    if (outcome?._tag === "Permanent" && sent.length !== 1) {
      violate("R3.1 never retried", `lookup ${key} failed permanently and was sent ${sent.length} times`)
    }
    if (sent.length > limit) violate("R3.7 maxRetries", `lookup ${key} was sent ${sent.length} times, over ${limit}`)
  }
  return violations
}
