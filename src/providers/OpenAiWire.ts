/**
 * The chat-completions wire format shared by OpenAI, DeepSeek and other compatible
 * endpoints: the request body built from the run's messages, tool definitions and the
 * per-model options (in the endpoint's {@link OpenAiOptions.Dialect}), the `Schema`s
 * that decode a response or a streamed chunk (so an unexpected body is a typed failure,
 * never a crash), and the accumulation of streamed deltas into one response.
 *
 * Tool-call arguments stay the raw text the provider sent: the runtime's tool pipeline
 * parses them, so malformed JSON becomes a correctable tool result. Arguments of a tool
 * sent in its strict form are brought back to the tool's own shape first.
 *
 * The encoders of responses (plain and streamed), for servers and tests that speak the
 * protocol, are in `OpenAiWireEncode`.
 *
 * @since 0.1.0
 */
import { Result, Schema, SchemaTransformation } from "effect"
import type * as Model from "../model/Model.ts"
import * as WireChunk from "./internal/WireChunk.ts"
import * as WireRequest from "./internal/WireRequest.ts"
import * as WireResponse from "./internal/WireResponse.ts"

/**
 * What shapes a request besides the conversation: the model and the per-model options.
 *
 * @category models
 * @since 0.1.0
 */
export type { RequestOptions } from "./internal/WireRequest.ts"

/**
 * The JSON body of a chat-completions request.
 *
 * @category constructors
 * @since 0.1.0
 */
export const requestBody: (options: WireRequest.RequestOptions, request: Model.Request) => object = WireRequest.body

const Nullable = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

// Token counts feed the run's counters and budgets: a negative, fractional or huge count
// would bend them, so a usage that is not whole, non-negative, safe integers does not decode.
// A count left out (or null) is read as what the rest says (see `WireResponse`), never as a
// broken answer: some servers report a usage in part.
const WireUsage = Schema.Struct({
  prompt_tokens: Nullable(Schema.Natural),
  completion_tokens: Nullable(Schema.Natural),
  prompt_tokens_details: Nullable(Schema.Struct({ cached_tokens: Nullable(Schema.Natural) })),
  completion_tokens_details: Nullable(Schema.Struct({ reasoning_tokens: Nullable(Schema.Natural) })),
  /** DeepSeek's count of prompt tokens read from its cache. */
  prompt_cache_hit_tokens: Nullable(Schema.Natural),
  /** Read only when it is a count (it tells a part reported beside its whole); nothing else checks it. */
  total_tokens: Schema.optional(Schema.Unknown)
})

/** A part of an answer's content given as a list (Mistral's reasoning models): its text, when it is text. */
const ContentPart = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })

/**
 * An answer's content: text, or a list of parts read as the text of its `text` parts (a
 * `thinking` part, or one of another kind, adds none).
 */
const ContentText = Schema.Union([Schema.String, Schema.Array(ContentPart)]).pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform<string, string | ReadonlyArray<typeof ContentPart.Type>>({
      decode: (content) =>
        typeof content === "string"
          ? content
          : content.map((part) => (part.type === "text" && part.text !== undefined ? part.text : "")).join(""),
      encode: (text) => text
    })
  )
)

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
        content: Nullable(ContentText),
        tool_calls: Nullable(Schema.Array(WireToolCall)),
        /** DeepSeek's thinking mode. */
        reasoning_content: Nullable(Schema.String)
      }),
      finish_reason: Nullable(Schema.String)
    })
  ),
  usage: Nullable(WireUsage)
})

/**
 * @category schemas
 * @since 0.1.0
 */
export type Completion = typeof Completion.Type

/**
 * A tool call's index in a stream: within 32 bits, as every server numbers calls from 0. One past
 * the safe integers made two calls one slot (review 146: 2^53 + 1 is 2^53), and a call was lost.
 */
const CallIndex = Schema.Int.check(Schema.isBetween({ minimum: -(2 ** 31), maximum: 2 ** 31 - 1 }))

const WireToolCallDelta = Schema.Struct({
  index: Nullable(CallIndex),
  id: Nullable(Schema.String),
  function: Nullable(Schema.Struct({ name: Nullable(Schema.String), arguments: Nullable(Schema.String) }))
})

/**
 * One streamed chunk. The last chunk of a stream asked with `include_usage` has no
 * choices and carries the usage: an empty list, or, from some servers, no `choices` key
 * at all (or `null`), read the same way.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Chunk = Schema.Struct({
  choices: Nullable(
    Schema.Array(
      Schema.Struct({
        /** Which choice (a request asks for one: index 0); absent from some servers. */
        index: Nullable(Schema.Int),
        delta: Nullable(
          Schema.Struct({
            content: Nullable(ContentText),
            reasoning_content: Nullable(Schema.String),
            tool_calls: Nullable(Schema.Array(WireToolCallDelta))
          })
        ),
        finish_reason: Nullable(Schema.String)
      })
    )
  ),
  usage: Nullable(WireUsage)
})

