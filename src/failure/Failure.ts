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
import { Cause, Predicate, Schema } from "effect"
import { StoredCategory } from "./internal/Category.ts"
import { diagnosticOf, safeDescription } from "./internal/Defect.ts"

export { Category } from "./internal/Category.ts"
export { type DefectDescription, describeDefect, diagnosticOf, safeDescription } from "./internal/Defect.ts"

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

/** A token count: a whole number a sum of many can still hold exactly enough (R2.1). */
const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(Number.MAX_SAFE_INTEGER))
/** A price: finite, and small enough that a run's total stays finite. */
/**
 * The largest cost a usage may carry, in USD: far past every budget, and exactly held by a
 * double. A cost counted past it (safe-integer token counts at the highest price) is this.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxCostUsd = 1e15

const Cost = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(maxCostUsd))

/**
 * The tokens a model call used and what they cost: `Model.Usage`, documented there. It
 * is defined here, below the model, so that a failure can carry what an answer the
 * provider stopped unfinished had already cost ({@link Retryable}'s `usage`).
 *
 * @category models
 * @since 0.3.0
 */
export const Usage = Schema.Struct({
  inputTokens: Count,
  outputTokens: Count,
  cachedInputTokens: Schema.optional(Count),
  reasoningTokens: Schema.optional(Count),
  costUsd: Schema.optional(Cost),
  estimated: Schema.optional(Schema.Boolean)
})

const fields = {
  source: Source,
  category: StoredCategory,
  code: Schema.String,
  attempts: Schema.Int,
  hint: Schema.String,
  diagnostic: Schema.optional(Schema.String),
  /** Set on a timeout: the layer that fired (R4.3). */
  timeout: Schema.optional(Timeout),
  /**
   * What a model's answer cost though it failed (one the provider stopped unfinished, or
   * paused): the run counts it toward its token and cost budgets, as a response's (R2.1).
   */
  usage: Schema.optional(Usage)
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
 * The failure of a call its circuit refused (R3.9), as the runtime's circuit breakers make it
 * (and the test kit's replay of one): the call never ran, so waiting for its circuit spends no
 * retry. Only these are refusals (`Recovery.isRefusal`): a failure of a tool's or a model's own
 * under a circuit's category is that code's own, and draws on its retries and the run's budget
 * (R3.4; review 140: a tool failing `circuit_half_open` was called 302,397 times in 20 s).
 * Encoded by its schema it is a `Retryable`; its {@link Summary} says `refused`.
 *
 * @category errors
 * @since 0.3.0
 */
export class Refusal extends Retryable {}

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
    // Only with every field as its schema has it: one of ours built with its checks disabled, or
    // changed since, is not trusted; nor is a look-alike (another copy of this library) that is not
    // shaped so. The classification that matches the tag is asked first: most values have none.
    return (
      Predicate.hasProperty(u, "classification") &&
      Predicate.hasProperty(u, "_tag") &&
      u.classification !== undefined &&
      u.classification === classifications.get(u._tag) &&
      isShaped(u)
    )
  } catch {
    return false
  }
}

const classifications = new Map<unknown, Classification>([
  ["Retryable", "retryable"],
  ["Permanent", "permanent"],
  ["UnknownOutcome", "unknown"]
])

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
  timeout: Schema.optional(Timeout),
  /**
   * A retryable failure's `retryAfterMillis` (a 429's `Retry-After`), so that a replay
   * waits it as the run did. Absent from logs written before 0.3.0.
   */
  retryAfterMillis: Schema.optional(Schema.Finite),
  /** A {@link Refusal} of the run's circuit breaker (R3.9), so that a replay refuses the call as the run's breaker did. */
  refused: Schema.optional(Schema.Literal(true))
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
  ...(failure.timeout !== undefined ? { timeout: failure.timeout } : {}),
  ...(failure._tag === "Retryable" && failure.retryAfterMillis !== undefined
    ? { retryAfterMillis: failure.retryAfterMillis }
    : {}),
  ...(failure instanceof Refusal ? { refused: true as const } : {})
})

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
