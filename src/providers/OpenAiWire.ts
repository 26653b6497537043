/**
 * The chat-completions wire format shared by OpenAI, DeepSeek and other compatible
 * endpoints: the request body built from the run's messages and tool definitions, the
 * `Schema`s that decode a response or a streamed chunk (so an unexpected body is a
 * typed failure, never a crash), and the accumulation of streamed deltas into one
 * response.
 *
 * Tool-call arguments stay the raw text the provider sent: the runtime's tool pipeline
 * parses them, so malformed JSON becomes a correctable tool result. The encoders of
 * responses (plain and streamed) serve servers and tests that speak the protocol.
 *
 * @since 0.1.0
 */
import { Result, Schema } from "effect"
import type * as Model from "../model/Model.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface RequestOptions {
  readonly model: string
  readonly temperature?: number | undefined
  readonly stream: boolean
}

const argumentText = (args: unknown): string => (typeof args === "string" ? args : JSON.stringify(args ?? {}))

const wireToolCall = (call: Model.ToolCall) => ({
  id: call.id,
  type: "function",
  function: { name: call.name, arguments: argumentText(call.arguments) }
})

const wireMessage = (message: Model.Message): object => {
  switch (message._tag) {
    case "system":
    case "user":
      return { role: message._tag, content: message.content }
    case "assistant":
      return message.toolCalls.length === 0
        ? { role: "assistant", content: message.content }
        : {
            role: "assistant",
            content: message.content === "" ? null : message.content,
            tool_calls: message.toolCalls.map(wireToolCall)
          }
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content }
  }
}

/**
 * The JSON body of a chat-completions request.
 *
 * @category constructors
 * @since 0.1.0
 */
export const requestBody = (options: RequestOptions, request: Model.Request): object => ({
  model: options.model,
  messages: request.messages.map(wireMessage),
  ...(request.tools.length === 0
    ? {}
    : {
        tools: request.tools.map((tool) => ({
          type: "function",
          function: { name: tool.name, description: tool.description, parameters: tool.parameters }
        }))
      }),
  ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
  ...(options.stream ? { stream: true, stream_options: { include_usage: true } } : {})
})

const Nullable = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

// Token counts feed the run's counters and budgets: a negative, fractional or huge count
// would bend them, so a usage that is not whole, non-negative, safe integers does not decode.
const WireUsage = Schema.Struct({
  prompt_tokens: Schema.Natural,
  completion_tokens: Schema.Natural
})

const WireToolCall = Schema.Struct({
  id: Nullable(Schema.String),
  function: Schema.Struct({ name: Schema.String, arguments: Nullable(Schema.Unknown) })
})

/**
 * A complete (non-streamed) chat completion.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Completion = Schema.Struct({
  choices: Schema.NonEmptyArray(
    Schema.Struct({
      message: Schema.Struct({
        content: Nullable(Schema.String),
        tool_calls: Nullable(Schema.Array(WireToolCall))
      })
    })
  ),
  usage: Nullable(WireUsage)
})

/**
 * @category schemas
 * @since 0.1.0
 */
export type Completion = typeof Completion.Type

const WireToolCallDelta = Schema.Struct({
  index: Nullable(Schema.Int),
  id: Nullable(Schema.String),
  function: Nullable(Schema.Struct({ name: Nullable(Schema.String), arguments: Nullable(Schema.String) }))
})

/**
 * One streamed chunk. The last chunk of a stream asked with `include_usage` has no
 * choices and carries the usage.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Chunk = Schema.Struct({
  choices: Schema.Array(
    Schema.Struct({
      delta: Nullable(
        Schema.Struct({
          content: Nullable(Schema.String),
          tool_calls: Nullable(Schema.Array(WireToolCallDelta))
        })
      )
    })
  ),
  usage: Nullable(WireUsage)
})

/**
 * @category schemas
 * @since 0.1.0
 */
export type Chunk = typeof Chunk.Type

/**
 * The error envelope of an error response or an error event: `{ error: { message } }`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ErrorBody = Schema.Struct({
  error: Schema.Struct({ message: Nullable(Schema.String), type: Nullable(Schema.String) })
})

const decodeCompletion = Schema.decodeUnknownResult(Schema.fromJsonString(Completion))
const decodeChunk = Schema.decodeUnknownResult(Schema.fromJsonString(Chunk))
const decodeError = Schema.decodeUnknownResult(Schema.fromJsonString(ErrorBody))

/**
 * Decodes a JSON text, or says why it does not decode.
 *
 * @category decoding
 * @since 0.1.0
 */
export const parseCompletion = (text: string): Result.Result<Completion, string> =>
  Result.mapError(decodeCompletion(text), (error) => error.message)

/**
 * @category decoding
 * @since 0.1.0
 */
export const parseChunk = (text: string): Result.Result<Chunk, string> =>
  Result.mapError(decodeChunk(text), (error) => error.message)

/**
 * The provider's own error message in an error body, when it has one.
 *
 * @category decoding
 * @since 0.1.0
 */
export const errorMessage = (text: string): string | undefined => {
  const decoded = decodeError(text)
  return Result.isSuccess(decoded)
    ? (decoded.success.error.message ?? decoded.success.error.type ?? undefined)
    : undefined
}

/**
 * Prices to turn token usage into a cost.
 *
 * @category models
 * @since 0.1.0
 */
export interface Prices {
  readonly input: number
  readonly output: number
}

