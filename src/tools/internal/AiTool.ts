/**
 * What `Tool.fromAi` and `Tool.fromToolkit` read from an effect/ai tool: its
 * annotations as the runtime's metadata, its `toModelOutput` as an observation, its
 * handler's failures in the failure algebra, and the handler a toolkit's layer put in
 * the context. Private to `tools/`.
 */
import { Context, Duration, Effect, Exit, Predicate, Schema } from "effect"
import * as AiError from "effect/ai/AiError"
import * as Prompt from "effect/ai/Prompt"
import * as AiTool from "effect/ai/Tool"
import * as Failure from "../../failure/Failure.ts"
import * as Text from "../../failure/Text.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Redaction from "../Redaction.ts"

/** The metadata an effect/ai tool declares, as the runtime's fields. */
export interface Declared {
  readonly idempotent: boolean
  readonly sideEffect: "read" | "write" | "external"
  readonly destructive: boolean
  readonly needsApproval: boolean
  readonly recoverErrors: boolean
}

/**
 * Its annotations, read with effect/ai's own defaults (an unannotated tool may change
 * things, destructively, in the open world, and is not idempotent):
 *
 * - `Readonly` → `read`, never destructive; otherwise `OpenWorld` → `external`, else `write`;
 * - `Destructive` and `Idempotent` as they are;
 * - `needsApproval`: a function asks for every call (it needs the conversation, which
 *   effect/ai passes it and the runtime has no place for before the call: the gate decides);
 * - `failureMode: "return"` (failures go back to the model) → `recoverErrors`.
 */
export const declared = (tool: AiTool.Any): Declared => {
  const readonly = Context.get(tool.annotations, AiTool.Readonly)
  return {
    idempotent: Context.get(tool.annotations, AiTool.Idempotent),
    sideEffect: readonly ? "read" : Context.get(tool.annotations, AiTool.OpenWorld) ? "external" : "write",
    destructive: !readonly && Context.get(tool.annotations, AiTool.Destructive),
    needsApproval: tool.needsApproval !== undefined && tool.needsApproval !== false,
    recoverErrors: tool.failureMode === "return"
  }
}

/**
 * An effect/ai tool's schemas as the tool pipeline's codecs: effect/ai types them as
 * `Schema.Top`; `Tool.fromAi` takes only tools whose schemas need no services.
 */
export const schemasOf = <P, S>(
  tool: AiTool.Any
): {
  readonly parameters: Schema.Codec<P, unknown>
  readonly success: Schema.Codec<S, unknown>
  readonly failure: Schema.Codec<unknown, unknown>
} => ({
  // Boundary: effect/ai keeps its schemas as `Schema.Top`; `P` and `S` are what the tool's own type says they decode to.
  parameters: tool.parametersSchema as Schema.Codec<P, unknown>,
  success: tool.successSchema as Schema.Codec<S, unknown>,
  failure: tool.failureSchema as Schema.Codec<unknown, unknown>
})

/** Why the runtime cannot run this effect/ai tool, or `undefined`. */
export const unsupported = (tool: AiTool.Any): string | undefined => {
  if (AiTool.isProviderDefined(tool)) return "a provider-defined tool runs at the provider, not in the run"
  if (AiTool.isDynamic(tool) && tool.jsonSchema !== undefined) {
    return "its parameters are a JSON Schema: the runtime decodes arguments with an effect Schema"
  }
  return undefined
}

/** The observation of a success through the tool's `toModelOutput`, as text (effect/ai's own rendering). */
export const observer = (tool: AiTool.Any): ((output: unknown) => string) | undefined => {
  const toModelOutput = tool.toModelOutput
  return toModelOutput === undefined ? undefined : (output) => Prompt.toolModelOutputToText(toModelOutput(output))
}

/** The longest text of an encoded failure a hint carries. */
const maxHintChars = 2_000

const clip = (text: string): string => Text.clip(text, maxHintChars)

/** `RateLimitError` → `rate_limit_error`. */
const snake = (tag: string): string => tag.replace(/(?<=[a-z0-9])([A-Z])/g, "_$1").toLowerCase()

/**
 * The reasons effect/ai calls retryable that say the request was refused before it was
 * acted on: only a rate limit. A broken connection, a provider's internal error or an
 * output that does not parse may come after the action took place.
 */
const refusedBeforeActing = new Set(["RateLimitError"])

