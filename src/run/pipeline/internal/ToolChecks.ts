/**
 * The checks of a tool call before its handler (R3.5, R3.6): the tool looked up, its
 * arguments parsed, the permission policy's denial, the input schema. A call that fails
 * one is refused with one feedback value, which becomes its `ToolResult`. Private to
 * the runtime.
 */
import { Cause, Exit, Schema } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import * as Text from "../../../failure/Text.ts"
import type * as Model from "../../../model/Model.ts"
import type * as Deadline from "../../../time/Deadline.ts"
import type * as Permission from "../../../tools/Permission.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import * as Tool from "../../../tools/Tool.ts"
import * as ToolArguments from "../../../tools/ToolArguments.ts"
import { compiled } from "../../../tools/ToolCodec.ts"
import * as ToolResult from "../../../tools/ToolResult.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type { Registry } from "../Registry.ts"
import { type Call, cutToObservation, describeTimeout, failed, maskedObservation } from "./ToolCall.ts"
import type { Prepared } from "./ToolPrepare.ts"

/** A call refused before its handler ran: the feedback the model gets, as one value. */
export interface Refused {
  readonly _tag: "Refused"
  readonly error: ToolResult.ToolError
  /** `tool.blocked` (a policy said no) rather than `tool.failed` (the call is wrong). */
  readonly blocked: boolean
  readonly maxRetries: number
}

const refused = (error: ToolResult.ToolError, maxRetries: number, blocked = false): Refused => ({
  _tag: "Refused",
  error,
  blocked,
  maxRetries
})

/** Records a refusal and gives the call's result. */
export const refuse = (ctx: RunContext.RunContext, call: Model.ToolCall, refusal: Refused): ToolResult.ToolResult => {
  if (!refusal.blocked) return failed(ctx, call, refusal.error, refusal.maxRetries)
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "tool.blocked",
    callId: call.id,
    name: call.name,
    error: refusal.error,
    runId,
    seq,
    at
  }))
  return ToolResult.failed(call.id, call.name, refusal.error, "blocked")
}

const nameShown = (name: string): string => Text.clip(name, 64)

const isSettlement = Schema.is(Tool.Settlement)

/**
 * What a handler said became of its action, as the run records it (R12): a settlement
 * outside `Tool.Settlement` is recorded as `outcome_unknown`, the cautious word, saying so.
 */
const settledBy = (
  settlement: unknown,
  detail: unknown,
  secrets: Redaction.Secrets
): NonNullable<Call<unknown>["settled"]> => {
  if (!isSettlement(settlement)) {
    return {
      settlement: "outcome_unknown",
      detail: "the handler settled with a value that is not a settlement; whether its action took effect is unknown"
    }
  }
  return {
    settlement,
    // The call's secrets are masked before the cut, so that no part of one is left (R12).
    detail:
      typeof detail === "string" ? Text.head(Redaction.maskText(detail, secrets), 1000) : "the handler gave no detail"
  }
}

/**
 * The checks before the permission policy: the tool exists and its arguments parsed.
 * Gives the tool and the arguments, or the call's refusal.
 */
export const lookup = <R>(
  registry: Registry<R>,
  prepared: Prepared
): Refused | { readonly _tag: "Found"; readonly tool: Tool.Any<R>; readonly args: Record<string, unknown> } => {
  const call = prepared.call
  const tool = registry.tools.get(call.name)
  if (tool === undefined) {
    const known = [...registry.tools.keys()].join(", ")
    return refused(
      {
        code: "unknown_tool",
        message: `there is no tool named ${JSON.stringify(nameShown(call.name))}; the tools are: ${known}`,
        correctable: true
      },
      Tool.defaultMaxRetries
    )
  }
  const parsed = prepared.parsed
  if (parsed._tag === "Invalid") {
    return refused({ code: "invalid_arguments", message: parsed.message, correctable: true }, tool.metadata.maxRetries)
  }
  return { _tag: "Found", tool, args: parsed.value }
}

/** A denial of the permission policy (R3.6), as the call's refusal: its reason masked, and cut as an observation is (R12). */
export const denied = (
  prepared: Prepared,
  tool: Tool.Any<unknown>,
  decision: Extract<Permission.Decision, { readonly _tag: "Deny" }>,
  maxChars: number
): Refused =>
  refused(
    {
      code: "permission_denied",
      message: maskedObservation(`${decision.rule}: ${decision.reason}`, prepared.secrets, maxChars),
      correctable: false
    },
    tool.metadata.maxRetries,
    true
  )

/**
 * A permission policy that did not answer within the tool's timeout or the step: the call
 * is refused (the policy failed closed) and never runs. Cut off by the step deadline, the
 * refusal carries that timeout, and the step ends `step_timeout` (R4.2).
 */
export const unanswered = (tool: Tool.Any<unknown>, timeout: Deadline.Timeout): Refused => {
  const { layer, afterMillis } = timeout
  const failure = FailureBoundary.actionTimeout({
    source: "tool",
    layer,
    afterMillis,
    what: `the permission policy for ${tool.name}`,
    mayHaveSideEffects: false,
    idempotent: true
  })
  return refused(
    {
      code: "permission_denied",
      message: `policy_failed: the permission policy did not answer within ${describeTimeout(timeout)}; the call is refused`,
      correctable: false,
      ...(layer === "step" ? { failure: Failure.summarize(failure) } : {})
    },
    tool.metadata.maxRetries,
    true
  )
}

/**
 * The input schema: gives the call ready for its handler (its input decoded by the
 * tool's own schema, R3.5), or its refusal.
 */
export const decode = <R>(
  ctx: RunContext.RunContext,
  registry: Registry<R>,
  prepared: Prepared,
  tool: Tool.Any<R>,
  args: Record<string, unknown>
): Refused | { readonly _tag: "Ready"; readonly call: Call<R> } => {
  const call = prepared.call
  const codec = compiled(tool)
  const decoded = prepared.decoded ?? codec.decode(args)
  if (Exit.isFailure(decoded)) {
    const schemaError = Cause.squash(decoded.cause)
    if (!Schema.isSchemaError(schemaError)) {
      // The schema broke (a step that throws, or one that needs a fiber): the tool's fault, not the model's.
      const failure = Failure.fromDefect("tool", schemaError, "input_schema_defect")
      return refused(
        {
          code: "tool_failed",
          message: cutToObservation(
            `the tool's input schema could not decode the arguments: ${failure.hint}`,
            registry.limits.maxObservationChars
          ),
          correctable: false,
          failure: Failure.summarize(failure)
        },
        tool.metadata.maxRetries
      )
    }
    const described = ToolArguments.describeIssue(schemaError.issue)
    return refused(
      {
        code: "input_validation_failed",
        message: cutToObservation(
          Redaction.maskText(described.message, prepared.secrets),
          registry.limits.maxObservationChars
        ),
        correctable: true,
        fieldPaths: described.fieldPaths
      },
      tool.metadata.maxRetries
    )
  }
  const c: Call<R> = {
    ctx,
    registry,
    call,
    tool,
    codec,
    args: prepared.shown,
    secrets: prepared.secrets,
    input: decoded.value,
    recorded: prepared.recorded,
    context: {
      runId: ctx.runId,
      callId: call.id,
      idempotencyKey: `${ctx.runId}:${call.id}`,
      settle: (settlement, detail) => {
        c.settled = settledBy(settlement, detail, prepared.secrets)
      },
      sideEffect: tool.metadata.sideEffect
    },
    attempt: 0,
    settled: undefined
  }
  return { _tag: "Ready", call: c }
}
