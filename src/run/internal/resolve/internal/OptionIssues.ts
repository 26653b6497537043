/**
 * Options read by their Schema, and what cannot be read made into the typed error naming
 * the field (`InvalidRunOptions`): the first issue of a decode, what was expected and what
 * was given, safely; a field whose reading throws. Private to `resolve/`.
 */
import { Predicate, Result, Schema, SchemaIssue } from "effect"
import * as Failure from "../../../../failure/Failure.ts"
import * as UserCode from "../../../../failure/UserCode.ts"
import * as RunOptions from "../../../RunOptions.ts"
import * as RunOptionsSchema from "../../options/RunOptionsSchema.ts"

const decodeOptions = Schema.decodeUnknownResult(RunOptionsSchema.RunOptions, {
  errors: "first",
  onExcessProperty: "error"
})

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** The value at `path` inside `root`, for a message; `undefined` when it cannot be read. */
const valueAt = (root: unknown, path: ReadonlyArray<PropertyKey>): unknown => {
  try {
    let value = root
    for (const key of path) value = Predicate.isObjectOrArray(value) ? Reflect.get(value, key) : undefined
    return value
  } catch {
    return undefined
  }
}

/**
 * What the first issue of a decode says, read from its structure (the path the formatter
 * follows: a check's own message first, then the first issue of a group): a key missing, a
 * key not allowed, a message of its own (`stated`, shown as it is), or what was expected
 * (`expected`, shown with what was given).
 */
type Kind = "missing" | "excess" | "stated" | "expected"

const hasMessage = (annotations: { readonly message?: unknown } | undefined): boolean =>
  typeof annotations?.message === "string"

const kindOf = (issue: SchemaIssue.Issue): Kind => {
  switch (issue._tag) {
    case "MissingKey":
      return typeof issue.annotations?.messageMissingKey === "string" ? "stated" : "missing"
    case "UnexpectedKey":
      return typeof issue.ast.annotations?.messageUnexpectedKey === "string" ? "stated" : "excess"
    case "Filter":
      return hasMessage(issue.filter.annotations) ? "stated" : kindOf(issue.issue)
    case "Encoding":
    case "Pointer":
      return kindOf(issue.issue)
    case "Composite":
      return kindOf(issue.issues[0])
    case "AnyOf": {
      const first = issue.issues[0]
      if (first !== undefined) return kindOf(first)
      return hasMessage(issue.ast.annotations) ? "stated" : "expected"
    }
    case "InvalidType":
    case "OneOf":
      return hasMessage(issue.ast.annotations) ? "stated" : "expected"
    case "InvalidValue":
      return hasMessage(issue.annotations) ? "stated" : "expected"
    case "Forbidden":
      return "stated"
  }
}

/**
 * The first issue of a decode as the typed error, its path under `prefix`: what was
 * expected, and what was given (read again from `root`, and shown safely).
 */
export const invalid = (
  issue: SchemaIssue.Issue,
  root: unknown,
  prefix: ReadonlyArray<string>
): RunOptions.InvalidRunOptions => {
  const first = formatter(issue).issues[0]
  const path = (first?.path ?? []).map((p) => (typeof p === "object" ? p.key : p))
  const message = first === undefined ? "is invalid" : first.message
  const kind = first === undefined ? "stated" : kindOf(issue)
  const reason =
    kind === "missing"
      ? "field is required"
      : kind === "excess"
        ? "no such option"
        : kind === "expected"
          ? `${message}, got ${UserCode.shown(valueAt(root, path))}`
          : message
  return new RunOptions.InvalidRunOptions({
    path: [...prefix, ...path.map((key) => (typeof key === "number" ? key : String(key)))],
    reason
  })
}

/**
 * The field whose reading throws, looking into the options and their groups (`limits`,
 * `time`, `recovery`); `[]` when it is the options themselves, or none is found.
 */
const unreadableAt = (value: unknown, depth = 1): ReadonlyArray<string> | undefined => {
  let keys: ReadonlyArray<string | symbol>
  try {
    // Boundary: options of whatever shape; `ownKeys` of a non-object throws, and is caught.
    keys = Reflect.ownKeys(value as object)
  } catch {
    return []
  }
  for (const key of keys) {
    if (typeof key !== "string") continue
    let item: unknown
    try {
      item = Reflect.get(value as object, key)
    } catch {
      return [key]
    }
    let inner: ReadonlyArray<string> | undefined
    try {
      // A revoked Proxy throws even when asked whether it is an array.
      inner = depth > 0 && Predicate.isObject(item) && !Array.isArray(item) ? unreadableAt(item, depth - 1) : undefined
    } catch {
      inner = []
    }
    if (inner !== undefined) return [key, ...inner]
  }
  return undefined
}

/** The options read and checked, or the first field that cannot work. Never throws. */
export const check = (options: unknown): Result.Result<RunOptionsSchema.Checked, RunOptions.InvalidRunOptions> => {
  try {
    return Result.mapError(decodeOptions(options), (error) => invalid(error.issue, options, []))
  } catch (error) {
    // Options built by hostile or broken code: a getter that throws, a Proxy.
    return Result.fail(
      new RunOptions.InvalidRunOptions({
        path: unreadableAt(options) ?? [],
        reason: `cannot be read (${Failure.safeDescription(error)})`
      })
    )
  }
}
