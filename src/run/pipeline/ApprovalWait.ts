/**
 * The approval step of the tool pipeline (R7), between the input schema and the
 * handler: the run waits in `awaiting_approval` for a person's decision on the
 * {@link Approval.ApprovalGate}, bounded by min(the approval timeout, what is left of
 * the step, what is left of the run) (R4.2). Private to the runtime.
 */
import { Effect, Exit, Result, Schema } from "effect"
import type * as RunState from "../../events/RunState.ts"
import * as UserCode from "../../failure/UserCode.ts"
import type * as Model from "../../model/Model.ts"
import * as Approval from "../../tools/Approval.ts"
import type * as Tool from "../../tools/Tool.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as RunContext from "../internal/RunContext.ts"
import { isStop, Stop } from "./ApprovalStop.ts"
import { recordNeverRan } from "./internal/ToolInterruption.ts"

export { isStop, Stop }

const enter = (ctx: RunContext.RunContext) => RunContext.hold(ctx, "awaiting_approval", "tool_executing")
const leave = (ctx: RunContext.RunContext) => RunContext.release(ctx, "awaiting_approval", "tool_executing")

const checkDecision = UserCode.check(
  Schema.Union([
    Schema.TaggedStruct("Approved", { by: Schema.optional(Schema.String) }),
    Schema.TaggedStruct("Rejected", { reason: Schema.String, by: Schema.optional(Schema.String) })
  ]),
  "the approval gate's decision"
)

const expired: unique symbol = Symbol.for("effect-agent-runtime/ApprovalWait/expired")

/**
 * Puts `call` on the gate and waits for its decision. Succeeds when it is approved;
 * fails with a {@link Stop} when it is rejected or expires. An interruption (cancel,
 * run deadline) withdraws the request and records the call as cancelled: it never ran.
 */
export const awaitDecision = (
  ctx: RunContext.RunContext,
  approvalMillis: number | undefined,
  call: Model.ToolCall,
  tool: Tool.Any,
  args: Record<string, unknown>
): Effect.Effect<void, Stop | RunState.IllegalTransition> =>
  Effect.withFiber((fiber) => {
    const gate = fiber.getRef(Approval.ApprovalGate)
    const { millis, layer } = RunContext.bound(ctx, approvalMillis, "approval")
    const requestedAt = RunContext.now(ctx)
    const illegal = enter(ctx)
    if (illegal !== undefined) return Exit.fail(illegal)
    const request: Approval.Request = {
      runId: ctx.runId,
      callId: call.id,
      tool: tool.name,
      arguments: args,
      sideEffect: tool.metadata.sideEffect,
      requestedAt,
      expiresAt: requestedAt + millis
    }
    RunContext.emit(ctx, {
      _tag: "approval.requested",
      callId: call.id,
      name: call.name,
      arguments: args,
      expiresAt: request.expiresAt
    })
    const decided = (
      decision: "approved" | "rejected" | "expired",
      extra: { readonly by?: string | undefined; readonly reason?: string | undefined }
    ): RunState.IllegalTransition | undefined => {
      RunContext.emit(ctx, {
        _tag: "approval.decided",
        callId: call.id,
        name: call.name,
        decision,
        ...(extra.by !== undefined ? { by: extra.by } : {}),
        ...(extra.reason !== undefined ? { reason: extra.reason } : {}),
        ...(decision === "expired" ? { layer } : {})
      })
      return leave(ctx)
    }
    // A gate is user code (R12): a throw, a non-Effect or an answer that is not a decision
    // ends the run internal_error; a decision is never guessed.
    const asked = Effect.flatMap(
      UserCode.orDie(
        "the approval gate",
        UserCode.effectOrDie("the approval gate", () => gate.request(request))
      ),
      (decision) => {
        const checked = checkDecision(decision)
        return Result.isSuccess(checked)
          ? Exit.succeed(checked.success)
          : Exit.die(new UserCode.UserCodeDefect(checked.failure))
      }
    )
    // The run deadline's own timer interrupts the wait; a tighter layer needs one here.
    const wait: Effect.Effect<Approval.Decision | typeof expired> =
      layer === "run" ? asked : Effect.timeoutOrElse(asked, { duration: millis, orElse: () => Effect.succeed(expired) })
    const withdraw = (detail: string) =>
      Effect.sync(() => {
        RunContext.emit(ctx, { _tag: "approval.decided", callId: call.id, name: call.name, decision: "withdrawn" })
        recordNeverRan(ctx, call, detail)
        // The run is ending (cancel, deadline, another call's stop, a broken gate): back to the batch's phase.
        leave(ctx)
      })
    return Effect.flatMap(
      wait.pipe(
        Effect.onInterrupt(() => withdraw("withdrawn while waiting for approval; it never ran")),
        Effect.tapDefect(() => withdraw("the approval gate failed; the call never ran"))
      ),
      (decision): Effect.Effect<void, Stop | RunState.IllegalTransition> => {
        if (decision === expired) {
          const moved = decided("expired", {})
          if (moved !== undefined) return Exit.fail(moved)
          const what = `${call.name} (${call.id}) waited ${millis} ms for approval`
          return Exit.fail(
            layer === "step"
              ? blocked(ctx, call, "step_timeout", "approval_expired", `${what}: the step deadline passed`)
              : blocked(ctx, call, "approval_expired", "approval_expired", `${what}: no decision before it expired`)
          )
        }
        if (decision._tag === "Approved") {
          const moved = decided("approved", { by: decision.by })
          return moved === undefined ? Exit.void : Exit.fail(moved)
        }
        const moved = decided("rejected", { by: decision.by, reason: decision.reason })
        if (moved !== undefined) return Exit.fail(moved)
        const who = decision.by !== undefined ? ` by ${decision.by}` : ""
        return Exit.fail(
          blocked(
            ctx,
            call,
            "approval_rejected",
            "approval_rejected",
            `${call.name} (${call.id}) was rejected${who}: ${decision.reason}`
          )
        )
      }
    )
  })

/** Ends the call's events (`tool.blocked`) and makes the run's stop. */
const blocked = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  reason: Stop["reason"],
  code: "approval_rejected" | "approval_expired",
  detail: string
): Stop => {
  const error: ToolResult.ToolError = { code, message: detail, correctable: false }
  RunContext.emit(ctx, { _tag: "tool.blocked", callId: call.id, name: call.name, error })
  return new Stop(reason, detail)
}
