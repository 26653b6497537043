/**
 * The failure algebra: every failure that crosses a boundary (provider, tool,
 * subprocess, store) is converted, at that boundary, into exactly one of three typed
 * outcomes (R3.1):
 *
 * - {@link Retryable}: transient; trying again may succeed.
 * - {@link Permanent}: trying the same thing again will fail the same way.
 * - {@link UnknownOutcome}: a side effect may or may not have happened; never retried blindly.
 *
 * Each carries its source, a category, a stable code, how many attempts were already
 * made (so an outer layer does not retry again, R3.4) and a `hint` that is safe to show
 * the model or a user. Diagnostic detail stays in `diagnostic`, which never reaches an
 * observation or an event.
 *
 * @since 0.1.0
 */
import { Cause, Predicate, Schema, SchemaTransformation } from "effect"

/**
 * Where a failure came from.
 *
 * @category models
 * @since 0.1.0
 */
export const Source = Schema.Literals(["provider", "tool", "subprocess", "store", "runtime"])

/**
 * @category models
 * @since 0.1.0
 */
export type Source = typeof Source.Type

/**
 * How a failure may be recovered.
 *
 * @category models
 * @since 0.1.0
 */
export type Classification = "retryable" | "permanent" | "unknown"

/**
 * The time layers a deadline or timeout belongs to (R4.1), from the whole run down to
 * the transport's own timeouts.
 *
 * @category models
 * @since 0.1.0
 */
export const TimeoutLayer = Schema.Literals([
  "run",
  "step",
  "attempt",
  "tool",
  "approval",
  "connect",
  "first_byte",
  "idle_read"
])

/**
 * @category models
 * @since 0.1.0
 */
export type TimeoutLayer = typeof TimeoutLayer.Type

/**
 * What a timeout says about itself (R4.3): which layer fired, after how long, and
 * whether the action it cut off may have left side effects. Whether it is retryable is
 * the failure's own class.
 *
 * @category models
 * @since 0.1.0
 */
export const Timeout = Schema.Struct({
  layer: TimeoutLayer,
  elapsedMillis: Schema.Finite,
  mayHaveSideEffects: Schema.Boolean
})

/**
 * @category models
 * @since 0.1.0
 */
export type Timeout = typeof Timeout.Type

/**
 * What kind of failure this is: the runtime decides by it (with the class and
 * `timeout.layer`), never by `code`. The library's own, by where they come from:
 *
 * - transport and provider: `transient_http`, `permanent_http`, `timeout`, `connection`,
 *   `corrupt_response`, `request_failed`, `response_too_large`, `stream_error`,
 *   `provider_interrupted`, `content_filter` (the run stops `content_filtered`),
 *   `invalid_response`, `invalid_options`;
 * - circuit breakers: `circuit_open`, `circuit_half_open` (the call never ran), `circuit_store`;
 * - tools and files: `invalid_argument`, `invalid_target`, `not_found`, `permission`,
 *   `too_large`, `io`, `invalid_output`, `not_applied`; effect/ai tools: `ai_error` (an
 *   `AiError`), `tool_failure` (a value of the tool's failure schema);
 * - subprocesses: `spawn`, `exit`, `crash`, `output`, `output_limit`;
 * - anything thrown: `defect`; the testing kit's scripts: `script`.
 *
 * For a tool's own failures: `conflict` (the state changed: never retried by default,
 * R3.10), `rejected` (the service said no), `unavailable`, `rate_limited`,
 * `unauthorized`, and `other`. A tool's own `code` stays free text (`payment_declined`).
 *
 * @category models
 * @since 0.3.0
 */
export const Category = Schema.Literals([
  "transient_http",
  "permanent_http",
  "timeout",
  "connection",
  "corrupt_response",
  "request_failed",
  "response_too_large",
  "stream_error",
  "provider_interrupted",
  "content_filter",
  "invalid_response",
  "invalid_options",
  "circuit_open",
  "circuit_half_open",
  "circuit_store",
  "invalid_argument",
  "invalid_target",
  "not_found",
  "permission",
  "too_large",
  "io",
  "invalid_output",
  "not_applied",
  "ai_error",
  "tool_failure",
  "spawn",
  "exit",
  "crash",
  "output",
  "output_limit",
  "defect",
  "script",
  "conflict",
  "rejected",
  "unavailable",
  "rate_limited",
  "unauthorized",
  "other"
])

/**
 * @category models
 * @since 0.3.0
 */
