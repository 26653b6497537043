/**
 * Model providers that talk to a real API over HTTP, for `effect-agent-runtime/providers`.
 * They run over any effect `HttpClient`: `NodeTransport.layer()` from
 * `effect-agent-runtime/providers/node` (undici, with connection reports; needs
 * `@effect/platform-node`), or effect's own `FetchHttpClient.layer` (needs nothing more).
 * Also `LanguageModelAdapter` (an effect/ai `LanguageModel` of your choice as the run's model) and
 * `FailureBoundary` (HTTP statuses, timeouts, broken responses and unknown errors as
 * classified failures, for a provider or an HTTP tool of your own).
 *
 * @module effect-agent-runtime/providers
 * @since 0.2.0
 */

/** @since 0.1.0 */
export * as FailureBoundary from "../failure/FailureBoundary.ts"
/** @since 0.3.0 */
export * as ConnectionProgress from "./ConnectionProgress.ts"
/** @since 0.1.0 */
export * as LanguageModelAdapter from "./LanguageModelAdapter.ts"
/** @since 0.1.0 */
export * as OpenAiCompatible from "./OpenAiCompatible.ts"
