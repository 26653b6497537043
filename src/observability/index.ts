/**
 * Seeing what a run did and why it stopped: the `Recorder` (every run's events to a JSONL
 * file as they happen), `Recording` (reading one back, or a `RunResult` as JSON), and the
 * `Viewer` (a run as one self-contained HTML page; the CLI `effect-agent-runtime view`).
 *
 * @module effect-agent-runtime/observability
 * @since 0.6.0
 */

/** @since 0.6.0 */
export * as LiveView from "./LiveView.ts"
/** @since 0.6.0 */
export * as Recorder from "./Recorder.ts"
/** @since 0.6.0 */
export * as Recording from "./Recording.ts"
/** @since 0.6.0 */
export * as Viewer from "./Viewer.ts"
