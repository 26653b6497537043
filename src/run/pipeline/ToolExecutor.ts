/**
 * Runs one tool call through the pipeline (R3.5, R3.6, R3.7):
 *
 * lookup → argument parsing → permission policy → input schema validation → handler →
 * output schema → postcondition → {@link ToolResult.ToolResult} keyed by `tool_call_id`.
 *
 * Nothing a model sends can crash the run: an unknown tool, arguments that are not a
 * JSON object, `__proto__` keys, oversized arguments and schema mismatches become
 * `failed` results the model can correct; a permission denial becomes a `blocked`
 * result; a handler's failure or defect becomes a `failed` result carrying the failure
 * algebra's safe summary. Interruption is never converted: cancelling the run cancels
 * the call.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import * as Deadline from "../../time/Deadline.ts"
import type * as Permission from "../../tools/Permission.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as RunContext from "../internal/RunContext.ts"
import * as ApprovalWait from "./ApprovalWait.ts"
import { settle } from "./internal/ToolAttempt.ts"
import { check, refuse } from "./internal/ToolChecks.ts"
import { afterHandler } from "./internal/ToolOutput.ts"
import type { Prepared } from "./internal/ToolPrepare.ts"
import type { Registry } from "./Registry.ts"

export {
  defaultLimits,
  describeIssue,
  type Limits,
  type ParsedArguments,
  parseArguments
} from "../../tools/ToolArguments.ts"
/** How the run records a call it leaves behind when it ends. */
export { recordAbandoned } from "./internal/ToolInterruption.ts"
export { type Prepared, prepare } from "./internal/ToolPrepare.ts"
export {
  type ExecutionError,
  noTimeLimits,
  type Registry,
  registry,
  type TimeLimits
} from "./Registry.ts"

/**
 * Runs one prepared call: its checks, its approval, its handler's attempts, its output.
 * Publishes `tool.started`, then exactly one of `tool.succeeded`, `tool.failed` or
 * `tool.blocked`, or a `tool.interrupted` that settles it.
 *
 * @category combinators
 * @since 0.1.0
 */
export const execute = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  registry: Registry<R>,
  prepared: Prepared,
  permission: Permission.PermissionService
) {
  const call = prepared.call
  // No new action once the deadline has passed (R3.11), even if its timer could not fire yet.
  if (yield* Deadline.passed) return yield* RunContext.expire(ctx)
  RunContext.emit(ctx, {
    _tag: "tool.started",
    callId: call.id,
    toolCallId: prepared.toolCallId,
    name: call.name,
    signature: prepared.signature
  })
  const checked = yield* check(ctx, registry, prepared, permission)
  if (checked._tag === "Refused") return refuse(ctx, call, checked)
  const c = checked.call
  if (c.tool.metadata.needsApproval) {
    yield* ApprovalWait.awaitDecision(ctx, registry.time.approvalMillis, call, c.tool, prepared.shown)
  }
  const settled = yield* settle(c)
  if (settled._tag === "Ended") return settled.result
  const result: ToolResult.ToolResult = yield* afterHandler(c, settled.output)
  return result
})
