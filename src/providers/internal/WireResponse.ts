/**
 * The response the parts of an answer make, plain or streamed (R11): its usage (with
 * cached and reasoning tokens, priced), its finish reason, its reasoning, and tool calls
 * whose arguments come back from a tool's strict form. Private to `OpenAiWire`.
 */
import { Result } from "effect"
import * as Model from "../../model/Model.ts"
import * as UsageParts from "../../model/UsageParts.ts"
import type * as OpenAiOptions from "../OpenAiOptions.ts"
import * as Cost from "./Cost.ts"

/**
 * What a decoded answer needs besides its body: the iteration (for ids the provider left
 * out), the prices, the strict forms of the tools sent strict (their arguments are
 * brought back to the tool's own shape), and the request answered, whose text estimates
 * the usage of an answer that reports none (`Model.estimatedUsage`; without it such an
 * answer counts 0 tokens). Re-exported by `OpenAiWire`.
 */
export interface Decoding {
  readonly iteration: number
  readonly prices?: OpenAiOptions.Prices | undefined
  readonly strict?: ReadonlyMap<string, Model.StrictForm> | undefined
  readonly request?: Pick<Model.Request, "messages" | "tools"> | undefined
}

/**
 * Why a body does not make a response: it is corrupt (`corrupt`), or the provider
 * stopped the answer itself unfinished (`interrupted`: DeepSeek's
 * `insufficient_system_resource`, a finish reason such as `error` or `abort`, or a
 * `tool_calls` one with no tool call, with `finishReason` saying which), which is worth
 * asking again. Re-exported by `OpenAiWire`.
 */
export interface Problem {
  readonly kind: "corrupt" | "interrupted"
  readonly detail: string
  readonly finishReason?: string | undefined
  /** What an interrupted answer had cost, when its usage could be read (R2.1). */
  readonly usage?: Model.Usage | undefined
}

/** The usage as the wire carries it (what `OpenAiWire`'s schema decodes). */
export interface WireUsage {
  readonly prompt_tokens?: number | null | undefined
  readonly completion_tokens?: number | null | undefined
  readonly prompt_tokens_details?: { readonly cached_tokens?: number | null | undefined } | null | undefined
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number | null | undefined } | null | undefined
  readonly prompt_cache_hit_tokens?: number | null | undefined
  /** Read only when it is a count: it tells a part reported beside its whole, and checks nothing. */
  readonly total_tokens?: unknown
}

type WireUsageType = WireUsage

export const priced = (usage: Model.Usage, prices: OpenAiOptions.Prices | undefined): Model.Usage =>
  prices === undefined ? usage : { ...usage, costUsd: Cost.costUsd(prices, usage) }

/** A count as the usage's schema reads one: a safe integer, not negative. */
const countOf = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined

/** The larger of two reports of one count: a later report counts the same answer, up to later. */
const larger = (earlier: unknown, later: unknown): number | undefined => {
  const a = countOf(earlier)
  const b = countOf(later)
  return a === undefined ? b : b === undefined ? a : Math.max(a, b)
}

/** An object of the counts given, those left out left out (an absent count is read as what the rest says). */
const counts = <K extends string>(
  entries: ReadonlyArray<readonly [K, number | undefined]>
): Partial<Record<K, number>> =>
  // Boundary: `Object.fromEntries` forgets the keys' type; they are the entries' own.
  Object.fromEntries(entries.filter(([, value]) => value !== undefined)) as Partial<Record<K, number>>

/** What a total leaves of one side once the other is taken out, when it tells. */
const restOf = (total: number | undefined, other: number | undefined): number | undefined =>
  total !== undefined && other !== undefined && total >= other ? total - other : undefined

/** The two sides of a usage as the server says them: each its own count, or what its total leaves of the other. */
const sidesOf = (wire: WireUsageType) => {
  const total = countOf(wire.total_tokens)
  const prompt = wire.prompt_tokens ?? restOf(total, wire.completion_tokens ?? undefined)
  const said = wire.completion_tokens ?? restOf(total, wire.prompt_tokens ?? undefined)
  return { total, prompt, said }
}

/**
 * A stream's usage reports as one (review 177): each side the larger one reported, read as
 * {@link sidesOf} reads a report (its own count, or what its total leaves of the other), and
 * no less than what the largest total leaves of the larger prompt (review 178: an early
 * running count of 0 outputs hid the 500 a final report's total left). So a part one chunk
 * reported (the prompt's, early) is not lost to a later chunk that reported another, and a
 * count never reads less than the server reported.
 */
