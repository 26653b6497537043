/**
 * effect-agent-runtime: an agent-loop runtime on Effect v4 that makes LLM agents stop
 * reliably, for a reason you can trust.
 *
 * @module effect-agent-runtime
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Abortable from "./cancellation/Abortable.ts"
/** @since 0.1.0 */
export * as Subprocess from "./cancellation/Subprocess.ts"
/** @since 0.1.0 */
export * as Counters from "./events/Counters.ts"
/** @since 0.1.0 */
export * as Event from "./events/Event.ts"
/** @since 0.3.0 */
export * as RunLog from "./events/RunLog.ts"
/** @since 0.1.0 */
export * as RunState from "./events/RunState.ts"
/** @since 0.1.0 */
export * as StopReason from "./events/StopReason.ts"
/** @since 0.1.0 */
export * as Timeline from "./events/Timeline.ts"
/** @since 0.5.0 */
export * as Explain from "./explain/Explain.ts"
/** @since 0.1.0 */
export * as Failure from "./failure/Failure.ts"
/** @since 0.1.0 */
export * as FailureBoundary from "./failure/FailureBoundary.ts"
/** @since 0.1.0 */
export * as Model from "./model/Model.ts"
/** @since 0.1.0 */
export * as LanguageModelAdapter from "./providers/LanguageModelAdapter.ts"
/** @since 0.1.0 */
export * as Breakers from "./recovery/Breakers.ts"
/** @since 0.1.0 */
export * as Recovery from "./recovery/Recovery.ts"
/** @since 0.1.0 */
export * as Run from "./run/Run.ts"
/** @since 0.6.0 */
export * as RunObserver from "./run/RunObserver.ts"
/** @since 0.1.0 */
export * as RunResult from "./run/RunResult.ts"
/** @since 0.1.0 */
export * as Termination from "./termination/Termination.ts"
/** @since 0.3.0 */
export * as Deadline from "./time/Deadline.ts"
/** @since 0.2.0 */
export * as AiTools from "./tools/AiTools.ts"
/** @since 0.1.0 */
export * as Approval from "./tools/Approval.ts"
/** @since 0.1.0 */
export * as FileTools from "./tools/FileTools.ts"
/** @since 0.1.0 */
export * as Permission from "./tools/Permission.ts"
/** @since 0.1.0 */
export * as Tool from "./tools/Tool.ts"
/** @since 0.1.0 */
export * as ToolResult from "./tools/ToolResult.ts"
/** @since 0.3.0 */
export * as TraceAttributes from "./tracing/Attributes.ts"
/** @since 0.3.0 */
export * as Metrics from "./tracing/Metrics.ts"
/** @since 0.3.0 */
export * as Tracing from "./tracing/Tracing.ts"
/** @since 0.1.0 */
export * as Artifact from "./validation/Artifact.ts"
/** @since 0.1.0 */
export * as Criterion from "./validation/Criterion.ts"
/** @since 0.1.0 */
export * as Validation from "./validation/Validation.ts"
