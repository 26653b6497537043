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
 * The client runs over the `HttpClient` in context: {@link layerHttpClient} (keep-alive
 * `node:http` that reports connections) tells the connect phase apart; over any other
 * client (e.g. `NodeHttpClient.layerUndici`) connect and first byte are one wait,
 * reported as `first_byte`.
 *
 * @since 0.1.0
 */
import {
  Config,
  ConfigProvider,
  Deferred,
  Duration,
  Effect,
  Exit,
  Layer,
  Option,
  Pull,
  Redacted,
  Result,
  Stream
} from "effect"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import type * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
import * as Model from "../model/Model.ts"
import * as HttpTransport from "./HttpTransport.ts"
import * as Body from "./internal/Body.ts"
import * as ProviderFailure from "./internal/ProviderFailure.ts"
import * as Redact from "./internal/Redact.ts"
import { DeepSeek, OpenAi, type Preset, type PresetOptions } from "./OpenAiPresets.ts"
import * as OpenAiWire from "./OpenAiWire.ts"
import * as Sse from "./Sse.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Timeouts {
  /** Until the request has a connected socket. Default 10 seconds. */
  readonly connect?: Duration.Input | undefined
  /** From the connection until the response headers. Default 5 minutes. */
  readonly firstByte?: Duration.Input | undefined
  /**
   * The longest gap between two reads of a streamed body; a plain body, which comes
   * whole once the provider has finished, must arrive within it. Default 60 seconds.
   */
  readonly idleRead?: Duration.Input | undefined
}

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** The API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  readonly baseUrl: string
  readonly model: string
  readonly apiKey: Redacted.Redacted<string>
  /** Ask for server-sent events. Default `false`. */
  readonly stream?: boolean | undefined
  readonly timeouts?: Timeouts | undefined
  /** Prices in USD per million tokens, to fill `usage.costUsd`. */
  readonly costPerMillionTokens?: OpenAiWire.Prices | undefined
  readonly temperature?: number | undefined
  /**
   * The largest response body read, plain or streamed; a longer one fails
   * `response_too_large` and its request is aborted. Default 16 MiB.
   */
  readonly maxResponseBytes?: number | undefined
}

/**
 * The default of {@link Options.maxResponseBytes}: 16 MiB.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxResponseBytes = 16 * 1024 * 1024

/** An error body is read for its diagnostic only. */
const maxErrorBodyBytes = 64 * 1024

/** How long the rest of a stream is drained after `[DONE]`, at most. */
const drainMillis = 1_000

const source = "provider" as const

const millis = (input: Duration.Input | undefined, fallback: number): number =>
  input === undefined ? fallback : Duration.toMillis(Duration.fromInputUnsafe(input))

interface Phase {
  readonly layer: FailureBoundary.TimeoutLayer
  readonly millis: number
}

/** The request's deadline and the time layer it belongs to. */
interface Deadline {
  readonly at: number
  readonly layer: FailureBoundary.TimeoutLayer
}

const deadlineOf = (request: Model.Request): Deadline => ({
  at: request.deadlineAt,
  layer: request.deadlineLayer ?? "attempt"
})

/** A phase's own limit, or what is left before the deadline (named by its layer) if that is shorter. */
const cap = (layer: FailureBoundary.TimeoutLayer, own: number, deadline: Deadline, now: number): Phase => {
  const left = deadline.at - now
  return own <= left ? { layer, millis: own } : { layer: deadline.layer, millis: Math.max(0, Math.floor(left)) }
}

const timedOut = (phase: Phase) => FailureBoundary.timeout({ source, layer: phase.layer, afterMillis: phase.millis })

