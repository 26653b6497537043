/**
 * The options of the chat-completions client (`OpenAiCompatible`) and their check: a
 * value that cannot work (a temperature of 3, an output cap of 0, an option the
 * endpoint does not have) fails with a typed {@link InvalidOptions} naming the field,
 * when the client is made, never at the first request. Re-exported from
 * `OpenAiCompatible`.
 *
 * @since 0.1.0
 */
import type { Duration, Redacted } from "effect"
import { Schema } from "effect"
import * as Cost from "./internal/Cost.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Timeouts {
  /** Until the request has a connected socket. Default 10 seconds; each timeout is at least 1 ms. */
  readonly connect?: Duration.Input | undefined
  /** From the connection until the response headers. Default 5 minutes. */
  readonly firstByte?: Duration.Input | undefined
  /**
   * The longest gap between two reads of the body, streamed or plain (a provider that sends
   * empty lines while it works is not idle); the whole body is bounded by the request's
   * deadline. Default 60 seconds.
   */
  readonly idleRead?: Duration.Input | undefined
}

/**
 * Prices in USD per million tokens, each from 0 to {@link maxPricePerMillionTokens}.
 * `cachedInput` is the price of an input token read from the provider's prompt cache
 * (OpenAI's `cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`); without it, cached
 * tokens cost `input`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Prices extends Cost.Prices {}

/**
 * The highest price {@link Prices} takes: a million USD per million tokens. A higher one
 * would make an answer's cost too large to count, so it is refused at `make`.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxPricePerMillionTokens: number = Cost.maxPricePerMillionTokens

/**
 * Which wire conventions the endpoint follows where OpenAI and DeepSeek differ: the
 * name of the output cap, the reasoning options, `parallel_tool_calls`, and whether an
 * assistant turn carries its `reasoning_content` back. The presets set it.
 *
 * @category models
 * @since 0.1.0
 */
export const Dialect = Schema.Literals(["openai", "deepseek"])

/**
 * @category models
 * @since 0.1.0
 */
export type Dialect = typeof Dialect.Type

/**
 * Whether and which tool the model must call: `auto` (it decides), `none` (it answers
 * in text), `required` (some tool), or `{ tool }` (that one). Sent only when the request
 * has tools. Note that a run whose model must always call a tool cannot get a final
 * answer: it ends by one of its limits.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolChoice = Schema.Union([
  Schema.Literals(["auto", "none", "required"]),
  Schema.Struct({ tool: Schema.String })
])

/**
 * @category models
 * @since 0.1.0
 */
export type ToolChoice = typeof ToolChoice.Type

/**
 * The reasoning efforts OpenAI takes.
 *
 * @category constants
 * @since 0.1.0
 */
export const openAiEfforts = ["none", "minimal", "low", "medium", "high", "xhigh"] as const
/**
 * The reasoning efforts DeepSeek takes (it maps some onto others).
 *
 * @category constants
 * @since 0.1.0
 */
export const deepSeekEfforts = ["minimal", "low", "medium", "high", "xhigh", "max"] as const

/**
 * Reasoning options. `effort` is OpenAI's and DeepSeek's `reasoning_effort` (OpenAI:
 * `none`, `minimal`, `low`, `medium`, `high`, `xhigh`; DeepSeek: `low`, `high`, `max`,
 * and the names it maps onto them). `thinking` is DeepSeek's thinking mode switch (on by
 * default at DeepSeek).
 *
 * @category models
 * @since 0.1.0
 */
export const Reasoning = Schema.Struct({
  effort: Schema.optional(Schema.Literals([...new Set([...openAiEfforts, ...deepSeekEfforts])])),
  thinking: Schema.optional(Schema.Boolean)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Reasoning = typeof Reasoning.Type

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** The API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  readonly baseUrl: string
  readonly model: string
  readonly apiKey: Redacted.Redacted<string>
  /** The endpoint's wire conventions. Default `openai`; the DeepSeek preset sets `deepseek`. */
  readonly dialect?: Dialect | undefined
  /** Ask for server-sent events. Default `false`. */
  readonly stream?: boolean | undefined
  readonly timeouts?: Timeouts | undefined
  /** Prices in USD per million tokens, to fill `usage.costUsd`. */
  readonly costPerMillionTokens?: Prices | undefined
  /** Sampling temperature, 0 to 2. */
  readonly temperature?: number | undefined
  /**
   * The most tokens one answer may have (reasoning included): `max_completion_tokens` to
   * OpenAI, `max_tokens` to DeepSeek. An answer cut off by it is never a final answer.
   * The run's `limits.maxTokens` is a budget for the whole run, not this.
   */
  readonly maxOutputTokens?: number | undefined
  readonly toolChoice?: ToolChoice | undefined
  /** Whether the model may ask for several tools in one answer (OpenAI's `parallel_tool_calls`). */
  readonly parallelToolCalls?: boolean | undefined
  /**
   * Send each tool's strict form with `strict: true` (OpenAI's structured outputs), so the
   * arguments always match its schema; a tool without one is sent as it is. DeepSeek
   * takes `strict` only at its beta base URL, `https://api.deepseek.com/beta`.
   */
  readonly strict?: boolean | undefined
  readonly reasoning?: Reasoning | undefined
  /**
   * The largest response body read, plain or streamed; a longer one fails
   * `response_too_large` and its request is aborted. Default 16 MiB.
   */
  readonly maxResponseBytes?: number | undefined
}

/**
 * Options that cannot work, naming the field and why.
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>()("InvalidOptions", {
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid OpenAiCompatible options: ${this.reason}`
  }
}

/**
 * The default of {@link Options.maxResponseBytes}: 16 MiB.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxResponseBytes = 16 * 1024 * 1024
