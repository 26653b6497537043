/**
 * A tool's input and output schemas compiled once per tool (by `Tool.make`), to the synchronous
 * decoder and encoders the tool executor runs on every call, and whether they hold a
 * `Redacted` (see `Redaction`). Private to the runtime.
 */
import { Cause, Exit, Schema, SchemaIssue } from "effect"
import * as SchemaIssues from "../failure/SchemaIssues.ts"
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
  /**
   * Whether each schema is plain (objects, arrays, unions, primitives and literals, with no
   * transformation): decoding and encoding by it build new objects and arrays all the way
   * down, so what they give shares nothing with what they were given.
   */
  readonly plainInput: boolean
  readonly plainOutput: boolean
}

/** The AST nodes whose parsing builds what it gives afresh, or passes on a primitive. */
const plainTags: ReadonlySet<unknown> = new Set([
  "Null",
  "Undefined",
  "Void",
  "Never",
  "Enum",
  "TemplateLiteral",
  "Literal",
  "String",
  "Number",
  "Boolean",
  "Arrays",
  "Objects",
  "Union",
  "Filter",
  "FilterGroup"
])

const isEmpty = (list: unknown): boolean => Array.isArray(list) && list.length === 0

/**
 * Whether a schema is plain (see {@link Compiled}): every tagged node below it is one of
 * {@link plainTags}, none has an encoding, and every object has fields. Anything else (an
 * `Unknown`, a declaration, a transformation, a recursive schema, `Struct({})`) may hand on
 * a value it was given, so it is not.
 */
const isPlain = (schema: Schema.Top): boolean => {
  const seen = new Set<object>()
  const stack: Array<object> = [schema.ast]
  while (stack.length > 0) {
    // Boundary: an AST node (or one of its objects), read by its field names.
    const node = stack.pop() as Record<string, unknown>
    if (seen.has(node)) continue
    seen.add(node)
    if (typeof node._tag === "string" && !plainTags.has(node._tag)) return false
    if (node.encoding !== undefined) return false
    // An object with no fields (`Struct({})`) takes any object, and hands on the one it was given.
    if (node._tag === "Objects" && isEmpty(node.propertySignatures) && isEmpty(node.indexSignatures)) return false
    for (const value of Object.values(node)) if (typeof value === "object" && value !== null) stack.push(value)
  }
  return true
}

/** Where a decoded value holds a number that is not finite, anywhere (in a `Set`, an `Option`, a class's fields). */
const nonFiniteAt = (root: unknown): ReadonlyArray<PropertyKey> | undefined => {
  const seen = new Set<object>()
  const stack: Array<readonly [unknown, ReadonlyArray<PropertyKey>]> = [[root, []]]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [value, path] = top
    if (typeof value === "number" && !Number.isFinite(value)) return path
    if (typeof value !== "object" || value === null || seen.has(value)) continue
    seen.add(value)
    const entries: Iterable<readonly [PropertyKey, unknown]> =
      value instanceof Map ? value : value instanceof Set ? [...value].entries() : Object.entries(value)
    for (const [key, item] of entries) stack.push([item, [...path, key]])
  }
  return undefined
}

/** The fields a failure names, with their messages; `undefined` when it is not the schema's. */
const faultsOf = (exit: Exit.Exit<unknown, Schema.SchemaError>) => {
  const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
  return Schema.isSchemaError(error) ? SchemaIssues.fields(error.issue) : undefined
}

/**
 * When neither reading takes the arguments: the fields the JSON form finds wrong, if fewer
 * (the one that blames only what is wrong), in the schema's own words where it has them
 * (the JSON form's number also reads "NaN", which is no advice to give); else the schema's.
 * `json` is the JSON form's failure as its named fields ({@link faultsOf}), not the failure.
 */
const bothFailed = (
  ast: Schema.Codec<unknown, unknown>["ast"],
  decoded: Exit.Exit<unknown, Schema.SchemaError>,
  json: ReturnType<typeof faultsOf>
): Exit.Exit<unknown, Schema.SchemaError> => {
  const plain = faultsOf(decoded)
  if (plain === undefined || json === undefined) return decoded
  const [first, ...rest] = json.fields
  if (first === undefined || json.fields.length + json.omitted >= plain.fields.length + plain.omitted) return decoded
  // Past the fields a description names, the rest go unnamed: the model is told them once it fixes these.
  const said = new Map(plain.fields.map((f) => [JSON.stringify(f.path), f.message]))
  const issue = (f: (typeof json.fields)[number]) =>
    new SchemaIssue.Pointer(
      f.path,
      new SchemaIssue.InvalidValue({ message: said.get(JSON.stringify(f.path)) ?? f.message })
    )
  return Exit.fail(new Schema.SchemaError(new SchemaIssue.Composite(ast, [issue(first), ...rest.map(issue)])))
}

