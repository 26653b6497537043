/**
 * Termination policies: small pure values that decide, at each checkpoint, whether a
 * run should stop (R2.2, R2.3).
 *
 * The loop evaluates the list after every model response (`after_model`, before any
 * tool of that response runs) and after every tool batch (`after_tools`). Policies are
 * evaluated in list order; warnings are collected, and the first `Stop` wins. The
 * default order, which the README documents, is:
 *
 * 1. `final_answer`: text with no tool calls is a completion *candidate* (R6).
 * 2. `run_timeout`: the run deadline has passed.
 * 3. `max_tool_calls`: the calls of the pending batch are already counted, so a batch
 *    that would pass the limit is rejected whole before any handler runs.
 * 4. `max_iterations`: all model responses used.
 * 5. `repeated_tool_call`: one canonical call signature requested too often.
 * 6. `repeated_tool_failure`: one failure signature past its tool's `maxRetries`.
 * 7. `recovery_exhausted`: a recovery or correction budget was spent.
 * 8. `max_tool_errors`: the run's error budget was spent.
 * 9. `empty_output`: empty responses past their budget.
 * 10. `loop_detected`: an unchanged observation warns first, then stops.
 * 11. `budget_exhausted`: token or cost budget spent.
 * 12. `same_class_errors`: never stops; reminds the model after failures in a row
 *     that share an error code (R2.4).
 *
 * Users add, remove, replace and reorder policies with the combinators below.
 *
 * @since 0.1.0
 */
import type * as StopReason from "../events/StopReason.ts"
import {
  budget,
  type Checkpoint,
  emptyOutput,
  finalAnswer,
  isBuiltIn,
  loopDetected,
  maxIterations,
  maxToolCalls,
  maxToolErrors,
  type Policy,
  recoveryExhausted,
  repeatedToolCall,
  repeatedToolFailure,
  runTimeout,
  sameClassErrors
} from "./internal/TerminationPolicies.ts"
import { decideChecked } from "./internal/UserPolicies.ts"

export type { Checkpoint, Decision, Policy } from "./internal/TerminationPolicies.ts"
export {
  budget,
  continue_,
  emptyOutput,
  finalAnswer,
  /** Whether a policy is one of the built-ins above (they need no checking of their decisions). */
  isBuiltIn,
  loopDetected,
  make,
  maxIterations,
  maxToolCalls,
  maxToolErrors,
  /** Whether the budget policy finds a count of tokens or a cost over its limit (what `Explain` calls spent). */
  overBudget,
  recoveryExhausted,
  repeatedToolCall,
  repeatedToolFailure,
  runTimeout,
  sameClassErrors,
  stop,
  warn
} from "./internal/TerminationPolicies.ts"

/**
 * The tunable limits of the default policies.
 *
 * @category models
 * @since 0.1.0
 */
export interface Limits {
  readonly maxIterations?: number | undefined
  readonly maxToolCalls?: number | undefined
  readonly repeatedToolCall?: number | undefined
  readonly maxToolErrors?: number | undefined
  readonly maxEmptyOutputs?: number | undefined
  readonly loopThreshold?: number | undefined
  readonly sameClassErrors?: number | undefined
  readonly maxTokens?: number | undefined
  readonly maxCostUsd?: number | undefined
}

/**
 * The limits the default policies use when `Limits` leaves them out (a run's `run.started`
 * records only the limits it was given).
 *
 * @category constructors
 * @since 0.3.0
 */
export const defaultLimits = Object.freeze({
  maxToolCalls: 50,
  maxIterations: 20,
  repeatedToolCall: 3,
  maxToolErrors: 8,
  maxEmptyOutputs: 2,
  loopThreshold: 3,
  sameClassErrors: 3
} as const)

