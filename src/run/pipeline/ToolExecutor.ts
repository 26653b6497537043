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
import { Cause, Effect, Exit, Predicate, Schema } from "effect"
import type * as Model from "../../model/Model.ts"
import type * as Permission from "../../tools/Permission.ts"
import * as Redaction from "../../tools/Redaction.ts"
import * as Signature from "../../tools/Signature.ts"
import * as Tool from "../../tools/Tool.ts"
import * as ToolArguments from "../../tools/ToolArguments.ts"
import { compiled } from "../../tools/ToolCodec.ts"
import * as ToolResult from "../../tools/ToolResult.ts"
import * as CallId from "../internal/CallId.ts"
import * as RunContext from "../internal/RunContext.ts"
import * as ApprovalWait from "./ApprovalWait.ts"
import { attempt, awaitHandler, recover, recoverFinished } from "./internal/ToolAttempt.ts"
import { type Call, callHandler, failed, type Ran } from "./internal/ToolCall.ts"
import { lateDetail, recordNeverRan } from "./internal/ToolInterruption.ts"
import { afterHandler } from "./internal/ToolOutput.ts"
import { checkPermission } from "./internal/ToolPermission.ts"
import type { Registry } from "./Registry.ts"

export {
  defaultLimits,
  describeIssue,
  type Limits,
  type ParsedArguments,
  parseArguments
} from "../../tools/ToolArguments.ts"
/**
 * Argument parsing and schema-issue messages live in `ToolArguments`; re-exported here
 * because they are steps of this pipeline.
 *
 * @since 0.1.0
 */
/** How the run records a call it leaves behind when it ends. */
export { recordAbandoned } from "./internal/ToolInterruption.ts"
export {
  type ExecutionError,
  noTimeLimits,
  type Registry,
  registry,
  type TimeLimits
} from "./Registry.ts"

/** The effect as its `Exit` when it has already finished (an `Exit` is an `Effect`), else `undefined`. */
const finished = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? (effect as Exit.Exit<A, E>) : undefined

const settlements: ReadonlySet<unknown> = new Set(Tool.Settlement.literals)

/**
 * What a handler said became of its action, as the run records it (R12): a settlement
 * outside `Tool.Settlement` is recorded as `outcome_unknown`, the cautious word, saying so.
 */
const settledBy = (settlement: unknown, detail: unknown): NonNullable<Call["settled"]> => {
  if (!settlements.has(settlement)) {
    return {
      settlement: "outcome_unknown",
      detail: "the handler settled with a value that is not a settlement; whether its action took effect is unknown"
    }
  }
  return {
    settlement: settlement as Tool.Settlement,
    detail: typeof detail === "string" ? detail.slice(0, 1000) : "the handler gave no detail"
  }
}

/** Input schema, then the handler's first attempt. */
const afterPermission = (
  ctx: RunContext.RunContext,
  registry: Registry,
  prepared: Prepared,
  tool: Tool.Any,
  args: Record<string, unknown>,
  decision: Permission.Decision
): Ran => {
  const call = prepared.call
  // The policy may have taken its time: past the deadline, nothing more of the call starts.
  if (RunContext.deadlinePassed(ctx)) {
    recordNeverRan(ctx, call, lateDetail)
    return RunContext.expire(ctx)
  }
  if (decision._tag === "Deny") {
    const error: ToolResult.ToolError = {
      code: "permission_denied",
      message: Redaction.maskText(`${decision.rule}: ${decision.reason}`, prepared.secrets),
      correctable: false
    }
    RunContext.emit(ctx, { _tag: "tool.blocked", callId: call.id, name: call.name, error })
    return Exit.succeed(ToolResult.failed(call.id, call.name, error, "blocked"))
  }
  const codec = compiled(tool)
  const decoded = prepared.decoded ?? codec.decode(args)
  if (Exit.isFailure(decoded)) {
    const schemaError = Cause.squash(decoded.cause)
    const described = Schema.isSchemaError(schemaError)
      ? ToolArguments.describeIssue(schemaError.issue)
      : { message: "arguments do not match the tool's input schema", fieldPaths: [] }
    return Exit.succeed(
      failed(
        ctx,
        call,
        {
          code: "input_validation_failed",
          message: Redaction.maskText(described.message, prepared.secrets),
          correctable: true,
          fieldPaths: described.fieldPaths
        },
        tool.metadata.maxRetries
      )
    )
  }
  const c: Call = {
    ctx,
    registry,
    call,
    tool,
    codec,
    args: prepared.shown,
    secrets: prepared.secrets,
    input: decoded.value,
    context: {
      runId: ctx.runId,
      callId: call.id,
      idempotencyKey: `${ctx.runId}:${call.id}`,
      settle: (settlement, detail) => {
        c.settled = settledBy(settlement, detail)
      }
    },
    attempt: 0,
    settled: undefined
  }
  if (tool.metadata.needsApproval) {
    return Effect.flatMap(
      ApprovalWait.awaitDecision(ctx, registry.time.approvalMillis, call, tool, prepared.shown),
      () => firstAttempt(c)
    )
  }
  return firstAttempt(c)
}