/**
 * An `AiError` (or its reason) from a handler: retryable as effect/ai says, its text kept
 * out of the hint; but for a tool that may act and is not idempotent (`inDoubt`), an
 * `UnknownOutcome` when the request may have been acted on (R3.8).
 */
const fromAiError = (
  error: AiError.AiError | AiError.AiErrorReason,
  attempts: number,
  inDoubt: boolean
): Failure.Failure => {
  const reason = AiError.isAiError(error) ? error.reason : error
  // The wrapper reads it from its reason; a bare reason has it itself.
  const retryAfter = "retryAfter" in reason ? reason.retryAfter : undefined
  const fields = {
    source: "tool" as const,
    category: "ai_error" as const,
    code: snake(reason._tag),
    attempts,
    hint: `the tool failed with effect/ai's ${reason._tag}`,
    diagnostic: reason.message
  }
  if (!reason.isRetryable) return new Failure.Permanent(fields)
  if (inDoubt && !refusedBeforeActing.has(reason._tag)) {
    return new Failure.UnknownOutcome({ ...fields, hint: `${fields.hint}; whether the call took effect is unknown` })
  }
  return new Failure.Retryable({
    ...fields,
    // An endless wait (`Duration.infinity`) is the longest a failure says: the run gives up on it (review 183).
    ...(retryAfter === undefined
      ? {}
      : { retryAfterMillis: Math.min(Duration.toMillis(retryAfter), Number.MAX_SAFE_INTEGER) })
  })
}

/**
 * The failure algebra for what a handler failed with: a `Failure` as it is; an `AiError`
 * by its `isRetryable`; a value of the tool's `failure` schema a `Permanent` whose hint is
 * its JSON (the tool declared it as what the model may read; code: its `_tag`, snake
 * case, or `tool_failure`); anything else as a defect. `classify`, when given, decides
 * for everything but a `Failure`.
 */
export const classifier = (
  failureSchema: Schema.Codec<unknown, unknown>,
  classify: ((error: unknown) => Failure.Failure) | undefined,
  declared: Declared
): ((error: unknown) => Failure.Failure) => {
  if (classify !== undefined) return (error) => (Failure.isFailure(error) ? error : UserCode.letGo(classify(error)))
  const encodeFailure = Schema.encodeUnknownExit(Schema.toCodecJson(failureSchema))
  const inDoubt = declared.sideEffect !== "read" && !declared.idempotent
  return (error) => {
    if (Failure.isFailure(error)) return error
    if (AiError.isAiError(error) || AiError.isAiErrorReason(error)) return fromAiError(error, 1, inDoubt)
    const encoded = encodeFailure(error)
    if (Exit.isFailure(encoded)) return Failure.fromDefect("tool", error, "tool_failed")
    const tag = Predicate.hasProperty(error, "_tag") && Predicate.isString(error._tag) ? error._tag : undefined
    // A declared failure may hold a secret of the tool's own (`Schema.Redacted`), which its JSON encoding writes out.
    const shown = Redaction.maskValue(encoded.value, Redaction.secrets(Redaction.secretsOf(error)))
    return new Failure.Permanent({
      source: "tool",
      category: "tool_failure",
      code: tag === undefined ? "tool_failure" : snake(tag),
      attempts: 1,
      hint: `the tool failed: ${clip(JSON.stringify(shown) ?? "null")}`
    })
  }
}

/**
 * The handler a toolkit's layer (`toolkit.toLayer`, `toolkit.toHandlers`) put in
 * `context` for `tool`, run with the services the layer captured. effect/ai stores it
 * under the tool's `id`; reading it there (rather than through the toolkit's `handle`,
 * which decodes the parameters and encodes the result itself) leaves both to the tool
 * pipeline, as for every other tool.
 */
export const handlerIn = (
  context: Context.Context<never>,
  tool: AiTool.Any
): ((params: unknown, handlerContext: unknown) => Effect.Effect<unknown, unknown>) | undefined => {
  const found = Context.getOrUndefined(context, Context.Service<AiTool.Handler<string>>(tool.id))
  if (found === undefined) return undefined
  return (params, handlerContext) => {
    const out = found.handler(params, handlerContext)
    // Not an Effect: handed on as it is, for the tool pipeline to report (`not_an_effect`).
    if (!UserCode.isEffect(out)) return out as Effect.Effect<unknown, unknown>
    return Effect.updateContext(out, (input: Context.Context<never>) => Context.merge(found.context, input))
  }
}