/** The policies with the default limits: shared by every run (the policies are pure values). */
const standard = {
  maxToolCalls: maxToolCalls(defaultLimits.maxToolCalls),
  maxIterations: maxIterations(defaultLimits.maxIterations),
  repeatedToolCall: repeatedToolCall(defaultLimits.repeatedToolCall),
  maxToolErrors: maxToolErrors(defaultLimits.maxToolErrors),
  emptyOutput: emptyOutput(defaultLimits.maxEmptyOutputs),
  loopDetected: loopDetected(defaultLimits.loopThreshold),
  budget: budget({}),
  sameClassErrors: sameClassErrors(defaultLimits.sameClassErrors)
}

/** The shared policy when `limit` is its default, else one built for it. */
const withLimit = (
  limit: number | undefined,
  fallback: number,
  shared: Policy,
  make: (limit: number) => Policy
): Policy => (limit === undefined || limit === fallback ? shared : make(limit))

const build = (limits: Limits): ReadonlyArray<Policy> =>
  Object.freeze([
    finalAnswer,
    runTimeout,
    withLimit(limits.maxToolCalls, defaultLimits.maxToolCalls, standard.maxToolCalls, maxToolCalls),
    withLimit(limits.maxIterations, defaultLimits.maxIterations, standard.maxIterations, maxIterations),
    withLimit(limits.repeatedToolCall, defaultLimits.repeatedToolCall, standard.repeatedToolCall, repeatedToolCall),
    repeatedToolFailure,
    recoveryExhausted,
    withLimit(limits.maxToolErrors, defaultLimits.maxToolErrors, standard.maxToolErrors, maxToolErrors),
    withLimit(limits.maxEmptyOutputs, defaultLimits.maxEmptyOutputs, standard.emptyOutput, emptyOutput),
    withLimit(limits.loopThreshold, defaultLimits.loopThreshold, standard.loopDetected, loopDetected),
    limits.maxTokens === undefined && limits.maxCostUsd === undefined
      ? standard.budget
      : budget({ maxTokens: limits.maxTokens, maxCostUsd: limits.maxCostUsd }),
    withLimit(limits.sameClassErrors, defaultLimits.sameClassErrors, standard.sameClassErrors, sameClassErrors)
  ])

/** The list of every run that sets none of the limits. */
const standardList = build({})

/** The names of the standard list, made once: every run that keeps it records the same names. */
const standardNames: ReadonlyArray<string> = Object.freeze(standardList.map((policy) => policy.name))

/**
 * The names of a list of policies, in its order (what `run.started` records): the standard
 * list's names are made once and shared.
 *
 * @category getters
 * @since 0.3.0
 */
export const names = (policies: ReadonlyArray<Policy>): ReadonlyArray<string> =>
  policies === standardList ? standardNames : policies.map((policy) => policy.name)

const builtInNames: ReadonlySet<string> = new Set(standardNames)

/**
 * Whether a stop by `policy` for `reason` is one a built-in policy gives: each stops for its
 * own name (`final_answer` for `goal_reached`; `same_class_errors` never stops). A policy of
 * the user's that replaces a built-in under its name, and stops for another reason, is the
 * user's own (R13: no limit of the runtime was passed).
 *
 * @category guards
 * @since 0.3.0
 */
export const isBuiltInStop = (policy: string, reason: StopReason.StopReason): boolean =>
  builtInNames.has(policy) && (policy === "final_answer" ? reason === "goal_reached" : policy === reason)

const limitKeys = [
  "maxIterations",
  "maxToolCalls",
  "repeatedToolCall",
  "maxToolErrors",
  "maxEmptyOutputs",
  "loopThreshold",
  "sameClassErrors",
  "maxTokens",
  "maxCostUsd"
] as const

/**
 * The built-in policies in their documented order. The list is frozen; limits that set
 * none of these keys give one shared list, and a policy whose limit is its default is
 * the shared one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const defaults = (limits: Limits = {}): ReadonlyArray<Policy> =>
  limitKeys.every((key) => limits[key] === undefined) ? standardList : build(limits)

/**
 * What the policies decided at one checkpoint: the first stop (when one said stop), and every
 * warning raised by a policy evaluated before it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Verdict {
  readonly stop:
    | {
        readonly policy: string
        readonly reason: StopReason.StopReason
        readonly detail: string
        /** The policy is the user's own, not a built-in (even under a built-in's name); `evaluate` always says. */
        readonly own?: boolean | undefined
      }
    | undefined
  readonly warnings: ReadonlyArray<{ readonly policy: string; readonly kind: string; readonly text: string }>
}

