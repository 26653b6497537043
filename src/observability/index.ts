/**
 * Seeing what a run did and why it stopped: the `Recorder` (every run's events to a JSONL
 * file as they happen), `Recording` (reading one back, or a `RunResult` as JSON), and the
 * `Viewer` (a run as one self-contained HTML page; the CLI `effect-agent-runtime view`).
 * Also `Explain` (why a run stopped, from its log), `RunLog` (a log folded into the run's
 * state at any prefix), `RunObserver` (every run's events as they happen), and `Tracing`,
 * `Metrics` and `TraceAttributes` (spans and metrics, free without a tracer).
 *
 * @module effect-agent-runtime/observability
 * @since 0.3.0
 */

/** @since 0.3.0 */
export * as RunLog from "../events/RunLog.ts"
/** @since 0.3.0 */
export * as Explain from "../explain/Explain.ts"
/** @since 0.3.0 */
export * as RunObserver from "../run/RunObserver.ts"
/** @since 0.3.0 */
export * as TraceAttributes from "../tracing/Attributes.ts"
/** @since 0.3.0 */
export * as Metrics from "../tracing/Metrics.ts"
/** @since 0.3.0 */
export * as Tracing from "../tracing/Tracing.ts"
/** @since 0.3.0 */
export * as LiveView from "./LiveView.ts"
/** @since 0.3.0 */
export * as Recorder from "./Recorder.ts"
/** @since 0.3.0 */
export * as Recording from "./Recording.ts"
/** @since 0.3.0 */
export * as Viewer from "./Viewer.ts"