/**
 * @category schemas
 * @since 0.1.0
 */
export type Chunk = typeof Chunk.Type

const decodeCompletion = Schema.decodeUnknownResult(Schema.fromJsonString(Completion))
const decodeChunk = Schema.decodeUnknownResult(Schema.fromJsonString(Chunk))
const decodeChunkValue = Schema.decodeUnknownResult(Chunk)

/**
 * Decodes a JSON text, or says why it does not decode.
 *
 * @category decoding
 * @since 0.1.0
 */
export const parseCompletion = (text: string): Result.Result<Completion, string> =>
  Result.mapError(decodeCompletion(text), (error) => error.message)

/**
 * Decodes one streamed chunk. A chunk of the common shape is checked by hand (a stream
 * has dozens of them, and the schema's decode would cost as much as the rest of the
 * client); anything else goes to the schema, which accepts it or says why not. Accepts
 * only what the schema accepts.
 *
 * @category decoding
 * @since 0.1.0
 */
export const parseChunk = (text: string): Result.Result<Chunk, string> => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return Result.mapError(decodeChunk(text), (error) => error.message)
  }
  // Boundary: the hand check says yes only to what the schema accepts as it is (see WireChunk).
  if (WireChunk.isPlain(value)) return Result.succeed(value as Chunk)
  return Result.mapError(decodeChunkValue(value), (error) => error.message)
}

export {
  carriedError,
  ErrorBody,
  errorMessage,
  PlainErrorBody,
  parseError
} from "./internal/WireError.ts"

export type { Decoding, Problem } from "./internal/WireResponse.ts"

const corrupt = (detail: string): Result.Result<never, WireResponse.Problem> => Result.fail({ kind: "corrupt", detail })

type WireUsageType = typeof WireUsage.Type

/**
 * The response of a complete chat completion, or why it is none.
 *
 * @category decoding
 * @since 0.1.0
 */
