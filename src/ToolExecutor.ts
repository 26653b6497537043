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
import { Cause, Duration, Effect, Exit, Predicate, Schema, SchemaIssue } from "effect"
import * as Failure from "./Failure.ts"
import * as RunContext from "./internal/RunContext.ts"
import type * as Model from "./Model.ts"
import * as Permission from "./Permission.ts"
import * as Reconciliation from "./Reconciliation.ts"
import * as Recovery from "./Recovery.ts"
import * as Signature from "./Signature.ts"
import * as Tool from "./Tool.ts"
import * as ToolResult from "./ToolResult.ts"

/**
 * Limits the pipeline enforces on what the model sends and what it sees back.
 *
 * @category models
 * @since 0.1.0
 */
export interface Limits {
  /** Arguments larger than this (JSON text, in characters) are refused. Default 256 KiB. */
  readonly maxArgumentChars: number
  /** Observations longer than this are cut, saying how much was cut. Default 32 KiB. */
  readonly maxObservationChars: number
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const defaultLimits: Limits = { maxArgumentChars: 256 * 1024, maxObservationChars: 32 * 1024 }

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

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, key) => (Predicate.isNumber(key) ? `${acc}[${key}]` : `${acc}.${String(key)}`), "arguments")

/**
 * Field-level messages for a schema error: `arguments.content: field is required`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const describeIssue = (
  issue: SchemaIssue.Issue
): { readonly message: string; readonly fieldPaths: ReadonlyArray<string> } => {
  const issues = formatter(issue).issues
  const fieldPaths = issues.map((i) => formatPath((i.path ?? []).map((p) => (typeof p === "object" ? p.key : p))))
  const lines = issues.map((i, n) => {
    const text = i.message === "Missing key" ? "field is required" : i.message
    return `${fieldPaths[n]}: ${text}`
  })
  return { message: lines.join("; "), fieldPaths }
}

const findProtoKey = (value: unknown, path: string): string | undefined => {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findProtoKey(value[i], `${path}[${i}]`)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (Predicate.isObject(value)) {
    for (const key of Object.keys(value)) {
      if (key === "__proto__") return `${path}.__proto__`
      const found = findProtoKey((value as Record<string, unknown>)[key], `${path}.${key}`)
      if (found !== undefined) return found
    }
  }
  return undefined
}

const describeType = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`

/**
 * Arguments parsed into a plain JSON object, or why they could not be.
 *
 * @category models
 * @since 0.1.0
 */
export type ParsedArguments =
  | { readonly _tag: "Ok"; readonly value: Record<string, unknown> }
  | { readonly _tag: "Invalid"; readonly message: string }

/**
 * Parses the raw arguments into a plain JSON object, or explains why not.
 *
 * @category combinators
 * @since 0.1.0
 */
export const parseArguments = (raw: unknown, limits: Limits = defaultLimits): ParsedArguments => {
  let value: unknown = raw
  if (Predicate.isString(raw)) {
    if (raw.length > limits.maxArgumentChars) {
      return {
        _tag: "Invalid",
        message: `arguments are ${raw.length} characters, over the limit of ${limits.maxArgumentChars}`
      }
    }
    if (raw.trim() === "") return { _tag: "Ok", value: {} }
    try {
      value = JSON.parse(raw)
    } catch (error) {
      return {
        _tag: "Invalid",
        message: `arguments are not valid JSON (${Predicate.isError(error) ? error.message : "parse error"})`
      }
    }
  } else if (raw !== undefined) {
    const size = JSON.stringify(raw)?.length ?? 0
    if (size > limits.maxArgumentChars) {
      return {
        _tag: "Invalid",
        message: `arguments are ${size} characters, over the limit of ${limits.maxArgumentChars}`
      }
    }
  } else {
    value = {}
  }
  if (!Predicate.isObject(value) || Array.isArray(value)) {
    return { _tag: "Invalid", message: `arguments must be a JSON object, got ${describeType(value)}` }
  }
  const proto = findProtoKey(value, "arguments")
  if (proto !== undefined) return { _tag: "Invalid", message: `${proto}: the key "__proto__" is not allowed` }
  return { _tag: "Ok", value: value as Record<string, unknown> }
}

