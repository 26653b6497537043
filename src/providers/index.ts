/**
 * Model providers that talk to a real API over HTTP, for `effect-agent-runtime/providers`.
 * They are a subpath of their own because they need `@effect/platform-node` (the Node HTTP
 * transport), which the core does not.
 *
 * @module effect-agent-runtime/providers
 * @since 0.2.0
 */

/** @since 0.1.0 */
export * as OpenAiCompatible from "./OpenAiCompatible.ts"
