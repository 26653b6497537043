/**
 * A tool's input and output schemas compiled once per tool, to the synchronous
 * decoder and encoder the tool executor runs on every call. Private to the runtime.
 */
import { type Exit, Schema } from "effect"
import type * as Tool from "../Tool.ts"

/** A tool's compiled schemas. */
export interface Compiled {
  // Synchronous: tool schemas need no services, and an Exit costs no fiber step.
  readonly decode: (input: unknown) => Exit.Exit<unknown, Schema.SchemaError>
  readonly encode: (output: unknown) => Exit.Exit<unknown, Schema.SchemaError>
}

const compiledCache = new WeakMap<Tool.Any, Compiled>()

/** A tool's compiled schemas, compiled on its first call. */
export const compiled = (tool: Tool.Any): Compiled => {
  let entry = compiledCache.get(tool)
  if (entry === undefined) {
    entry = {
      decode: Schema.decodeUnknownExit(tool.input, { errors: "all" }),
      // The output as JSON: the log stores it and the model reads it (a `Date` as its ISO
      // text, an `Option` as JSON), so the result always encodes and round-trips (R12).
      encode: Schema.encodeUnknownExit(Schema.toCodecJson(tool.output))
    }
    compiledCache.set(tool, entry)
  }
  return entry
}
