/**
 * Circuit breakers, for `effect-agent-runtime/recovery`: `Breakers` keeps one breaker per
 * provider, model or tool across runs (R3.9); a run uses them when a breakers layer is
 * provided. `Recovery` itself (settings, the retry decision) is in the root.
 *
 * @module effect-agent-runtime/recovery
 * @since 0.3.0
 */

/** @since 0.1.0 */
export * as Breakers from "./Breakers.ts"
