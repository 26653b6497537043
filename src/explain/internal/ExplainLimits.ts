/**
 * Each counter of a run beside the limit it runs against, as `run.started` recorded the
 * limits (or the default policies' defaults, when it did not; the run's time limit as a
 * resume brought it closer), and the next safe step
 * after a stop. Private to `observability/`.
 */
import type * as Counters from "../../events/Counters.ts"
import type * as Event from "../../events/Event.ts"
import type * as StopReason from "../../events/StopReason.ts"
import * as Termination from "../../termination/Termination.ts"
import type { Explanation, Gauge, NextStep } from "./ExplainModel.ts"

interface Meter {
  readonly counter: string
  readonly value: (c: Counters.Counters) => number
  readonly limit: string
  /** The built-in policy that enforces the limit, when one does. */
  readonly policy: string | undefined
  readonly reasons: ReadonlyArray<StopReason.StopReason>
}

type Counted = "iterations" | "toolCalls" | "repeatedToolCallCount" | "toolErrors" | "emptyOutputs"
type Tallied = Counted | "unchangedObservations" | "toolCorrectionAttempts" | "costUsd" | "elapsedMillis"

/** A counter read as it is, its limit, the policy that enforces it and the stops it is about. */
const meter = (
  counter: Tallied,
  limit: string,
  policy: string | undefined,
  reasons: ReadonlyArray<StopReason.StopReason>
): Meter => ({ counter, value: (c) => c[counter], limit, policy, reasons })

const meters: ReadonlyArray<Meter> = [
  meter("iterations", "maxIterations", "max_iterations", ["max_iterations"]),
  meter("toolCalls", "maxToolCalls", "max_tool_calls", ["max_tool_calls"]),
  meter("repeatedToolCallCount", "repeatedToolCall", "repeated_tool_call", ["repeated_tool_call"]),
  meter("toolErrors", "maxToolErrors", "max_tool_errors", ["max_tool_errors"]),
  meter("emptyOutputs", "maxEmptyOutputs", "empty_output", ["empty_output"]),
  meter("unchangedObservations", "loopThreshold", "loop_detected", ["loop_detected"]),
  {
    // The retries the run's budget counts: its recovery episodes less the argument corrections,
    // which spend the correction budget instead (R3.4, R3.5).
    counter: "retries",
    value: (c) => c.recoveryAttempts - c.toolCorrectionAttempts,
    limit: "maxRecoveries",
    policy: undefined,
    reasons: ["recovery_exhausted"]
  },
  meter("toolCorrectionAttempts", "correctionBudget", undefined, ["recovery_exhausted", "output_truncated"]),
  {
    counter: "tokens",
    value: (c) => c.inputTokens + c.outputTokens,
    limit: "maxTokens",
    policy: "budget_exhausted",
    reasons: ["budget_exhausted"]
  },
  meter("costUsd", "maxCostUsd", "budget_exhausted", ["budget_exhausted"]),
  meter("elapsedMillis", "runTimeoutMillis", undefined, ["run_timeout"])
]

const defaults: Readonly<Record<string, number>> = Termination.defaultLimits

/** The limits that decided a stop only when spent: each shares its reason with another. */
const spentOnly: ReadonlySet<string> = new Set(["maxTokens", "maxCostUsd", "correctionBudget", "maxRecoveries"])

/** Whether `value` spent the budget `max`: a token or cost budget as its policy finds it over (review 166), a retry budget used up. */
const spent = (m: Meter, value: number, max: number): boolean =>
  m.counter === "tokens" || m.counter === "costUsd" ? Termination.overBudget(m.counter, value, max) : value >= max

