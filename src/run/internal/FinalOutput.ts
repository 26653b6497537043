/**
 * The typed final output of a run (`Run.Options.output`): the final answer read as JSON
 * and decoded with the run's output schema, as a tool's output is checked. Private to
 * the runtime.
 */
import { Exit, Result, Schema } from "effect"
import * as ToolArguments from "../../tools/ToolArguments.ts"

/** The schema a run's final answer decodes with; its decoding needs no services. */
export type OutputSchema = Schema.Codec<unknown, unknown>

/** A reply wholly inside one Markdown code fence (```json … ```), as models often send JSON. */
const fenced = /^```[A-Za-z0-9_-]*\s*\n([\s\S]*?)\n?```$/

/**
 * The final answer decoded with `schema`, or why it does not decode, in words the model
 * can act on (the field paths and what was expected).
 */
export const decode = (schema: OutputSchema, text: string): Result.Result<unknown, string> => {
  const trimmed = text.trim()
  const json = fenced.exec(trimmed)?.[1] ?? trimmed
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    return Result.fail("the final answer is not JSON; answer with the JSON value alone")
  }
  const decoded = Schema.decodeUnknownExit(schema)(parsed)
  if (Exit.isSuccess(decoded)) return Result.succeed(decoded.value)
  const error = Exit.findErrorOption(decoded)
  const issue =
    error._tag === "Some" && Schema.isSchemaError(error.value)
      ? ToolArguments.describeIssue(error.value.issue, "output").message
      : "it does not match the output schema"
  return Result.fail(`the final answer does not match the output schema: ${issue}`)
}
