/**
 * A response in the chat-completions wire format, plain or as the events of a stream,
 * the way OpenAI and DeepSeek send it: for servers and tests that speak the protocol
 * (`FakeOpenAiServer` answers with these).
 *
 * @since 0.1.0
 */
import type * as Model from "../model/Model.ts"
import { argumentText, wireToolCall } from "./internal/WireRequest.ts"
import type * as OpenAiOptions from "./OpenAiOptions.ts"

/**
 * A response to encode: a `Model.Response`, whose finish reason may also be one the
 * runtime does not know (a server under test sends whatever it is told to), and whose
 * usage may be absent: then none is sent, as some compatible servers do (an `estimated`
 * usage was never reported either, and is not sent).
 *
 * @category models
 * @since 0.3.0
 */
export type Encodable = Omit<Model.Response, "finishReason" | "usage"> & {
  readonly finishReason?: string | undefined
  readonly usage?: Model.Usage | undefined
}

/** The usage a server reports for a response: none when it was never reported. */
const reported = (response: Encodable): Model.Usage | undefined =>
  response.usage?.estimated === true ? undefined : response.usage

/**
 * @category models
 * @since 0.1.0
 */
export interface EncodeOptions {
  readonly model: string
  /** The completion's id. Default `chatcmpl-0`. */
  readonly id?: string | undefined
  /** Seconds since the epoch. Default 0. */
  readonly created?: number | undefined
  /** Whose usage fields to send. Default `openai`. */
  readonly dialect?: OpenAiOptions.Dialect | undefined
  /**
   * For a stream: whether the request set `stream_options.include_usage`, so that every
   * chunk carries `usage: null` and a last chunk without choices carries the usage, as
   * the APIs do. Default `true`.
   */
  readonly includeUsage?: boolean | undefined
  /** For a stream: the size of the pieces of text and arguments. Default 8. */
  readonly pieceSize?: number | undefined
}

/**
 * A usage as the API sends it: the totals, their details, and DeepSeek's cache counts.
 *
 * @category encoding
 * @since 0.1.0
 */
export const usageBody = (usage: Model.Usage, dialect: OpenAiOptions.Dialect = "openai"): object => {
  const cached = usage.cachedInputTokens ?? 0
  const reasoning = usage.reasoningTokens ?? 0
  const common = {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens
  }
  return dialect === "deepseek"
    ? {
        ...common,
        prompt_tokens_details: { cached_tokens: cached },
        ...(usage.reasoningTokens === undefined ? {} : { completion_tokens_details: { reasoning_tokens: reasoning } }),
        prompt_cache_hit_tokens: cached,
        prompt_cache_miss_tokens: usage.inputTokens - cached
      }
    : {
        ...common,
        prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
        completion_tokens_details: {
          reasoning_tokens: reasoning,
          audio_tokens: 0,
          accepted_prediction_tokens: 0,
          rejected_prediction_tokens: 0
        }
      }
}

const finishReasonOf = (response: Encodable): string =>
  response.finishReason ?? (response.toolCalls.length > 0 ? "tool_calls" : "stop")

/**
 * A response as the JSON body of a complete chat completion.
 *
 * @category encoding
 * @since 0.1.0
 */
export const completionBody = (response: Encodable, options: EncodeOptions): object => {
  const usage = reported(response)
  return {
    id: options.id ?? "chatcmpl-0",
    object: "chat.completion",
    created: options.created ?? 0,
    model: options.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: response.text === "" && response.toolCalls.length > 0 ? null : response.text,
          ...(response.reasoning === undefined ? {} : { reasoning_content: response.reasoning }),
          ...(response.toolCalls.length === 0 ? {} : { tool_calls: response.toolCalls.map(wireToolCall) }),
          refusal: null
        },
        logprobs: null,
        finish_reason: finishReasonOf(response)
      }
    ],
    ...(usage === undefined ? {} : { usage: usageBody(usage, options.dialect) }),
    system_fingerprint: "fp_fake"
  }
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff

const pieces = (text: string, size: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; ) {
    let end = Math.min(i + size, text.length)
    // Never between the halves of a pair: each piece is text a strict reader (Python, Go) takes.
    if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end++
    out.push(text.slice(i, end))
    i = end
  }
  return out
}

/**
 * A response as the data of the events of a stream, the way providers send it: the
 * reasoning, the text and each call's arguments in pieces, a call's id and name with
 * its first delta, the finish reason in the last chunk with choices, the usage in a
 * last chunk without choices (when asked), then `[DONE]`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const chunkData = (response: Encodable, options: EncodeOptions): Array<string> => {
  const size = options.pieceSize ?? 8
  const includeUsage = options.includeUsage ?? true
  const envelope = (choices: ReadonlyArray<object>, usage: object | null = null) =>
    JSON.stringify({
      id: options.id ?? "chatcmpl-0",
      object: "chat.completion.chunk",
      created: options.created ?? 0,
      model: options.model,
      system_fingerprint: "fp_fake",
      choices,
      ...(includeUsage ? { usage } : {})
    })
  const chunk = (delta: object, finish: string | null = null) =>
    envelope([{ index: 0, delta, logprobs: null, finish_reason: finish }])
  const out = [chunk({ role: "assistant", content: "" })]
  for (const piece of pieces(response.reasoning ?? "", size)) out.push(chunk({ reasoning_content: piece }))
  for (const piece of pieces(response.text, size)) out.push(chunk({ content: piece }))
  response.toolCalls.forEach((call, index) => {
    const start = { index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }
    out.push(chunk({ tool_calls: [start] }))
    for (const piece of pieces(argumentText(call.arguments), size)) {
      out.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    }
  })
  out.push(chunk({}, finishReasonOf(response)))
  const usage = reported(response)
  if (includeUsage && usage !== undefined) out.push(envelope([], usageBody(usage, options.dialect)))
  out.push("[DONE]")
  return out
}
