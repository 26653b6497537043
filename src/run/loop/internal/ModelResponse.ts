/**
 * What the loop accepts as a model's response (R12, R11), private to the runtime: a
 * value the `Model` contract allows, rebuilt from exactly its fields, or a typed failure.
 * A response the provider's content filter withheld is never an answer: it is a
 * permanent failure of its own (`content_filtered`).
 */
import { Exit, Result } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import * as Model from "../../../model/Model.ts"
import * as UsageParts from "../../../model/UsageParts.ts"

const checkResponse = UserCode.check(Model.Response, "the model's response")

/** A token count as `Model.Usage` allows it: a safe integer >= 0, so the run's sums stay exact and finite. */
const isCount = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
/** A price as `Model.Usage` allows it. */
const isCost = (value: unknown): value is number =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= 1e15

const finishReasons: ReadonlySet<unknown> = new Set<unknown>(Model.FinishReason.literals)

/** A count or a price, with -0 as 0. */
const unsigned = (n: number): number => (n === 0 ? 0 : n)

/** The usage, rebuilt from exactly its schema's fields, or `undefined` if one is off. */
const plainUsage = (usage: unknown): Model.Usage | undefined => {
  if (typeof usage !== "object" || usage === null) return undefined
  // Read field by field: each is checked below before it is used.
  const { inputTokens, outputTokens, cachedInputTokens, reasoningTokens, costUsd, estimated } = usage as Partial<
    Record<keyof Model.Usage, unknown>
  >
  if (!isCount(inputTokens) || !isCount(outputTokens)) return undefined
  if (estimated !== undefined && typeof estimated !== "boolean") return undefined
  const optional = { cachedInputTokens, reasoningTokens, costUsd }
  // -0 is 0 once the log is JSON: the live log says so too.
  const out: { -readonly [K in keyof Model.Usage]: Model.Usage[K] } = {
    inputTokens: unsigned(inputTokens),
    outputTokens: unsigned(outputTokens)
  }
  for (const key of ["cachedInputTokens", "reasoningTokens", "costUsd"] as const) {
    const value = optional[key]
    if (value === undefined) continue
    if (typeof value !== "number" || !(key === "costUsd" ? isCost(value) : isCount(value))) return undefined
    out[key] = unsigned(value)
  }
  // A part larger than its whole was reported beside it: counted so, as the providers count it.
  out.inputTokens = UsageParts.wholeWith(out.inputTokens, out.cachedInputTokens)
  out.outputTokens = UsageParts.wholeWith(out.outputTokens, out.reasoningTokens)
  // Only an estimate is marked: `false` says what no field says.
  if (estimated === true) out.estimated = true
  // The log's own, frozen: the model is handed its responses back in the conversation.
  return Object.freeze(out)
}

/**
 * A response that is plainly valid, rebuilt from exactly its schema's fields; `undefined`
 * for anything else, which the schema then judges (and explains). The schema's decode
 * costs a step more than the rest of the loop's checks together, and nearly every
 * response is plainly valid. Accepts only what the schema accepts.
 */
const plainResponse = (response: unknown): Model.Response | undefined => {
  if (typeof response !== "object" || response === null) return undefined
  // Read field by field: each is checked below before it is used.
  const { text, toolCalls, usage, finishReason, reasoning, reasoningParts } = response as Partial<
    Record<keyof Model.Response, unknown>
  >
  // What a provider attached to its parts is the schema's to judge.
  if (typeof text !== "string" || !Array.isArray(toolCalls) || reasoningParts !== undefined) return undefined
  const plain = plainUsage(usage)
  if (plain === undefined) return undefined
  if (finishReason !== undefined && !finishReasons.has(finishReason)) return undefined
  if (reasoning !== undefined && typeof reasoning !== "string") return undefined
  const calls: Array<Model.ToolCall> = new Array(toolCalls.length)
  for (let i = 0; i < toolCalls.length; i++) {
    const call: unknown = toolCalls[i]
    if (typeof call !== "object" || call === null) return undefined
    // Read field by field: `id` and `name` are checked next; `arguments` is any value, parsed later.
    const { id, name, metadata } = call as Partial<Record<keyof Model.ToolCall, unknown>>
    if (typeof id !== "string" || typeof name !== "string" || metadata !== undefined) return undefined
    // Any value: `arguments` is read as it is and parsed by the pipeline (`ToolArguments.parseArguments`).
    calls[i] = { id, name, arguments: (call as Model.ToolCall).arguments }
  }
  return Model.response({
    text,
    toolCalls: calls,
    usage: plain,
    // Checked against the schema's literals above.
    finishReason: finishReason as Model.FinishReason | undefined,
    reasoning
  })
}

