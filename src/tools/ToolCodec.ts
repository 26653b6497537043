/**
 * A tool's input and output schemas compiled once per tool (by `Tool.make`), to the synchronous
 * decoder and encoders the tool executor runs on every call, and whether they hold a
 * `Redacted` (see `Redaction`). Private to the runtime.
 */
import { type Exit, Schema } from "effect"
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

/** A tool's schemas compiled (see `Tool.make`, which compiles them once per tool). */
export const compile = (input: Schema.Codec<unknown, unknown>, output: Schema.Codec<unknown, unknown>): Compiled => ({
  decode: Schema.decodeUnknownExit(input, { errors: "all" }),
  encode: Schema.encodeUnknownExit(Schema.toCodecJson(output)),
  encodeInput: Schema.encodeUnknownExit(Schema.toCodecJson(input)),
  sensitiveInput: isSensitive(input),
  sensitiveOutput: isSensitive(output)
})

/** A tool's compiled schemas, made when the tool was. */
export const compiled = (tool: { readonly codec: Compiled }): Compiled => tool.codec
