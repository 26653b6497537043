/**
 * The model the loop talks to, as a service.
 *
 * The loop calls {@link Model} once per iteration with the conversation so far and the
 * tool definitions, and gets back text and/or tool calls with token usage. Failures
 * must already be in the failure algebra ({@link Failure.Failure}): a provider adapter
 * converts its raw errors at its own edge, so the loop never inspects HTTP codes or
 * exceptions. The OpenAI-compatible client and the adapter for effect's
 * `ai/LanguageModel` implement this same service; tests use `ScriptedModel` from
 * `effect-agent-runtime/testing`.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema, type Scope } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as Blank from "./internal/Blank.ts"

/**
 * What a provider attaches to a part of its answer, by provider (effect/ai's
 * `ProviderMetadata`: an Anthropic thinking block's signature, OpenAI's encrypted reasoning,
 * Gemini's thought signature): kept in the log and sent back with the part, as the provider
 * needs it on the next turn (review 183).
 *
 * @category models
 * @since 0.3.0
 */
export const ProviderMetadata = Schema.Record(Schema.String, Schema.NullOr(Schema.Json))

/**
 * A tool call as the model proposed it. `arguments` is the raw JSON text the model
 * produced (or an already-parsed value from providers that parse it): the tool
 * pipeline parses and validates it, so a malformed argument is a correctable tool
 * result, not a crash.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown,
  /** What the provider attached to the call (Gemini's thought signature): sent back with it. */
  metadata: Schema.optional(ProviderMetadata)
})

/**
 * @category models
 * @since 0.1.0
 */
export type ToolCall = typeof ToolCall.Type

/**
 * The tokens a response used and what they cost. `inputTokens` counts every prompt
 * token, the cached ones too (`cachedInputTokens`, read from the provider's prompt
 * cache, usually at a lower price); `outputTokens` counts every generated token, the
 * reasoning ones too (`reasoningTokens`, the model's hidden or `reasoning_content`
 * thinking). A part larger than its whole can only have been reported beside it: the run
 * counts it so (10 input tokens with 40 cached count 50). `estimated: true` marks counts the provider did not report: estimated from
 * the text sent and received ({@link estimatedUsage}), so that a token or cost budget still
 * trips against a server that leaves its usage out (`false` is the same as none). A
 * failure of an answer the provider stopped unfinished carries its usage too
 * (`Failure`'s `usage`): it counts toward the run's budgets as a response's does.
 *
 * @category models
 * @since 0.1.0
 */
export const Usage = Failure.Usage

/**
 * @category models
 * @since 0.1.0
 */
export type Usage = typeof Usage.Type

/**
 * @category constructors
 * @since 0.1.0
 */
export const noUsage: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0 })

/**
 * The usage of a call whose provider reported none, estimated from the text of the
 * request (messages and tool definitions) and of the response at about four characters
 * a token, and marked `estimated: true` (R2.1). The built-in providers use it when a
 * server sends no usage; a `Model` of your own can too. No cost: a provider that knows
 * its prices adds `costUsd`.
 *
 * @category constructors
 * @since 0.3.0
 */
export const estimatedUsage = (
  request: Pick<Request, "messages" | "tools">,
  response: {
    readonly text: string
    readonly reasoning?: string | undefined
    readonly toolCalls: ReadonlyArray<ToolCall>
  }
): Usage => {
  const sent =
    request.messages.reduce((sum, message) => sum + messageChars(message), 0) +
    request.tools.reduce(
      (sum, tool) => sum + tool.name.length + tool.description.length + jsonChars(tool.parameters),
      0
    )
  const reasoning = response.reasoning?.length ?? 0
  const received = response.text.length + reasoning + callsChars(response.toolCalls)
  return {
    inputTokens: tokensOf(sent),
    outputTokens: tokensOf(received),
    ...(reasoning === 0 ? {} : { reasoningTokens: tokensOf(reasoning) }),
    estimated: true
  }
}

/** Characters per token: OpenAI's rule of thumb for English text and JSON. */
const tokensOf = (chars: number): number => Math.ceil(chars / 4)

const jsonChars = (value: unknown): number => {
  if (typeof value === "string") return value.length
  try {
    return JSON.stringify(value)?.length ?? 0
  } catch {
    // What JSON cannot write (a cycle, a bigint) was never sent as text: it counts nothing.
    return 0
  }
}