const truncate = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… [observation cut: ${text.length - max} more characters]`

/**
 * Bounds a handler by min(the tool's own timeout, what is left of the run) (R4.2). A
 * call cut off is a `timeout` failure saying which layer fired; for a tool that is not
 * idempotent it is an `UnknownOutcome` (R3.8): stopping the wait does not undo the effect.
 */
const within =
  (ctx: RunContext.RunContext, tool: Tool.Any) =>
  <A, R>(self: Effect.Effect<A, Failure.Failure, R>): Effect.Effect<A, Failure.Failure, R> => {
    const own = tool.metadata.timeout
    if (own === undefined) return self
    const ownMillis = Duration.toMillis(Duration.fromInputUnsafe(own))
    // Measured when each attempt starts, so a retry gets only what is left. When the
    // run has less time left than the tool's own limit, the run's deadline timer is the
    // one that fires, and no second timer is needed.
    return Effect.suspend(() =>
      ownMillis >= RunContext.remainingMillis(ctx)
        ? self
        : Effect.timeoutOrElse(self, {
            duration: ownMillis,
            orElse: () => {
              const mayHaveEffects = tool.metadata.sideEffect === "write" || tool.metadata.sideEffect === "external"
              const fields = {
                source: "tool" as const,
                category: "timeout",
                code: "tool_timeout",
                attempts: 1,
                hint: `${tool.name} was cut off by the tool timeout after ${ownMillis} ms${
                  mayHaveEffects ? "; its side effects may or may not have happened" : ""
                }`
              }
              return Effect.fail(
                tool.metadata.idempotent || !mayHaveEffects
                  ? new Failure.Retryable(fields)
                  : new Failure.UnknownOutcome(fields)
              )
            }
          })
    )
  }

/**
 * What the executor needs to know about the run it serves.
 *
 * @category models
 * @since 0.1.0
 */
export interface Registry {
  readonly tools: ReadonlyMap<string, Tool.Any>
  readonly limits: Limits
  readonly recovery: Recovery.Settings
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const registry = (
  tools: ReadonlyArray<Tool.Any>,
  limits: Limits = defaultLimits,
  recovery: Recovery.Settings = Recovery.defaults
): Registry => ({
  tools: new Map(tools.map((tool) => [tool.name, tool])),
  limits,
  recovery
})

/**
 * Runs one call to a result, publishing `tool.started` and then exactly one of
 * `tool.succeeded`, `tool.failed` or `tool.blocked` on the run's timeline.
 *
 * @category combinators
 * @since 0.1.0
 */
export const execute = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  registry: Registry,
  call: Model.ToolCall,
  signature: string,
  preParsed?: ParsedArguments
) {
  RunContext.emit(ctx, { _tag: "tool.started", callId: call.id, name: call.name, signature })
  const tool = registry.tools.get(call.name)
  const fail = (error: ToolResult.ToolError, maxRetries: number, status: "failed" | "inconsistent" = "failed") => {
    RunContext.emit(ctx, { _tag: "tool.failed", callId: call.id, name: call.name, error, maxRetries })
    return ToolResult.failed(call.id, call.name, error, status)
  }
  if (tool === undefined) {
    const known = [...registry.tools.keys()].join(", ")
    return fail(
      {
        code: "unknown_tool",
        message: `there is no tool named "${call.name}"; the tools are: ${known}`,
        correctable: true
      },
      Tool.defaultMaxRetries
    )
  }
  const maxRetries = tool.metadata.maxRetries
  const parsed = preParsed ?? parseArguments(call.arguments, registry.limits)
  if (parsed._tag === "Invalid") {
    return fail({ code: "invalid_arguments", message: parsed.message, correctable: true }, maxRetries)
  }

  const permission = yield* Permission.Permission
  const decision = yield* permission.check({ tool, arguments: parsed.value, runId: ctx.runId, callId: call.id })
  if (decision._tag === "Deny") {
    const error: ToolResult.ToolError = {
      code: "permission_denied",
      message: `${decision.rule}: ${decision.reason}`,
      correctable: false
    }
    RunContext.emit(ctx, { _tag: "tool.blocked", callId: call.id, name: call.name, error })
    return ToolResult.failed(call.id, call.name, error, "blocked")
  }

  const codec = compiled(tool)
  const decoded = codec.decode(parsed.value)
  if (Exit.isFailure(decoded)) {
    const schemaError = Cause.squash(decoded.cause)
    const described = Schema.isSchemaError(schemaError)
      ? describeIssue(schemaError.issue)
      : { message: "arguments do not match the tool's input schema", fieldPaths: [] }
    return fail(
      {
        code: "input_validation_failed",
        message: described.message,
        correctable: true,
        fieldPaths: described.fieldPaths
      },
      maxRetries
    )
  }
  const input = decoded.value
  let settled: { readonly settlement: Tool.Settlement; readonly detail: string } | undefined
  const context: Tool.CallContext = {
    runId: ctx.runId,
    callId: call.id,
    idempotencyKey: `${ctx.runId}:${call.id}`,
    settle: (settlement, detail) => {
      settled = { settlement, detail }
    }
  }
  // Without a handler's own word, an interrupted call that could change the world may have.
  const onInterrupt = Effect.sync(() => {
    const mayHaveEffects = tool.metadata.sideEffect === "write" || tool.metadata.sideEffect === "external"
    const { settlement, detail } = settled ?? {
      settlement: mayHaveEffects ? "outcome_unknown" : "cancelled",
      detail: mayHaveEffects
        ? `interrupted; a ${tool.metadata.sideEffect} action may or may not have taken effect`
        : `interrupted; a ${tool.metadata.sideEffect === "none" ? "pure" : "read-only"} call leaves nothing behind`
    }
    RunContext.emit(ctx, { _tag: "tool.interrupted", callId: call.id, name: call.name, settlement, detail })
  })

  const handler = tool.handler as (
    input: unknown,
    context: Tool.CallContext
  ) => Effect.Effect<unknown, Failure.Failure, R>
  const once = Effect.suspend(() => handler(input, context)).pipe(
    Effect.catchDefect((defect) => Effect.fail(Failure.fromDefect("tool", defect, "tool_defect"))),
    Effect.onInterrupt(() => onInterrupt),
    within(ctx, tool)
  )
  const ran = yield* Effect.exit(
    Recovery.retry(
      ctx,
      {
        kind: "tool_retry",
        source: "tool",
        resume: "tool_executing",
        schedule: registry.recovery.schedule,
        maxRecoveries: registry.recovery.maxRecoveries,
        maxRetries,
        // Only an idempotent call is safe to send twice (R3.7).
        allowed: tool.metadata.idempotent
      },
      () => once
    )
  )
  let output: unknown
  if (Exit.isFailure(ran)) {
    if (Cause.hasInterruptsOnly(ran.cause)) return yield* Effect.failCause(ran.cause)
    const squashed = Cause.squash(ran.cause)
    const first = Recovery.isExhausted(squashed) ? squashed.failure : Failure.fromCause("tool", ran.cause)
    const reconciled = yield* Reconciliation.reconcile(ctx, tool, input, context, first)
    if (reconciled._tag === "Failed") {
      const failure = reconciled.failure
      return fail(
        { code: "tool_failed", message: failure.hint, correctable: false, failure: Failure.summarize(failure) },
        maxRetries
      )
    }
    output = reconciled.output
  } else {
    output = ran.value
  }
  const encoded = codec.encode(output)
  if (Exit.isFailure(encoded)) {
    const schemaError = Cause.squash(encoded.cause)
    const detail = Schema.isSchemaError(schemaError) ? describeIssue(schemaError.issue).message : "invalid output"
    return fail(
      {
        code: "output_validation_failed",
        message: `the tool returned output that does not match its output schema (${detail.replaceAll("arguments", "output")})`,
        correctable: false
      },
      maxRetries
    )
  }
  if (tool.postcondition !== undefined) {
    const postcondition = tool.postcondition as (
      input: unknown,
      output: unknown,
      context: Tool.CallContext
    ) => Effect.Effect<boolean, Failure.Failure, R>
    const confirmed = yield* Effect.exit(Effect.suspend(() => postcondition(input, output, context)))
    if (Exit.isFailure(confirmed) && Cause.hasInterruptsOnly(confirmed.cause))
      return yield* Effect.failCause(confirmed.cause)
    if (Exit.isFailure(confirmed) || !confirmed.value) {
      const why = Exit.isFailure(confirmed)
        ? `the check failed: ${Failure.fromCause("tool", confirmed.cause).hint}`
        : "the check answered false"
      return fail(
        {
          code: "inconsistent_result",
          message: `the tool reported success but its postcondition does not hold (${why})`,
          correctable: false
        },
        maxRetries,
        "inconsistent"
      )
    }
  }
  const observe = tool.observe as ((output: unknown) => string) | undefined
  const rendered = yield* Effect.exit(
    Effect.sync(() => (observe !== undefined ? observe(output) : (JSON.stringify(encoded.value) ?? "null")))
  )
  if (Exit.isFailure(rendered)) {
    const failure = Failure.fromCause("tool", rendered.cause)
    return fail(
      {
        code: "tool_failed",
        message: `rendering the output failed: ${failure.hint}`,
        correctable: false,
        failure: Failure.summarize(failure)
      },
      maxRetries
    )
  }
  const observation = truncate(rendered.value, registry.limits.maxObservationChars)
  RunContext.emit(ctx, {
    _tag: "tool.succeeded",
    callId: call.id,
    name: call.name,
    sideEffect: tool.metadata.sideEffect,
    observationDigest: Signature.digest(observation),
    input: parsed.value,
    output: encoded.value
  })
  const result: ToolResult.ToolResult = {
    callId: call.id,
    name: call.name,
    status: "succeeded",
    output: encoded.value,
    observation
  }
  return result
})