/** Every counter beside its limit (`limits`: those in force, `RunLog.limitsOf`). */
export const gauges = (
  started: Event.Of<"run.started"> | undefined,
  limits: Readonly<Record<string, number>> | undefined,
  counters: Counters.Counters,
  reason: StopReason.StopReason | undefined
): ReadonlyArray<Gauge> =>
  meters.map((m): Gauge => {
    const recorded = limits?.[m.limit]
    const off = m.policy !== undefined && started?.policies !== undefined && !started.policies.includes(m.policy)
    const fallback = defaults[m.limit]
    const [max, source]: [number | undefined, Gauge["source"]] =
      recorded !== undefined
        ? [recorded, "recorded"]
        : off
          ? [undefined, "off"]
          : fallback !== undefined && started?.policies !== undefined
            ? [fallback, "default"]
            : [undefined, "unset"]
    const decisive =
      reason !== undefined &&
      m.reasons.includes(reason) &&
      // Of two budgets behind one reason, the one that is spent (neither, for a failure its owner had
      // retried already: the run spent no retry on it).
      (!spentOnly.has(m.limit) || (max !== undefined && spent(m, m.value(counters), max)))
    return { counter: m.counter, value: m.value(counters), limit: m.limit, max, source, decisive }
  })

/** The option a limit is set with. */
const optionOf = (limit: string): string => {
  switch (limit) {
    case "runTimeoutMillis":
      return "time.run"
    case "stepTimeoutMillis":
      return "time.step"
    case "approvalTimeoutMillis":
      return "time.approval"
    case "maxRecoveries":
      return "recovery.maxRecoveries"
    case "correctionBudget":
      return "recovery.correctionBudget"
    case "backoff":
      return "recovery.backoff"
    default:
      return `limits.${limit}`
  }
}

type Facts = Omit<Explanation, "next">

/**
 * Why recovery gave up on the model call that stopped the run (the log up to `index`, its
 * `termination.decided`): `owner_retried` when the failure's owner (the provider's client)
 * had retried it already, `schedule_exhausted` when the run's own backoff schedule allowed no
 * more retries (its `recovery.failed` follows the failure); `undefined` for neither.
 */
export const gaveUpOn = (
  timeline: ReadonlyArray<Event.Event>,
  index: number
): "owner_retried" | "schedule_exhausted" | undefined => {
  let recorded = false
  for (let i = Math.min(index, timeline.length) - 1; i >= 0; i--) {
    const e = timeline[i]
    if (e === undefined || e._tag === "state.changed" || e._tag === "circuit.changed") continue
    if (e._tag === "recovery.failed" && e.kind === "provider_retry" && e.scope === "call") recorded = true
    else if (e._tag === "model.failed") {
      return e.failure.attempts > 1 ? "owner_retried" : recorded ? "schedule_exhausted" : undefined
    } else return undefined
  }
  return undefined
}

const step = (kind: NextStep["kind"], text: string, limit?: string, callIds: ReadonlyArray<string> = []): NextStep => ({
  kind,
  limit: limit === undefined ? undefined : optionOf(limit),
  callIds,
  text
})

const decisiveLimit = (facts: Facts): string | undefined => facts.gauges.find((g) => g.decisive)?.limit

/**
 * What to do next, safely: reconcile first, then check the world where a tool's success
 * was contradicted (`contradicted`: its call, whatever stopped the run after), then what
 * the stop calls for.
 */