const callsChars = (calls: ReadonlyArray<ToolCall>): number =>
  calls.reduce((sum, call) => sum + call.id.length + call.name.length + jsonChars(call.arguments), 0)

const messageChars = (message: Message): number => {
  switch (message._tag) {
    case "system":
    case "user":
      return message.content.length
    case "assistant":
      return message.content.length + (message.reasoning?.length ?? 0) + callsChars(message.toolCalls)
    case "tool":
      return message.toolCallId.length + message.name.length + message.content.length
  }
}

/**
 * One part of the model's reasoning as its provider gave it, with what it attached.
 *
 * @category models
 * @since 0.3.0
 */
export const ReasoningPart = Schema.Struct({ text: Schema.String, metadata: Schema.optional(ProviderMetadata) })

/**
 * The reasoning's parts, kept when the provider attached something to one of them: a turn
 * is sent back with them as they came (an encrypted part may have no text at all).
 */
const reasoningParts = Schema.optional(Schema.Array(ReasoningPart))

/**
 * One message of the conversation, in the shape chat-completion APIs share.
 *
 * @category models
 * @since 0.1.0
 */
export const Message = Schema.Union([
  Schema.TaggedStruct("system", { content: Schema.String }),
  Schema.TaggedStruct("user", { content: Schema.String }),
  Schema.TaggedStruct("assistant", {
    content: Schema.String,
    toolCalls: Schema.Array(ToolCall),
    /**
     * The model's reasoning for this turn (DeepSeek's `reasoning_content`), kept so a
     * provider that needs it back (DeepSeek's thinking mode with tools) can send it.
     */
    reasoning: Schema.optional(Schema.String),
    reasoningParts
  }),
  Schema.TaggedStruct("tool", {
    toolCallId: Schema.String,
    name: Schema.String,
    content: Schema.String,
    /** The call failed or was refused: `content` says why (a provider that marks failed results, such as Anthropic's `is_error`, is told). */
    failed: Schema.optional(Schema.Boolean)
  })
])

/**
 * @category models
 * @since 0.1.0
 */
export type Message = typeof Message.Type

/**
 * A tool's input in the strict form of OpenAI's structured outputs (`strict: true`):
 * every object closed (`additionalProperties: false`) with every property required, an
 * optional one as nullable; what strict mode cannot express (records, tuples) encoded in
 * a shape it can. The model's arguments then come in that shape, and `restore` turns
 * them back into the shape `ToolDefinition.parameters` describes, which the tool
 * pipeline checks.
 *
 * @category models
 * @since 0.1.0
 */
export interface StrictForm {
  readonly parameters: unknown
  /**
   * The arguments a model sent against the strict `parameters` (raw JSON text or a
   * parsed value) in the tool's own shape, as JSON text (`null` for an optional field
   * becomes no field). Arguments that do not fit are returned as they are, for the tool
   * pipeline to refuse with its own, correctable, error.
   */
  readonly restore: (args: unknown) => unknown
}

/**
 * What the model is told about a tool: its name, description and the JSON Schema of
 * its input, generated from the tool's effect `Schema`, and its strict form when the
 * input has one.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: unknown
  readonly strict?: StrictForm | undefined
}

/**
 * @category models
 * @since 0.1.0
 */
export interface Request {
  readonly runId: string
  readonly iteration: number
  /**
   * The conversation so far. It is the run's own log, passed without copying so a
   * step costs the same at step 200 as at step 2: read it during the call, copy it if
   * you keep it.
   */
  readonly messages: ReadonlyArray<Message>
  readonly tools: ReadonlyArray<ToolDefinition>
  /**
   * When this call must have answered, in milliseconds since the epoch by the run's
   * `Clock`: the tightest of the run, step and attempt deadlines. A provider derives its
   * request timeouts from it (R4.2, R11); the runtime also enforces it from outside.
   */
  readonly deadlineAt: number
  /**
   * Which time layer `deadlineAt` is (R4.3): `run`, `step` or `attempt`, so that a
   * provider whose own timer fires at the deadline reports the right layer. Default
   * `attempt`.
   */
  readonly deadlineLayer?: Failure.TimeoutLayer | undefined
}

