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
 * The API key is `Redacted`, sent only in the `Authorization` header, and scrubbed from
 * every failure's diagnostic.
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
  Predicate,
  Pull,
  Redacted,
  Result,
  Stream
} from "effect"
import * as HttpClient from "effect/http/HttpClient"
import type * as HttpClientError from "effect/http/HttpClientError"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as Failure from "../Failure.ts"
import * as FailureBoundary from "../FailureBoundary.ts"
import * as Model from "../Model.ts"
import * as HttpTransport from "./HttpTransport.ts"
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
}

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

const describe = (cause: unknown): string => {
  if (!Predicate.isError(cause)) return String(cause)
  const code = Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) ? ` ${cause.code}` : ""
  return `${cause.name}${code}: ${cause.message}`
}

const clip = (text: string, max = 500) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** Transport failures; the diagnostic names the cause, never the request (it has the headers). */
const fromHttpError = (error: HttpClientError.HttpClientError): Failure.Failure => {
  const reason = error.reason
  const cause = "cause" in reason ? reason.cause : undefined
  const detail = `${reason._tag}: ${cause === undefined ? (reason.description ?? "") : describe(cause)}`
  const programmerError =
    Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) && cause.code.startsWith("ERR_")
  if ((reason._tag === "TransportError" || reason._tag === "DecodeError") && !programmerError) {
    return FailureBoundary.connection({ source, detail })
  }
  const named = new Error(detail)
  named.name = reason._tag
  return FailureBoundary.unknown(source, named)
}

const scrub = (failure: Failure.Failure, secret: string): Failure.Failure => {
  if (secret === "" || failure.diagnostic === undefined || !failure.diagnostic.includes(secret)) return failure
  const diagnostic = failure.diagnostic.replaceAll(secret, "<redacted>")
  switch (failure._tag) {
    case "Retryable":
      return new Failure.Retryable({ ...failure, diagnostic })
    case "Permanent":
      return new Failure.Permanent({ ...failure, diagnostic })
    case "UnknownOutcome":
      return new Failure.UnknownOutcome({ ...failure, diagnostic })
  }
}

const retryAfter = (response: HttpClientResponse.HttpClientResponse): string | undefined => {
  const ms = Number(response.headers["retry-after-ms"])
  return Number.isFinite(ms) && ms >= 0 ? String(ms / 1000) : response.headers["retry-after"]
}

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

  const bounded = <A>(effect: Effect.Effect<A, Failure.Failure>, now: number, deadline: Deadline) => {
    const left = cap(deadline.layer, Number.POSITIVE_INFINITY, deadline, now)
    return Effect.timeoutOrElse(effect, { duration: left.millis, orElse: () => Effect.fail(timedOut(left)) })
  }

  /**
   * A whole (non-streamed) body: it comes in one piece once the provider has finished,
   * so it must arrive within one idle-read period, capped by the deadline.
   */
  const wholeBody = (response: HttpClientResponse.HttpClientResponse, now: number, deadline: Deadline) => {
    const idle = cap("idle_read", idleMillis, deadline, now)
    return Effect.timeoutOrElse(Effect.mapError(response.text, fromHttpError), {
      duration: idle.millis,
      orElse: () => Effect.fail(timedOut(idle))
    })
  }

  const readPlain = (text: string, iteration: number) =>
    Result.match(OpenAiWire.parseCompletion(text), {
      onFailure: (detail) => Effect.fail(FailureBoundary.corruptResponse({ source, detail: clip(detail) })),
      onSuccess: (completion) => Effect.succeed(OpenAiWire.fromCompletion(completion, iteration, prices))
    })

  /**
   * Folds the events of a streamed answer as they arrive. Each read must come within
   * the idle-read timeout; after `[DONE]`, the rest is drained so the connection can be
   * reused, and a server that then keeps it open has still answered.
   */
  const readEvents = Effect.fnUntraced(
    function* (response: HttpClientResponse.HttpClientResponse, request: Model.Request, now: number) {
      let done = false
      const pull = yield* Stream.toPull(response.stream)
      const idle = cap("idle_read", idleMillis, deadlineOf(request), now)
      const next = pull.pipe(
        Pull.catchDone(() => Effect.succeed(undefined)),
        Effect.mapError(fromHttpError),
        Effect.timeoutOrElse({
          duration: idle.millis,
          orElse: () => (done ? Effect.succeed(undefined) : Effect.fail(timedOut(idle)))
        })
      )
      const decoder = new TextDecoder()
      const parser = Sse.parser()
      const acc = OpenAiWire.accumulator()
      while (true) {
        const chunks = yield* next
        if (chunks === undefined) break
        if (done) continue
        for (const bytes of chunks) {
          for (const data of Sse.feedText(parser, decoder.decode(bytes, { stream: true }))) {
            if (done) break
            if (data === "[DONE]") {
              done = true
              break
            }
            const chunk = OpenAiWire.parseChunk(data)
            if (Result.isFailure(chunk)) {
              const message = OpenAiWire.errorMessage(data)
              const detail = message === undefined ? chunk.failure : `the stream carried an error: ${message}`
              return yield* FailureBoundary.corruptResponse({ source, detail: clip(detail) })
            }
            OpenAiWire.accumulate(acc, chunk.success)
          }
        }
      }
      if (!done) {
        return yield* FailureBoundary.corruptResponse({ source, detail: "the event stream ended without [DONE]" })
      }
      return yield* Result.match(OpenAiWire.fromAccumulator(acc, request.iteration, prices), {
        onFailure: (detail) => Effect.fail(FailureBoundary.corruptResponse({ source, detail })),
        onSuccess: Effect.succeed
      })
    },
    Effect.scoped,
    (effect, _response, request, now) => bounded(effect, now, deadlineOf(request))
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
          .pipe(Effect.mapError(fromHttpError), Effect.provideService(HttpTransport.CurrentProgress, progress)),
        headersTimer(deadlineOf(request), connected, transport)
      )
      const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
      if (response.status < 200 || response.status >= 300) {
        // Read the error body (bounded) so the diagnostic says what the provider said.
        const text = yield* wholeBody(response, now, deadlineOf(request)).pipe(Effect.orElseSucceed(() => ""))
        const said = OpenAiWire.errorMessage(text) ?? clip(text, 300)
        return yield* FailureBoundary.http({
          status: response.status,
          retryAfter: retryAfter(response),
          now,
          diagnostic: `HTTP ${response.status} from ${url}: ${said}`
        })
      }
      const eventStream = (response.headers["content-type"] ?? "").includes("text/event-stream")
      if (eventStream) return yield* readEvents(response, request, now)
      const text = yield* wholeBody(response, now, deadlineOf(request))
      return yield* readPlain(text, request.iteration)
    },
    (effect) => Effect.mapError(effect, (failure) => scrub(failure, Redacted.value(options.apiKey)))
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
