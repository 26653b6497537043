/**
 * Model providers: an OpenAI-compatible HTTP client (OpenAI, DeepSeek and any endpoint that
 * speaks the chat-completions API) and an adapter for effect/ai `LanguageModel` layers.
 * Imported from `effect-agent-runtime/providers`.
 *
 * @since 0.2.0
 */

/** @since 0.1.0 */
export * as LanguageModelAdapter from "./LanguageModelAdapter.ts"
/** @since 0.1.0 */
export * as OpenAiCompatible from "./OpenAiCompatible.ts"
