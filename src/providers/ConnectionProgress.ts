/**
 * What a transport tells the provider client about one request's connection, so that
 * the client can time the connect phase apart from the first-byte phase (R4.1).
 *
 * The client puts a {@link Progress} in {@link CurrentProgress} around each `execute`;
 * a transport that can see the moment (`NodeTransport`, over undici) calls `started`
 * as the request begins and `connected` once it has a connected socket. A transport
 * that cannot (effect's `FetchHttpClient`, say) never calls them, and the client then
 * waits for the connection and the first byte as one wait. A transport whose connections
 * are limited calls `queued` for a request that waits for a free one, and `started` again
 * as it leaves the queue: the wait is bounded by the request's deadline, not the connect
 * timeout (a server that is reachable is not timed out for being busy).
 *
 * @since 0.3.0
 */
import { Context } from "effect"

/**
 * What a transport reports about one request: `started` when it begins (so the caller
 * knows connection reports will follow; its connect phase begins), `queued` when it waits
 * for a free connection (its connect phase begins at the next `started`), `connected` once
 * the request has a connected socket (at once for a reused keep-alive socket).
 *
 * @category models
 * @since 0.3.0
 */
export interface Progress {
  readonly started: () => void
  readonly queued: () => void
  readonly connected: () => void
}

/**
 * The progress hooks of the current request, set by the caller around one `execute`.
 *
 * @category services
 * @since 0.3.0
 */
export const CurrentProgress = Context.Reference<Progress | undefined>(
  "effect-agent-runtime/providers/ConnectionProgress/CurrentProgress",
  { defaultValue: () => undefined }
)
