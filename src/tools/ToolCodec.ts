/**
 * A tool's input and output schemas compiled once per tool, to the synchronous
 * decoder and encoders the tool executor runs on every call, and whether they hold a
 * `Redacted` (see `Redaction`). Private to the runtime.
 */
import { type Exit, Schema } from "effect"
import { isSensitive } from "./Redaction.ts"
import type * as Tool from "./Tool.ts"

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

const compiledCache = new WeakMap<Tool.Any, Compiled>()

/** A tool's compiled schemas, compiled on its first call. */
export const compiled = (tool: Tool.Any): Compiled => {
  let entry = compiledCache.get(tool)
  if (entry === undefined) {
    entry = {
      decode: Schema.decodeUnknownExit(tool.input, { errors: "all" }),
      encode: Schema.encodeUnknownExit(Schema.toCodecJson(tool.output)),
      encodeInput: Schema.encodeUnknownExit(Schema.toCodecJson(tool.input)),
      sensitiveInput: isSensitive(tool.input),
      sensitiveOutput: isSensitive(tool.output)
    }
    compiledCache.set(tool, entry)
  }
  return entry
}
