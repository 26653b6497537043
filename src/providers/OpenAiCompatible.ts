/**
 * A chat-completions client for OpenAI, DeepSeek and any compatible endpoint, serving
 * as the run's {@link Model.Model} (R11).
 *
 * Each `generate` is exactly one HTTP request: the client never retries, because the
 * loop owns retries (R3.4). Its raw failures are classified here, once, as R3.2 says
 * (see `FailureBoundary`). Time is bounded in three phases, each capped by what is left
 * before the request's `deadlineAt` (R4.1, R4.2): connect, first byte (until the
 * response headers), and idle read (the longest gap between body bytes). When the cap
 * is what binds, the timeout reports the `attempt` layer. Interrupting the fiber aborts
 * the HTTP request.
 *
 * Memory is bounded by `maxResponseBytes`, not by what the server sends (R12): a plain
 * body, a streamed one (each event and the whole stream, so the text and tool-call
 * arguments folded from its deltas too) and an error body (64 KiB, read for the
 * diagnostic only) are read up to their limit, and a response that goes past it is
 * aborted there and fails `response_too_large` (retryable). Headers are bounded by the
 * HTTP client (16 KiB by default in node:http and undici) and fail the same way.
 *
 * The API key is `Redacted`, sent only in the `Authorization` header, and scrubbed from
 * every failure: server text is scrubbed before it is cut, so no piece of the key
 * survives a cut (R3.1).
 *
 * Per-model options (an output cap, the tool choice, parallel tool calls, strict tool
 * schemas, temperature, reasoning) are checked when the client is made, and sent under
 * the names the endpoint's dialect gives them (see `OpenAiOptions` and the README's
 * table). A bad value fails with a typed `InvalidOptions`.
 *
 * The client runs over any `HttpClient` in context. `NodeTransport.layer()` (from
 * `effect-agent-runtime/providers/node`: `@effect/platform-node`'s undici client) reports
 * each request's connection (`ConnectionProgress`), so the connect phase is told apart;
 * over a client that does not report (effect's `FetchHttpClient.layer`, which needs no
 * other package, or your own), connect and first byte are one wait, reported as
 * `first_byte`. The HTTP client's own timeouts (fetch's undici dispatcher: 10 s to connect,
 * 300 s for the headers and between body reads) can fire first: each is reported as the
 * phase it cut, never as a connection error.
 *
 * @since 0.1.0
 */
import { Config, ConfigProvider, Context, Effect, Layer, Redacted, Result } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as Headers from "effect/http/Headers"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import type * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
import * as Model from "../model/Model.ts"
import * as ConnectionProgress from "./ConnectionProgress.ts"
import * as Body from "./internal/Body.ts"
import * as EventStream from "./internal/EventStream.ts"
import * as PaidUsage from "./internal/PaidUsage.ts"
import * as Phases from "./internal/Phases.ts"
import * as ProviderFailure from "./internal/ProviderFailure.ts"
import * as Redact from "./internal/Redact.ts"
import { resolve } from "./internal/Resolve.ts"
import type { InvalidOptions, Options } from "./OpenAiOptions.ts"
import { DeepSeek, OpenAi, type Preset, type PresetOptions } from "./OpenAiPresets.ts"
import * as OpenAiWire from "./OpenAiWire.ts"

/**
 * The options live in `OpenAiOptions`; they are re-exported here.
 *
 * @since 0.1.0
 */
export {
  Dialect,
  defaultMaxResponseBytes,
  InvalidOptions,
  maxPricePerMillionTokens,
  type Options,
  type Prices,
  Reasoning,
  type Timeouts,
  ToolChoice
} from "./OpenAiOptions.ts"

/** An error body is read for its diagnostic only. */
const maxErrorBodyBytes = 64 * 1024

/** How long an error response's body is read for its words. */
const errorBodyMillis = 2_000

const source = "provider" as const

const now = Effect.clockWith((clock) => clock.currentTimeMillis)

/**
 * The request is sent where `baseUrl` says, never elsewhere: `fetch` follows redirects
 * itself (turning the POST into a bodiless GET, to another origin as well), so over
 * `FetchHttpClient` a redirect is handed back as the answer (a permanent failure), as
 * `NodeTransport` does. The caller's other `RequestInit` fields are kept.
 */
const noRedirects = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) =>
    Effect.provideService(self, FetchHttpClient.RequestInit, {
      ...Context.getOrUndefined(fiber.context, FetchHttpClient.RequestInit),
      redirect: "manual"
    })
  )

