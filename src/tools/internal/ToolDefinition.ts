/**
 * What `Tool.make` checks of a definition before it builds anything: every option a
 * caller (typed or not) can get wrong, each with a reason naming the option. A tool is
 * checked once, where it is defined; a run then trusts what it was given. Private to
 * `tools/`.
 */
import { Duration, Option, Predicate, Schema, SchemaAST } from "effect"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as ToolFields from "./ToolFields.ts"

const namePattern = /^[a-zA-Z0-9_-]{1,64}$/

/** The options of `Tool.make` as values of any type: what a caller without types can pass. */
type Untyped = {
  readonly [K in
    | "name"
    | "description"
    | "input"
    | "output"
    | "handler"
    | "idempotent"
    | "maxRetries"
    | "timeout"
    | "sideEffect"
    | "destructive"
    | "needsApproval"
    | "recoverErrors"
    | "pathFields"
    | "contentFields"
    | "strict"
    | "postcondition"
    | "observe"
    | "reconcile"]?: unknown
}

/** Every option of `Tool.make`: one it does not know is refused (review 173: `needApproval` asked for no approval). */
export const knownOptions: OptionKeys.Known<Untyped> = {
  name: true,
  description: true,
  input: true,
  output: true,
  handler: true,
  idempotent: true,
  maxRetries: true,
  timeout: true,
  sideEffect: true,
  destructive: true,
  needsApproval: true,
  recoverErrors: true,
  pathFields: true,
  contentFields: true,
  strict: true,
  postcondition: true,
  observe: true,
  reconcile: true
}

const sideEffects: ReadonlyArray<unknown> = ["none", "read", "write", "external"]

/**
 * Whether a value of the schema's encoded form can be a JSON object: the model sends a
 * call's arguments as one. Refused are only roots that never can: a string, a number, a
 * boolean, a literal, an array, `null`, `never`, or a union of those. A struct, a record,
 * `Unknown`, a declared type, or a union with one such member, can; a recursive schema is
 * followed a few levels.
 */
const acceptsObjects = (ast: SchemaAST.AST, depth = 0): boolean => {
  switch (ast._tag) {
    case "String":
    case "Number":
    case "Boolean":
    case "BigInt":
    case "Symbol":
    case "UniqueSymbol":
    case "Literal":
    case "Enum":
    case "TemplateLiteral":
    case "Arrays":
    case "Null":
    case "Undefined":
    case "Void":
    case "Never":
      return false
    case "Union":
      return ast.types.some((member) => acceptsObjects(member, depth))
    case "Suspend":
      return depth >= 8 || acceptsObjects(ast.thunk(), depth + 1)
    default:
      return true
  }
}

/** A list of top-level argument field names, or why not. */
const fieldList = (option: string, value: unknown): string | undefined => {
  if (value === undefined) return undefined
  if (!Array.isArray(value))
    return `${option} must be an array of field names, got ${Predicate.isString(value) ? JSON.stringify(value) : typeof value}`
  const bad = value.find((field) => !Predicate.isString(field) || field === "")
  return bad === undefined
    ? undefined
    : `${option} must hold non-empty field names, got ${JSON.stringify(bad) ?? String(bad)}`
}

const flag = (option: string, value: unknown): string | undefined =>
  value === undefined || typeof value === "boolean" ? undefined : `${option} must be a boolean, got ${typeof value}`

const optionalFunction = (option: string, value: unknown): string | undefined =>
  value === undefined || Predicate.isFunction(value) ? undefined : `${option} must be a function, got ${typeof value}`

/** The first reason the definition cannot work, or `undefined`. */
export const problem = (options: Untyped, known: OptionKeys.Known<Untyped> = knownOptions): string | undefined => {
  const { name, description, input, output, handler, maxRetries, timeout, sideEffect } = options
  if (!Predicate.isString(name) || !namePattern.test(name)) {
    return "the name must be 1 to 64 characters of letters, digits, '_' or '-'"
  }
  // A made tool spread into a definition would lose its metadata (its `needsApproval` among it).
  if (Reflect.get(options, "_tag") === "Tool") {
    return "a made tool is no definition: give the options it is made of (its metadata spread in), or its approval and side effect are lost"
  }
  const unknown = OptionKeys.unknownOption(options, known)
  if (unknown !== undefined) return unknown
  if (!Predicate.isString(description)) return `description must be a string, got ${typeof description}`
  if (!Schema.isSchema(input)) return "input must be a Schema (the arguments' schema)"
  if (!acceptsObjects(SchemaAST.toEncoded(input.ast))) {
    return "input must be a schema of a JSON object (a Schema.Struct, a record, or a union of them): the model sends a call's arguments as an object"
  }
  if (!Schema.isSchema(output)) return "output must be a Schema (the handler's output schema)"
  if (!Predicate.isFunction(handler)) return `handler must be a function, got ${typeof handler}`
  if (
    maxRetries !== undefined &&
    !(typeof maxRetries === "number" && Number.isInteger(maxRetries) && maxRetries >= 0)
  ) {
    return `maxRetries must be an integer >= 0, got ${UserCode.shown(maxRetries)}`
  }
  if (timeout !== undefined) {
    // Untyped input at the boundary: `Duration.fromInput` reads what it can and gives `None` for the rest.
    const millis = Option.match(Duration.fromInput(timeout as Duration.Input), {
      onNone: () => Number.NaN,
      onSome: Duration.toMillis
    })
    if (!(millis > 0 && Number.isFinite(millis))) {
      // Positive, but less than effect counts (`1e-9`, read as 0 ns): refused as what it is, not as
      // one that is not positive (as `Durations.belowResolution`, which `tools/` cannot import).
      const amount = Predicate.isNumber(timeout)
        ? timeout
        : Predicate.isString(timeout)
          ? Number.parseFloat(timeout)
          : 0
      // A Duration made of such an amount (`Duration.millis(4e-7)`) is 0 nanoseconds, where none is 0 milliseconds.
      const rounded = Duration.isDuration(timeout) && timeout.value._tag === "Nanos" && timeout.value.nanos === 0n
      const expected =
        millis === 0 && (amount > 0 || rounded)
          ? "at least 1 nanosecond (effect counts time in whole nanoseconds)"
          : "a positive, finite duration"
      return `timeout must be ${expected}, got ${UserCode.shown(timeout)}`
    }
  }
  if (sideEffect !== undefined && !sideEffects.includes(sideEffect)) {
    return `sideEffect must be one of "none", "read", "write", "external", got ${JSON.stringify(sideEffect) ?? String(sideEffect)}`
  }
  return (
    flag("idempotent", options.idempotent) ??
    flag("destructive", options.destructive) ??
    flag("needsApproval", options.needsApproval) ??
    flag("recoverErrors", options.recoverErrors) ??
    flag("strict", options.strict) ??
    fieldList("pathFields", options.pathFields) ??
    fieldList("contentFields", options.contentFields) ??
    // Lists of names: `fieldList` checked them just above (a definition is untyped here).
    ToolFields.problem(
      input.ast,
      (options.pathFields as ReadonlyArray<string> | undefined) ?? [],
      (options.contentFields as ReadonlyArray<string> | undefined) ?? []
    ) ??
    optionalFunction("postcondition", options.postcondition) ??
    optionalFunction("observe", options.observe) ??
    optionalFunction("reconcile", options.reconcile)
  )
}
