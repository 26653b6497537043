/**
 * The providers' default `HttpClient` on Node, for `effect-agent-runtime/providers/node`:
 * `@effect/platform-node`'s undici client, which reports connections so the connect
 * timeout is told apart from the first-byte timeout. An entry point of its own because it
 * needs `@effect/platform-node`, which the rest of the package does not.
 *
 * @module effect-agent-runtime/providers/node
 * @since 0.3.0
 */

/** @since 0.3.0 */
export * as NodeTransport from "./NodeTransport.ts"
