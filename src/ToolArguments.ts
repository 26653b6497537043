/**
 * The arguments of a tool call, as the model sent them: parsed into a plain JSON object
 * under a size limit, with `__proto__` keys refused (R3.5), and schema issues rendered as
 * field-level messages the model can act on (`arguments.content: field is required`).
 *
 * @since 0.1.0
 */
import { Predicate, SchemaIssue } from "effect"

/**
 * Limits the pipeline enforces on what the model sends and what it sees back.
 *
 * @category models
 * @since 0.1.0
 */
export interface Limits {
  /**
   * Arguments larger than this (JSON text, in characters) are refused. Default 8 MiB:
   * room for a content field at the permission policy's 1 MiB limit even in its worst JSON
   * encoding (six characters a byte), so oversize content is denied by the policy (R3.6).
   */
  readonly maxArgumentChars: number
  /** Observations longer than this are cut, saying how much was cut. Default 32 KiB. */
  readonly maxObservationChars: number
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const defaultLimits: Limits = { maxArgumentChars: 8 * 1024 * 1024, maxObservationChars: 32 * 1024 }

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, key) => (Predicate.isNumber(key) ? `${acc}[${key}]` : `${acc}.${String(key)}`), "arguments")

/**
 * Field-level messages for a schema error: `arguments.content: field is required`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const describeIssue = (
  issue: SchemaIssue.Issue
): { readonly message: string; readonly fieldPaths: ReadonlyArray<string> } => {
  const issues = formatter(issue).issues
  const fieldPaths = issues.map((i) => formatPath((i.path ?? []).map((p) => (typeof p === "object" ? p.key : p))))
  const lines = issues.map((i, n) => {
    const text = i.message === "Missing key" ? "field is required" : i.message
    return `${fieldPaths[n]}: ${text}`
  })
  return { message: lines.join("; "), fieldPaths }
}

/** Whether `__proto__` is an own key anywhere in `value`: the common answer, no, without building paths. */
const hasProtoKey = (value: unknown): boolean => {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (hasProtoKey(value[i])) return true
    return false
  }
  if (Predicate.isObject(value)) {
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue
      if (key === "__proto__" || hasProtoKey((value as Record<string, unknown>)[key])) return true
    }
  }
  return false
}

const findProtoKey = (value: unknown, path: string): string | undefined => {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findProtoKey(value[i], `${path}[${i}]`)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (Predicate.isObject(value)) {
    for (const key of Object.keys(value)) {
      if (key === "__proto__") return `${path}.__proto__`
      const found = findProtoKey((value as Record<string, unknown>)[key], `${path}.${key}`)
      if (found !== undefined) return found
    }
  }
  return undefined
}

const describeType = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`

/**
 * Arguments parsed into a plain JSON object, or why they could not be.
 *
 * @category models
 * @since 0.1.0
 */
export type ParsedArguments =
  | { readonly _tag: "Ok"; readonly value: Record<string, unknown> }
  | { readonly _tag: "Invalid"; readonly message: string }

/**
 * Parses the raw arguments into a plain JSON object, or explains why not.
 *
 * @category combinators
 * @since 0.1.0
 */
export const parseArguments = (raw: unknown, limits: Limits = defaultLimits): ParsedArguments => {
  let value: unknown = raw
  if (Predicate.isString(raw)) {
    if (raw.length > limits.maxArgumentChars) {
      return {
        _tag: "Invalid",
        message: `arguments are ${raw.length} characters, over the limit of ${limits.maxArgumentChars}`
      }
    }
    if (raw.trim() === "") return { _tag: "Ok", value: {} }
    try {
      value = JSON.parse(raw)
    } catch (error) {
      return {
        _tag: "Invalid",
        message: `arguments are not valid JSON (${Predicate.isError(error) ? error.message : "parse error"})`
      }
    }
  } else if (raw !== undefined) {
    const size = JSON.stringify(raw)?.length ?? 0
    if (size > limits.maxArgumentChars) {
      return {
        _tag: "Invalid",
        message: `arguments are ${size} characters, over the limit of ${limits.maxArgumentChars}`
      }
    }
  } else {
    value = {}
  }
  if (!Predicate.isObject(value) || Array.isArray(value)) {
    return { _tag: "Invalid", message: `arguments must be a JSON object, got ${describeType(value)}` }
  }
  const proto = hasProtoKey(value) ? findProtoKey(value, "arguments") : undefined
  if (proto !== undefined) return { _tag: "Invalid", message: `${proto}: the key "__proto__" is not allowed` }
  return { _tag: "Ok", value: value as Record<string, unknown> }
}