const usage = (wire: typeof WireUsage.Type | null | undefined, prices: Prices | undefined): Model.Usage => {
  const inputTokens = wire?.prompt_tokens ?? 0
  const outputTokens = wire?.completion_tokens ?? 0
  return prices === undefined
    ? { inputTokens, outputTokens }
    : { inputTokens, outputTokens, costUsd: (inputTokens * prices.input + outputTokens * prices.output) / 1_000_000 }
}

const callId = (id: string | null | undefined, iteration: number, index: number) =>
  id === null || id === undefined || id === "" ? `call_${iteration}_${index}` : id

/**
 * The response of a complete chat completion.
 *
 * @category decoding
 * @since 0.1.0
 */
export const fromCompletion = (
  completion: Completion,
  iteration: number,
  prices: Prices | undefined
): Model.Response => {
  const message = completion.choices[0].message
  return {
    text: message.content ?? "",
    toolCalls: (message.tool_calls ?? []).map((call, index) => ({
      id: callId(call.id, iteration, index),
      name: call.function.name,
      arguments: call.function.arguments ?? "{}"
    })),
    usage: usage(completion.usage, prices)
  }
}

interface PartialCall {
  id: string | undefined
  name: string
  arguments: string
}

/**
 * Streamed deltas folded so far.
 *
 * @category models
 * @since 0.1.0
 */
export interface Accumulator {
  text: string
  readonly calls: Map<number, PartialCall>
  usage: typeof WireUsage.Type | undefined
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const accumulator = (): Accumulator => ({ text: "", calls: new Map(), usage: undefined })

/**
 * Folds one chunk in: text is appended, tool-call deltas are merged by their `index`
 * (the id and name come with the first delta of a call, argument text with any).
 *
 * @category combinators
 * @since 0.1.0
 */
export const accumulate = (acc: Accumulator, chunk: Chunk): void => {
  if (chunk.usage !== undefined && chunk.usage !== null) acc.usage = chunk.usage
  for (const choice of chunk.choices) {
    const delta = choice.delta
    if (delta === undefined || delta === null) continue
    if (typeof delta.content === "string") acc.text += delta.content
    const deltas = delta.tool_calls ?? []
    for (let i = 0; i < deltas.length; i++) {
      const part = deltas[i]
      if (part === undefined) continue
      const index = part.index ?? i
      let call = acc.calls.get(index)
      if (call === undefined) {
        call = { id: undefined, name: "", arguments: "" }
        acc.calls.set(index, call)
      }
      if (typeof part.id === "string" && part.id !== "") call.id = part.id
      if (typeof part.function?.name === "string") call.name += part.function.name
      if (typeof part.function?.arguments === "string") call.arguments += part.function.arguments
    }
  }
}

/**
 * The response the deltas add up to, or why they do not make one (a tool call
 * without a name).
 *
 * @category decoding
 * @since 0.1.0
 */
export const fromAccumulator = (
  acc: Accumulator,
  iteration: number,
  prices: Prices | undefined
): Result.Result<Model.Response, string> => {
  const toolCalls: Array<Model.ToolCall> = []
  for (const [index, call] of [...acc.calls.entries()].sort(([a], [b]) => a - b)) {
    if (call.name === "") return Result.fail(`the streamed tool call at index ${index} has no function name`)
    toolCalls.push({ id: callId(call.id, iteration, index), name: call.name, arguments: call.arguments })
  }
  return Result.succeed({ text: acc.text, toolCalls, usage: usage(acc.usage, prices) })
}

const wireUsage = (usage: Model.Usage) => ({ prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens })

/**
 * A response as the JSON body of a complete chat completion.
 *
 * @category encoding
 * @since 0.1.0
 */
export const completionBody = (response: Model.Response, model: string): object => ({
  id: "chatcmpl-0",
  object: "chat.completion",
  created: 0,
  model,
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: response.text === "" && response.toolCalls.length > 0 ? null : response.text,
        ...(response.toolCalls.length === 0 ? {} : { tool_calls: response.toolCalls.map(wireToolCall) })
      },
      finish_reason: response.toolCalls.length > 0 ? "tool_calls" : "stop"
    }
  ],
  usage: wireUsage(response.usage)
})

const pieces = (text: string, size: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

/**
 * A response as the data of the events of a stream, the way providers send it: the
 * text and each call's arguments in pieces of `pieceSize` characters, a call's id and
 * name with its first delta, the usage in a last chunk without choices, then `[DONE]`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const chunkData = (response: Model.Response, model: string, pieceSize = 8): Array<string> => {
  const envelope = (choices: ReadonlyArray<object>, extra: object = {}) =>
    JSON.stringify({ id: "chatcmpl-0", object: "chat.completion.chunk", created: 0, model, choices, ...extra })
  const chunk = (delta: object, finish: string | null = null) => envelope([{ index: 0, delta, finish_reason: finish }])
  const out = [chunk({ role: "assistant", content: "" })]
  for (const piece of pieces(response.text, pieceSize)) out.push(chunk({ content: piece }))
  response.toolCalls.forEach((call, index) => {
    const start = { index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }
    out.push(chunk({ tool_calls: [start] }))
    for (const piece of pieces(argumentText(call.arguments), pieceSize)) {
      out.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    }
  })
  out.push(chunk({}, response.toolCalls.length > 0 ? "tool_calls" : "stop"))
  out.push(envelope([], { usage: wireUsage(response.usage) }))
  out.push("[DONE]")
  return out
}
