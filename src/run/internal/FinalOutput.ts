/**
 * The typed final output of a run (`Run.Options.output`): the final answer read as JSON
 * and decoded with the run's output schema, as a tool's output is checked. Private to
 * the runtime.
 */
import { Cause, Result, type Schema } from "effect"
import * as Failure from "../../failure/Failure.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as ToolArguments from "../../tools/ToolArguments.ts"
import * as ToolCodec from "../../tools/ToolCodec.ts"
import * as OwnCopy from "./OwnCopy.ts"

/** The schema a run's final answer decodes with; its decoding needs no services. */
export type OutputSchema = Schema.Codec<unknown, unknown>

/**
 * The text inside a reply that is wholly one Markdown code fence (```json … ```), as models
 * often send JSON, else the reply. Found by position, not by a pattern: a pattern whose
 * spaces may be newlines tried every split of an unclosed fence of blank lines (200 KB
 * took 10 s, R12).
 */
const unfenced = (text: string): string => {
  const opening = text.indexOf("\n")
  if (!text.startsWith("```") || opening < 0 || text.length < opening + 4 || !text.endsWith("```")) return text
  if (!/^[A-Za-z0-9_-]*$/.test(text.slice(3, opening).trim())) return text
  const body = text.slice(opening + 1, text.length - 3)
  return body.endsWith("\n") ? body.slice(0, -1) : body
}

/**
 * Why a final answer is not the output: it does not match the schema (`Mismatch`, the
 * model's to correct), or the schema itself failed while decoding it (`Broken`: user code
 * that broke its contract, R12; not the model's mistake).
 */
export type Problem =
  | { readonly _tag: "Mismatch"; readonly message: string }
  | { readonly _tag: "Broken"; readonly message: string }

const broken = (cause: Cause.Cause<unknown>): Problem => ({
  _tag: "Broken",
  message: `the output schema failed while decoding the final answer: ${Failure.fromCause("runtime", cause).hint}`
})

/**
 * The answer's JSON decoded as a tool's arguments are (review 173: a `Date` or a `bigint`
 * output never decoded from JSON): by the schema, else in its JSON form (a `Date` as its ISO
 * text, a `bigint` as its digits). A schema that throws is user code that broke its contract.
 */
const decodeAnswer = (schema: OutputSchema, parsed: unknown): UserCode.Decoding =>
  UserCode.decodingOf(() => ToolCodec.decodeArguments(schema)(parsed))

/**
 * The final answer decoded with `schema`, or why it is not the output, in words the model
 * can act on (the field paths and what was expected) when it is the model's to correct.
 */
export const decode = (
  schema: OutputSchema,
  text: string,
  limits: ToolArguments.Limits = ToolArguments.defaultLimits
): Result.Result<unknown, Problem> => {
  const trimmed = text.trim()
  const json = unfenced(trimmed)
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    return Result.fail({ _tag: "Mismatch", message: "the final answer is not JSON; answer with the JSON value alone" })
  }
  // What the model sends is bounded as its tool arguments are (R3.5, R12): no nesting past
  // the limit (that no decoder, encoder or reader of the result need walk), no `__proto__` key.
  const unfit = ToolArguments.jsonIssue(parsed, {
    root: "the final answer",
    maxDepth: limits.maxArgumentDepth,
    maxNodes: limits.maxArgumentChars,
    strict: true
  })
  if (unfit !== undefined) return Result.fail({ _tag: "Mismatch", message: unfit })
  const decoded = decodeAnswer(schema, parsed)
  if (decoded._tag === "Decoded") {
    // Frozen now, as the result will hold it: a value that throws when read (a getter, a
    // Proxy's trap) is the schema's broken contract, not a defect of the run's ending (R12).
    // Its plain parts' `-0` is `0`, as the result's JSON gives it back (review 118).
    try {
      return Result.succeed(OwnCopy.frozenPlainCopy(decoded.value))
    } catch (error) {
      return Result.fail(broken(Cause.die(error)))
    }
  }
  if (decoded._tag === "Broken") return Result.fail(broken(decoded.cause))
  const issue = ToolArguments.describeIssue(decoded.error.issue, "output").message
  return Result.fail({ _tag: "Mismatch", message: `the final answer does not match the output schema: ${issue}` })
}

/** The widest limits a run may set: what one accepted, read back. */
const readBack: ToolArguments.Limits = {
  ...ToolArguments.defaultLimits,
  maxArgumentChars: Number.POSITIVE_INFINITY,
  maxArgumentDepth: ToolArguments.deepestArguments
}

/**
 * A finished run's result as its journal gave it back, its `output` decoded again from its
 * final answer with `schema` (R9): the journal keeps what JSON can hold, so an output that
 * is a `Date`, a `bigint` or a class instance was left out of the stored result. Without a
 * schema, the result is as stored; when the answer does not decode with it (a schema other
 * than the run's), it has no `output`: none of another type is handed out as this one's.
 */
export const restored = <
  R extends { readonly status: string; readonly finalAnswer?: string | undefined; readonly output?: unknown }
>(
  result: R,
  schema: OutputSchema | undefined
): R => {
  if (schema === undefined || result.status !== "completed" || result.finalAnswer === undefined) return result
  // The run took this answer under its own limits, which no run sets past these.
  const decoded = decode(schema, result.finalAnswer, readBack)
  if (Result.isSuccess(decoded)) return { ...result, output: decoded.success }
  const { output: _notThisSchemas, ...rest } = result
  // The same result less its optional `output`: TypeScript cannot see that the rest is still an `R`.
  return rest as R
}