/** The handler's first attempt, then whatever its result needs. */
const firstAttempt = (c: Call): Ran => {
  // The deadline may have passed while the timer could not fire (R3.11): no new action.
  if (RunContext.deadlinePassed(c.ctx)) {
    recordNeverRan(c.ctx, c.call, lateDetail)
    return RunContext.expire(c.ctx)
  }
  // A tool with its own timeout, in a step with a deadline, or behind a circuit
  // breaker runs every attempt in the whole wrapper.
  if (
    c.tool.metadata.timeout !== undefined ||
    c.ctx.stepDeadlineAt !== Number.POSITIVE_INFINITY ||
    c.ctx.breakers !== undefined
  ) {
    return Effect.matchCauseEffect(attempt(c), {
      onSuccess: (output) => afterHandler(c, output),
      onFailure: (cause) => recover(c, cause)
    }) as Ran
  }
  // Otherwise the first attempt runs bare: nothing to wrap for a handler that has
  // already finished (an `Exit`), and for one still running only an observer that
  // records its interruption; recovery is built only for a failure.
  const running = callHandler(c)
  const done = finished(running)
  if (done !== undefined) {
    return Exit.isSuccess(done) ? afterHandler(c, done.value) : recoverFinished(c, done.cause)
  }
  return awaitHandler(c, running)
}

/**
 * One call of a batch, made ready before any of the batch runs: its run-unique identity
 * (R3.8), its arguments parsed (R3.5), its input decoded ahead when its schema holds a
 * `Redacted` (only to find the secrets: the pipeline still reports in its own order), and
 * its signature, with those values masked (R3.1).
 *
 * @category models
 * @since 0.1.0
 */
export interface Prepared {
  /** The call, under the run's own identity (`call.id`). */
  readonly call: Model.ToolCall
  /** The id the model gave the call, for the conversation. */
  readonly toolCallId: string
  readonly parsed: ToolArguments.ParsedArguments
  /** The decoded input, when it was decoded ahead (a sensitive tool whose arguments parsed). */
  readonly decoded: Exit.Exit<unknown, Schema.SchemaError> | undefined
  /** The plain values of the `Redacted`s in the decoded input. */
  readonly secrets: ReadonlyArray<string>
  /** The arguments as events and approvals show them: parsed, with the secrets masked. */
  readonly shown: Record<string, unknown>
  /**
   * The arguments as the log and the conversation keep what the model sent: its text as
   * it is; a value a provider parsed itself as its JSON snapshot, or, when the pipeline
   * refuses it (a cycle, a function, too deep, not an object), a text saying why.
   */
  readonly recorded: unknown
  readonly signature: string
}

// A JSON syntax error quotes the text around it: for a sensitive tool, it could be the secret.
const notJson = "arguments are not valid JSON"

/**
 * The secrets of a call and what it shows of its arguments (see `Redaction`): for a tool
 * whose input schema holds no `Redacted`, the arguments as parsed and no secret.
 */
const redacted = (
  codec: ReturnType<typeof compiled> | undefined,
  parsed: ToolArguments.ParsedArguments,
  decoded: Exit.Exit<unknown, Schema.SchemaError> | undefined
): { readonly secrets: ReadonlyArray<string>; readonly shown: Record<string, unknown> } => {
  if (parsed._tag === "Invalid") return { secrets: [], shown: {} }
  if (codec === undefined || !codec.sensitiveInput) return { secrets: [], shown: parsed.value }
  if (decoded === undefined || Exit.isFailure(decoded)) {
    // It did not decode: nobody knows which part is secret, so every part is.
    const secrets = Redaction.allLeaves(parsed.value)
    return { secrets, shown: Redaction.maskValue(parsed.value, secrets) as Record<string, unknown> }
  }
  const secrets = Redaction.secretsOf(decoded.value)
  const shown = Redaction.shownBy(codec.encodeInput, decoded.value, secrets)
  return Predicate.isObject(shown) && !Array.isArray(shown)
    ? { secrets, shown: shown as Record<string, unknown> }
    : {
        secrets,
        shown: Redaction.maskValue(parsed.value, [...secrets, ...Redaction.allLeaves(parsed.value)]) as Record<
          string,
          unknown
        >
      }
}