/**
 * The model service over the `HttpClient` in context.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (options: Options) {
  const client = yield* HttpClient.HttpClient
  const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
  const stream = options.stream ?? false
  const connectMillis = millis(options.timeouts?.connect, 10_000)
  const firstByteMillis = millis(options.timeouts?.firstByte, 300_000)
  const idleMillis = millis(options.timeouts?.idleRead, 60_000)
  const prices = options.costPerMillionTokens
  const maxBytes = options.maxResponseBytes ?? defaultMaxResponseBytes
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    return yield* Effect.die(
      new RangeError(`OpenAiCompatible: maxResponseBytes must be an integer >= 1, got ${String(maxBytes)}`)
    )
  }
  const scrub = Redact.redactor(Redacted.value(options.apiKey))
  /** Server text for a diagnostic: scrubbed first, then cut, so no cut leaves a piece of the key. */
  const said = (text: string, max?: number) => Redact.clip(scrub(text), max)
  const tooLarge = (what: string) => ProviderFailure.responseTooLarge(what, `maxResponseBytes (${maxBytes} bytes)`)
  const wire: OpenAiWire.RequestOptions = { model: options.model, temperature: options.temperature, stream }
  const encoder = new TextEncoder()
  const base = HttpClientRequest.post(url).pipe(
    HttpClientRequest.bearerToken(options.apiKey),
    HttpClientRequest.setHeader("accept", stream ? "text/event-stream" : "application/json")
  )

  /** Fails once a phase passes without headers: connect, then first byte. */
  const headersTimer = Effect.fnUntraced(function* (
    deadline: Deadline,
    connected: Deferred.Deferred<void>,
    transport: { started: boolean }
  ) {
    const connect = cap("connect", connectMillis, deadline, yield* Effect.clockWith((c) => c.currentTimeMillis))
    const reported = yield* Effect.timeoutOption(Deferred.await(connected), connect.millis)
    // A transport that never reports connections gets one wait: connect, then first byte.
    if (Option.isNone(reported) && transport.started) return yield* timedOut(connect)
    const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
    const firstByte = cap("first_byte", firstByteMillis, deadline, now)
    yield* Effect.sleep(firstByte.millis)
    return yield* timedOut(firstByte)
  })

  /** Fails with the phase's timeout once it passes. */
  const within = <A>(effect: Effect.Effect<A, Failure.Failure>, phase: Phase) =>
    Effect.timeoutOrElse(effect, { duration: phase.millis, orElse: () => Effect.fail(timedOut(phase)) })

  /** A whole-body read must arrive within one idle-read period, capped by the deadline. */
  const withinIdle = <A>(effect: Effect.Effect<A, Failure.Failure>, now: number, deadline: Deadline) =>
    within(effect, cap("idle_read", idleMillis, deadline, now))

  /**
   * A whole (non-streamed) body: it comes in one piece once the provider has finished,
   * so it must arrive within one idle-read period. One declared or found longer than
   * `maxResponseBytes` is not read on.
   */
  const wholeBody = Effect.fnUntraced(function* (response: HttpClientResponse.HttpClientResponse) {
    if ((Body.declaredLength(response) ?? 0) > maxBytes) {
      yield* Body.discard(response)
      return yield* tooLarge(`the declared body length (${Body.declaredLength(response)} bytes)`)
    }
    const read = yield* Effect.mapError(Body.readUpTo(response, maxBytes), ProviderFailure.fromHttpError)
    if (!read.complete) return yield* tooLarge("the response body")
    return read.text
  })

  /** What the provider said in an error response, from at most 64 KiB of its body; never a failure of its own. */
  const errorText = (response: HttpClientResponse.HttpClientResponse, now: number, deadline: Deadline) =>
    withinIdle(
      Effect.mapError(Body.readUpTo(response, maxErrorBodyBytes), ProviderFailure.fromHttpError),
      now,
      deadline
    ).pipe(
      Effect.map((read) => {
        const text = said(OpenAiWire.errorMessage(read.text) ?? read.text, 300)
        return read.complete ? text : `${text} (the body went on past 64 KiB and was not read)`
      }),
      Effect.orElseSucceed(() => "(the body could not be read)")
    )

  const readPlain = (text: string, iteration: number) =>
    Result.match(OpenAiWire.parseCompletion(text), {
      onFailure: (detail) => Effect.fail(FailureBoundary.corruptResponse({ source, detail: said(detail) })),
      onSuccess: (completion) => Effect.succeed(OpenAiWire.fromCompletion(completion, iteration, prices))
    })

  /**
   * Folds the events of a streamed answer as they arrive. Each read must come within
   * the idle-read timeout, and the bytes read stay within `maxResponseBytes` (so does
   * everything folded from them: text, tool-call arguments).
   */
  const readEvents = Effect.fnUntraced(
    function* (response: HttpClientResponse.HttpClientResponse, request: Model.Request, now: number) {
      let done = false
      const pull = yield* Stream.toPull(response.stream)
      const idle = cap("idle_read", idleMillis, deadlineOf(request), now)
      const next = pull.pipe(
        Pull.catchDone(() => Effect.succeed(undefined)),
        Effect.mapError(ProviderFailure.fromHttpError),
        Effect.timeoutOrElse({
          duration: idle.millis,
          orElse: () => (done ? Effect.succeed(undefined) : Effect.fail(timedOut(idle)))
        })
      )
      const decoder = new TextDecoder()
      const parser = Sse.parser({ maxEventLength: maxBytes })
      const acc = OpenAiWire.accumulator()
      let received = 0
      while (!done) {
        const chunks = yield* next
        if (chunks === undefined) break
        for (const bytes of chunks) {
          received += bytes.length
          if (received > maxBytes) return yield* tooLarge("the event stream")
          const events = parser.feed(decoder.decode(bytes, { stream: true }))
          if (Result.isFailure(events)) return yield* tooLarge("one event of the stream")
          for (const data of events.success) {
            if (data === "[DONE]") {
              done = true
              break
            }
            const chunk = OpenAiWire.parseChunk(data)
            if (Result.isFailure(chunk)) {
              const message = OpenAiWire.errorMessage(data)
              const detail = message === undefined ? chunk.failure : `the stream carried an error: ${message}`
              return yield* FailureBoundary.corruptResponse({ source, detail: said(detail) })
            }
            OpenAiWire.accumulate(acc, chunk.success)
          }
          if (done) break
        }
      }
      if (!done) {
        return yield* FailureBoundary.corruptResponse({ source, detail: "the event stream ended without [DONE]" })
      }
      // The answer is whole. Drain what follows so the connection can be reused, but only
      // briefly and within the byte limit: a server that keeps sending, stalls or resets
      // after [DONE] has still answered (stopping the read aborts its connection).
      const drain = Effect.gen(function* () {
        while (received <= maxBytes) {
          const chunks = yield* next
          if (chunks === undefined) return
          for (const bytes of chunks) received += bytes.length
        }
      })
      yield* drain.pipe(Effect.timeoutOption(Math.min(idle.millis, drainMillis)), Effect.ignore)
      return yield* Result.match(OpenAiWire.fromAccumulator(acc, request.iteration, prices), {
        onFailure: (detail) => Effect.fail(FailureBoundary.corruptResponse({ source, detail: said(detail) })),
        onSuccess: Effect.succeed
      })
    },
    Effect.scoped,
    (effect, _response, request, now) =>
      within(effect, cap(deadlineOf(request).layer, Number.POSITIVE_INFINITY, deadlineOf(request), now))
  )

  const generate = Effect.fnUntraced(
    function* (request: Model.Request) {
      const start = yield* Effect.clockWith((c) => c.currentTimeMillis)
      if (request.deadlineAt - start <= 0)
        return yield* timedOut({ layer: request.deadlineLayer ?? "attempt", millis: 0 })
      const httpRequest = HttpClientRequest.bodyUint8Array(
        base,
        encoder.encode(JSON.stringify(OpenAiWire.requestBody(wire, request))),
        "application/json"
      )
      const connected = Deferred.makeUnsafe<void>()
      const transport = { started: false }
      const progress: HttpTransport.Progress = {
        started: () => {
          transport.started = true
        },
        connected: () => {
          Deferred.doneUnsafe(connected, Exit.void)
        }
      }
      const response = yield* Effect.raceFirst(
        client
          .execute(httpRequest)
          .pipe(
            Effect.mapError(ProviderFailure.fromHttpError),
            Effect.provideService(HttpTransport.CurrentProgress, progress)
          ),
        headersTimer(deadlineOf(request), connected, transport)
      )
      const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
      if (response.status < 200 || response.status >= 300) {
        // Read (a bounded part of) the error body so the diagnostic says what the provider said.
        const text = yield* errorText(response, now, deadlineOf(request))
        return yield* FailureBoundary.http({
          status: response.status,
          retryAfter: ProviderFailure.retryAfter(response),
          now,
          diagnostic: `HTTP ${response.status} from ${url}: ${text}`
        })
      }
      const eventStream = (response.headers["content-type"] ?? "").includes("text/event-stream")
      if (eventStream) return yield* readEvents(response, request, now)
      const text = yield* withinIdle(wholeBody(response), now, deadlineOf(request))
      return yield* readPlain(text, request.iteration)
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
export const layer = (options: Options): Layer.Layer<Model.Model, never, HttpClient.HttpClient> =>
  Layer.effect(Model.Model, make(options))

/**
 * The keep-alive `node:http` transport that reports connections, so the connect
 * timeout is told apart from the first-byte timeout. Any other `HttpClient` layer
 * (e.g. `NodeHttpClient.layerUndici`) works too.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerHttpClient: (options?: HttpTransport.Options) => Layer.Layer<HttpClient.HttpClient> =
  HttpTransport.layer

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
): Layer.Layer<Model.Model, Config.ConfigError, HttpClient.HttpClient> => {
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
      return layer({ ...options, apiKey, baseUrl, model })
    })
  )
}
