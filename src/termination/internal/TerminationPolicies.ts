/**
 * The models and built-in policies of `Termination`: the `Decision` and `Policy` types,
 * their small constructors, and the twelve built-in policies with their validation.
 *
 * `Termination` re-exports everything public here; import from there. This module
 * imports nothing from `Termination`, so the dependency stays one-way.
 *
 * @internal
 */
import type * as Counters from "../../events/Counters.ts"
import type * as StopReason from "../../events/StopReason.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Checkpoint {
  readonly phase: "after_model" | "after_tools"
  readonly counters: Counters.Counters
  /** Milliseconds since the epoch, by the run's `Clock`. */
  readonly now: number
  readonly deadlineAt: number
}

/**
 * @category models
 * @since 0.1.0
 */
export type Decision =
  | { readonly _tag: "Continue" }
  | { readonly _tag: "Warn"; readonly kind: string; readonly text: string }
  | { readonly _tag: "Stop"; readonly reason: StopReason.StopReason; readonly detail: string }

/**
 * @category models
 * @since 0.1.0
 */
export interface Policy {
  readonly name: string
  readonly decide: (checkpoint: Checkpoint) => Decision
  /**
   * The limits it enforces, by the name of their `limits` option (`{ maxIterations: 20 }`):
   * `run.started` records them, so that the log says the limits in force. The built-in
   * policies set it; a policy of your own may.
   */
  readonly limits?: Readonly<Record<string, number>> | undefined
}

/**
 * @category constructors
 * @since 0.1.0
 */
// Frozen: every built-in returns it, and its decisions are not checked as a user's are (R12).
export const continue_: Decision = Object.freeze({ _tag: "Continue" })

/**
 * @category constructors
 * @since 0.1.0
 */
export const stop = (reason: StopReason.StopReason, detail: string): Decision => ({ _tag: "Stop", reason, detail })

/**
 * @category constructors
 * @since 0.1.0
 */
export const warn = (kind: string, text: string): Decision => ({ _tag: "Warn", kind, text })

/**
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  name: string,
  decide: (checkpoint: Checkpoint) => Decision,
  limits?: Readonly<Record<string, number>>
): Policy => (limits === undefined ? { name, decide } : { name, decide, limits })

/**
 * The policies of this module, told apart by a private field only their constructor gives
 * (an object made on their prototype has none; no registry of them is kept), and frozen:
 * they read the counters' fields and `reminders`, never the per-key maps, and never throw,
 * so they may be given the run's counters as they are and run unguarded (see
 * `Termination.evaluate`). One that user code changed or imitated would be neither; it is
 * checked as the user's own policies are (R2.5, R12).
 */
class BuiltIn implements Policy {
  readonly #builtIn = true
  declare readonly name: string
  declare readonly decide: (checkpoint: Checkpoint) => Decision
  declare readonly limits?: Readonly<Record<string, number>>
  constructor(name: string, decide: (checkpoint: Checkpoint) => Decision, limits?: Readonly<Record<string, number>>) {
    this.name = name
    this.decide = decide
    if (limits !== undefined) this.limits = Object.freeze({ ...limits })
    Object.freeze(this)
  }
  static is(policy: object): boolean {
    return #builtIn in policy && policy.#builtIn
  }
}

/** Whether `policy` is one of this module's built-in policies, as this module made it. */
export const isBuiltIn = (policy: object): boolean => BuiltIn.is(policy)

const builtInPolicy = (
  name: string,
  decide: (checkpoint: Checkpoint) => Decision,
  limits?: Readonly<Record<string, number>>
): Policy => new BuiltIn(name, decide, limits)

/** What a value given for a number is, as a message shows it: `"5"` is no 5. */
const shown = (value: unknown): string =>
  typeof value === "number" ? String(value) : typeof value === "string" ? `the string "${value}"` : `a ${typeof value}`

/** `value` when it is an integer at least `minimum`, as the `limits` option takes it (a resumed run reads it back as one). */
const count = (policy: string, field: string, value: number, minimum: number): number => {
  if (!Number.isSafeInteger(value) || value < minimum) {
    // A safe integer, as the `limits` option takes it: past 2^53 a count no longer counts.
    const bound = Number.isInteger(value) && value >= minimum ? " and at most 2^53 - 1" : ""
    throw new RangeError(
      `Termination.${policy}: ${field} must be an integer >= ${minimum}${bound}, got ${shown(value)}`
    )
  }
  return value
}

