/**
 * A small `node:http` transport for effect's `HttpClient` that reports when a request's
 * connection is established, so a provider can tell a connect timeout from a
 * first-byte timeout (R4.1).
 *
 * Neither flavour of `@effect/platform-node`'s `NodeHttpClient` exposes that moment
 * per request: undici only has an agent-wide connect timeout (and `makeUndici`
 * overrides its header and body timeouts), and the `node:http` client hides the socket.
 * This transport sends bodies of bytes (what JSON APIs send), keeps connections alive,
 * and calls the {@link CurrentProgress} hooks of the calling fiber. The timers
 * themselves stay with the caller, on Effect's `Clock`. Interrupting the request
 * destroys its socket, so the server sees the connection close.
 *
 * Any other `HttpClient` works with the providers too: without connection reports,
 * the connect and first-byte timeouts run one after the other as one wait.
 *
 * @since 0.1.0
 */

import * as Http from "node:http"
import * as Https from "node:https"
import { TLSSocket } from "node:tls"
import { NodeHttpIncomingMessage } from "@effect/platform-node/NodeHttpIncomingMessage"
import { Context, Effect, Layer, type Scope } from "effect"
import * as Cookies from "effect/http/Cookies"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientError from "effect/http/HttpClientError"
import type * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as HttpClientResponse from "effect/http/HttpClientResponse"
import { pipeArguments } from "effect/Pipeable"
import type * as Socket from "effect/socket/Socket"

/**
 * What a transport reports about one request: `started` when it begins (so the caller
 * knows connection reports will follow), `connected` once the request has a connected
 * socket (at once for a reused keep-alive socket).
 *
 * @category models
 * @since 0.1.0
 */
export interface Progress {
  readonly started: () => void
  readonly connected: () => void
}

/**
 * The progress hooks of the current request, set by the caller around one `execute`.
 *
 * @category services
 * @since 0.1.0
 */
export const CurrentProgress = Context.Reference<Progress | undefined>(
  "effect-agent-runtime/providers/HttpTransport/CurrentProgress",
  { defaultValue: () => undefined }
)

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Idle keep-alive sockets kept per origin. Default 16. */
  readonly maxFreeSockets?: number | undefined
  /** Concurrent sockets per origin. Default `Infinity`. */
  readonly maxSockets?: number | undefined
}

const transportError = (request: HttpClientRequest.HttpClientRequest, cause: unknown) =>
  new HttpClientError.HttpClientError({ reason: new HttpClientError.TransportError({ request, cause }) })

const ignore = () => {}

/**
 * An `HttpClient` over the given agents.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (agents: { readonly http: Http.Agent; readonly https: Https.Agent }): HttpClient.HttpClient =>
  HttpClient.make((request, url, signal, fiber) => {
    const body = request.body
    const bytes =
      body._tag === "Empty"
        ? undefined
        : body._tag === "Uint8Array"
          ? body.body
          : body._tag === "Raw"
            ? body.body
            : null
    if (bytes !== undefined && !(bytes instanceof Uint8Array)) {
      return Effect.fail(
        new HttpClientError.HttpClientError({
          reason: new HttpClientError.EncodeError({
            request,
            description: `HttpTransport sends byte bodies only, got a ${body._tag} body`
          })
        })
      )
    }
    const progress = fiber.getRef(CurrentProgress)
    return Effect.callback<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>((resume) => {
      progress?.started()
      const secure = url.protocol === "https:"
      const options = {
        agent: secure ? agents.https : agents.http,
        method: request.method,
        headers: request.headers,
        signal
      }
      const nodeRequest = secure ? Https.request(url, options) : Http.request(url, options)
      nodeRequest.on("socket", (socket) => {
        if (progress === undefined) return
        if (!socket.connecting) return progress.connected()
        socket.once(socket instanceof TLSSocket ? "secureConnect" : "connect", progress.connected)
      })
      const onError = (cause: Error) => resume(Effect.fail(transportError(request, cause)))
      nodeRequest.once("error", onError)
      nodeRequest.once("response", (response) => {
        nodeRequest.off("error", onError)
        // Later errors (a reset mid-body, an abort) surface through the response stream.
        nodeRequest.on("error", ignore)
        resume(Effect.succeed(new NodeResponse(request, response, url.href.split("#")[0] ?? url.href)))
      })
      nodeRequest.end(bytes)
      return Effect.sync(() => {
        nodeRequest.on("error", ignore)
        nodeRequest.destroy()
      })
    })
  })

/**
 * The transport with its own keep-alive agents, destroyed with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeScoped = (options: Options = {}): Effect.Effect<HttpClient.HttpClient, never, Scope.Scope> => {
  const agentOptions = {
    keepAlive: true,
    maxFreeSockets: options.maxFreeSockets ?? 16,
    maxSockets: options.maxSockets ?? Number.POSITIVE_INFINITY
  }
  return Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => ({ http: new Http.Agent(agentOptions), https: new Https.Agent(agentOptions) })),
      (agents) =>
        Effect.sync(() => {
          agents.http.destroy()
          agents.https.destroy()
        })
    ),
    make
  )
}

/**
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Options = {}): Layer.Layer<HttpClient.HttpClient> =>
  Layer.effect(HttpClient.HttpClient, makeScoped(options))

class NodeResponse
  extends NodeHttpIncomingMessage<HttpClientError.HttpClientError>
  implements HttpClientResponse.HttpClientResponse
{
  readonly [HttpClientResponse.TypeId]: typeof HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly request: HttpClientRequest.HttpClientRequest
  readonly url: string

  constructor(request: HttpClientRequest.HttpClientRequest, source: Http.IncomingMessage, url: string) {
    super(
      source,
      (cause) =>
        new HttpClientError.HttpClientError({
          reason: new HttpClientError.DecodeError({ request, response: this, cause })
        })
    )
    this.request = request
    this.url = url
  }

  get status(): number {
    return this.source.statusCode ?? 0
  }

  get cookies(): Cookies.Cookies {
    const header = this.source.headers["set-cookie"]
    return header === undefined ? Cookies.empty : Cookies.fromSetCookie(header)
  }

  get formData(): Effect.Effect<FormData, HttpClientError.HttpClientError> {
    return Effect.fail(this.unsupported("form data bodies"))
  }

  get upgrade(): Effect.Effect<Socket.Socket, HttpClientError.HttpClientError> {
    return Effect.fail(this.unsupported("connection upgrades"))
  }

  private unsupported(what: string) {
    return new HttpClientError.HttpClientError({
      reason: new HttpClientError.DecodeError({
        request: this.request,
        response: this,
        description: `HttpTransport does not support ${what}`
      })
    })
  }

  toJSON(): unknown {
    return { _id: "effect/http/HttpClientResponse", url: this.url, status: this.status }
  }

  pipe() {
    // biome-ignore lint/complexity/noArguments: the Pipeable protocol
    return pipeArguments(this, arguments)
  }
}
