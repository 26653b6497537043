/**
 * The bodies `FakeOpenAiServer` answers with, shaped as the API it plays shapes them:
 * error envelopes with the type and code the API gives each status, and replies (plain
 * or streamed) with unique ids, `total_tokens` and the usage details, the usage chunk
 * only when the request asked for it, and DeepSeek's `reasoning_content` in its
 * thinking mode.
 */
import { randomUUID } from "node:crypto"
import * as OpenAiWireEncode from "../../providers/OpenAiWireEncode.ts"
import type { ApiError, Step } from "./FakeOpenAiSteps.ts"
import type { Api } from "./FakeOpenAiValidation.ts"

type Reply = Extract<Step, { _tag: "Reply" }>

/** The `type` and `code` the API gives an error status. */
const kindOf = (status: number): { readonly type: string; readonly code: string | null } => {
  switch (status) {
    case 401:
      return { type: "invalid_request_error", code: "invalid_api_key" }
    case 403:
      return { type: "invalid_request_error", code: "unsupported_country_region_territory" }
    case 404:
      return { type: "invalid_request_error", code: "model_not_found" }
    case 429:
      return { type: "requests", code: "rate_limit_exceeded" }
    default:
      return status >= 500 ? { type: "server_error", code: null } : { type: "invalid_request_error", code: null }
  }
}

/** The API's error envelope for a status. */
export const errorBody = (status: number, message: string, error: Partial<ApiError> = {}): string =>
  JSON.stringify({ error: { message, ...kindOf(status), param: null, ...error } })

/** What answering one request needs to know about it and the server. */
export interface Answering {
  readonly api: Api
  /** Whether the request is in DeepSeek's thinking mode. */
  readonly thinking: boolean
  readonly streamed: boolean
  /** Whether the streamed request set `stream_options.include_usage`. */
  readonly includeUsage: boolean
  /** The next tool-call id (`call_0`, `call_1`, …, across the whole script). */
  readonly nextCallId: () => string
  /** The number of this completion, across the whole script. */
  readonly completion: number
}

const MODEL = "fake-model"

const modelOf = (api: Api) => (api === "deepseek" ? "deepseek-v4-flash" : MODEL)

/** The response a reply stands for. */
const responseOf = (reply: Reply, answering: Answering): OpenAiWireEncode.Encodable => ({
  text: reply.text,
  toolCalls: reply.toolCalls.map((call) => ({
    id: call.id ?? answering.nextCallId(),
    name: call.name,
    arguments: call.arguments
  })),
  usage:
    reply.usage === "unreported"
      ? undefined
      : {
          inputTokens: reply.usage.input,
          outputTokens: reply.usage.output,
          ...(reply.usage.cached === undefined ? {} : { cachedInputTokens: reply.usage.cached }),
          ...(reply.usage.reasoning === undefined ? {} : { reasoningTokens: reply.usage.reasoning })
        },
  // A scripted finish reason is sent as it is, also one the runtime does not know.
  ...(reply.finishReason === undefined ? {} : { finishReason: reply.finishReason }),
  ...(reply.reasoning !== undefined
    ? { reasoning: reply.reasoning }
    : answering.thinking
      ? { reasoning: `Thinking it over (${answering.completion}).` }
      : {})
})

/** The body of a 200 answer as parts: the events of a stream, or two halves of the JSON. */
export const replyParts = (reply: Reply, answering: Answering): Array<string> => {
  const response = responseOf(reply, answering)
  const options: OpenAiWireEncode.EncodeOptions = {
    model: modelOf(answering.api),
    id: answering.api === "deepseek" ? randomUUID() : `chatcmpl-fake${String(answering.completion).padStart(8, "0")}`,
    created: Math.floor(Date.now() / 1000),
    dialect: answering.api,
    includeUsage: answering.includeUsage
  }
  if (answering.streamed) {
    return OpenAiWireEncode.chunkData(response, options).map((data) => `data: ${data}\n\n`)
  }
  const json = JSON.stringify(OpenAiWireEncode.completionBody(response, options))
  return [json.slice(0, json.length >> 1), json.slice(json.length >> 1)]
}