const positiveInt = (policy: string, field: string, value: number): number => count(policy, field, value, 1)

const nonNegative = (policy: string, field: string, value: number): number => {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`Termination.${policy}: ${field} must be a finite number >= 0, got ${shown(value)}`)
  }
  return value
}

/**
 * @category policies
 * @since 0.1.0
 */
export const finalAnswer: Policy = builtInPolicy("final_answer", ({ counters, phase }) =>
  phase === "after_model" && counters.finalAnswerReceived
    ? stop("goal_reached", "the model gave a final answer (a candidate: validation decides)")
    : continue_
)

/**
 * @category policies
 * @since 0.1.0
 */
export const runTimeout: Policy = builtInPolicy("run_timeout", ({ deadlineAt, now }) =>
  now >= deadlineAt ? stop("run_timeout", `the run deadline passed ${now - deadlineAt} ms ago`) : continue_
)

/**
 * @category policies
 * @since 0.1.0
 */
export const maxToolCalls = (limit: number): Policy => {
  positiveInt("maxToolCalls", "limit", limit)
  return builtInPolicy(
    "max_tool_calls",
    ({ counters }) =>
      counters.toolCalls > limit
        ? stop(
            "max_tool_calls",
            `the batch would bring tool calls to ${counters.toolCalls}, over the limit of ${limit}`
          )
        : continue_,
    { maxToolCalls: limit }
  )
}

/**
 * @category policies
 * @since 0.1.0
 */
export const maxIterations = (limit: number): Policy => {
  positiveInt("maxIterations", "limit", limit)
  return builtInPolicy(
    "max_iterations",
    ({ counters }) =>
      counters.iterations >= limit
        ? stop("max_iterations", `${counters.iterations} model responses of ${limit}`)
        : continue_,
    { maxIterations: limit }
  )
}

/**
 * @category policies
 * @since 0.1.0
 */
export const repeatedToolCall = (threshold: number): Policy => {
  // A call made once is no repeat: at 1 the first call of a run would stop it.
  count("repeatedToolCall", "threshold", threshold, 2)
  return builtInPolicy(
    "repeated_tool_call",
    ({ counters }) =>
      counters.repeatedToolCallCount >= threshold
        ? stop(
            "repeated_tool_call",
            `the same tool call was requested ${counters.repeatedToolCallCount} times (threshold ${threshold})`
          )
        : continue_,
    { repeatedToolCall: threshold }
  )
}

/**
 * @category policies
 * @since 0.1.0
 */
export const repeatedToolFailure: Policy = builtInPolicy("repeated_tool_failure", ({ counters }) => {
  if (counters.repeatedFailureOverLimit <= 0) return continue_
  // The failure that passed its limit, which need not be the one that occurred most (R13).
  const failure = counters.overLimitFailure
  return stop(
    "repeated_tool_failure",
    failure === undefined
      ? `the same failure occurred ${counters.repeatedFailureCount} times, past the tool's retry limit`
      : `the same failure of ${failure.name} (${failure.code}) occurred ${failure.times} times, past the tool's retry limit of ${failure.maxRetries}`
  )
})

/**
 * @category policies
 * @since 0.1.0
 */
export const recoveryExhausted: Policy = builtInPolicy("recovery_exhausted", ({ counters }) =>
  counters.recoveryExhausted
    ? stop(
        "recovery_exhausted",
        `recovery budget spent after ${counters.recoveryAttempts} attempt${counters.recoveryAttempts === 1 ? "" : "s"}`
      )
    : continue_
)

/**
 * @category policies
 * @since 0.1.0
 */
export const maxToolErrors = (limit: number): Policy => {
  count("maxToolErrors", "limit", limit, 0)
  return builtInPolicy(
    "max_tool_errors",
    ({ counters }) =>
      counters.toolErrors > limit
        ? stop("max_tool_errors", `${counters.toolErrors} tool errors, over the budget of ${limit}`)
        : continue_,
    { maxToolErrors: limit }
  )
}

