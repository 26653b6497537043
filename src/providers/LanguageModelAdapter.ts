/**
 * Any effect `ai/LanguageModel` as the run's {@link Model.Model} (R11): one you write
 * with `LanguageModel.make`, or one of the Effect AI provider packages once they load
 * next to effect 4.1 (as published, the `@effect/ai-openai` and
 * `@effect/ai-openai-compat` 4.0 betas import `effect/unstable/*` paths that effect 4.1
 * no longer has, and fail to load with `ERR_MODULE_NOT_FOUND`).
 *
 * The adapter asks for one response and hands back the tool calls the model proposed:
 * it never lets effect/ai run a tool. The tools are passed as dynamic tools (their
 * JSON Schema as is) with tool-call resolution disabled and validation deferred, so
 * effect/ai neither invokes a handler nor rejects a call with invalid parameters: the
 * runtime's tool pipeline validates them and gives the model a correctable result.
 *
 * `AiError` is mapped onto the failure algebra by its reason, not by its own
 * `isRetryable` (which marks "send the request again" and "ask the model again" alike,
 * and has no unknown-outcome class): an HTTP status goes through `FailureBoundary.http`
 * (R3.2); a transport error is a connection error, or a timeout when its cause is one;
 * a response or output that does not decode is `corrupt_response`; an exhausted quota
 * is permanent even when its status was 429; anything else is a permanent request
 * failure. The diagnostic keeps the error's message with credentials scrubbed
 * (`Bearer` values, `sk-…` keys) and cut to 500 characters (R3.1).
 *
 * Tools are handed over in their strict form (every object closed, every property
 * required, optionals nullable: what OpenAI's `strict` mode needs) when they have one,
 * and the arguments a model sends against it come back in the tool's own shape; `strict:
 * false` hands over the plain schemas.
 *
 * The finish reason (a cut-off answer is never final, a filtered one fails
 * `content_filtered`, one ended by an error or paused part way is asked again as a
 * retryable `answer_unfinished`, as is one that ends `other`), the reasoning text, and cached and reasoning tokens are carried
 * over. Token usage feeds the run's counters and budgets: effect/ai decodes its counts as
 * integers, and a negative one is refused here as a `corrupt_response` too (R2.1). A
 * side with no total counts the parts it reports (`uncached` + `cacheRead` + `cacheWrite`;
 * `text` + `reasoning`); a side with none is estimated by `Model.estimatedUsage` (the usage
 * marked `estimated`), so that a token or cost budget still trips.
 *
 * A tool call the provider ran itself (`providerExecuted`: its web search, say) is not
 * handed back: the run neither runs it again nor takes it for a call of an unknown tool.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Duration, Effect, Layer, Predicate, Result, Schema } from "effect"
import type * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as Tool from "effect/ai/Tool"
import * as Toolkit from "effect/ai/Toolkit"
import * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Model from "../model/Model.ts"
import * as AiUsage from "./internal/AiUsage.ts"
import * as Cost from "./internal/Cost.ts"
import * as ProviderFailure from "./internal/ProviderFailure.ts"
import * as Redact from "./internal/Redact.ts"
import type * as OpenAiOptions from "./OpenAiOptions.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /**
   * Prices in USD per million tokens (`cachedInput`: of an input token read from a prompt
   * cache), to fill `usage.costUsd`; each from 0 to `OpenAiCompatible.maxPricePerMillionTokens`.
   */
  readonly costPerMillionTokens?: OpenAiOptions.Prices | undefined
  /** Hand tools over in their strict form when they have one (see the module doc). Default `true`. */
  readonly strict?: boolean | undefined
}

/**
 * Options that cannot work (a price that is negative, NaN or past a million USD per million
 * tokens, a `strict` that is no boolean), refused when the model is made, naming the field.
 *
 * @category errors
 * @since 0.3.0
 */
