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
import { Cause, Duration, Effect, Exit, Result, Schema } from "effect"
import * as Failure from "./Failure.ts"
import * as FailureBoundary from "./FailureBoundary.ts"
import * as ApprovalWait from "./internal/ApprovalWait.ts"
import * as RunContext from "./internal/RunContext.ts"
import type * as Model from "./Model.ts"
import * as Permission from "./Permission.ts"
import * as Reconciliation from "./Reconciliation.ts"
import * as Recovery from "./Recovery.ts"
import type * as RunState from "./RunState.ts"
import * as Signature from "./Signature.ts"
import * as Tool from "./Tool.ts"
import * as ToolArguments from "./ToolArguments.ts"
import * as ToolResult from "./ToolResult.ts"

/**
 * Argument parsing and schema-issue messages live in `ToolArguments`; re-exported here
 * because they are steps of this pipeline.
 *
 * @since 0.1.0
 */
export {
  defaultLimits,
  describeIssue,
  type Limits,
  type ParsedArguments,
  parseArguments
} from "./ToolArguments.ts"

interface Compiled {
  // Synchronous: tool schemas need no services, and an Exit costs no fiber step.
  readonly decode: (input: unknown) => Exit.Exit<unknown, Schema.SchemaError>
  readonly encode: (output: unknown) => Exit.Exit<unknown, Schema.SchemaError>
}

const compiledCache = new WeakMap<Tool.Any, Compiled>()

const compiled = (tool: Tool.Any): Compiled => {
  let entry = compiledCache.get(tool)
  if (entry === undefined) {
    entry = {
      decode: Schema.decodeUnknownExit(tool.input, { errors: "all" }),
      encode: Schema.encodeUnknownExit(tool.output)
    }
    compiledCache.set(tool, entry)
  }
  return entry
}

