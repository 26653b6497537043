/**
 * effect-agent-runtime: an agent-loop runtime on Effect v4 that makes LLM agents stop
 * reliably, for a reason you can trust.
 *
 * The root holds what running an agent needs: the run and its result, tools and their
 * gates, the model interface, termination, failures and recovery, validation, and the
 * events a run is made of. Optional parts have subpaths of their own: `/tools` (file
 * tools, effect/ai tools), `/cancellation` (deadlines, abortable promises, subprocesses),
 * `/recovery` (circuit breakers), `/providers` (HTTP providers, the effect/ai adapter,
 * failure boundaries), `/observability` (recorder, viewer, tracing, explanations, the log
 * fold), `/journal`, `/durable` and `/testing`.
 *
 * @module effect-agent-runtime
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Counters from "./events/Counters.ts"
/** @since 0.1.0 */
export * as Event from "./events/Event.ts"
/** @since 0.1.0 */
export * as RunState from "./events/RunState.ts"
/** @since 0.1.0 */
export * as StopReason from "./events/StopReason.ts"
/** @since 0.1.0 */
export * as Timeline from "./events/Timeline.ts"
/** @since 0.1.0 */
export * as Failure from "./failure/Failure.ts"
/** @since 0.1.0 */
export * as Model from "./model/Model.ts"
/** @since 0.1.0 */
export * as Recovery from "./recovery/Recovery.ts"
/** @since 0.1.0 */
export * as Run from "./run/Run.ts"
/** @since 0.1.0 */
export * as RunResult from "./run/RunResult.ts"
/** @since 0.1.0 */
export * as Termination from "./termination/Termination.ts"
/** @since 0.1.0 */
export * as Approval from "./tools/Approval.ts"
/** @since 0.1.0 */
export * as Permission from "./tools/Permission.ts"
/** @since 0.1.0 */
export * as Tool from "./tools/Tool.ts"
/** @since 0.1.0 */
export * as ToolResult from "./tools/ToolResult.ts"
/** @since 0.1.0 */
export * as Criterion from "./validation/Criterion.ts"
/** @since 0.1.0 */
export * as Validation from "./validation/Validation.ts"