export class InvalidAdapterOptions extends Schema.TaggedError<InvalidAdapterOptions>()("InvalidAdapterOptions", {
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid LanguageModelAdapter options: ${this.reason}`
  }
}

const checkOptions = UserCode.check(
  Schema.Struct({ costPerMillionTokens: Schema.optional(Cost.PricesSchema), strict: Schema.optional(Schema.Boolean) }),
  "the options",
  { exact: true }
)

const source = "provider" as const

// effect/ai's provider holds the key, so only key-shaped text can be recognised here.
const scrub = Redact.redactor(undefined)

const decodeJson = Schema.decodeUnknownResult(Schema.fromJsonString(Schema.Unknown))
const decodeObject = Schema.decodeUnknownResult(Schema.Record(Schema.String, Schema.Unknown))

/** Raw argument text becomes the parameters effect/ai encodes; text that is not JSON stays text. */
const params = (args: unknown): unknown => {
  if (!Predicate.isString(args)) return args
  const parsed = decodeJson(args)
  return Result.isSuccess(parsed) ? parsed.success : args
}

/** What a provider attached to a part, when it attached anything. */
const attached = (metadata: Response.ProviderMetadata | undefined): Response.ProviderMetadata | undefined =>
  metadata === undefined || Object.keys(metadata).length === 0 ? undefined : metadata

/** The part's `metadata` field, when its provider attached anything. */
const withMetadata = (metadata: Response.ProviderMetadata | undefined) => {
  const kept = attached(metadata)
  return kept === undefined ? {} : { metadata: kept }
}

/** The model's reasoning for its turn: as its parts came, with what their provider attached, or its text. */
const reasoningOf = (message: Extract<Model.Message, { readonly _tag: "assistant" }>) =>
  message.reasoningParts !== undefined
    ? message.reasoningParts.map((part) => Prompt.reasoningPart({ text: part.text, options: part.metadata ?? {} }))
    : message.reasoning === undefined
      ? []
      : [Prompt.reasoningPart({ text: message.reasoning })]

const toMessage = (message: Model.Message): Prompt.Message => {
  switch (message._tag) {
    case "system":
      return Prompt.systemMessage({ content: message.content })
    case "user":
      return Prompt.userMessage({ content: [Prompt.textPart({ text: message.content })] })
    case "assistant":
      return Prompt.assistantMessage({
        content: [
          // The model's own reasoning goes back to its provider (DeepSeek's thinking mode needs it).
          ...reasoningOf(message),
          ...(message.content === "" ? [] : [Prompt.textPart({ text: message.content })]),
          ...message.toolCalls.map((call) =>
            Prompt.toolCallPart({
              id: call.id,
              name: call.name,
              params: params(call.arguments),
              providerExecuted: false,
              options: call.metadata ?? {}
            })
          )
        ]
      })
    case "tool":
      return Prompt.toolMessage({
        content: [
          Prompt.toolResultPart({
            id: message.toolCallId,
            name: message.name,
            isFailure: message.failed === true,
            result: message.content,
            // The text itself, not its JSON encoding as a string.
            modelOutput: [Prompt.textPart({ text: message.content })],
            providerExecuted: false
          })
        ]
      })
  }
}

/**
 * The conversation as an effect/ai `Prompt`.
 *
 * @category converting
 * @since 0.1.0
 */
export const toPrompt = (messages: ReadonlyArray<Model.Message>): Prompt.Prompt =>
  Prompt.fromMessages(messages.map(toMessage))

/**
 * The tool definitions as an effect/ai toolkit of dynamic tools, in their strict form
 * when asked and they have one. Their handlers are never called (resolution is
 * disabled); `failureMode: "return"` is a second guard.
 *
 * @category converting
 * @since 0.1.0
 */
export const toToolkit = (tools: ReadonlyArray<Model.ToolDefinition>, strict = true) =>
  Toolkit.make(
    ...tools.map((tool) => {
      const schema = decodeObject(strict && tool.strict !== undefined ? tool.strict.parameters : tool.parameters)
      return Tool.dynamic(tool.name, {
        description: tool.description,
        parameters: Result.isSuccess(schema) ? schema.success : { type: "object" },
        failureMode: "return"
      })
    })
  )

const retryAfterOf = (reason: AiError.AiErrorReason): string | undefined => {
  if (reason._tag === "RateLimitError" && reason.retryAfter !== undefined) {
    return FailureBoundary.retryAfterSeconds(Duration.toMillis(reason.retryAfter))
  }
  const header = "http" in reason ? reason.http?.response?.headers["retry-after"] : undefined
  return Predicate.isString(header) ? header : undefined
}

/**
 * Classifies an `AiError` by its reason (see the module doc).
 *
 * @category converting
 * @since 0.1.0
 */
export const fromAiError = (error: AiError.AiError, now: number, elapsedMillis: number): Failure.Failure => {
  const reason = error.reason
  const diagnostic = Redact.clip(scrub(`${error.module}.${error.method}: ${reason._tag}: ${reason.message}`))
  const status = "http" in reason ? reason.http?.response?.status : undefined
  // An error the body reported after a successful status (a stream's `error` event after a
  // 200) is what its reason says: the status says only that the answer had begun (review 183).
  const errorStatus = status !== undefined && status >= 400 ? status : undefined
  const http = (fallback: number) =>
    FailureBoundary.http({ status: errorStatus ?? fallback, retryAfter: retryAfterOf(reason), now, diagnostic })
  const other = () => {
    const named = new Error(diagnostic)
    named.name = reason._tag
    return FailureBoundary.unknown(source, named)
  }
  switch (reason._tag) {
    case "NetworkError":
      if (reason.reason !== "TransportError") return other()
      return Cause.isTimeoutError(reason.cause)
        ? FailureBoundary.timeout({ source, layer: "attempt", afterMillis: elapsedMillis })
        : FailureBoundary.connection({ source, detail: diagnostic })
    case "InvalidOutputError":
    case "InvalidResponseError":
    case "StructuredOutputError":
      return errorStatus !== undefined
        ? http(errorStatus)
        : FailureBoundary.corruptResponse({ source, detail: diagnostic })
    case "QuotaExhaustedError":
      return other()
    case "RateLimitError":
      return http(429)
    case "InternalProviderError":
      return http(500)
    case "AuthenticationError":
      return http(401)
    case "InvalidRequestError":
      return http(400)
    case "ContentPolicyError":
      // The content filter refused: the run stops `content_filtered`, as for a filtered answer (R11).
      return ProviderFailure.filteredRequest(errorStatus ?? 400, undefined, diagnostic)
    default:
      return errorStatus !== undefined ? http(errorStatus) : other()
  }
}

/** The finish reasons of an answer the provider stopped before its end. */
const unfinished: ReadonlySet<Response.FinishReason> = new Set(["error", "other", "pause"])

const FinishReasons: Readonly<Record<string, Model.FinishReason>> = {
  stop: "stop",
  length: "length",
  "content-filter": "content_filter",
  "tool-calls": "tool_calls"
}

/**
 * The model service over the `LanguageModel` in context. Options that cannot work fail with
 * {@link InvalidAdapterOptions}, naming the field.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (options: Options = {}) {
  const checked = checkOptions(options)
  if (Result.isFailure(checked)) {
    return yield* new InvalidAdapterOptions({ reason: checked.failure.replace(/^the options is invalid: /, "") })
  }
  const model = yield* LanguageModel.LanguageModel
  const prices = options.costPerMillionTokens
  const strict = options.strict ?? true
  // Made per request from the request's tools: a few objects, next to a call that waits seconds.
  const toolkitFor = (tools: ReadonlyArray<Model.ToolDefinition>) => toToolkit(tools, strict)

  const priced = (usage: Model.Usage): Model.Usage =>
    prices === undefined ? usage : { ...usage, costUsd: Cost.costUsd(prices, usage) }

  const toResponse = (
    response: {
      readonly text: string
      readonly toolCalls: ReadonlyArray<{
        readonly id: string
        readonly name: string
        readonly params: unknown
        readonly providerExecuted?: boolean
        readonly metadata?: Response.ProviderMetadata
      }>
      readonly usage: Response.Usage
      readonly finishReason: Response.FinishReason
      readonly reasoningText: string | undefined
      readonly reasoning: ReadonlyArray<{ readonly text: string; readonly metadata?: Response.ProviderMetadata }>
    },
    request: Model.Request
  ): Effect.Effect<Model.Response, Failure.Failure> => {
    const tools = request.tools
    const restore = (name: string, params: unknown) => {
      const form = strict ? tools.find((tool) => tool.name === name)?.strict : undefined
      return form === undefined ? params : form.restore(params)
    }
    // A call the provider ran itself (its web search, say) is done: the run neither runs it again nor corrects it.
    const toolCalls = response.toolCalls
      .filter((call) => call.providerExecuted !== true)
      .map((call) => ({
        id: call.id,
        name: call.name,
        arguments: restore(call.name, call.params),
        ...withMetadata(call.metadata)
      }))
    // What the provider attached to its reasoning goes back with it, as its parts came (review 183).
    const reasoningParts = response.reasoning.some((part) => attached(part.metadata) !== undefined)
      ? response.reasoning.map((part) => ({ text: part.text, ...withMetadata(part.metadata) }))
      : undefined
    // What the provider did not report is estimated from the text, so budgets still trip.
    const usage = AiUsage.usageOf(response.usage, priced, () =>
      Model.estimatedUsage(request, { text: response.text, reasoning: response.reasoningText, toolCalls })
    )
    // A usage that is no count (negative, past the safe integers) is a corrupt answer, whatever else it says.
    if (typeof usage === "string") return Effect.fail(FailureBoundary.corruptResponse({ source, detail: usage }))
    // An answer the provider says ended in an error, in a way effect/ai has no name for
    // (`other`, as the OpenAI wire reads it: review 183), or paused (a long turn it stopped part
    // way, as Anthropic's `pause_turn`), is unfinished: never a final answer, worth asking again
    // (R11). So is one that says it calls tools and carries none for the run (review 128; review
    // 183: only calls the provider ran itself). What it cost counts toward the run's budgets (R2.1).
    const noCall = response.finishReason === "tool-calls" && toolCalls.length === 0
    if (unfinished.has(response.finishReason) || noCall) {
      return Effect.fail(
        new Failure.Retryable({
          source,
          category: "provider_interrupted",
          code: "answer_unfinished",
          attempts: 1,
          hint: noCall
            ? "the answer says it calls tools (finish reason: tool-calls) and carries no tool call"
            : `the provider stopped the answer unfinished (finish reason: ${response.finishReason})`,
          usage
        })
      )
    }
    return Effect.succeed(
      Model.response({
        text: response.text,
        toolCalls,
        usage,
        finishReason: FinishReasons[response.finishReason],
        reasoning: response.reasoningText,
        reasoningParts
      })
    )
  }

  const generate = Effect.fnUntraced(function* (request: Model.Request) {
    const start = yield* Clock.currentTimeMillis
    const left = request.deadlineAt - start
    const layer = request.deadlineLayer ?? "attempt"
    if (left <= 0) return yield* FailureBoundary.timeout({ source, layer, limitMillis: 0, afterMillis: 0 })
    const prompt = toPrompt(request.messages)
    const call: Effect.Effect<Model.Response, AiError.AiError | Failure.Failure> =
      request.tools.length === 0
        ? Effect.flatMap(model.generateText({ prompt }), (response) => toResponse(response, request))
        : Effect.flatMap(
            model.generateText({
              prompt,
              toolkit: toolkitFor(request.tools),
              disableToolCallResolution: true,
              toolCallValidation: "deferred"
            }),
            (response) => toResponse(response, request)
          )
    return yield* call.pipe(
      Effect.catchTag("AiError", (error) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fail(fromAiError(error, now, now - start)))
      ),
      Effect.timeoutOrElse({
        duration: left,
        orElse: () => Effect.fail(FailureBoundary.timeout({ source, layer, limitMillis: left, afterMillis: left }))
      })
    )
  })

  return Model.Model.of({ generate })
})

/**
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Model.Model, InvalidAdapterOptions, LanguageModel.LanguageModel> =>
  Layer.effect(Model.Model, make(options))
