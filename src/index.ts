/**
 * effect-agent-runtime: an agent-loop runtime on Effect v4 that makes LLM agents stop
 * reliably, for a reason you can trust.
 *
 * @module effect-agent-runtime
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Abortable from "./Abortable.ts"
/** @since 0.1.0 */
export * as Approval from "./Approval.ts"
/** @since 0.1.0 */
export * as Artifact from "./Artifact.ts"
/** @since 0.1.0 */
export * as Breakers from "./Breakers.ts"
/** @since 0.1.0 */
export * as Counters from "./Counters.ts"
/** @since 0.1.0 */
export * as Criterion from "./Criterion.ts"
/** @since 0.1.0 */
export * as Event from "./Event.ts"
/** @since 0.1.0 */
export * as Failure from "./Failure.ts"
/** @since 0.1.0 */
export * as FailureBoundary from "./FailureBoundary.ts"
/** @since 0.1.0 */
export * as Loop from "./Loop.ts"
/** @since 0.1.0 */
export * as Model from "./Model.ts"
/** @since 0.1.0 */
export * as Permission from "./Permission.ts"
/** @since 0.1.0 */
export * as LanguageModelAdapter from "./providers/LanguageModelAdapter.ts"
/** @since 0.1.0 */
export * as Reconciliation from "./Reconciliation.ts"
/** @since 0.1.0 */
export * as Recovery from "./Recovery.ts"
/** @since 0.1.0 */
export * as Run from "./Run.ts"
/** @since 0.1.0 */
export * as RunResult from "./RunResult.ts"
/** @since 0.1.0 */
export * as RunState from "./RunState.ts"
/** @since 0.1.0 */
export * as Signature from "./Signature.ts"
/** @since 0.1.0 */
export * as StopReason from "./StopReason.ts"
/** @since 0.1.0 */
export * as Subprocess from "./Subprocess.ts"
/** @since 0.1.0 */
export * as Termination from "./Termination.ts"
/** @since 0.1.0 */
export * as Timeline from "./Timeline.ts"
/** @since 0.1.0 */
export * as Tool from "./Tool.ts"
/** @since 0.1.0 */
export * as ToolArguments from "./ToolArguments.ts"
/** @since 0.1.0 */
export * as ToolExecutor from "./ToolExecutor.ts"
/** @since 0.1.0 */
export * as ToolResult from "./ToolResult.ts"
/** @since 0.1.0 */
export * as FileTools from "./tools/FileTools.ts"
/** @since 0.1.0 */
export * as Validation from "./Validation.ts"