/**
 * The request's span, when the app traces headers (`HttpClient.TracerHeaderFilter`), records
 * none of the response's: a server may echo the key in one (`x-debug-auth`), and the names
 * the app redacts cannot know it. The request's headers are recorded as the app says, with
 * `authorization` always redacted, whatever names the app redacts (R12).
 */
const untracedSecrets = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  self.pipe(
    Effect.updateService(
      HttpClient.TracerHeaderFilter,
      (filter) => (name: string, phase: "request" | "response") => phase === "request" && filter(name, phase)
    ),
    Effect.updateService(Headers.CurrentRedactedNames, (names) => [...names, "authorization"])
  )

/**
 * The model service over the `HttpClient` in context. Options that cannot work fail with
 * `InvalidOptions`, naming the field.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (options: Options) {
  const client = yield* HttpClient.HttpClient
  const resolved = yield* resolve(options)
  const { url, maxBytes, prices } = resolved
  const scrub = Redact.redactor(Redacted.value(resolved.apiKey))
  /** Server text for a diagnostic: scrubbed first, then cut, so no cut leaves a piece of the key. */
  const said = (text: string, max?: number) => Redact.clip(scrub(text), max)
  const tooLarge = (what: string) => ProviderFailure.responseTooLarge(what, `maxResponseBytes (${maxBytes} bytes)`)
  const problem = (problem: OpenAiWire.Problem) =>
    problem.kind === "interrupted"
      ? ProviderFailure.interrupted(problem.detail, problem.finishReason, problem.usage)
      : FailureBoundary.corruptResponse({ source, detail: said(problem.detail) })
  const reader: EventStream.Reader = { idleMillis: resolved.idleMillis, maxBytes, said, tooLarge, problem }
  const wire: OpenAiWire.RequestOptions = {
    model: resolved.model,
    stream: resolved.stream,
    dialect: resolved.dialect,
    temperature: resolved.temperature,
    maxOutputTokens: resolved.maxOutputTokens,
    toolChoice: resolved.toolChoice,
    parallelToolCalls: resolved.parallelToolCalls,
    strict: resolved.strict,
    reasoning: resolved.reasoning
  }
  const encoder = new TextEncoder()
  const base = HttpClientRequest.post(url).pipe(
    HttpClientRequest.bearerToken(resolved.apiKey),
    HttpClientRequest.setHeader("accept", resolved.stream ? "text/event-stream" : "application/json")
  )

  /**
   * A whole-body read: no idle-read period may pass without a byte, and the whole of it is
   * bounded by the deadline. A provider that keeps the connection alive with empty lines
   * before its answer (DeepSeek under load) is not idle (review 190: it timed out while bytes came).
   */
  const withinIdle = <A>(
    read: Effect.Effect<A, Failure.Failure>,
    reading: Phases.Reading,
    at: number,
    deadline: Phases.Deadline
  ) => Effect.raceFirst(read, Phases.idleWatch(reading, Phases.idleLimits(resolved.idleMillis, deadline, at), deadline))

  /**
   * A whole (non-streamed) body. One declared or found longer than `maxResponseBytes` is
   * not read on.
   */
  const wholeBody = Effect.fnUntraced(function* (
    response: HttpClientResponse.HttpClientResponse,
    progress: { bytes: number; lastBytesAt?: number }
  ) {
    if ((Body.declaredLength(response) ?? 0) > maxBytes) {
      yield* Body.discard(response)
      return yield* tooLarge(`the declared body length (${Body.declaredLength(response)} bytes)`)
    }
    const clock = yield* Effect.clockWith(Effect.succeed)
    const began = clock.currentTimeMillisUnsafe()
    const read = yield* Effect.mapError(Body.readUpTo(response, maxBytes, progress), (error) =>
      ProviderFailure.fromHttpError(error, clock.currentTimeMillisUnsafe() - began)
    )
    if (!read.complete) return yield* tooLarge("the response body")
    return read.text
  })

  /**
   * What the provider said in an error response, from at most 64 KiB of its body, read for
   * 2 s at most (the status classifies it; a body that stalls holds nothing up); never a
   * failure of its own: the diagnostic's text, and the message of its error envelope (for
   * the hint) when it has one.
   */
  const errorText = (response: HttpClientResponse.HttpClientResponse, at: number, deadline: Phases.Deadline) =>
    Phases.within(
      // Whatever fails here is not a failure of its own (see below): no elapsed time is told.
      Effect.mapError(Body.readUpTo(response, maxErrorBodyBytes), (error) => ProviderFailure.fromHttpError(error, 0)),
      Phases.cap("idle_read", Math.min(resolved.idleMillis, errorBodyMillis), deadline, at)
    ).pipe(
      Effect.map((read) => {
        const error = OpenAiWire.parseError(read.text)
        const message = OpenAiWire.errorMessage(read.text)
        const text = said(message ?? read.text, 300)
        return {
          diagnostic: read.complete ? text : `${text} (the body went on past 64 KiB and was not read)`,
          message: message === undefined ? undefined : said(message, 200),
          filtered: error !== undefined && ProviderFailure.isContentFilter(error),
          spent: error !== undefined && ProviderFailure.isSpentQuota(error)
        }
      }),
      Effect.orElseSucceed(() => ({
        diagnostic: "(the body could not be read)",
        message: undefined,
        filtered: false,
        spent: false
      }))
    )

  const readPlain = (text: string, decoding: OpenAiWire.Decoding): Effect.Effect<Model.Response, Failure.Failure> => {
    // A stream a proxy labelled otherwise: read as the stream it is.
    if (EventStream.isEventText(text)) return EventStream.fromText(reader, text, decoding)
    // A 200 whose body carries an error envelope: classified by what it says, as in a stream.
    const error = OpenAiWire.carriedError(text)
    if (error !== undefined) {
      const message = said(error.message ?? error.type ?? "no message", 200)
      return Effect.fail(ProviderFailure.streamError(error, message, `the body carried an error: ${said(text)}`))
    }
    return Result.match(OpenAiWire.parseCompletion(text), {
      onFailure: (detail) => Effect.fail(FailureBoundary.corruptResponse({ source, detail: said(detail) })),
      onSuccess: (completion) =>
        Result.match(OpenAiWire.fromCompletion(completion, decoding), {
          onFailure: (p) => Effect.fail(problem(p)),
          onSuccess: Effect.succeed
        })
    })
  }

  /**
   * The strict forms of the tools this request sends strict (their arguments come back in
   * the tool's shape), and the request, to estimate the usage of an answer that reports none.
   */
  const decodingOf = (request: Model.Request): OpenAiWire.Decoding => {
    if (!resolved.strict) return { iteration: request.iteration, prices, request }
    const strict = new Map<string, Model.StrictForm>()
    for (const tool of request.tools) if (tool.strict !== undefined) strict.set(tool.name, tool.strict)
    return { iteration: request.iteration, prices, strict, request }
  }

  /** A tool choice naming a tool the request does not have: OpenAI answers 400, so it is refused here. */
  const choiceIssue = (request: Model.Request): string | undefined => {
    const choice = resolved.toolChoice
    if (choice === undefined || typeof choice === "string" || request.tools.length === 0) return undefined
    return request.tools.some((tool) => tool.name === choice.tool)
      ? undefined
      : `toolChoice names "${choice.tool}", which is not one of the run's tools (${request.tools.map((t) => t.name).join(", ")})`
  }

  const generate = Effect.fnUntraced(
    function* (request: Model.Request) {
      const clock = yield* Effect.clockWith(Effect.succeed)
      const start = clock.currentTimeMillisUnsafe()
      const deadline = Phases.deadlineOf(request, start)
      if (request.deadlineAt - start <= 0) return yield* Phases.timedOut(Phases.cap(deadline.layer, 0, deadline, start))
      const issue = choiceIssue(request)
      if (issue !== undefined) return yield* ProviderFailure.invalidRequest(issue)
      const httpRequest = HttpClientRequest.bodyUint8Array(
        base,
        encoder.encode(JSON.stringify(OpenAiWire.requestBody(wire, request))),
        "application/json"
      )
      const connection: Phases.Connection = { startedAt: undefined, queued: false, connectedAt: undefined }
      const progress: ConnectionProgress.Progress = {
        started: () => {
          connection.startedAt = clock.currentTimeMillisUnsafe()
          connection.queued = false
        },
        queued: () => {
          connection.queued = true
        },
        connected: () => {
          connection.connectedAt = clock.currentTimeMillisUnsafe()
        }
      }
      const response = yield* Effect.raceFirst(
        client.execute(httpRequest).pipe(
          Effect.mapError((error) => ProviderFailure.fromHttpError(error, clock.currentTimeMillisUnsafe() - start)),
          Effect.provideService(ConnectionProgress.CurrentProgress, progress),
          noRedirects,
          untracedSecrets
        ),
        Phases.headersTimer(resolved, deadline, connection)
      )
      const at = yield* now
      if (response.status < 200 || response.status >= 300) {
        // Read (a bounded part of) the error body so the diagnostic says what the provider said.
        const { diagnostic, message, filtered, spent } = yield* errorText(response, at, deadline)
        // A request the content filter refused stops the run `content_filtered`, whatever its 4xx.
        if (filtered && response.status >= 400 && response.status < 500) {
          return yield* ProviderFailure.filteredRequest(
            response.status,
            message,
            `HTTP ${response.status} from ${url}: ${diagnostic}`
          )
        }
        // A spent quota does not come back with a wait, whatever its 4xx (OpenAI's is a 429).
        if (spent && response.status >= 400 && response.status < 500) {
          return yield* ProviderFailure.spentQuota(
            response.status,
            message,
            `HTTP ${response.status} from ${url}: ${diagnostic}`
          )
        }
        return yield* FailureBoundary.http({
          status: response.status,
          retryAfter: ProviderFailure.retryAfter(response),
          now: at,
          diagnostic: `HTTP ${response.status} from ${url}: ${diagnostic}`,
          providerMessage: message
        })
      }
      const decoding = decodingOf(request)
      // A media type is case-insensitive (`Text/Event-Stream`).
      const eventStream = (response.headers["content-type"] ?? "").toLowerCase().includes("text/event-stream")
      if (eventStream) return yield* EventStream.read(reader, response, deadline, decoding, at)
      // An answer sent (a 200) is paid for, whatever becomes of it here: cut off, too large, or
      // one that makes no response carries what it cost (R2.1).
      const came = { bytes: 0, lastBytesAt: at, doneAt: undefined }
      const text = yield* withinIdle(wholeBody(response, came), came, at, deadline).pipe(
        Effect.mapError((failure) => FailureBoundary.withUsage(failure, PaidUsage.ofBytes(came.bytes, decoding))),
        Effect.onInterrupt(() => Model.reportCutOff(PaidUsage.ofBytes(came.bytes, decoding)))
      )
      return yield* readPlain(text, decoding).pipe(
        Effect.mapError((failure) => FailureBoundary.withUsage(failure, PaidUsage.ofBody(text, decoding)))
      )
    },
    // The last guard: whatever text reached a failure, no key leaves it.
    (effect) => Effect.mapError(effect, (failure) => ProviderFailure.scrubbed(failure, scrub))
  )

  return Model.Model.of({ generate })
})

