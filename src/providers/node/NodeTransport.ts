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
 * (`CurrentProgress`) in their undici options. With `maxSockets`, the interceptor also keeps
 * each origin's requests as undici's pool holds them, and reports a request that waits for a
 * free connection (`queued`, then `started` as it gets one). The timers stay with the provider
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
import * as OptionKeys from "../../failure/OptionKeys.ts"
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

/**
 * The requests of one origin as its undici pool holds them, when its connections are
 * limited: those given a connection, and, in order, those its queue holds (undici's pool
 * hands a freed connection to the oldest). A request that waits is reported `queued`, and
 * `started` as it leaves, so that the time it waits for a busy server's connection is not
 * timed as a connect.
 */
class Slots {
  readonly limit: number
  /** Called when it holds no request: an origin no longer asked is not kept. */
  readonly idle: () => void
  active = 0
  readonly waiting: Array<Reporting> = []
  constructor(limit: number, idle: () => void) {
    this.limit = limit
    this.idle = idle
  }
  enter(request: Reporting): void {
    if (this.active < this.limit) {
      this.active++
      request.state = "active"
    } else {
      request.state = "waiting"
      this.waiting.push(request)
      request.progress?.queued()
    }
  }
  /** undici started it: it holds a connection, whatever the queue said. */
  begun(request: Reporting): void {
    if (request.state !== "waiting") return
    this.waiting.splice(this.waiting.indexOf(request), 1)
    this.active++
    request.state = "active"
  }
  leave(request: Reporting): void {
    const was = request.state
    request.state = "done"
    if (was === "waiting") this.waiting.splice(this.waiting.indexOf(request), 1)
    if (was === "active") this.active--
    const next = this.active < this.limit ? this.waiting.shift() : undefined
    if (next !== undefined) {
      this.active++
      next.state = "active"
      next.progress?.started()
    }
    if (this.active === 0 && this.waiting.length === 0) this.idle()
  }
}

/**
 * A handler that reports the connection as undici starts the request, and keeps its origin's
 * slots, then does what `inner` does.
 */
class Reporting implements Undici.Dispatcher.DispatchHandler {
  readonly inner: Undici.Dispatcher.DispatchHandler
  readonly progress: ConnectionProgress.Progress | undefined
  readonly slots: Slots | undefined
  state: "active" | "waiting" | "done" = "active"
  constructor(
    inner: Undici.Dispatcher.DispatchHandler,
    progress: ConnectionProgress.Progress | undefined,
    slots: Slots | undefined
  ) {
    this.inner = inner
    this.progress = progress
    this.slots = slots
    slots?.enter(this)
  }
  onRequestStart(controller: Undici.Dispatcher.DispatchController, context: unknown): void {
    this.slots?.begun(this)
    this.progress?.connected()
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
    this.slots?.leave(this)
    this.inner.onResponseEnd?.(...args)
  }
  onResponseError(...args: Parameters<NonNullable<Undici.Dispatcher.DispatchHandler["onResponseError"]>>): void {
    this.slots?.leave(this)
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

/** Reports each request's connection; with `maxSockets`, keeps each origin's slots for every request. */
const reportConnections =
  (maxSockets: number | undefined): Undici.Dispatcher.DispatcherComposeInterceptor =>
  (dispatch) => {
    const origins = new Map<string, Slots>()
    const slotsOf = (origin: unknown): Slots | undefined => {
      if (maxSockets === undefined) return undefined
      const key = String(origin)
      const found = origins.get(key)
      if (found !== undefined) return found
      const made = new Slots(maxSockets, () => origins.delete(key))
      origins.set(key, made)
      return made
    }
    return (options, handler) => {
      const carried = progressKey in options ? options[progressKey] : undefined
      const progress = carried instanceof Reporter ? carried.progress : undefined
      const slots = slotsOf(options.origin)
      return dispatch(
        options,
        progress === undefined && slots === undefined ? handler : new Reporting(handler, progress, slots)
      )
    }
  }

/** Every option: one the transport does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options> = { maxSockets: true }

/**
 * The client, with its agent, destroyed with the scope.
 *
 * @category constructors
 * @since 0.3.0
 */
export const make = (options: Options = {}): Effect.Effect<HttpClient.HttpClient, InvalidOptions, Scope.Scope> =>
  Effect.gen(function* () {
    const unknown = OptionKeys.unknownOption(options, knownOptions)
    if (unknown !== undefined) return yield* new InvalidOptions({ reason: unknown })
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
      agent.compose(reportConnections(maxSockets))
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
