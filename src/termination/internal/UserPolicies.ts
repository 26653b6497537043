/**
 * A user's termination policy through the user-code boundary (R12): what it decides is
 * checked (its shape, a stop reason it may give), and its words cut to what the run keeps.
 * Private to `termination/`.
 */
import { Result, Schema } from "effect"
import * as StopReason from "../../events/StopReason.ts"
import * as UserCode from "../../failure/UserCode.ts"
import type { Checkpoint, Decision, Policy } from "./TerminationPolicies.ts"

/** What a policy may decide: the schema its decisions are checked against. */
const DecisionSchema = Schema.Union([
  Schema.TaggedStruct("Continue", {}),
  Schema.TaggedStruct("Warn", { kind: Schema.String, text: Schema.String }),
  Schema.TaggedStruct("Stop", { reason: StopReason.StopReason, detail: Schema.String })
])

const checkDecision = UserCode.checkAs(DecisionSchema)

/**
 * A user's policy, through the user-code boundary (R12): a throw, or a decision outside
 * the `Decision` union (a stop reason that is not a `StopReason`), is a defect that ends
 * the run `internal_error`, naming the policy and the field.
 */
export const decideChecked = (policy: Policy, checkpoint: Checkpoint): Decision => {
  let decision: unknown
  try {
    decision = policy.decide(checkpoint)
  } catch (defect) {
    throw UserCode.threw(`the termination policy "${policy.name}"`, defect)
  }
  const checked = checkDecision(decision, () => `the decision of the termination policy "${policy.name}"`)
  if (Result.isFailure(checked)) throw new UserCode.UserCodeDefect(checked.failure)
  const claimed = checked.success._tag === "Stop" ? unfounded(checked.success.reason, checkpoint) : undefined
  if (claimed !== undefined) {
    throw new UserCode.UserCodeDefect(`the termination policy "${policy.name}" stopped the run with ${claimed}`)
  }
  if (checked.success._tag === "Warn" && builtInWarnings.has(checked.success.kind)) {
    throw new UserCode.UserCodeDefect(
      `the termination policy "${policy.name}" warned with the kind "${checked.success.kind}", which only the built-in policy that counts it gives`
    )
  }
  return bounded(checked.success)
}

/**
 * A decision with its words cut to what the run keeps (`UserCode.maxWords`): a stop's detail
 * goes into the log and the result, a warning's text into the conversation at every
 * checkpoint it is given (R12: 20 MB of it went in as it was).
 */
const bounded = (decision: Decision): Decision => {
  const max = UserCode.maxWords
  switch (decision._tag) {
    case "Continue":
      return decision
    case "Warn":
      return decision.text.length <= max && decision.kind.length <= 256
        ? decision
        : { _tag: "Warn", kind: UserCode.cutWords(decision.kind, 256), text: UserCode.cutWords(decision.text) }
    case "Stop":
      return decision.detail.length <= max
        ? decision
        : { _tag: "Stop", reason: decision.reason, detail: UserCode.cutWords(decision.detail) }
  }
}

/**
 * Stop reasons that state what only the runtime can know: a cancel, a validation, an
 * outcome in doubt, a defect, a person's decision, a contradicted tool, a filtered answer,
 * a step's deadline, a model or tool that failed for good, an answer cut off. A policy's
 * stop names a limit (R2.5: the reason is a fact a reader can trust); it cannot say that
 * the goal was reached unless the model gave a final answer (R6.1), which validation then
 * judges, nor that the run deadline passed before it did.
 */
const runtimeOnly: ReadonlySet<StopReason.StopReason> = new Set<StopReason.StopReason>([
  "cancelled",
  "validation_failed",
  "unknown_outcome",
  "internal_error",
  "approval_rejected",
  "approval_expired",
  "inconsistent_result",
  "content_filtered",
  "step_timeout",
  "model_error",
  "tool_error",
  "output_truncated"
])

/**
 * Warning kinds a built-in policy counts (R2.3: a warning first, then the stop): the counters
 * note where each was given, so that one of a user's policy under the same kind would move
 * the built-in one's count, and its warning or stop with it (review 132).
 */
const builtInWarnings: ReadonlySet<string> = new Set(["loop_warning", "same_class_errors"])

/** Why a user's policy cannot stop for `reason` at `checkpoint`, or `undefined` when it can. */
const unfounded = (reason: StopReason.StopReason, checkpoint: Checkpoint): string | undefined => {
  if (runtimeOnly.has(reason)) return `${reason}, a stop reason only the runtime gives`
  if (reason === "goal_reached" && !checkpoint.counters.finalAnswerReceived) {
    return "goal_reached without a final answer: only the model's final answer is a candidate completion"
  }
  if (reason === "run_timeout" && checkpoint.now < checkpoint.deadlineAt) {
    return "run_timeout before the run deadline (set time.run to give the run less time)"
  }
  return undefined
}