/**
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Options): Layer.Layer<Model.Model, InvalidOptions, HttpClient.HttpClient> =>
  Layer.effect(Model.Model, make(options))

/**
 * The presets live in `OpenAiPresets`; they are re-exported here.
 *
 * @since 0.1.0
 */
export { DeepSeek, deepseek, OpenAi, openai, type Preset, type PresetOptions } from "./OpenAiPresets.ts"

/**
 * The client configured from the environment: the preset's API key variable
 * (required, read as `Redacted`; a missing key fails with a `ConfigError` naming the
 * variable), base URL and model variables (optional).
 *
 * @category layers
 * @since 0.1.0
 */
export const layerConfig = (
  preset: Preset | "openai" | "deepseek",
  options: Omit<PresetOptions, "apiKey"> = {}
): Layer.Layer<Model.Model, Config.ConfigError | InvalidOptions, HttpClient.HttpClient> => {
  const known = preset === "openai" ? OpenAi : preset === "deepseek" ? DeepSeek : preset
  return Layer.unwrap(
    Effect.gen(function* () {
      const apiKey = yield* Config.Redacted(known.env.apiKey).pipe(
        Config.orElse(() =>
          Config.fail(
            new ConfigProvider.SourceError({
              message: `${known.env.apiKey} is not set: set it to your ${known.name} API key to use ${known.baseUrl}`
            })
          )
        )
      )
      const baseUrl = yield* Config.String(known.env.baseUrl).pipe(Config.withDefault(options.baseUrl ?? known.baseUrl))
      const model = yield* Config.String(known.env.model).pipe(Config.withDefault(options.model ?? known.model))
      return layer({ dialect: known.dialect, ...options, apiKey, baseUrl, model })
    })
  )
}
