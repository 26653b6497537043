/**
 * One tool call that passed its checks, as the later stages of the pipeline see it (its
 * attempts, its output, its interruption), and the records that end a call. Private to
 * the runtime.
 */
import { Duration, Effect, Exit, Predicate } from "effect"
import type * as Failure from "../../../failure/Failure.ts"
import * as Text from "../../../failure/Text.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as Model from "../../../model/Model.ts"
import * as Deadline from "../../../time/Deadline.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import * as Tool from "../../../tools/Tool.ts"
import * as ToolArguments from "../../../tools/ToolArguments.ts"
import type * as ToolCodec from "../../../tools/ToolCodec.ts"
import * as ToolResult from "../../../tools/ToolResult.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type * as Registry from "../Registry.ts"

/** One call that passed its checks: what its attempts and its ending need. */
export interface Call<R> {
  readonly ctx: RunContext.RunContext
  readonly registry: Registry.Registry<R>
  readonly call: Model.ToolCall
  readonly tool: Tool.Any<R>
  readonly codec: ToolCodec.Compiled
  /** The arguments as events show them: parsed, the call's secrets masked (see `Redaction`). */
  readonly args: Record<string, unknown>
  /** The plain values of the `Redacted`s in the decoded input: never copied into what the run derives. */
  readonly secrets: Redaction.Secrets
  /** The input, decoded by the tool's own input schema: what the first attempt is handed. */
  readonly input: unknown
  /** The arguments as the log records them (the model's text, or the run's frozen copy of its value). */
  readonly recorded: unknown
  readonly context: Tool.CallContext
  /** The attempt of the handler running or last run, from 1 (0 before the first). */
  attempt: number
  /** What the handler said became of the current attempt's action, if it said (`context.settle`). */
  settled: { readonly settlement: Tool.Settlement; readonly detail: string } | undefined
}

/**
 * A tool's functions as the pipeline calls them: `input` is the value its own input
 * schema decoded, which is what the tool's `I` promises.
 */
type Handler<R> = (input: unknown, context: Tool.CallContext) => Effect.Effect<unknown, Failure.Failure, R>

/**
 * Calls the handler through the user-code boundary: a throw is a `tool_defect`, and a
 * return that is not an Effect (the Promise of an `async` function) a `not_an_effect`
 * failure (R12).
 */
export const callHandler = <R>(c: Call<R>): Effect.Effect<unknown, Failure.Failure, R> => {
  // Each attempt says what became of its own action: an earlier attempt's word does not carry over.
  c.attempt++
  c.settled = undefined
  // Erased boundary: the registry holds tools of any input type, and `c.input` was decoded by this tool's schema.
  const handler = c.tool.handler as Handler<R>
  // What it ends with besides its typed failure (a defect, an interruption of its own) is
  // handled where the attempt runs it (`HandlerAttempt`), in one place.
  return UserCode.called(
    {
      source: "tool",
      what: `the handler of ${c.tool.name}`,
      advice: "a handler must return an Effect; wrap promises with `Abortable.handler`",
      defectCode: "tool_defect"
    },
    () => handler(inputFor(c, c.attempt > 1), c.context)
  )
}

/**
 * The input handed to a piece of the tool's code: the decoded input to the first attempt;
 * to each retry, the status query and the postcondition, for a tool whose input schema is
 * plain (no transformation: decoding gives the same values every time), the recorded
 * arguments decoded afresh, so that code that changed the input it was handed changes
 * nothing the next one acts on or checks (R3.8, R12). A schema that transforms may give
 * other values each time (a default key it generates): its decoded input is handed again.
 */
export const inputFor = <R>(c: Call<R>, fresh: boolean): unknown => {
  if (!fresh || !c.codec.plainInput) return c.input
  // A value (not text) is the run's frozen copy: cloned, so that the code gets one it may change.
  const source = Predicate.isObject(c.recorded) ? structuredClone(c.recorded) : c.recorded
  const parsed = ToolArguments.parseArguments(source, c.registry.limits)
  const decoded = parsed._tag === "Ok" ? c.codec.decode(parsed.value) : undefined
  return decoded !== undefined && Exit.isSuccess(decoded) ? decoded.value : c.input
}

