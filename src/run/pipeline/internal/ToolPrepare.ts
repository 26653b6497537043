/**
 * Making the calls of a response ready, before any of the batch runs: identity,
 * arguments, secrets, signature. Re-exported from `ToolExecutor`. Private to the runtime.
 */
import { Exit, Predicate, type Schema } from "effect"
import type * as Model from "../../../model/Model.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import * as Signature from "../../../tools/Signature.ts"
import * as ToolArguments from "../../../tools/ToolArguments.ts"
import { compiled } from "../../../tools/ToolCodec.ts"
import * as CallId from "../../internal/CallId.ts"
import * as OwnCopy from "../../internal/OwnCopy.ts"
import type { Registry } from "../Registry.ts"

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
  readonly parsed: ToolArguments.ParsedArguments
  /** The decoded input, when it was decoded ahead (a sensitive tool whose arguments parsed). */
  readonly decoded: Exit.Exit<unknown, Schema.SchemaError> | undefined
  /** The plain values of the `Redacted`s in the decoded input. */
  readonly secrets: Redaction.Secrets
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
): { readonly secrets: Redaction.Secrets; readonly shown: Record<string, unknown> } => {
  if (parsed._tag === "Invalid") return { secrets: Redaction.none, shown: {} }
  if (codec === undefined || !codec.sensitiveInput) return { secrets: Redaction.none, shown: parsed.value }
  if (decoded === undefined || Exit.isFailure(decoded)) {
    // It did not decode: nobody knows which part is secret, so every part is.
    const secrets = Redaction.secrets(Redaction.allLeaves(parsed.value))
    // Masking replaces leaves only: the arguments' object stays an object.
    return { secrets, shown: Redaction.maskValue(parsed.value, secrets) as Record<string, unknown> }
  }
  const secrets = Redaction.secrets(Redaction.secretsOf(decoded.value))
  const shown = Redaction.shownBy(codec.encodeInput, decoded.value, secrets)
  // The guard leaves `shown` an `object`; a record of its keys is what it is. Masking keeps an object an object.
  return Predicate.isObject(shown) && !Array.isArray(shown)
    ? { secrets, shown: shown as Record<string, unknown> }
    : {
        secrets,
        // Masking replaces leaves only: the arguments' object stays an object.
        shown: Redaction.maskValue(
          parsed.value,
          Redaction.adding(secrets, Redaction.allLeaves(parsed.value))
        ) as Record<string, unknown>
      }
}

/**
 * Arguments as the log keeps them (the model's `arguments` when it sent a value, and what
 * events and approvals show): the run's own frozen copy, so that neither the model (handed
 * them back in its conversation) nor a handler (which decodes the parsed value) changes
 * what was recorded (R9.1).
 */
const recordedCopy = (value: unknown): unknown => {
  const copy = OwnCopy.frozenCopy(value)
  return copy._tag === "Copied" ? copy.value : `<arguments refused: they cannot be read (${copy.why})>`
}

/**
 * Prepares one call the model asked for (see {@link Prepared}); `used` holds the
 * identities this run has given so far.
 *
 * @category constructors
 * @since 0.1.0
 */
export const prepare = <R>(registry: Registry<R>, used: CallId.Identities, call: Model.ToolCall): Prepared =>
  prepareAs(registry, CallId.assign(used, call.id), call)

/**
 * Prepares a call under the identity `id` the run gave it already: a call of a resumed
 * run's batch, from its `model.responded` record.
 *
 * @category constructors
 * @since 0.3.0
 */
export const prepareAs = <R>(registry: Registry<R>, id: string, call: Model.ToolCall): Prepared => {
  const parsed = ToolArguments.parseArguments(call.arguments, registry.limits)
  const tool = registry.tools.get(call.name)
  const codec = tool === undefined ? undefined : compiled(tool)
  // Decoded ahead only to find a sensitive tool's secrets: the others decode in the pipeline,
  // and only if the batch gets that far.
  const decoded =
    parsed._tag === "Ok" && codec !== undefined && codec.sensitiveInput ? codec.decode(parsed.value) : undefined
  const { secrets, shown: raw } = redacted(codec, parsed, decoded)
  // Arguments this run parsed from text, decoded by a plain schema into new values, are its
  // own: frozen as they are. Anything else is copied first (it may be the model's, or the handler's).
  const own = typeof call.arguments === "string" && (codec === undefined || (codec.plainInput && !codec.sensitiveInput))
  const shown = (own ? OwnCopy.ownFrozen(raw) : recordedCopy(raw)) as Record<string, unknown>
  return {
    call: id === call.id ? call : { ...call, id },
    parsed:
      codec?.sensitiveInput === true && parsed._tag === "Invalid" && parsed.reason === "not_json"
        ? { _tag: "Invalid", reason: "not_json", message: notJson }
        : parsed,
    decoded,
    secrets,
    shown,
    // A call without arguments is recorded as the pipeline reads it, one with none: `undefined`
    // is no JSON, and a log holding it did not encode (review 145: a journal refused every commit after it).
    recorded:
      typeof call.arguments === "string"
        ? call.arguments
        : parsed._tag === "Ok"
          ? recordedCopy(parsed.value)
          : `<arguments refused: ${parsed.message}>`,
    // A sensitive tool's call, parsed or not, is signed under the run's key: its arguments hold its secrets.
    signature:
      codec?.sensitiveInput === true
        ? parsed._tag === "Ok"
          ? Signature.toolCallKeyed(call.name, parsed.value, registry.secretKey)
          : Signature.unparsedKeyed(call.name, call.arguments, registry.secretKey)
        : parsed._tag === "Ok"
          ? Signature.toolCallParsed(call.name, shown)
          : Signature.unparsed(call.name, call.arguments)
  }
}