const truncate = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… [observation cut: ${text.length - max} more characters]`

const ownTimeouts = new WeakMap<Tool.Any, number>()

/** A tool's own timeout in milliseconds, parsed once per tool. */
const ownTimeout = (tool: Tool.Any): number | undefined => {
  const own = tool.metadata.timeout
  if (own === undefined) return undefined
  let millis = ownTimeouts.get(tool)
  if (millis === undefined) {
    millis = Duration.toMillis(Duration.fromInputUnsafe(own))
    ownTimeouts.set(tool, millis)
  }
  return millis
}

/**
 * Bounds a handler by min(the tool's own timeout, what is left of the step, what is
 * left of the run) (R4.2), measured when each attempt starts, so a retry gets only what
 * is left. A call cut off is a timeout failure naming the layer that fired; for a tool
 * that may have had a side effect and is not idempotent it is an `UnknownOutcome`
 * (R3.8): stopping the wait does not undo the effect, unless the handler said, when it
 * was interrupted, that it stopped before doing anything (`settle("cancelled")`). When
 * the run's deadline is the tightest, the run's timer is the one that fires, and no
 * second timer is needed.
 */
const within =
  (c: Call) =>
  <A, R>(self: Effect.Effect<A, Failure.Failure, R>): Effect.Effect<A, Failure.Failure, R> =>
    Effect.suspend(() => {
      const tool = c.tool
      const { millis, layer } = RunContext.bound(c.ctx, ownTimeout(tool), "tool")
      if (layer === "run") return self
      return Effect.timeoutOrElse(self, {
        duration: millis,
        orElse: () =>
          Effect.fail(
            FailureBoundary.actionTimeout({
              source: "tool",
              layer,
              afterMillis: millis,
              what: tool.name,
              mayHaveSideEffects: c.settled?.settlement !== "cancelled" && mayHaveEffects(tool),
              idempotent: tool.metadata.idempotent
            })
          )
      })
    })

/**
 * What the executor needs to know about the run it serves.
 *
 * @category models
 * @since 0.1.0
 */
export interface Registry {
  readonly tools: ReadonlyMap<string, Tool.Any>
  readonly limits: ToolArguments.Limits
  readonly recovery: Recovery.Settings
  readonly time: TimeLimits
}

/**
 * The time layers below the run deadline (R4.1), in milliseconds; `undefined` when a
 * layer is not set. A tool's own timeout is in its metadata.
 *
 * @category models
 * @since 0.1.0
 */
export interface TimeLimits {
  readonly stepMillis: number | undefined
  readonly attemptMillis: number | undefined
  readonly approvalMillis: number | undefined
}

/**
 * No layer below the run deadline.
 *
 * @category constructors
 * @since 0.1.0
 */
export const noTimeLimits: TimeLimits = { stepMillis: undefined, attemptMillis: undefined, approvalMillis: undefined }

/**
 * @category constructors
 * @since 0.1.0
 */
export const registry = (
  tools: ReadonlyArray<Tool.Any>,
  limits: ToolArguments.Limits = ToolArguments.defaultLimits,
  recovery: Recovery.Settings = Recovery.defaults,
  time: TimeLimits = noTimeLimits
): Registry => ({
  tools: new Map(tools.map((tool) => [tool.name, tool])),
  limits,
  recovery,
  time
})

const failed = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  error: ToolResult.ToolError,
  maxRetries: number,
  status: "failed" | "inconsistent" = "failed"
): ToolResult.ToolResult => {
  RunContext.emit(ctx, { _tag: "tool.failed", callId: call.id, name: call.name, error, maxRetries })
  return ToolResult.failed(call.id, call.name, error, status)
}

const mayHaveEffects = (tool: Tool.Any): boolean =>
  tool.metadata.sideEffect === "write" || tool.metadata.sideEffect === "external"

type Handler = (input: unknown, context: Tool.CallContext) => Effect.Effect<unknown, Failure.Failure, unknown>

/** One call that passed its checks: what its attempts and its ending need. */
interface Call {
  readonly ctx: RunContext.RunContext
  readonly registry: Registry
  readonly call: Model.ToolCall
  readonly tool: Tool.Any
  readonly codec: Compiled
  readonly args: Record<string, unknown>
  readonly input: unknown
  readonly context: Tool.CallContext
  /** What the handler said became of its action, if it said (`context.settle`). */
  settled: { readonly settlement: Tool.Settlement; readonly detail: string } | undefined
}

type Ran = Effect.Effect<ToolResult.ToolResult, ExecutionError, unknown>

/**
 * What running a call fails with: only an interruption, a broken invariant, or a stop
 * the run must take (an approval that was rejected or expired, R7).
 *
 * @category models
 * @since 0.1.0
 */
export type ExecutionError = Failure.Failure | RunState.IllegalTransition | Recovery.Exhausted | ApprovalWait.Stop

/** The effect as its `Exit` when it has already finished (an `Exit` is an `Effect`), else `undefined`. */
const finished = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? (effect as Exit.Exit<A, E>) : undefined

/** Without a handler's own word, an interrupted call that could change the world may have. */
const recordInterrupt = (c: Call): void => {
  const tool = c.tool
  const effects = mayHaveEffects(tool)
  const { settlement, detail } = c.settled ?? {
    settlement: effects ? "outcome_unknown" : "cancelled",
    detail: effects
      ? `interrupted; a ${tool.metadata.sideEffect} action may or may not have taken effect`
      : `interrupted; a ${tool.metadata.sideEffect === "none" ? "pure" : "read-only"} call leaves nothing behind`
  }
  RunContext.emit(c.ctx, { _tag: "tool.interrupted", callId: c.call.id, name: c.call.name, settlement, detail })
}

/** A defect in the handler is a failure of the tool, never a crash of the run. */
const defectToFailure = (defect: unknown) => Effect.fail(Failure.fromDefect("tool", defect, "tool_defect"))

/** One attempt with the whole wrapper: defects caught, interruption recorded, the tool's own timeout. */
const attempt = (c: Call): Effect.Effect<unknown, Failure.Failure> => {
  const wrapped = Effect.suspend(() => (c.tool.handler as Handler)(c.input, c.context)).pipe(
    Effect.catchDefect(defectToFailure),
    Effect.onInterrupt(() => Effect.sync(() => recordInterrupt(c))),
    within(c)
  ) as Effect.Effect<unknown, Failure.Failure>
  // The tool's circuit breaker (R3.9) sees one outcome per attempt, its timeout inside it.
  const breakers = c.ctx.breakers
  return breakers === undefined ? wrapped : breakers.guard("tool", c.tool.name, wrapped)
}

const episodeOf = (c: Call): Recovery.Episode => ({
  kind: "tool_retry",
  source: "tool",
  resume: "tool_executing",
  schedule: c.registry.recovery.schedule,
  maxRecoveries: c.registry.recovery.maxRecoveries,
  maxRetries: c.tool.metadata.maxRetries,
  // Only an idempotent call is safe to send twice (R3.7).
  allowed: c.tool.metadata.idempotent
})

/** The recovery of a first attempt that failed (R3.3, R3.7), then reconciliation of what is left (R3.8). */
const recover = (c: Call, cause: Cause.Cause<Failure.Failure>): Ran =>
  Effect.matchCauseEffect(
    Recovery.recoverFrom(c.ctx, episodeOf(c), () => attempt(c), cause),
    {
      onSuccess: (output) => afterHandler(c, output),
      onFailure: (cause): Ran => {
        if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
        const squashed = Cause.squash(cause)
        const first = Recovery.isExhausted(squashed) ? squashed.failure : Failure.fromCause("tool", cause)
        return Effect.flatMap(Reconciliation.reconcile(c.ctx, c.tool, c.input, c.context, first), (reconciled): Ran => {
          if (reconciled._tag === "Applied") return afterHandler(c, reconciled.output)
          const failure = reconciled.failure
          return Exit.succeed(
            failed(
              c.ctx,
              c.call,
              { code: "tool_failed", message: failure.hint, correctable: false, failure: Failure.summarize(failure) },
              c.tool.metadata.maxRetries
            )
          )
        })
      }
    }
  )

/**
 * A first attempt that ended before anyone waited on it (the handler returned a
 * finished `Exit`): what the wrapper of `attempt` would have made of its failure.
 */
const recoverFinished = (c: Call, cause: Cause.Cause<Failure.Failure>): Ran => {
  const defect = Cause.findDefect(cause)
  if (Result.isSuccess(defect)) return recover(c, Cause.fail(Failure.fromDefect("tool", defect.success, "tool_defect")))
  if (Cause.hasInterrupts(cause)) recordInterrupt(c)
  return recover(c, cause)
}

/** The interruption observer of a handler that is still running when the executor waits on it. */
const observe =
  (c: Call) =>
  (exit: Exit.Exit<unknown, Failure.Failure>): undefined => {
    if (exit._tag === "Failure" && Cause.hasInterrupts(exit.cause)) recordInterrupt(c)
    return undefined
  }

/** `Effect.catchDefect(defectToFailure)`, as one handler of the whole cause. */
const catchDefects = (cause: Cause.Cause<Failure.Failure>): Effect.Effect<never, Failure.Failure> => {
  const defect = Cause.findDefect(cause)
  return Result.isSuccess(defect) ? defectToFailure(defect.success) : Effect.failCause(cause)
}

/**
 * A first attempt still running: `attempt`'s wrapper without the suspension and the
 * timeout (defects caught, then interruption observed), and no recovery unless it fails.
 */
const awaitHandler = (c: Call, running: Effect.Effect<unknown, Failure.Failure, unknown>): Ran =>
  Effect.matchCauseEffect(Effect.onExitPrimitive(Effect.catchCause(running, catchDefects), observe(c)), {
    onSuccess: (output) => afterHandler(c, output),
    onFailure: (cause) => recover(c, cause)
  }) as Ran

/** Output schema, postcondition, observation: the steps after a handler succeeded. */
const afterHandler = (c: Call, output: unknown): Ran => {
  const { ctx, call, tool } = c
  const encoded = c.codec.encode(output)
  if (Exit.isFailure(encoded)) {
    const schemaError = Cause.squash(encoded.cause)
    const detail = Schema.isSchemaError(schemaError)
      ? ToolArguments.describeIssue(schemaError.issue).message
      : "invalid output"
    return Exit.succeed(
      failed(
        ctx,
        call,
        {
          code: "output_validation_failed",
          message: `the tool returned output that does not match its output schema (${detail.replaceAll("arguments", "output")})`,
          correctable: false
        },
        tool.metadata.maxRetries
      )
    )
  }
  if (tool.postcondition === undefined) return Exit.succeed(succeeded(c, output, encoded.value))
  const postcondition = tool.postcondition as (
    input: unknown,
    output: unknown,
    context: Tool.CallContext
  ) => Effect.Effect<boolean, Failure.Failure, unknown>
  return Effect.flatMap(
    Effect.exit(Effect.suspend(() => postcondition(c.input, output, c.context))),
    (confirmed): Ran => {
      if (Exit.isFailure(confirmed) && Cause.hasInterruptsOnly(confirmed.cause))
        return Effect.failCause(confirmed.cause)
      if (Exit.isFailure(confirmed) || !confirmed.value) {
        const why = Exit.isFailure(confirmed)
          ? `the check failed: ${Failure.fromCause("tool", confirmed.cause).hint}`
          : "the check answered false"
        return Exit.succeed(
          failed(
            ctx,
            call,
            {
              code: "inconsistent_result",
              message: `the tool reported success but its postcondition does not hold (${why})`,
              correctable: false
            },
            tool.metadata.maxRetries,
            "inconsistent"
          )
        )
      }
      return Exit.succeed(succeeded(c, output, encoded.value))
    }
  ) as Ran
}

/** Renders the observation and records the success. */
const succeeded = (c: Call, output: unknown, encoded: unknown): ToolResult.ToolResult => {
  const { ctx, call, tool } = c
  const observe = tool.observe as ((output: unknown) => string) | undefined
  let rendered: string
  try {
    rendered = observe !== undefined ? observe(output) : (JSON.stringify(encoded) ?? "null")
  } catch (defect) {
    const failure = Failure.fromCause("tool", Cause.die(defect))
    return failed(
      ctx,
      call,
      {
        code: "tool_failed",
        message: `rendering the output failed: ${failure.hint}`,
        correctable: false,
        failure: Failure.summarize(failure)
      },
      tool.metadata.maxRetries
    )
  }
  const observation = truncate(rendered, c.registry.limits.maxObservationChars)
  RunContext.record(ctx, {
    _tag: "tool.succeeded",
    callId: call.id,
    name: call.name,
    sideEffect: tool.metadata.sideEffect,
    observationDigest: Signature.digest(observation),
    input: c.args,
    output: encoded,
    runId: ctx.runId,
    seq: 0,
    at: 0
  })
  return { callId: call.id, name: call.name, status: "succeeded", output: encoded, observation }
}

/** Input schema, then the handler's first attempt. */
const afterPermission = (
  ctx: RunContext.RunContext,
  registry: Registry,
  call: Model.ToolCall,
  tool: Tool.Any,
  args: Record<string, unknown>,
  decision: Permission.Decision
): Ran => {
  if (decision._tag === "Deny") {
    const error: ToolResult.ToolError = {
      code: "permission_denied",
      message: `${decision.rule}: ${decision.reason}`,
      correctable: false
    }
    RunContext.emit(ctx, { _tag: "tool.blocked", callId: call.id, name: call.name, error })
    return Exit.succeed(ToolResult.failed(call.id, call.name, error, "blocked"))
  }
  const codec = compiled(tool)
  const decoded = codec.decode(args)
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
          message: described.message,
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
    args,
    input: decoded.value,
    context: {
      runId: ctx.runId,
      callId: call.id,
      idempotencyKey: `${ctx.runId}:${call.id}`,
      settle: (settlement, detail) => {
        c.settled = { settlement, detail }
      }
    },
    settled: undefined
  }
  if (tool.metadata.needsApproval) {
    return Effect.flatMap(ApprovalWait.awaitDecision(ctx, registry.time.approvalMillis, call, tool, args), () =>
      firstAttempt(c)
    )
  }
  return firstAttempt(c)
}

/** The handler's first attempt, then whatever its result needs. */
const firstAttempt = (c: Call): Ran => {
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
  let running: Effect.Effect<unknown, Failure.Failure, unknown>
  try {
    running = (c.tool.handler as Handler)(c.input, c.context)
  } catch (defect) {
    running = Exit.die(defect)
  }
  const done = finished(running)
  if (done !== undefined) {
    return Exit.isSuccess(done) ? afterHandler(c, done.value) : recoverFinished(c, done.cause)
  }
  return awaitHandler(c, running)
}

/**
 * `execute` run now, for a caller that has the run's permission policy and yields the
 * result at once (the loop). Everything up to the handler is synchronous, and a call
 * that never waits returns a finished `Exit`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const executeNow = (
  ctx: RunContext.RunContext,
  registry: Registry,
  call: Model.ToolCall,
  signature: string,
  preParsed: ToolArguments.ParsedArguments | undefined,
  permission: Permission.PermissionService
): Ran => {
  RunContext.record(ctx, {
    _tag: "tool.started",
    callId: call.id,
    name: call.name,
    signature,
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
          message: `there is no tool named "${call.name}"; the tools are: ${known}`,
          correctable: true
        },
        Tool.defaultMaxRetries
      )
    )
  }
  const parsed = preParsed ?? ToolArguments.parseArguments(call.arguments, registry.limits)
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
  const checked = permission.check({ tool, arguments: args, runId: ctx.runId, callId: call.id })
  const decided = finished(checked)
  if (decided !== undefined) {
    return Exit.isSuccess(decided)
      ? afterPermission(ctx, registry, call, tool, args, decided.value)
      : Exit.failCause(decided.cause)
  }
  return Effect.flatMap(checked, (decision) => afterPermission(ctx, registry, call, tool, args, decision))
}

/**
 * Runs one call to a result, publishing `tool.started` and then exactly one of
 * `tool.succeeded`, `tool.failed` or `tool.blocked` on the run's timeline.
 *
 * @category combinators
 * @since 0.1.0
 */
export const execute = <_R = unknown>(
  ctx: RunContext.RunContext,
  registry: Registry,
  call: Model.ToolCall,
  signature: string,
  preParsed?: ToolArguments.ParsedArguments
): Effect.Effect<ToolResult.ToolResult, ExecutionError, unknown> =>
  Effect.withFiber((fiber) =>
    executeNow(ctx, registry, call, signature, preParsed, fiber.getRef(Permission.Permission))
  )
