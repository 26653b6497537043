/**
 * The default `HttpClient` for the providers on Node: `@effect/platform-node`'s undici
 * client (`NodeHttpClient.makeUndici`) over a keep-alive undici `Agent` of its own, which
 * reports each request's connection (see `ConnectionProgress`) so that the client tells
 * a connect timeout from a first-byte timeout (R4.1).
 *
 * undici has no per-request connect event, but it starts a request (`onRequestStart`)
 * only once the request has a connected socket: at once on a reused keep-alive socket,
 * after the TCP (and TLS) handshake on a new one. An interceptor composed onto the agent
 * reports that moment for the requests that carry the hooks of their calling fiber
 * (`CurrentProgress`) in their undici options. The timers stay with the provider
 * client, on Effect's `Clock`; interrupting a request aborts it, which
 * destroys its socket, so the server sees the connection close.
 *
 * It lives in its own entry point, `effect-agent-runtime/providers/node`, because it
 * needs `@effect/platform-node` (an optional peer dependency). Without it, give the
 * providers any other `HttpClient`, e.g. effect's own `FetchHttpClient.layer`.
 *
 * @since 0.3.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as Undici from "@effect/platform-node/Undici"
import { Effect, Layer, Schema, type Scope } from "effect"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as ConnectionProgress from "../ConnectionProgress.ts"

/**
 * @category models
 * @since 0.3.0
 */
export interface Options {
  /** Concurrent connections per origin. Default: no limit. */
  readonly maxSockets?: number | undefined
}

/**
 * Options that cannot work, naming the field.
 *
 * @category errors
 * @since 0.3.0
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>()("InvalidOptions", {
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid NodeTransport options: ${this.reason}`
  }
}

/**
 * undici's own connect timeout only ends a connection attempt nobody waits for any more:
 * the provider's connect phase (R4.1) times the requests, and stops waiting first.
 */
const connectAttemptMillis = 120_000

/** The option under which a request carries the hooks of its calling fiber to the interceptor. */
const progressKey: unique symbol = Symbol("effect-agent-runtime/NodeTransport/progress")

/** What is carried under that key. */
class Reporter {
  readonly progress: ConnectionProgress.Progress
  constructor(progress: ConnectionProgress.Progress) {
    this.progress = progress
  }
}

/** A handler that reports the connection as undici starts the request, then does what `inner` does. */
class Reporting implements Undici.Dispatcher.DispatchHandler {
  readonly inner: Undici.Dispatcher.DispatchHandler
  readonly progress: ConnectionProgress.Progress
  constructor(inner: Undici.Dispatcher.DispatchHandler, progress: ConnectionProgress.Progress) {
    this.inner = inner
    this.progress = progress
  }
  onRequestStart(controller: Undici.Dispatcher.DispatchController, context: unknown): void {
    this.progress.connected()
    this.inner.onRequestStart?.(controller, context)
  }
  onRequestUpgrade(...args: Parameters<NonNullable<Undici.Dispatcher.DispatchHandler["onRequestUpgrade"]>>): void {
    this.inner.onRequestUpgrade?.(...args)
  }
  onResponseStart(...args: Parameters<NonNullable<Undici.Dispatcher.DispatchHandler["onResponseStart"]>>): void {
    this.inner.onResponseStart?.(...args)
  }
  onResponseData(...args: Parameters<NonNullable<Undici.Dispatcher.DispatchHandler["onResponseData"]>>): void {
    this.inner.onResponseData?.(...args)
  }
  onResponseEnd(...args: Parameters<NonNullable<Undici.Dispatcher.DispatchHandler["onResponseEnd"]>>): void {
    this.inner.onResponseEnd?.(...args)
  }
  onResponseError(...args: Parameters<NonNullable<Undici.Dispatcher.DispatchHandler["onResponseError"]>>): void {
    this.inner.onResponseError?.(...args)
  }
  onResponseStarted(): void {
    this.inner.onResponseStarted?.()
  }
  onBodySent(chunk: Buffer): void {
    this.inner.onBodySent?.(chunk)
  }
  onRequestSent(): void {
    this.inner.onRequestSent?.()
  }
}

const reportConnections: Undici.Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
  const carried = progressKey in options ? options[progressKey] : undefined
  return dispatch(options, carried instanceof Reporter ? new Reporting(handler, carried.progress) : handler)
}

/**
 * The client, with its agent, destroyed with the scope.
 *
 * @category constructors
 * @since 0.3.0
 */
export const make = (options: Options = {}): Effect.Effect<HttpClient.HttpClient, InvalidOptions, Scope.Scope> =>
  Effect.gen(function* () {
    const maxSockets = options.maxSockets
    if (maxSockets !== undefined && !(Number.isSafeInteger(maxSockets) && maxSockets > 0)) {
      return yield* new InvalidOptions({ reason: `maxSockets must be a positive integer, got ${maxSockets}` })
    }
    const agent = yield* NodeHttpClient.makeDispatcherOptions({
      connections: maxSockets ?? null,
      connect: { timeout: connectAttemptMillis }
    })
    const undici = yield* Effect.provideService(
      NodeHttpClient.makeUndici,
      NodeHttpClient.Dispatcher,
      agent.compose(reportConnections)
    )
    // undici's `request` decodes no content coding: the body is asked for as it is (RFC 9110
    // §12.5.3), unless the caller asks for a coding itself, as a server may use one otherwise.
    const asIs = HttpClient.mapRequest(undici, (request) =>
      request.headers["accept-encoding"] === undefined
        ? HttpClientRequest.setHeader(request, "accept-encoding", "identity")
        : request
    )
    return HttpClient.transform(asIs, (execute) =>
      Effect.withFiber((fiber) => {
        const progress = fiber.getRef(ConnectionProgress.CurrentProgress)
        if (progress === undefined) return execute
        progress.started()
        // undici hands the request's options, unknown keys included, to the interceptor.
        const undiciOptions = Object.assign({}, fiber.getRef(NodeHttpClient.UndiciOptions), {
          [progressKey]: new Reporter(progress)
        })
        return Effect.provideService(execute, NodeHttpClient.UndiciOptions, undiciOptions)
      })
    )
  })

/**
 * @category layers
 * @since 0.3.0
 */
export const layer = (options: Options = {}): Layer.Layer<HttpClient.HttpClient, InvalidOptions> =>
  Layer.effect(HttpClient.HttpClient, make(options))