export const mergedUsage = (earlier: WireUsage | undefined, later: WireUsage): WireUsage => {
  if (earlier === undefined) return later
  const before = sidesOf(earlier)
  const after = sidesOf(later)
  const total = larger(before.total, after.total)
  const prompt = larger(before.prompt, after.prompt)
  const cached = larger(earlier.prompt_tokens_details?.cached_tokens, later.prompt_tokens_details?.cached_tokens)
  const hits = larger(earlier.prompt_cache_hit_tokens, later.prompt_cache_hit_tokens)
  // What the total leaves of the input as `usageOf` reads it: cached tokens beside a smaller
  // prompt are input, not output (review 179: counted as output, past the server's total).
  const input = prompt === undefined ? undefined : UsageParts.wholeWith(prompt, cached ?? hits)
  const said = larger(larger(before.said, after.said), restOf(total, input))
  const reasoning = larger(
    earlier.completion_tokens_details?.reasoning_tokens,
    later.completion_tokens_details?.reasoning_tokens
  )
  return {
    ...counts([
      ["prompt_tokens", prompt],
      ["completion_tokens", said],
      ["prompt_cache_hit_tokens", hits],
      ["total_tokens", total]
    ]),
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
    ...(reasoning === undefined ? {} : { completion_tokens_details: { reasoning_tokens: reasoning } })
  }
}

/** Whether the server counted the output side of `wire` (its own count, or its total): else it is estimated from the text. */
const countsOutput = (wire: WireUsageType): boolean => {
  const { total, prompt, said } = sidesOf(wire)
  return said !== undefined || (prompt === undefined && total !== undefined)
}

/**
 * The usage the server reported, counted as it says. A side it left out (no
 * `prompt_tokens` or `completion_tokens`, or `null`) is what its `total_tokens` leaves of
 * the other, else estimated from the text (`estimate`; with only the total, split by the
 * estimate and summing to it), and the usage is then marked
 * `estimated` (0, unmarked, when there is nothing to estimate from): a usage reported in
 * part counts what it has (R2.1).
 */
const usageOf = (
  wire: WireUsageType,
  prices: OpenAiOptions.Prices | undefined,
  estimate: () => Model.Usage | undefined
): Model.Usage => {
  const cached = wire.prompt_tokens_details?.cached_tokens ?? wire.prompt_cache_hit_tokens ?? undefined
  const { total, prompt, said } = sidesOf(wire)
  const estimated = prompt === undefined || said === undefined ? estimate() : undefined
  const reasoning =
    wire.completion_tokens_details?.reasoning_tokens ?? (said === undefined ? estimated?.reasoningTokens : undefined)
  // Neither side reported but the total: the estimate's input within it, the rest the output,
  // so the count is never below what the server reported (review 129).
  const onlyTotal = prompt === undefined && said === undefined ? total : undefined
  const input = prompt ?? Math.min(estimated?.inputTokens ?? 0, onlyTotal ?? Number.POSITIVE_INFINITY)
  const inputTokens = UsageParts.wholeWith(input, cached)
  const completion = said ?? (onlyTotal === undefined ? (estimated?.outputTokens ?? 0) : onlyTotal - input)
  // Reasoning beside the completion: larger than it, or a total that adds it (Gemini's gateways).
  const besideTotal = reasoning !== undefined && reasoning > 0 && total === inputTokens + completion + reasoning
  const outputTokens = besideTotal
    ? UsageParts.beside(completion, reasoning)
    : UsageParts.wholeWith(completion, reasoning)
  const usage: { -readonly [K in keyof Model.Usage]: Model.Usage[K] } = { inputTokens, outputTokens }
  if (cached !== undefined) usage.cachedInputTokens = cached
  if (reasoning !== undefined) usage.reasoningTokens = reasoning
  if (estimated !== undefined) usage.estimated = true
  return priced(usage, prices)
}

/**
 * The finish reasons compatible servers send, by what they mean (read without case):
 * an answer cut off by a token limit is never final, a filtered one stops the run (R11).
 * Gemini's, Anthropic's and Bedrock's own names are among them. A reason named nowhere here
 * is read as a normal stop.
 */
const finishReasons: Readonly<Record<string, Model.FinishReason>> = {
  stop: "stop",
  end_turn: "stop",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  tool_use: "tool_calls",
  length: "length",
  max_tokens: "length",
  max_output_tokens: "length",
  model_length: "length",
  max_length: "length",
  token_limit: "length",
  model_context_window_exceeded: "length",
  content_filter: "content_filter",
  content_filtered: "content_filter",
  safety: "content_filter",
  recitation: "content_filter",
  prohibited_content: "content_filter",
  blocklist: "content_filter",
  spii: "content_filter",
  image_safety: "content_filter",
  refusal: "content_filter",
  guardrail_intervened: "content_filter",
  image_prohibited_content: "content_filter",
  image_recitation: "content_filter"
}

/**
 * Finish reasons that say the answer was not finished at all: the call failed (Gemini's
 * `malformed_function_call` and `other` among them, review 87; Bedrock's
 * `malformed_model_output` and `malformed_tool_use`, and Anthropic's `pause_turn`, a turn
 * paused part way, review 128).
 */
const broken: ReadonlySet<string> = new Set([
  "error",
  "abort",
  "aborted",
  "insufficient_system_resource",
  "malformed_function_call",
  "malformed_model_output",
  "malformed_tool_use",
  "pause_turn",
  "unexpected_tool_call",
  "too_many_tool_calls",
  "other",
  "image_other",
  "no_image",
  "language",
  "missing_thought_signature"
])

const callId = (id: string | null | undefined, iteration: number, index: number) =>
  id === null || id === undefined || id === "" ? `call_${iteration}_${index}` : id

