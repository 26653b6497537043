/**
 * The arguments of a tool call, as the model sent them: parsed into a plain JSON object
 * under a size limit, with `__proto__` keys refused (R3.5), and schema issues rendered as
 * field-level messages the model can act on (`arguments.content: field is required`).
 *
 * @since 0.1.0
 */
import { Predicate } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as SchemaIssues from "../failure/SchemaIssues.ts"
import * as Text from "../failure/Text.ts"

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
  /**
   * Arguments nested deeper than this (objects and arrays inside each other) are
   * refused: no walk of the runtime's, nor of a tool's, then has to go that deep.
   * Default 64.
   */
  readonly maxArgumentDepth: number
}

/**
 * The deepest `maxArgumentDepth` a run may set: the runtime's own walks of arguments (a
 * call's signature) go no deeper.
 *
 * @category constants
 * @since 0.3.0
 */
export const deepestArguments = 512

/**
 * @category constructors
 * @since 0.1.0
 */
export const defaultLimits: Limits = Object.freeze({
  maxArgumentChars: 8 * 1024 * 1024,
  maxObservationChars: 32 * 1024,
  maxArgumentDepth: 64
})

/**
 * Field-level messages for a schema error (see `SchemaIssues.describe`).
 *
 * @category combinators
 * @since 0.1.0
 */
export const describeIssue = SchemaIssues.describe