/**
 * Why the model stopped generating: `stop` (it finished), `tool_calls` (it asks for
 * tools), `length` (the output token limit cut it off), `content_filter` (the
 * provider's filter withheld it). A response without one finished normally.
 *
 * A truncated (`length`) answer is never a final answer: the run asks the model to
 * finish it, shorter, within the correction budget, then stops `output_truncated`. A
 * filtered one is a permanent failure (`content_filtered`), never an answer (R11).
 *
 * @category models
 * @since 0.1.0
 */
export const FinishReason = Schema.Literals(["stop", "tool_calls", "length", "content_filter"])

/**
 * @category models
 * @since 0.1.0
 */
export type FinishReason = typeof FinishReason.Type

/**
 * @category models
 * @since 0.1.0
 */
export const Response = Schema.Struct({
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  usage: Usage,
  finishReason: Schema.optional(FinishReason),
  /** The model's reasoning, when the provider returns it (DeepSeek's `reasoning_content`). */
  reasoning: Schema.optional(Schema.String),
  reasoningParts
})

/**
 * @category models
 * @since 0.1.0
 */
export type Response = typeof Response.Type

/**
 * @category services
 * @since 0.1.0
 */
export class Model extends Context.Service<
  Model,
  {
    readonly generate: (request: Request) => Effect.Effect<Response, Failure.Failure>
  }
>()("effect-agent-runtime/Model") {}

/**
 * Where a model tells the run what an answer it is cut off from cost so far (R2.1): the
 * run's own timers (the attempt's and the step's timeouts, the run deadline) and its cancel
 * interrupt a call whose answer was coming, and paid for. A provider that knows what it has
 * received reports that usage here as it is interrupted, and the run counts it with the
 * timeout (or the cancel), toward its budgets. The run provides it to each attempt; by
 * default a report goes nowhere.
 *
 * @category services
 * @since 0.3.0
 */
export const CutOffUsage = Context.Reference<(usage: Usage) => void>("effect-agent-runtime/Model/CutOffUsage", {
  defaultValue: () => () => {}
})

/**
 * Reports `usage` (when there is one) to the run's {@link CutOffUsage}: for a provider's
 * `Effect.onInterrupt`.
 *
 * @category combinators
 * @since 0.3.0
 */
export const reportCutOff = (usage: Usage | undefined): Effect.Effect<void> =>
  usage === undefined
    ? Effect.void
    : Effect.withFiber((fiber) => {
        fiber.getRef(CutOffUsage)(usage)
        return Effect.void
      })

/**
 * A named model, for the run's fallback chain (R3.9) and its circuit breaker: when the
 * model in use fails for good (recovery gave up, or its circuit is open), the run
 * switches to the next one for the rest of the run, and the result says so.
 *
 * @category models
 * @since 0.1.0
 */
export interface Fallback {
  readonly name: string
  readonly model: Model["Service"]
}

/**
 * Builds a fallback from a layer that provides a `Model` (a provider's `layer`), in the
 * current scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fallback = <E, R>(
  name: string,
  layer: Layer.Layer<Model, E, R>
): Effect.Effect<Fallback, E, R | Scope.Scope> =>
  Effect.map(Layer.build(layer), (context) => ({ name, model: Context.get(context, Model) }))

/**
 * @category constructors
 * @since 0.1.0
 */
export const response = (options: {
  readonly text?: string | undefined
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  readonly usage?: Usage | undefined
  readonly finishReason?: FinishReason | undefined
  readonly reasoning?: string | undefined
  readonly reasoningParts?: ReadonlyArray<typeof ReasoningPart.Type> | undefined
}): Response => ({
  text: options.text ?? "",
  toolCalls: options.toolCalls ?? [],
  usage: options.usage ?? noUsage,
  ...(options.finishReason === undefined ? {} : { finishReason: options.finishReason }),
  ...(options.reasoning === undefined ? {} : { reasoning: options.reasoning }),
  ...(options.reasoningParts === undefined ? {} : { reasoningParts: options.reasoningParts })
})

/**
 * Whether a text shows nothing: no character but whitespace and separators, control and
 * format characters (zero-width spaces and joiners, byte order marks, soft hyphens),
 * combining marks with nothing to mark, the letters drawn blank (the Hangul fillers, the
 * blank Braille pattern), lone surrogate halves and Unicode's noncharacters. A response whose
 * text is blank says nothing, so it is an empty output, never a final answer (R2.1, R2.3); a
 * blank file is empty to an artifact check (R6).
 *
 * @category predicates
 * @since 0.3.0
 */
export const isBlank: (text: string) => boolean = Blank.isBlank