export type Category = typeof Category.Type

const isCategory = Schema.is(Category)

/**
 * A category as stored (a timeline, a result): text. A category this version does not
 * know (written by a later one) decodes as `other`, so an old reader still reads the
 * log; its `code` and `hint` keep what it was. Built in code, a category must be one of
 * {@link Category}.
 */
const StoredCategory = Schema.String.pipe(
  Schema.decodeTo(
    Category,
    SchemaTransformation.transform<Category, string>({
      decode: (text) => (isCategory(text) ? text : "other"),
      encode: (category) => category
    })
  )
)

const fields = {
  source: Source,
  category: StoredCategory,
  code: Schema.String,
  attempts: Schema.Int,
  hint: Schema.String,
  diagnostic: Schema.optional(Schema.String),
  /** Set on a timeout: the layer that fired (R4.3). */
  timeout: Schema.optional(Timeout)
}

/**
 * A transient failure: the same request may succeed later.
 *
 * @category errors
 * @since 0.1.0
 */
export class Retryable extends Schema.TaggedError<Retryable>()("Retryable", {
  ...fields,
  retryAfterMillis: Schema.optional(Schema.Finite)
}) {
  get classification(): Classification {
    return "retryable"
  }
  override get message(): string {
    return `${this.source} ${this.code}: ${this.hint}`
  }
}

/**
 * A failure that will repeat if the same request is sent again.
 *
 * @category errors
 * @since 0.1.0
 */
export class Permanent extends Schema.TaggedError<Permanent>()("Permanent", fields) {
  get classification(): Classification {
    return "permanent"
  }
  override get message(): string {
    return `${this.source} ${this.code}: ${this.hint}`
  }
}

/**
 * A side effect may or may not have happened (R3.8).
 *
 * @category errors
 * @since 0.1.0
 */
export class UnknownOutcome extends Schema.TaggedError<UnknownOutcome>()("UnknownOutcome", fields) {
  get classification(): Classification {
    return "unknown"
  }
  override get message(): string {
    return `${this.source} ${this.code}: ${this.hint}`
  }
}

/**
 * @category models
 * @since 0.1.0
 */
export type Failure = Retryable | Permanent | UnknownOutcome

/**
 * @category models
 * @since 0.1.0
 */
export const Failure = Schema.Union([Retryable, Permanent, UnknownOutcome])

/**
 * @category guards
 * @since 0.1.0
 */
export const isFailure = (u: unknown): u is Failure => {
  // A thrown value may be hostile (a Proxy whose traps throw): asking it anything may throw.
  try {
    if (u instanceof Retryable || u instanceof Permanent || u instanceof UnknownOutcome) return true
    // Not one of ours (another copy of this library, or a look-alike): only with every field as ours has it.
    return isShaped(u) && Predicate.hasProperty(u, "classification") && u.classification === classifications[u._tag]
  } catch {
    return false
  }
}

const classifications: Record<Failure["_tag"], Classification> = {
  Retryable: "retryable",
  Permanent: "permanent",
  UnknownOutcome: "unknown"
}

const isShaped = Schema.is(
  Schema.Struct({
    ...fields,
    _tag: Schema.Literals(["Retryable", "Permanent", "UnknownOutcome"]),
    retryAfterMillis: Schema.optional(Schema.Finite)
  })
)

/**
 * The safe, serialisable summary of a failure that events and observations carry.
 *
 * @category models
 * @since 0.1.0
 */