/** The verdict of a checkpoint where no policy had anything to say. */
const proceed: Verdict = Object.freeze({ stop: undefined, warnings: Object.freeze([]) })

/**
 * @category combinators
 * @since 0.1.0
 */
export const evaluate = (policies: ReadonlyArray<Policy>, given: Checkpoint): Verdict => {
  // Every policy sees the same checkpoint, frozen (counters too): a policy that writes to it
  // fails, named, and cannot change what the next one sees or what its stop is checked against.
  const checkpoint =
    Object.isFrozen(given) && Object.isFrozen(given.counters)
      ? given
      : Object.freeze({ ...given, counters: Object.freeze({ ...given.counters }) })
  let warnings: Array<Verdict["warnings"][number]> | undefined
  for (const policy of policies) {
    // A user's policy is user code, checked at its boundary.
    const decision = isBuiltIn(policy) ? policy.decide(checkpoint) : decideChecked(policy, checkpoint)
    if (decision._tag === "Stop") {
      return {
        stop: { policy: policy.name, reason: decision.reason, detail: decision.detail, own: !isBuiltIn(policy) },
        warnings: warnings ?? []
      }
    }
    if (decision._tag === "Warn") {
      if (warnings === undefined) warnings = []
      warnings.push({ policy: policy.name, kind: decision.kind, text: decision.text })
    }
  }
  return warnings === undefined ? proceed : { stop: undefined, warnings }
}

const noPolicy = (policies: ReadonlyArray<Policy>, name: string): RangeError =>
  new RangeError(`Termination: no policy named "${name}" in [${policies.map((p) => p.name).join(", ")}]`)

const indexOf = (policies: ReadonlyArray<Policy>, name: string): number => {
  const index = policies.findIndex((p) => p.name === name)
  if (index < 0) throw noPolicy(policies, name)
  return index
}

const named = (policies: ReadonlyArray<Policy>, name: string): Policy => {
  const policy = policies.find((p) => p.name === name)
  if (policy === undefined) throw noPolicy(policies, name)
  return policy
}

/**
 * @category combinators
 * @since 0.1.0
 */
export const remove = (policies: ReadonlyArray<Policy>, name: string): ReadonlyArray<Policy> => {
  const index = indexOf(policies, name)
  return [...policies.slice(0, index), ...policies.slice(index + 1)]
}

/**
 * @category combinators
 * @since 0.1.0
 */
export const replace = (policies: ReadonlyArray<Policy>, name: string, policy: Policy): ReadonlyArray<Policy> => {
  const index = indexOf(policies, name)
  return [...policies.slice(0, index), policy, ...policies.slice(index + 1)]
}

/**
 * @category combinators
 * @since 0.1.0
 */
export const insertBefore = (policies: ReadonlyArray<Policy>, name: string, policy: Policy): ReadonlyArray<Policy> => {
  const index = indexOf(policies, name)
  return [...policies.slice(0, index), policy, ...policies.slice(index)]
}

/**
 * @category combinators
 * @since 0.1.0
 */
export const insertAfter = (policies: ReadonlyArray<Policy>, name: string, policy: Policy): ReadonlyArray<Policy> => {
  const index = indexOf(policies, name)
  return [...policies.slice(0, index + 1), policy, ...policies.slice(index + 1)]
}

/**
 * Puts the named policies first, in the given order, keeping the others' order.
 *
 * @category combinators
 * @since 0.1.0
 */
export const prioritize = (policies: ReadonlyArray<Policy>, names: ReadonlyArray<string>): ReadonlyArray<Policy> => {
  const first = names.map((name) => named(policies, name))
  return [...first, ...policies.filter((p) => !names.includes(p.name))]
}