const nameShown = (name: string): string => (name.length > 64 ? `${name.slice(0, 64)}…` : name)

/**
 * Prepares one call the model asked for (see {@link Prepared}); `used` holds the
 * identities this run has given so far.
 *
 * @category constructors
 * @since 0.1.0
 */
export const prepare = (registry: Registry, used: CallId.Identities, call: Model.ToolCall): Prepared => {
  const id = CallId.assign(used, call.id)
  const parsed = ToolArguments.parseArguments(call.arguments, registry.limits)
  const tool = registry.tools.get(call.name)
  const codec = tool === undefined ? undefined : compiled(tool)
  // Decoded ahead only to find a sensitive tool's secrets: the others decode in the pipeline,
  // and only if the batch gets that far.
  const decoded =
    parsed._tag === "Ok" && codec !== undefined && codec.sensitiveInput ? codec.decode(parsed.value) : undefined
  const { secrets, shown } = redacted(codec, parsed, decoded)
  return {
    call: id === call.id ? call : { ...call, id },
    toolCallId: call.id,
    parsed:
      codec?.sensitiveInput === true && parsed._tag === "Invalid" && parsed.message.startsWith(notJson)
        ? { _tag: "Invalid", message: notJson }
        : parsed,
    decoded,
    secrets,
    shown,
    recorded:
      typeof call.arguments === "string" || call.arguments === undefined
        ? call.arguments
        : parsed._tag === "Ok"
          ? parsed.value
          : `<arguments refused: ${parsed.message}>`,
    signature:
      parsed._tag === "Ok" ? Signature.toolCallParsed(call.name, shown) : Signature.unparsed(call.name, call.arguments)
  }
}

/**
 * Runs one prepared call now, for a caller that has the run's permission policy and
 * yields the result at once (the loop). Everything up to the handler is synchronous,
 * and a call that never waits returns a finished `Exit`. Publishes `tool.started`, then
 * exactly one of `tool.succeeded`, `tool.failed` or `tool.blocked`, or `tool.interrupted`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const executeNow = (
  ctx: RunContext.RunContext,
  registry: Registry,
  prepared: Prepared,
  permission: Permission.PermissionService
): Ran => {
  const call = prepared.call
  // No new action once the deadline has passed (R3.11), even if its timer could not fire yet.
  if (RunContext.deadlinePassed(ctx)) return RunContext.expire(ctx)
  RunContext.record(ctx, {
    _tag: "tool.started",
    callId: call.id,
    toolCallId: prepared.toolCallId,
    name: call.name,
    signature: prepared.signature,
    runId: ctx.runId,
    seq: 0,
    at: 0
  })
  const tool = registry.tools.get(call.name)
  if (tool === undefined) {
    const known = [...registry.tools.keys()].join(", ")
    return Exit.succeed(
      failed(
        ctx,
        call,
        {
          code: "unknown_tool",
          message: `there is no tool named ${JSON.stringify(nameShown(call.name))}; the tools are: ${known}`,
          correctable: true
        },
        Tool.defaultMaxRetries
      )
    )
  }
  const parsed = prepared.parsed
  if (parsed._tag === "Invalid") {
    return Exit.succeed(
      failed(
        ctx,
        call,
        { code: "invalid_arguments", message: parsed.message, correctable: true },
        tool.metadata.maxRetries
      )
    )
  }
  const args = parsed.value
  const checked = checkPermission(permission, { tool, arguments: args, runId: ctx.runId, callId: call.id })
  const decided = finished(checked)
  if (decided !== undefined) {
    return Exit.isSuccess(decided)
      ? afterPermission(ctx, registry, prepared, tool, args, decided.value)
      : Exit.failCause(decided.cause)
  }
  // A policy that takes its time is a wait like any other: interrupted, the call never ran (R5.2).
  const waited = Effect.onInterrupt(checked, () =>
    Effect.sync(() => recordNeverRan(ctx, call, "interrupted while the permission policy decided; it never ran"))
  )
  return Effect.flatMap(waited, (decision) => afterPermission(ctx, registry, prepared, tool, args, decision))
}
