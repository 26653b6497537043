/**
 * The termination policies of a run: the defaults built from its limits, the list given,
 * or what a function of the defaults made of them; and, for a fresh run, only if they
 * enforce the limits given. Private to `resolve/`.
 */
import { Predicate, Result, Schema } from "effect"
import * as UserCode from "../../../../failure/UserCode.ts"
import * as Termination from "../../../../termination/Termination.ts"
import * as Tool from "../../../../tools/Tool.ts"
import * as RunOptions from "../../../RunOptions.ts"
import * as RunOptionsSchema from "../../options/RunOptionsSchema.ts"
import { invalid } from "./OptionIssues.ts"

/** Whether the options are a fresh run's, or a resumed one's filled from its record. */
export type From = "fresh" | "resumed"

const decodePolicies = Schema.decodeUnknownResult(RunOptionsSchema.Policies, { errors: "first" })

/**
 * What a throw of the policies function says: the library's own configuration errors
 * (a `RangeError` from a combinator given a name that is not in the list) are shown
 * whole; anything else is described safely.
 */
const threwMessage = (error: unknown): string => {
  try {
    if (error instanceof RangeError || error instanceof Tool.InvalidToolDefinition) return error.message
  } catch {
    // A hostile value: described below.
  }
  return UserCode.threw("the function", error).safeMessage
}

const pipelineLimits: ReadonlySet<string> = new Set(RunOptionsSchema.pipelineLimitNames)

/**
 * The first limit given that the policies in force do not enforce as given (a list given
 * with its own policies, a function that removed one), as the typed error naming it:
 * it would be ignored, and `run.started` would record other limits than the caller's.
 */
const unenforced = (
  limits: RunOptions.Limits,
  policies: ReadonlyArray<Termination.Policy>
): RunOptions.InvalidRunOptions | undefined => {
  const enforced: Record<string, number | undefined> = Object.assign({}, ...policies.map((p) => p.limits ?? {}))
  for (const [name, given] of Object.entries(limits)) {
    if (given === undefined || pipelineLimits.has(name) || enforced[name] === given) continue
    const held = enforced[name]
    return new RunOptions.InvalidRunOptions({
      path: ["limits", name],
      reason:
        (held === undefined
          ? "no policy in force enforces it (it would be ignored)"
          : `the policies in force enforce ${held} (${given} would be ignored)`) +
        ": pass policies as a function of the defaults, which are built from the limits, or build the list with Termination.defaults(limits)"
    })
  }
  return undefined
}

/** The limits a built-in policy owns and declares only when they are set (the budget's). */
const unlimitedUnlessSet: Readonly<Record<string, ReadonlyArray<string>>> = {
  budget_exhausted: ["maxTokens", "maxCostUsd"]
}

/**
 * Two policies in force that declare one limit with different values: `run.started` could
 * record only one, and a resume would rebuild the defaults from it (a policy of the user's
 * declaring `maxIterations: 100` beside the default `max_iterations` at 20). One limit, one value.
 */
const conflicting = (policies: ReadonlyArray<Termination.Policy>): RunOptions.InvalidRunOptions | undefined => {
  const declared = new Map<string, { readonly policy: string; readonly value: number }>()
  // A built-in budget in force without a limit enforces none, which is a value too: a
  // policy of the user's declaring it would make a resume build the budget with it.
  for (const policy of policies) {
    for (const name of Termination.isBuiltIn(policy) ? (unlimitedUnlessSet[policy.name] ?? []) : []) {
      if (policy.limits?.[name] === undefined) declared.set(name, { policy: policy.name, value: Infinity })
    }
  }
  for (const [index, policy] of policies.entries()) {
    for (const [name, value] of Object.entries(policy.limits ?? {})) {
      const first = declared.get(name)
      if (first === undefined) declared.set(name, { policy: policy.name, value })
      else if (first.value !== value) {
        const enforces = first.value === Infinity ? "is in force without one" : `enforces ${first.value}`
        return new RunOptions.InvalidRunOptions({
          path: ["policies", index, "limits", name],
          reason: `the policy "${policy.name}" declares ${name}: ${value}, but "${first.policy}" ${enforces}: a limit has one value (set it in limits, or name your own limit otherwise)`
        })
      }
    }
  }
  return undefined
}

/**
 * The policies of the run: the defaults, the list given, or what the function given made
 * of the defaults; for a fresh run, only if they enforce the limits given. A resumed run's
 * limits are filled from its `run.started` (`JournalLoad.startedWith`), for its defaults to be
 * built from: policies given to the resume may replace them.
 */
export const policiesOf = (
  given: RunOptionsSchema.Checked["policies"],
  limits: RunOptions.Limits,
  from: From
): Result.Result<ReadonlyArray<Termination.Policy>, RunOptions.InvalidRunOptions> =>
  Result.flatMap(chosenPolicies(given, limits), (policies) => {
    const issue = conflicting(policies) ?? (from === "resumed" ? undefined : unenforced(limits, policies))
    return issue === undefined ? Result.succeed(policies) : Result.fail(issue)
  })

const chosenPolicies = (
  given: RunOptionsSchema.Checked["policies"],
  limits: RunOptions.Limits
): Result.Result<ReadonlyArray<Termination.Policy>, RunOptions.InvalidRunOptions> => {
  const defaults = Termination.defaults(limits)
  if (given === undefined) return Result.succeed(defaults)
  if (!Predicate.isFunction(given)) return Result.succeed(given)
  let returned: unknown
  try {
    returned = given(defaults)
  } catch (error) {
    return Result.fail(new RunOptions.InvalidRunOptions({ path: ["policies"], reason: threwMessage(error) }))
  }
  return Result.mapError(decodePolicies(returned), (error) => {
    const inner = invalid(error.issue, returned, ["policies"])
    return new RunOptions.InvalidRunOptions({
      path: inner.path,
      reason: `the function returned an invalid list: ${inner.reason}`
    })
  })
}