/**
 * What a model reported an answer cut off had cost (`Model.reportCutOff`), checked as a
 * response's usage is: only a `Model.Usage` is counted, and shown on the model call's span
 * (review 151: a `NaN`, a negative count or an object went onto the span as given).
 */
export const cutOffUsage = (usage: unknown): Model.Usage | undefined => {
  try {
    return plainUsage(usage)
  } catch {
    // A value whose reading throws (a getter, a Proxy) reports nothing.
    return undefined
  }
}

/**
 * A response the provider's content filter withheld (R11): permanent, since the same
 * request meets the same filter, and never an answer; what it cost counts all the same
 * (R2.1).
 */
export const contentFiltered = (usage?: Model.Usage): Failure.Permanent =>
  new Failure.Permanent({
    source: "provider",
    category: "content_filter",
    code: "content_filtered",
    attempts: 1,
    hint: "the provider's content filter withheld the answer (finish_reason: content_filter)",
    ...(usage === undefined || !paid(usage) ? {} : { usage })
  })

/** Whether a usage says something was paid for: tokens, or a cost. */
const paid = (usage: Model.Usage): boolean =>
  usage.inputTokens + usage.outputTokens > 0 || (usage.costUsd !== undefined && usage.costUsd > 0)

/**
 * A response as the loop may use it (R12): text a string, tool calls with string ids and
 * names, usage finite and never negative, a known finish reason. A model that breaks its
 * contract fails for good, naming the field (`invalid_response`), rather than corrupting
 * the run's log; a filtered response fails `content_filtered`.
 */
export const valid = (response: unknown): Exit.Exit<Model.Response, Failure.Failure> => {
  let plain: Model.Response | undefined
  try {
    plain = plainResponse(response)
  } catch {
    // A hostile value (a getter, a Proxy): the schema's check reports it.
  }
  if (plain === undefined) {
    const checked = checkResponse(response)
    if (Result.isFailure(checked)) {
      return Exit.fail(
        new Failure.Permanent({
          source: "provider",
          category: "invalid_response",
          code: "invalid_response",
          attempts: 1,
          hint: checked.failure
        })
      )
    }
    plain = { ...checked.success, usage: plainUsage(checked.success.usage) ?? checked.success.usage }
  }
  if (plain.finishReason === "content_filter") return Exit.fail(contentFiltered(plain.usage))
  return plain.finishReason === "tool_calls" && plain.toolCalls.length === 0
    ? Exit.fail(callsMissing(plain.usage))
    : Exit.succeed(plain)
}

/**
 * An answer that says it calls tools and carries none (R6.1, R11): unfinished, never a final
 * answer, worth asking again, as the built-in providers read it; of every model (review 193:
 * a model of the user's own had it taken as the run's answer). What it cost counts (R2.1).
 */
const callsMissing = (usage: Model.Usage): Failure.Retryable =>
  new Failure.Retryable({
    source: "provider",
    category: "provider_interrupted",
    code: "answer_unfinished",
    attempts: 1,
    hint: "the answer says it calls tools (finish reason: tool_calls) and carries no tool call",
    ...(paid(usage) ? { usage } : {})
  })