export const fromCompletion = (
  completion: Completion,
  decoding: WireResponse.Decoding
): Result.Result<Model.Response, WireResponse.Problem> => {
  const choice = completion.choices[0]
  const message = choice.message
  // As for a stream: a call with no name names no tool, and no answer is built on it.
  const unnamed = (message.tool_calls ?? []).findIndex((call) => call.function.name === "")
  if (unnamed !== -1) return corrupt(`the tool call at index ${unnamed} has no function name`)
  return WireResponse.make(
    {
      text: message.content ?? "",
      reasoning: message.reasoning_content ?? undefined,
      calls: (message.tool_calls ?? []).map((call) => ({
        id: call.id ?? undefined,
        name: call.function.name,
        arguments: call.function.arguments ?? "{}"
      })),
      finishReason: choice.finish_reason ?? undefined,
      usage: completion.usage ?? undefined
    },
    decoding
  )
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
  reasoning: string | undefined
  readonly calls: Map<number, PartialCall>
  /** The call each index last named: a delta with an index and no id goes on with it. */
  readonly latest: Map<number, PartialCall>
  /** The last call opened that holds each id, so that a delta finds its call at once. */
  readonly byId: Map<string, PartialCall>
  /** The order the calls were opened in (`byId` keeps the last opened). */
  readonly opened: Map<PartialCall, number>
  /** One past the highest index a call holds: where a call without one of its own goes. */
  next: number
  finishReason: string | undefined
  usage: WireUsageType | undefined
  /** Characters of the answer received (text, reasoning, calls' names and arguments), and the count `usage` covers. */
  received: number
  usageCovers: number
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const accumulator = (): Accumulator => ({
  text: "",
  reasoning: undefined,
  calls: new Map(),
  latest: new Map(),
  byId: new Map(),
  opened: new Map(),
  next: 0,
  finishReason: undefined,
  usage: undefined,
  received: 0,
  usageCovers: 0
})

/**
 * Folds one chunk in: text and reasoning are appended, tool-call deltas are merged by
 * their `index` (the id and name come with the first delta of a call, argument text with
 * every delta), the first finish reason kept, and the usage reports merged (each count the
 * largest reported). Only the first choice counts
 * (a request asks for one). A delta without an `index` starts a new call when it has an
 * id, and adds to the last call otherwise; a delta whose id differs from the one its
 * `index` holds starts a new call (servers that omit or reuse indexes), and the deltas of
 * that index without an id go on with it; a name sent again
 * whole with the call's id is not appended, and a name piece without an id always is.
 *
 * @category combinators
 * @since 0.1.0
 */
export const accumulate = (acc: Accumulator, chunk: Chunk): void => {
  if (chunk.usage !== undefined && chunk.usage !== null) acc.usage = WireResponse.mergedUsage(acc.usage, chunk.usage)
  for (const choice of chunk.choices ?? []) {
    if (typeof choice.index === "number" && choice.index !== 0) continue
    // A choice finishes once: a later finish reason (a `stop` after a `length`) changes nothing.
    if (typeof choice.finish_reason === "string" && choice.finish_reason !== "" && acc.finishReason === undefined) {
      acc.finishReason = choice.finish_reason
    }
    const delta = choice.delta
    if (delta === undefined || delta === null) continue
    if (typeof delta.content === "string") acc.text += delta.content
    if (typeof delta.reasoning_content === "string") acc.reasoning = (acc.reasoning ?? "") + delta.reasoning_content
    acc.received += (delta.content?.length ?? 0) + (delta.reasoning_content?.length ?? 0)
    for (const part of delta.tool_calls ?? []) {
      const id = typeof part.id === "string" && part.id !== "" ? part.id : undefined
      const call = callFor(acc, part.index, id)
      if (id !== undefined && call.id !== id) {
        call.id = id
        // A call takes an id once; of two calls holding one, a delta goes to the last opened.
        const holder = acc.byId.get(id)
        if (holder === undefined || (acc.opened.get(holder) ?? 0) < (acc.opened.get(call) ?? 0)) acc.byId.set(id, call)
      }
      // A name equal to the whole so far is a piece (`tar` + `tar`) only alone, before arguments; else a resend.
      const { name, arguments: args } = part.function ?? {}
      const resent = name === call.name && (id !== undefined || call.arguments !== "" || (args ?? "") !== "")
      if (typeof name === "string" && !resent) call.name += name
      if (typeof args === "string") call.arguments += args
      acc.received += (typeof name === "string" ? name.length : 0) + (typeof args === "string" ? args.length : 0)
    }
  }
  // A usage covers the answer up to its chunk: what comes after it is not in it.
  if (chunk.usage !== undefined && chunk.usage !== null) acc.usageCovers = acc.received
}

/**
 * The call a tool-call delta belongs to (see {@link accumulate}), made when it is new; in
 * constant time, since a stream may bring a delta for each of thousands of calls.
 */
const callFor = (acc: Accumulator, index: number | null | undefined, id: string | undefined): PartialCall => {
  const withId = id === undefined ? undefined : acc.byId.get(id)
  if (typeof index === "number") {
    const held = acc.latest.get(index)
    // The call its index last named, unless that one has another id (an index reused under a new id).
    if (held !== undefined && (id === undefined || held.id === undefined || held.id === id)) return held
    const call =
      held !== undefined && withId !== undefined ? withId : open(acc, acc.calls.has(index) ? acc.next : index)
    acc.latest.set(index, call)
    return call
  }
  // No index: the call of its id, or, without an id, the last call.
  const found = id === undefined ? acc.calls.get(acc.next - 1) : withId
  return found ?? open(acc, acc.next)
}

/** A new call at `at`. */
const open = (acc: Accumulator, at: number): PartialCall => {
  const call: PartialCall = { id: undefined, name: "", arguments: "" }
  acc.calls.set(at, call)
  acc.opened.set(call, acc.opened.size)
  if (Number.isFinite(at)) acc.next = Math.max(acc.next, at + 1)
  return call
}

/** The parts the deltas add up to, with `calls` in their order. */
const partsOf = (acc: Accumulator, calls: ReadonlyArray<PartialCall>): WireResponse.Parts => ({
  text: acc.text,
  reasoning: acc.reasoning,
  calls,
  finishReason: acc.finishReason,
  usage: acc.usage,
  charsAfterUsage: acc.received - acc.usageCovers
})

/**
 * What a streamed answer that never reached `[DONE]` had cost so far (R2.1): the usage the
 * server reported, priced, or an estimate from what came of it; `undefined` when nothing did.
 *
 * @category decoding
 * @since 0.3.0
 */
export const partialUsage = (acc: Accumulator, decoding: WireResponse.Decoding): Model.Usage | undefined =>
  WireResponse.partialUsage(partsOf(acc, [...acc.calls.values()]), decoding)

/**
 * The response the deltas add up to, or why they do not make one (a tool call
 * without a name).
 *
 * @category decoding
 * @since 0.1.0
 */
export const fromAccumulator = (
  acc: Accumulator,
  decoding: WireResponse.Decoding
): Result.Result<Model.Response, WireResponse.Problem> => {
  const calls: Array<PartialCall> = []
  for (const [index, call] of [...acc.calls.entries()].sort(([a], [b]) => a - b)) {
    if (call.name === "") return corrupt(`the streamed tool call at index ${index} has no function name`)
    calls.push(call)
  }
  // What came after the stream's last usage report is counted on top of it (review 165).
  return WireResponse.make(partsOf(acc, calls), decoding)
}