/**
 * The most values arguments may hold for a failure to count every problem in them (R12):
 * see `SchemaIssues.maxDescribedValues`.
 */
export const maxDescribedValues = SchemaIssues.maxDescribedValues

/**
 * A failure found at its first problem, for arguments too large to have every problem
 * named: its first problem, and a word that there may be more.
 */
const cutShort = (
  ast: Schema.Codec<unknown, unknown>["ast"],
  exit: Exit.Exit<unknown, Schema.SchemaError>
): Exit.Exit<unknown, Schema.SchemaError> => {
  const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
  if (!Schema.isSchemaError(error)) return exit
  const note = new SchemaIssue.InvalidValue({
    message: "checked only up to their first problem, as they are too large to name each; there may be more"
  })
  return Exit.fail(new Schema.SchemaError(new SchemaIssue.Composite(ast, [error.issue, note])))
}

/**
 * Decodes arguments by the input schema; failing that, in their JSON form, as the model is
 * told (`ToolJsonSchema`): a `Date` as its ISO text, a `bigint` as its digits. The JSON form
 * is taken only when every number it gives is finite, as the model is told numbers are (its
 * codec reads the text "NaN" as one). When neither reads them, see {@link bothFailed}.
 *
 * Each reading stops at the first problem, so that arguments wrong in millions of places
 * cost one issue, not millions (R12). Only when both fail, and the arguments hold at most
 * {@link maxDescribedValues} values, are they read again collecting every problem, so the
 * model is told each (the first `SchemaIssues.maxFields`, and how many more): the JSON form
 * first, kept only as its named fields, then the schema's, so that one reading's problems
 * at most are held at a time. Larger ones are described by their first problem (see
 * {@link cutShort}).
 */
export const decodeArguments = (input: Schema.Decoder<unknown>) => {
  const jsonForm = Schema.toCodecJson(input)
  const perValue = SchemaIssues.issuesPerValue(input.ast)
  const plain = Schema.decodeUnknownExit(input, { errors: "first" })
  const json = Schema.decodeUnknownExit(jsonForm, { errors: "first" })
  const plainAll = Schema.decodeUnknownExit(input, { errors: "all" })
  const jsonAll = Schema.decodeUnknownExit(jsonForm, { errors: "all" })
  return (value: unknown): Exit.Exit<unknown, Schema.SchemaError> => {
    const decoded = plain(value)
    if (Exit.isSuccess(decoded)) return decoded
    const fromJson = json(value)
    if (Exit.isFailure(fromJson)) {
      if (!SchemaIssues.describable(value, perValue)) {
        return cutShort(input.ast, bothFailed(input.ast, decoded, faultsOf(fromJson)))
      }
      const jsonFaults = faultsOf(jsonAll(value))
      return bothFailed(input.ast, plainAll(value), jsonFaults)
    }
    const at = nonFiniteAt(fromJson.value)
    if (at === undefined) return fromJson
    const issue = new SchemaIssue.InvalidValue({ message: "Expected a finite number" })
    return Exit.fail(new Schema.SchemaError(new SchemaIssue.Pointer(at, issue)))
  }
}

/**
 * An encoder that gives its failure, never throws: a value whose reading throws (a revoked
 * `Proxy` a handler returned) throws inside the schema's parser, and is the tool's broken
 * output (a defect in the `Exit`), not the run's.
 */
const encoder = (
  schema: Schema.Codec<unknown, unknown>
): ((value: unknown) => Exit.Exit<unknown, Schema.SchemaError>) => {
  const encode = Schema.encodeUnknownExit(Schema.toCodecJson(schema))
  return (value) => {
    try {
      return encode(value)
    } catch (error) {
      return Exit.die(error)
    }
  }
}

/** A tool's schemas compiled (see `Tool.make`, which compiles them once per tool). */
export const compile = (input: Schema.Codec<unknown, unknown>, output: Schema.Codec<unknown, unknown>): Compiled => ({
  decode: decodeArguments(input),
  encode: encoder(output),
  encodeInput: encoder(input),
  sensitiveInput: isSensitive(input),
  sensitiveOutput: isSensitive(output),
  plainInput: isPlain(input),
  plainOutput: isPlain(output)
})

/** A tool's compiled schemas, made when the tool was. */
export const compiled = (tool: { readonly codec: Compiled }): Compiled => tool.codec
