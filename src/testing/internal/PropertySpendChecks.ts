/**
 * R2.1: what the answers a run was given used, against its token budget. Every answer
 * that was paid for is counted (a failure's usage too), and once they used more than
 * `maxTokens`, nothing more is paid for or run. Private to the testing kit; `Properties`
 * is the public face.
 */
import type * as Event from "../../events/Event.ts"
import type * as Model from "../../model/Model.ts"
import type * as RunResult from "../../run/RunResult.ts"
import type { Budget } from "./PropertyBudget.ts"
import type { Violate } from "./PropertyViolation.ts"

const tokensOf = (usage: Model.Usage | undefined): number =>
  usage === undefined ? 0 : usage.inputTokens + usage.outputTokens

/** The usage an event records an answer paid for: a response's, or that of one the provider stopped unfinished. */
const paidIn = (e: Event.Event): Model.Usage | undefined =>
  e._tag === "model.responded" || e._tag === "model.failed" ? e.usage : undefined

/** The tokens the answers of `timeline` used. */
const tokensUsed = (timeline: ReadonlyArray<Event.Event>): number =>
  timeline.reduce((sum, e) => sum + tokensOf(paidIn(e)), 0)

/**
 * - `R2.1 usage counted`: the result's token counters are the sum of the usage of every
 *   answer on the timeline, failed ones included;
 * - `R2.1 token budget`: once those answers used more than `maxTokens`, no model request
 *   and no tool call starts.
 */
export const checkSpend = (result: RunResult.RunResult, budget: Budget, violate: Violate): void => {
  let used = 0
  let over: Event.Event | undefined
  for (const e of result.timeline) {
    if (over !== undefined && (e._tag === "model.requested" || e._tag === "tool.started")) {
      violate(
        "R2.1 token budget",
        `${e._tag} (seq ${e.seq}) after the answers had used ${used} tokens, over maxTokens ${budget.maxTokens} (seq ${over.seq})`
      )
      break
    }
    used += tokensOf(paidIn(e))
    if (over === undefined && budget.maxTokens !== undefined && used > budget.maxTokens) over = e
  }
  const counted = result.counters.inputTokens + result.counters.outputTokens
  if (counted !== tokensUsed(result.timeline)) {
    violate(
      "R2.1 usage counted",
      `the counters hold ${counted} tokens, the answers on the timeline used ${tokensUsed(result.timeline)}`
    )
  }
}