export const nextStep = (
  facts: Facts,
  contradicted?:
    | { readonly callId: string; readonly name: string; readonly error: { readonly message: string } }
    | undefined,
  gaveUp?: ReturnType<typeof gaveUpOn>
): NextStep => {
  const pending = facts.pendingActions.map((a) => a.callId)
  if (!facts.ended) {
    const doubt = facts.inFlight.filter((w) => w.kind === "tool_call").map((w) => w.callId ?? "")
    return step(
      "resume",
      "if no process is running it now, resume it from its journal (Run.resume): calls whose handler was running are reconciled, or run again only when that is safe",
      undefined,
      doubt
    )
  }
  if (pending.length > 0) {
    return step(
      "reconcile",
      `reconcile ${pending.join(", ")} by its idempotency key (a status query, or by hand) before acting on the same thing again; never resend it blindly`,
      undefined,
      pending
    )
  }
  if (contradicted !== undefined && facts.stopReason !== "inconsistent_result") {
    return step(
      "fix",
      `check the world by hand: ${contradicted.name} (${contradicted.callId}): ${contradicted.error.message}; the run did not build on it`,
      undefined,
      [contradicted.callId]
    )
  }
  const failure = facts.failure
  const failed = failure === undefined ? "" : ` (${failure.name}: ${failure.code})`
  const decision = facts.decision
  if (decision?.own === true) {
    const repeated = decision.reason === "repeated_tool_call" || decision.reason === "loop_detected"
    return step(
      repeated ? "change_approach" : "raise_limit",
      `the run's own policy "${decision.policy}" stopped it: ${decision.detail}; ` +
        (repeated
          ? "change the prompt, the tools or the goal"
          : "change that policy's limits if the run was making progress, else narrow the goal")
    )
  }
  switch (facts.stopReason) {
    case undefined:
    case "goal_reached":
      return step("none", "nothing: the run completed and validation agreed")
    case "validation_failed": {
      // As the result's `nextStep`: an optional step is never the next one.
      const first = facts.validation?.unfinished.find((i) => i.required)
      return step(
        "fix",
        first !== undefined
          ? `finish the unfinished plan step "${first.id}" (${first.description}), or fix the failing checks, then run again`
          : "fix what the failing checks name, then run again"
      )
    }
    case "run_timeout":
      return step(
        "raise_limit",
        "give the run more time, or a smaller goal; see what was in flight",
        "runTimeoutMillis"
      )
    case "step_timeout":
      return step("raise_limit", "give each step more time, or make the slow call faster", "stepTimeoutMillis")
    case "max_tool_calls":
    case "max_iterations":
    case "budget_exhausted":
      return step(
        "raise_limit",
        "raise the limit if the run was making progress, else narrow the goal",
        decisiveLimit(facts)
      )
    case "max_tool_errors":
      return step("fix", `look at why the tools failed${failed} before raising the error budget`, "maxToolErrors")
    case "repeated_tool_call":
    case "loop_detected":
    case "repeated_tool_failure":
      return step(
        "change_approach",
        "the model repeated itself: change the prompt, the tools or the goal; raising the threshold only repeats it longer"
      )
    case "recovery_exhausted":
      if (facts.gauges.some((g) => g.limit === "correctionBudget" && g.decisive)) {
        return step(
          "change_approach",
          "the model could not correct its tool arguments: make the tool's schema or description clearer",
          "correctionBudget"
        )
      }
      if (facts.gauges.some((g) => g.limit === "maxRecoveries" && g.decisive)) {
        return step(
          "retry",
          `the failure kept coming back${failed}: retry later, or allow more retries`,
          "maxRecoveries"
        )
      }
      // Not the budget: the run's own schedule ran out (its retries can be raised), or the owner had retried.
      if (gaveUp === "schedule_exhausted") {
        return step(
          "retry",
          `the run's backoff schedule allowed no more retries${failed}: retry later, or allow more with Recovery.backoff({ retries })`,
          "backoff"
        )
      }
      return gaveUp === "owner_retried"
        ? step(
            "retry",
            `its owner (the provider's client, or the tool) had retried the failure already${failed}: retry later`
          )
        : step("retry", `recovery gave up on the failure${failed}: retry later`)
    case "empty_output":
      return step("change_approach", "the model gave empty answers: check the prompt and the model", "maxEmptyOutputs")
    case "tool_error":
      return step("fix", `fix the tool${failed}, or let it hand its errors to the model (recoverErrors)`)
    case "model_error":
      return step("fix", `the model call failed for good${failed}: check the provider, its key and the request`)
    case "output_truncated":
      return step("change_approach", "raise the model's output token limit, or ask for a shorter answer")
    case "content_filtered":
      return step("change_approach", "the provider withheld the answer: change the goal or the input")
    case "inconsistent_result":
      return step("fix", `check the world by hand: the tool said it succeeded and its postcondition says not${failed}`)
    case "unknown_outcome":
      return step("reconcile", "reconcile the call in doubt before acting on the same thing again")
    case "approval_rejected":
      return step(
        "change_approach",
        `the action was refused${facts.approval?.by !== undefined ? ` by ${facts.approval.by}` : ""}: change it or the goal before asking again`,
        undefined,
        facts.approval === undefined ? [] : [facts.approval.callId]
      )
    case "approval_expired":
      return step(
        "decide",
        "decide approvals in time, or give them longer",
        "approvalTimeoutMillis",
        facts.approval === undefined ? [] : [facts.approval.callId]
      )
    case "cancelled":
      return step("rerun", "run it again if it is still wanted (a cancelled run is not resumed)")
    case "internal_error":
      return step("fix", "a defect or invalid options: the detail names the code or the option at fault")
  }
}