const describeType = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`

/**
 * Why arguments were refused: text over the size limit (`too_long`), text that is not JSON
 * (`not_json`), a value that is not an object (`not_an_object`), a value plain JSON cannot
 * hold or too deep (`not_plain_json`), or a value that cannot be read (`unreadable`).
 *
 * @category models
 * @since 0.3.0
 */
export type InvalidReason = "too_long" | "not_json" | "not_an_object" | "not_plain_json" | "unreadable"

/**
 * Arguments parsed into a plain JSON object, or why they could not be: `reason` to decide
 * by, `message` to show.
 *
 * @category models
 * @since 0.1.0
 */
export type ParsedArguments =
  | { readonly _tag: "Ok"; readonly value: Record<string, unknown> }
  | { readonly _tag: "Invalid"; readonly reason: InvalidReason; readonly message: string }

const invalid = (reason: InvalidReason, message: string): ParsedArguments => ({ _tag: "Invalid", reason, message })

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** An object that says how it is written as JSON (a `Date`, a class instance). */
const hasToJSON = (value: object): boolean =>
  Predicate.hasProperty(value, "toJSON") && Predicate.isFunction(value.toJSON)

/**
 * What makes a value unfit to be walked, stored and sent as JSON, or `undefined` when it
 * is fit. One walk, without recursion (a value the model sent may be nested thousands
 * deep), that never throws, whatever the value (a getter, a Proxy). Always refused: a
 * nesting deeper than `maxDepth`, an object met twice (a cycle, or a subtree shared:
 * JSON has neither), more than `maxNodes` values, and a `bigint`. With
 * `strict` (what the model sends), also a `__proto__` key and anything plain JSON cannot
 * hold: a function, `undefined`, a non-finite number, an object that is not plain.
 * Without it (a tool's output, which `JSON.stringify` renders), an object with a `toJSON`
 * (a `Redacted`, a `Date`) is a leaf.
 *
 * @category combinators
 * @since 0.1.0
 */
export const jsonIssue = (
  root: unknown,
  options: { readonly root: string; readonly maxDepth: number; readonly maxNodes: number; readonly strict: boolean }
): string | undefined => {
  try {
    return walk(root, options)
  } catch (defect) {
    return `${options.root} cannot be read (${Failure.safeDescription(defect)})`
  }
}

/** Where the walk is: the value, its depth, and how to name it if it is at fault. */
interface Frame {
  readonly value: unknown
  readonly depth: number
  readonly parent: Frame | undefined
  readonly key: string | number
}

/** The path of a frame, built only for the message of a value at fault. */
const pathOf = (frame: Frame | undefined, root: string): string => {
  const keys: Array<string | number> = []
  for (let f = frame; f?.parent !== undefined; f = f.parent) keys.push(f.key)
  let path = root
  for (const key of keys.reverse()) {
    path += typeof key === "number" ? `[${key}]` : `.${Text.clip(key, 64)}`
  }
  return path
}

type WalkOptions = {
  readonly root: string
  readonly maxDepth: number
  readonly maxNodes: number
  readonly strict: boolean
}

/** What is wrong with one value that is not an object or an array, or `undefined`. */
const leafIssue = (value: unknown, strict: boolean): string | undefined => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined
    case "number":
      return Number.isFinite(value) || !strict ? undefined : `${value} is not a JSON number`
    case "bigint":
      return "a bigint is not a JSON value"
    default:
      return value === null || !strict ? undefined : `${typeof value} is not a JSON value`
  }
}

const walk = (root: unknown, options: WalkOptions): string | undefined => {
  const { strict } = options
  // No object may be met twice: JSON has no shared values, and sharing would let a small
  // value make the walk visit an exponential number of nodes.
  const seen = new Set<object>()
  const stack: Array<Frame> = [{ value: root, depth: 0, parent: undefined, key: "" }]
  let nodes = 0
  const at = (frame: Frame | undefined, message: string) => `${pathOf(frame, options.root)}: ${message}`
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    const { value, depth } = frame
    if (++nodes > options.maxNodes) return `${options.root} holds more than ${options.maxNodes} values`
    if (!Predicate.isObjectOrArray(value)) {
      const issue = leafIssue(value, strict)
      if (issue !== undefined) return at(frame, issue)
      continue
    }
    if (depth >= options.maxDepth) return at(frame, `nested more than ${options.maxDepth} levels deep`)
    if (seen.has(value)) return at(frame, "the same object appears twice (a cycle or a shared value): not JSON")
    seen.add(value)
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        const item: unknown = value[i]
        if (typeof item === "object" && item !== null) {
          stack.push({ value: item, depth: depth + 1, parent: frame, key: i })
          continue
        }
        if (++nodes > options.maxNodes) return `${options.root} holds more than ${options.maxNodes} values`
        const issue = leafIssue(item, strict)
        if (issue !== undefined) return at({ value: item, depth: depth + 1, parent: frame, key: i }, issue)
      }
      continue
    }
    if (!isPlainObject(value)) {
      if (strict) return at(frame, "not a plain JSON object")
      if (hasToJSON(value)) continue
    }
    for (const key of Object.keys(value).reverse()) {
      if (key === "__proto__" && strict) {
        return at({ value: undefined, depth, parent: frame, key }, 'the key "__proto__" is not allowed')
      }
      stack.push({ value: value[key], depth: depth + 1, parent: frame, key })
    }
  }
  return undefined
}

/**
 * Parses the raw arguments into a plain JSON object, or explains why not: text over
 * `maxArgumentChars`, text that is not JSON, a value that is not an object, nested
 * deeper than `maxArgumentDepth`, or holding a `__proto__` key. Never throws and never
 * recurses, whatever the model sent.
 *
 * @category combinators
 * @since 0.1.0
 */
export const parseArguments = (raw: unknown, limits: Limits = defaultLimits): ParsedArguments => {
  try {
    return parse(raw, limits)
  } catch (defect) {
    // Only a value a provider built itself can throw when read (a getter, a Proxy).
    return invalid("unreadable", `arguments cannot be read (${Failure.safeDescription(defect)})`)
  }
}

const parse = (raw: unknown, limits: Limits): ParsedArguments => {
  if (raw === undefined) return { _tag: "Ok", value: {} }
  let value: unknown = raw
  const fromText = Predicate.isString(raw)
  if (Predicate.isString(raw)) {
    if (raw.length > limits.maxArgumentChars) {
      return invalid("too_long", `arguments are ${raw.length} characters, over the limit of ${limits.maxArgumentChars}`)
    }
    if (raw.trim() === "") return { _tag: "Ok", value: {} }
    try {
      value = JSON.parse(raw)
    } catch (error) {
      return invalid(
        "not_json",
        `arguments are not valid JSON (${Predicate.isError(error) ? error.message : "parse error"})`
      )
    }
  }
  if (!Predicate.isObject(value) || Array.isArray(value)) {
    return invalid("not_an_object", `arguments must be a JSON object, got ${describeType(value)}`)
  }
  const unfit = jsonIssue(value, {
    root: "arguments",
    maxDepth: limits.maxArgumentDepth,
    maxNodes: limits.maxArgumentChars,
    strict: true
  })
  if (unfit !== undefined) return invalid("not_plain_json", unfit)
  if (!fromText) {
    // Bounded by now: no cycle, no deep nesting, no more nodes than the limit. The value is
    // taken as its JSON text and parsed again: a snapshot, so a getter cannot show the
    // permission policy one thing and the handler another.
    const text = JSON.stringify(value)
    if (text.length > limits.maxArgumentChars) {
      return invalid(
        "too_long",
        `arguments are ${text.length} characters, over the limit of ${limits.maxArgumentChars}`
      )
    }
    return parse(text, limits)
  }
  return { _tag: "Ok", value }
}