export interface Parts {
  readonly text: string
  readonly reasoning: string | undefined
  readonly calls: ReadonlyArray<{ readonly id: string | undefined; readonly name: string; readonly arguments: unknown }>
  readonly finishReason: string | undefined
  readonly usage: WireUsageType | undefined
  /** Characters of the answer that came after `usage` was reported (a stream's early or running count). */
  readonly charsAfterUsage?: number | undefined
}

/**
 * What the parts of an answer that never ended (its stream broke, stalled or carried an
 * error) had cost (R2.1): the usage the server reported, priced; else, once something of the
 * answer came, an estimate from the text sent and received; else nothing (no answer began).
 * A usage reported before more of the answer came counts what came after it on top, four
 * characters a token, and is then marked `estimated` (review 162: an early count read 0 tokens
 * of 100 KB; review 163: a count above the estimate of the whole still left out what followed).
 * The prompt's count stands: it cannot grow after the server counted it.
 */
export const partialUsage = (parts: Parts, decoding: Decoding): Model.Usage | undefined => {
  const toolCalls = parts.calls.map((call, index) => ({
    id: callId(call.id, decoding.iteration, index),
    name: call.name,
    arguments: call.arguments
  }))
  const estimate = estimateOf(parts, decoding, toolCalls)
  if (parts.usage != null) return withTextAfter(parts, usageOf(parts.usage, decoding.prices, estimate), decoding.prices)
  const began = parts.text !== "" || (parts.reasoning ?? "") !== "" || parts.calls.length > 0
  const estimated = began ? estimate() : undefined
  return estimated === undefined ? undefined : priced(estimated, decoding.prices)
}

/**
 * `reported` (the usage of `parts`, as the server counted it) with what came of the answer after
 * that count on top of its output, four characters a token, marked `estimated`: unless nothing
 * came after it, or its output side is an estimate from the text already, which covers all that
 * came (review 165: a report without its prompt's count, or with only its total, was taken as
 * an estimate of the whole, and a stream whose only report came first counted none of its text).
 */
const withTextAfter = (parts: Parts, reported: Model.Usage, prices: OpenAiOptions.Prices | undefined): Model.Usage => {
  const after = parts.charsAfterUsage ?? 0
  if (after <= 0 || parts.usage == null || !countsOutput(parts.usage)) return reported
  const { costUsd: _, ...counts } = reported
  const outputTokens = UsageParts.beside(reported.outputTokens, Math.ceil(after / 4))
  return priced({ ...counts, outputTokens, estimated: true }, prices)
}

/** The estimate of what the parts cost, from the text sent and received, when the request is known. */
const estimateOf =
  (parts: Parts, decoding: Decoding, toolCalls: ReadonlyArray<Model.ToolCall>) => (): Model.Usage | undefined =>
    decoding.request === undefined
      ? undefined
      : Model.estimatedUsage(decoding.request, { text: parts.text, reasoning: parts.reasoning, toolCalls })

/** The response the parts of an answer make, plain or streamed. */
export const make = (parts: Parts, decoding: Decoding): Result.Result<Model.Response, Problem> => {
  const said = parts.finishReason?.toLowerCase()
  // Own keys only: a server's `constructor` or `__proto__` is no finish reason of ours.
  const finishReason = said !== undefined && Object.hasOwn(finishReasons, said) ? finishReasons[said] : undefined
  const toolCalls = parts.calls.map((call, index) => {
    const strict = decoding.strict?.get(call.name)
    return {
      id: callId(call.id, decoding.iteration, index),
      name: call.name,
      arguments: strict === undefined ? call.arguments : strict.restore(call.arguments)
    }
  })
  const estimate = estimateOf(parts, decoding, toolCalls)
  // No usage reported: an estimate, or 0 without the request to make one from.
  const usage =
    parts.usage == null
      ? priced(estimate() ?? { inputTokens: 0, outputTokens: 0 }, decoding.prices)
      : withTextAfter(parts, usageOf(parts.usage, decoding.prices, estimate), decoding.prices)
  // An answer that says it calls tools and carries none (vLLM's with `tool_choice: "required"`)
  // made no call it promised: unfinished, never a final answer.
  const noCall = finishReason === "tool_calls" && toolCalls.length === 0
  if (said !== undefined && (broken.has(said) || noCall)) {
    return Result.fail({
      kind: "interrupted",
      finishReason: said,
      detail:
        said === "insufficient_system_resource"
          ? "the provider stopped the answer for lack of resources (finish_reason: insufficient_system_resource)"
          : noCall
            ? `the answer says it calls tools (finish_reason: ${said}) and carries no tool call`
            : `the provider stopped the answer unfinished (finish_reason: ${said})`,
      // What it cost counts toward the run's budgets all the same (R2.1).
      usage
    })
  }
  return Result.succeed({
    text: parts.text,
    toolCalls,
    usage,
    ...(finishReason === undefined ? {} : { finishReason }),
    ...(parts.reasoning === undefined ? {} : { reasoning: parts.reasoning })
  })
}
