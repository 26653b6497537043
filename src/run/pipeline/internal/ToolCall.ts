/**
 * One tool call that passed its checks, as the tool executor's later stages see it
 * (its attempts, its timeout, its output, its interruption), and the `tool.failed`
 * result that any stage may end it with. Private to the runtime.
 */
import type { Effect } from "effect"
import type * as Failure from "../../../failure/Failure.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as Model from "../../../model/Model.ts"
import type * as Tool from "../../../tools/Tool.ts"
import type * as ToolCodec from "../../../tools/ToolCodec.ts"
import * as ToolResult from "../../../tools/ToolResult.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type * as Registry from "../Registry.ts"

/** One call that passed its checks: what its attempts and its ending need. */
export interface Call {
  readonly ctx: RunContext.RunContext
  readonly registry: Registry.Registry
  readonly call: Model.ToolCall
  readonly tool: Tool.Any
  readonly codec: ToolCodec.Compiled
  /** The arguments as events show them: parsed, the call's secrets masked (see `Redaction`). */
  readonly args: Record<string, unknown>
  /** The plain values of the `Redacted`s in the decoded input: never copied into what the run derives. */
  readonly secrets: ReadonlyArray<string>
  readonly input: unknown
  readonly context: Tool.CallContext
  /** The attempt of the handler running or last run, from 1 (0 before the first). */
  attempt: number
  /** What the handler said became of the current attempt's action, if it said (`context.settle`). */
  settled: { readonly settlement: Tool.Settlement; readonly detail: string } | undefined
}

/** A tool's handler, its input and requirements erased. */
export type Handler = (input: unknown, context: Tool.CallContext) => Effect.Effect<unknown, Failure.Failure, unknown>

/**
 * Calls the handler through the user-code boundary: a throw is a `tool_defect`, and a
 * return that is not an Effect (the Promise of an `async` function) a `not_an_effect`
 * failure, each as a finished `Exit` (R12).
 */
export const callHandler = (c: Call): Effect.Effect<unknown, Failure.Failure, unknown> => {
  // Each attempt says what became of its own action: an earlier attempt's word does not carry over.
  c.attempt++
  c.settled = undefined
  return UserCode.effect(
    {
      source: "tool",
      what: `the handler of ${c.tool.name}`,
      advice: "a handler must return an Effect; wrap promises with `Abortable.handler`",
      defectCode: "tool_defect"
    },
    () => (c.tool.handler as Handler)(c.input, c.context)
  )
}

/** What a stage of the pipeline returns: the call's result, or what running it fails with. */
export type Ran = Effect.Effect<ToolResult.ToolResult, Registry.ExecutionError, unknown>

/** Records a `tool.failed` event and returns the failed result. */
export const failed = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  error: ToolResult.ToolError,
  maxRetries: number,
  status: "failed" | "inconsistent" = "failed"
): ToolResult.ToolResult => {
  RunContext.emit(ctx, { _tag: "tool.failed", callId: call.id, name: call.name, error, maxRetries })
  return ToolResult.failed(call.id, call.name, error, status)
}

/** Whether a call of the tool may have changed the world. */
export const mayHaveEffects = (tool: Tool.Any): boolean =>
  tool.metadata.sideEffect === "write" || tool.metadata.sideEffect === "external"