export const Summary = Schema.Struct({
  classification: Schema.Literals(["retryable", "permanent", "unknown"]),
  source: Source,
  category: StoredCategory,
  code: Schema.String,
  attempts: Schema.Int,
  hint: Schema.String,
  timeout: Schema.optional(Timeout)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Summary = typeof Summary.Type

/**
 * Drops the diagnostic detail, keeping only what is safe to show.
 *
 * @category combinators
 * @since 0.1.0
 */
export const summarize = (failure: Failure): Summary => ({
  classification: failure.classification,
  source: failure.source,
  category: failure.category,
  code: failure.code,
  attempts: failure.attempts,
  hint: failure.hint,
  ...(failure.timeout !== undefined ? { timeout: failure.timeout } : {})
})

/** An error class name as code writes it (`TypeError`, `PaymentDeclined`); anything else is not shown. */
const identifier = /^[A-Za-z_$][\w$]{0,63}$/

/**
 * An error code as system and library errors carry it: an errno (`ENOENT`) or words
 * joined by `_` (`ERR_INVALID_URL`, `UND_ERR_SOCKET`). Not any run of capitals and
 * digits: an access key id looks like one.
 */
const errorCode = /^(E[A-Z]{2,15}|[A-Z][A-Z0-9]*(_[A-Z0-9]+){1,6})$/

/** Reads one property of a value that may be hostile (a getter or a Proxy trap that throws). */
const read = (value: object, key: string): unknown => {
  try {
    return Reflect.get(value, key)
  } catch {
    return undefined
  }
}

/**
 * What can be said about a thrown value without trusting it: its type, an error's class
 * name when it looks like one, an errno-style `code`, and the `safeMessage` the thrower
 * marked safe to show. Never the value's own text: an error message can hold anything
 * (a key, a private path, a customer's data). Nothing here can throw, whatever the value.
 *
 * @category models
 * @since 0.1.0
 */
export interface DefectDescription {
  /** `TypeError`, `Error`, `a string`, `a non-Error object`, `null`, … */
  readonly type: string
  readonly code: string | undefined
  readonly safeMessage: string | undefined
}

const isErrorSafe = (value: unknown): value is Error => {
  try {
    return Predicate.isError(value)
  } catch {
    return false
  }
}

/**
 * Describes an unknown thrown value safely (see {@link DefectDescription}).
 *
 * @category constructors
 * @since 0.1.0
 */
export const describeDefect = (defect: unknown): DefectDescription => {
  if (defect === null || defect === undefined) return { type: String(defect), code: undefined, safeMessage: undefined }
  if (typeof defect !== "object" && typeof defect !== "function") {
    return { type: `a ${typeof defect}`, code: undefined, safeMessage: undefined }
  }
  const name = isErrorSafe(defect) ? read(defect, "name") : undefined
  const code = read(defect, "code")
  const safe = read(defect, "safeMessage")
  return {
    type:
      Predicate.isString(name) && identifier.test(name)
        ? name
        : isErrorSafe(defect)
          ? "Error"
          : `a non-Error ${typeof defect}`,
    code: Predicate.isString(code) && errorCode.test(code) ? code : undefined,
    safeMessage: Predicate.isString(safe) && safe.trim() !== "" ? clip(safe) : undefined
  }
}

const clip = (text: string): string => {
  const line = text.split("\n", 1)[0] ?? ""
  return line.length > 1000 ? `${line.slice(0, 1000)}…` : line
}

/**
 * The text a thrown value is shown as to people and models: its type, its `code`, and
 * its `safeMessage` when the thrower set one (`TypeError`, `Error ENOENT`,
 * `PaymentError: the card was declined`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const safeDescription = (defect: unknown): string => {
  const { type, code, safeMessage } = describeDefect(defect)
  return `${type}${code === undefined ? "" : ` ${code}`}${safeMessage === undefined ? "" : `: ${safeMessage}`}`
}

/**
 * The whole text of a thrown value, for `diagnostic` only: its stack or its string form,
 * or, when even that throws, a note that it could not be printed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const diagnosticOf = (defect: unknown): string => {
  try {
    if (isErrorSafe(defect)) {
      const stack = read(defect, "stack")
      if (Predicate.isString(stack)) return stack
      const message = read(defect, "message")
      if (Predicate.isString(message)) return message
    }
    return String(defect)
  } catch {
    return `a ${describeDefect(defect).type} that cannot be printed`
  }
}

/**
 * Converts a defect (a thrown exception, a rejected promise, anything that is not
 * already in the algebra) into a {@link Permanent} failure. The hint is safe by
 * construction: it names only the value's type, its errno-style `code` and the
 * `safeMessage` the thrower marked safe (see {@link safeDescription}); its message and
 * stack stay in `diagnostic`. Nothing about the value is trusted: a value whose
 * `toString` throws, or a Proxy whose every trap throws, is described by its type.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromDefect = (source: Source, defect: unknown, code = "defect"): Permanent =>
  new Permanent({
    source,
    category: "defect",
    code,
    attempts: 1,
    hint: safeDescription(defect),
    diagnostic: diagnosticOf(defect)
  })

/**
 * Converts a whole `Cause` at a boundary: the first typed failure if it is already
 * in the algebra, otherwise the defect or unexpected error as a {@link Permanent}.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromCause = <E>(source: Source, cause: Cause.Cause<E>): Failure => {
  const squashed = Cause.squash(cause)
  return isFailure(squashed) ? squashed : fromDefect(source, squashed)
}