/**
 * @category policies
 * @since 0.1.0
 */
export const emptyOutput = (budget: number): Policy => {
  count("emptyOutput", "budget", budget, 0)
  return builtInPolicy(
    "empty_output",
    ({ counters }) =>
      counters.emptyOutputs > budget
        ? stop("empty_output", `${counters.emptyOutputs} empty model responses, over the budget of ${budget}`)
        : continue_,
    { maxEmptyOutputs: budget }
  )
}

/**
 * Counts the actions that returned an observation already seen while the state did not
 * change (R2.3): each new one warns the model, and one at or past the threshold stops the
 * run, once the model has been warned. Repeats that come in one batch are warned of
 * before they can stop the run.
 *
 * @category policies
 * @since 0.1.0
 */
export const loopDetected = (threshold: number): Policy => {
  positiveInt("loopDetected", "threshold", threshold)
  return builtInPolicy(
    "loop_detected",
    ({ counters }) => {
      const repeats = counters.unchangedObservations
      const warnedAt = counters.unchangedWhenWarned
      // Nothing repeated since the model was last warned: it has its chance.
      if (repeats <= warnedAt) return continue_
      if (repeats >= threshold && warnedAt > 0) {
        return stop(
          "loop_detected",
          `${repeats} actions returned an observation already seen with no state change (threshold ${threshold}; the model was warned first)`
        )
      }
      return warn(
        "loop_warning",
        "The last action repeated an earlier one and the state is unchanged. Try a different approach or give your final answer."
      )
    },
    { loopThreshold: threshold }
  )
}

/**
 * Whether the budget policy finds `used` over its limit `max`: tokens over it, a cost over it by
 * more than the sum's rounding (3 × $0.10 is $0.30000000000000004, not over $0.30).
 */
export const overBudget = (counter: "tokens" | "costUsd", used: number, max: number): boolean =>
  counter === "tokens" ? used > max : used - max > 1e-9 * Math.max(1, max)

/**
 * @category policies
 * @since 0.1.0
 */
export const budget = (limits: {
  readonly maxTokens?: number | undefined
  readonly maxCostUsd?: number | undefined
}): Policy => {
  const maxTokens =
    limits.maxTokens === undefined ? Number.POSITIVE_INFINITY : count("budget", "maxTokens", limits.maxTokens, 0)
  const maxCost =
    limits.maxCostUsd === undefined ? Number.POSITIVE_INFINITY : nonNegative("budget", "maxCostUsd", limits.maxCostUsd)
  return builtInPolicy(
    "budget_exhausted",
    ({ counters }) => {
      const tokens = counters.inputTokens + counters.outputTokens
      if (overBudget("tokens", tokens, maxTokens))
        return stop("budget_exhausted", `${tokens} tokens used, over the budget of ${maxTokens}`)
      if (overBudget("costUsd", counters.costUsd, maxCost)) {
        return stop("budget_exhausted", `$${counters.costUsd.toFixed(4)} spent, over the budget of $${maxCost}`)
      }
      return continue_
    },
    {
      ...(Number.isFinite(maxTokens) ? { maxTokens } : {}),
      ...(Number.isFinite(maxCost) ? { maxCostUsd: maxCost } : {})
    }
  )
}

/**
 * Reminds the model when failures in a row share one error code (R2.4), e.g. three
 * `not_found` on different paths: "list the directory first".
 *
 * @category policies
 * @since 0.1.0
 */
export const sameClassErrors = (threshold: number): Policy => {
  positiveInt("sameClassErrors", "threshold", threshold)
  return builtInPolicy(
    "same_class_errors",
    // Once `threshold` more failed in a row since the last reminder: a batch may take the
    // streak past a multiple of it (2, then 4), and is still reminded.
    ({ counters, phase }) =>
      phase === "after_tools" && counters.sameClassStreak - counters.sameClassWhenWarned >= threshold
        ? warn(
            "same_class_errors",
            `${counters.sameClassStreak} tool calls in a row failed with "${counters.sameClassCode}". Stop guessing: inspect the environment first (for files, list the directory), then act on what you find.`
          )
        : continue_,
    { sameClassErrors: threshold }
  )
}
