/**
 * A tool's input and output schemas compiled once per tool (by `Tool.make`), to the synchronous
 * decoder and encoders the tool executor runs on every call, and whether they hold a
 * `Redacted` (see `Redaction`). Private to the runtime.
 */
import { Exit, Predicate, Schema, SchemaIssue } from "effect"
import { isSensitive } from "./Redaction.ts"

/** A tool's compiled schemas. */
export interface Compiled {
  // Synchronous: tool schemas need no services, and an Exit costs no fiber step.
  readonly decode: (input: unknown) => Exit.Exit<unknown, Schema.SchemaError>
  /**
   * The output as JSON: the log stores it and the model reads it (a `Date` as its ISO
   * text, an `Option` as JSON), so the result always encodes and round-trips (R12).
   */
  readonly encode: (output: unknown) => Exit.Exit<unknown, Schema.SchemaError>
  /** The decoded input as JSON, for what a sensitive tool shows of its arguments. */
  readonly encodeInput: (input: unknown) => Exit.Exit<unknown, Schema.SchemaError>
  /** Whether the input schema holds a `Redacted`. */
  readonly sensitiveInput: boolean
  /** Whether the output schema holds a `Redacted`. */
  readonly sensitiveOutput: boolean
}

/** Where a decoded input holds a number that is not finite, looking into plain objects and arrays. */
const nonFinite = (value: unknown, path: Array<PropertyKey>): Array<PropertyKey> | undefined => {
  if (typeof value === "number") return Number.isFinite(value) ? undefined : path
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nonFinite(value[i], [...path, i])
      if (found !== undefined) return found
    }
  } else if (Predicate.isObject(value) && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [key, item] of Object.entries(value)) {
      const found = nonFinite(item, [...path, key])
      if (found !== undefined) return found
    }
  }
  return undefined
}

/**
 * Decodes arguments in their JSON form, as the model is told (`ToolJsonSchema`): a `Date`
 * comes as its ISO text, a `bigint` as its digits. The model is told numbers are finite
 * (`ToolJsonSchema.finiteNumbers`), while JSON's codec reads the text "NaN" as one: such
 * a number is refused, where it is.
 */
const decodeArguments = (input: Schema.Codec<unknown, unknown>) => {
  const decode = Schema.decodeUnknownExit(Schema.toCodecJson(input), { errors: "all" })
  return (value: unknown): Exit.Exit<unknown, Schema.SchemaError> => {
    const decoded = decode(value)
    if (Exit.isFailure(decoded)) return decoded
    const at = nonFinite(decoded.value, [])
    if (at === undefined) return decoded
    const issue = new SchemaIssue.InvalidValue({ message: "Expected a finite number" })
    return Exit.fail(new Schema.SchemaError(new SchemaIssue.Pointer(at, issue)))
  }
}

/** A tool's schemas compiled (see `Tool.make`, which compiles them once per tool). */
export const compile = (input: Schema.Codec<unknown, unknown>, output: Schema.Codec<unknown, unknown>): Compiled => ({
  decode: decodeArguments(input),
  encode: Schema.encodeUnknownExit(Schema.toCodecJson(output)),
  encodeInput: Schema.encodeUnknownExit(Schema.toCodecJson(input)),
  sensitiveInput: isSensitive(input),
  sensitiveOutput: isSensitive(output)
})

/** A tool's compiled schemas, made when the tool was. */
export const compiled = (tool: { readonly codec: Compiled }): Compiled => tool.codec