/** Records a `tool.failed` event and returns the failed result. */
export const failed = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  error: ToolResult.ToolError,
  maxRetries: number,
  after?: {
    /** The side-effect class of a tool whose handler returned: what it did took place. */
    readonly sideEffect: Tool.SideEffect
    readonly status?: "inconsistent" | undefined
    /** What the tool reported, when it passed its schema: its postcondition contradicted it, or it could not be rendered. */
    readonly output?: unknown
  }
): ToolResult.ToolResult => {
  const output = after?.output
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "tool.failed",
    callId: call.id,
    name: call.name,
    error,
    maxRetries,
    ...(output === undefined ? {} : { output }),
    ...(after === undefined ? {} : { sideEffect: after.sideEffect }),
    runId,
    seq,
    at
  }))
  return ToolResult.failed(call.id, call.name, error, after?.status ?? "failed")
}

/** A text the model is shown, cut to `max` characters (`limits.maxObservationChars`), saying how much was left out. */
export const cutToObservation = (text: string, max: number): string =>
  text.length <= max ? text : cutAt(text, max, text.length - max)

const cutAt = (text: string, max: number, more: number): string =>
  `${Text.head(text, max)}… [observation cut: ${more} more characters]`

/**
 * {@link cutToObservation} of a text that may hold the call's secrets: masked, then cut.
 * Only a beginning of the text is searched, long enough that what is sent lies a whole
 * secret's length before its end (a secret the beginning splits there is never in view,
 * and masks that shorten the text bring no more of it in): a tool's megabytes of output
 * cost about what the model reads.
 */
export const maskedObservation = (text: string, secrets: Redaction.Secrets, max: number): string => {
  const longest = secrets.forms?.[0]?.length ?? 0
  for (let window = max + longest; ; window *= 2) {
    if (window >= text.length) return cutToObservation(Redaction.maskText(text, secrets), max)
    const masked = Redaction.maskText(Text.head(text, window), secrets)
    if (masked.length >= max + longest) return cutAt(masked, max, text.length - max)
  }
}

/** Whether a call of the tool may have changed the world. */
export const mayHaveEffects = (tool: Tool.Any<unknown>): boolean => Tool.mayChangeWorld(tool.metadata.sideEffect)

/** Whether a call of the tool may change the world and may not be sent twice (R3.7, R3.8). */
export const mayActTwice = (tool: { readonly metadata: Tool.Metadata }): boolean =>
  Tool.mayChangeWorld(tool.metadata.sideEffect) && !tool.metadata.idempotent

/** A tool's own timeout in milliseconds (R4.2), if it has one. */
export const ownTimeout = (tool: Tool.Any<unknown>): number | undefined =>
  tool.metadata.timeout === undefined ? undefined : Duration.toMillis(Duration.fromInputUnsafe(tool.metadata.timeout))

/**
 * Bounds a wait of a call that is not an attempt of its handler (its status query, its
 * postcondition) as an attempt is bounded (R4.2): `timedOut` is the step or tool bound
 * that cut it off, after 0 ms when nothing was left of it and the wait was not started (as
 * a model attempt or a handler is not); the run's own deadline interrupts it instead.
 */
export const waitOf = <A, E, R>(
  c: Call<unknown>,
  self: Effect.Effect<A, E, R>
): Effect.Effect<{ readonly value: A } | { readonly timedOut: Deadline.Timeout }, E, R> =>
  Effect.map(self, (value): { readonly value: A } | { readonly timedOut: Deadline.Timeout } => ({ value })).pipe(
    Deadline.withinOrElse({
      layer: "tool",
      millis: ownTimeout(c.tool),
      orElse: (timedOut) => Effect.succeed({ timedOut }),
      ifNoTime: (timedOut) => Effect.succeed({ timedOut })
    })
  )

/**
 * The bound a wait ran into, in words (R4.3): `the tool timeout of 2000 ms`, with how long the
 * wait took when code held it past that; the step's deadline with how long the wait took (its
 * size is the step's); or one that had passed before it began.
 */
export const describeTimeout = ({ layer, limitMillis, afterMillis }: Deadline.Timeout): string => {
  const kind = layer === "step" ? "deadline" : "timeout"
  const elapsed = `(cut off after ${afterMillis} ms)`
  if (afterMillis === 0) return `the ${layer} ${kind}, which had passed (it was not asked)`
  if (layer === "step") return `the step deadline ${elapsed}`
  return `the ${layer} timeout of ${limitMillis} ms${afterMillis >= limitMillis + 1 ? ` ${elapsed}` : ""}`
}
