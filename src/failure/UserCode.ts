/**
 * The boundary where user code hands values to the runtime: tool handlers, models,
 * policies, permission checks, approval gates, hooks. Whatever they do (throw any value,
 * return something that is not an Effect, return a value outside its type) becomes a
 * typed failure here, with a safe description, before the runtime uses it (R12).
 *
 * A value that is not an Effect must never reach the fiber: effect's run loop ends a
 * fiber that meets one at once, skipping its finalizers, so the check is made on the
 * value before it is yielded. Private to the runtime.
 */
import { Cause, Effect, Exit, Predicate, Result, Schema } from "effect"
import * as Failure from "./Failure.ts"
import * as SchemaIssues from "./SchemaIssues.ts"
import * as Text from "./Text.ts"

/**
 * `Effect.isEffect`, for a value that may be hostile (a Proxy whose `has` trap throws).
 * Not a type guard: the caller's value keeps its declared type (and its requirements).
 */
export const isEffect = (value: unknown): boolean => {
  try {
    return Effect.isEffect(value)
  } catch {
    return false
  }
}

/**
 * What it is for `what` to end interrupted when nobody interrupted it: an
 * `Effect.interrupt` of its own, or a join of a fiber that was interrupted. Interrupting
 * is the runtime's to do (a cancel, a deadline), and each of those is recorded.
 */
export const interruptedItself = (what: string): string =>
  `${what} interrupted itself (an Effect.interrupt of its own, or a join of an interrupted fiber), with no cancel and no deadline`

/**
 * `self`, with an interruption it ends with made `onSelf()`. Only an interruption of
 * its own gets there: one from outside (a cancel, a deadline's race) is sticky in effect,
 * and the fiber stays interrupted whatever `onSelf` gives; so `onSelf` must do nothing
 * but describe it (no event, no other effect).
 */
export const catchSelfInterrupt = <A, E, R, A2, E2>(
  self: Effect.Effect<A, E, R>,
  onSelf: () => Effect.Effect<A2, E2>
): Effect.Effect<A | A2, E | E2, R> =>
  Effect.catchCause(
    self,
    (cause): Effect.Effect<A2, E | E2> => (Cause.hasInterruptsOnly(cause) ? onSelf() : Effect.failCause(cause))
  )

/**
 * Makes whatever a piece of user code outside a tool handler failed with (a typed
 * error it was not allowed to have, a defect, an interruption of its own) a
 * {@link UserCodeDefect} that names it; an interruption from outside stays one.
 */
export const orDie = <A, E, R>(what: string, self: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> =>
  Effect.catchCause(self, (cause) => {
    if (Cause.hasInterruptsOnly(cause)) return Exit.die(new UserCodeDefect(interruptedItself(what)))
    const squashed = Cause.squash(cause)
    return Exit.die(
      isUserCodeDefect(squashed)
        ? squashed
        : new UserCodeDefect(`${what} failed with ${Failure.safeDescription(squashed)}`, { cause: squashed })
    )
  })

/**
 * {@link orDie} for code whose contract names the errors it fails with (an approval gate's
 * `PendingUnavailable`): a failure of one of `errors` passes on as it is; a failure with a
 * value outside them, a defect or an interruption of its own is a {@link UserCodeDefect}
 * naming `what` (R12: the caller is never handed a failure of a type it was not promised).
 */
export const orDieExcept = <A, E, R>(
  what: string,
  errors: ReadonlyArray<abstract new (...args: never) => E>,
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.catchCause(self, (cause): Effect.Effect<never, E> => {
    for (const reason of cause.reasons) {
      if (Cause.isFailReason(reason) && !isOneOf(reason.error, errors)) return orDie(what, Effect.fail(reason.error))
    }
    // Every failure is one of `errors` (checked above): the cause passes on as it is.
    if (Cause.hasFails(cause) && !Cause.hasDies(cause)) return Effect.failCause(cause)
    return orDie(what, Effect.failCause(cause))
  })

/** Whether `value` is an instance of one of `classes` (false for a value whose prototype cannot be read). */
const isOneOf = (value: unknown, classes: ReadonlyArray<abstract new (...args: never) => unknown>): boolean => {
  try {
    return classes.some((each) => value instanceof each)
  } catch {
    return false
  }
}

/** Whether a value is a Promise or looks like one (a `then` method), read safely. */
export const isThenable = (value: unknown): boolean => {
  try {
    return Predicate.hasProperty(value, "then") && Predicate.isFunction(value.then)
  } catch {
    return false
  }
}

const handled = (): void => {}

/**
 * How much of user code's words the run keeps (a policy's stop detail or warning, a stop
 * hook's verdict, a criterion's finding): each goes into the log and the result, copied
 * several times (R12: 20 MB of it went in as it was).
 */
export const maxWords = 4096

/** `text` cut to `max` characters (no pair cut in two), saying how much more it had. */
export const cutWords = (text: string, max = maxWords): string => {
  if (text.length <= max) return text
  const kept = Text.head(text, max)
  return `${kept}... (${text.length - kept.length} more characters)`
}

/**
 * Lets go of what user code returned where no Promise belongs (an `async` function, where
 * an Effect, a decision or nothing was due): a rejection of a Promise is handled here, since
 * Node ends the process on a rejection nothing handles (R12). Returns the value as it is.
 */
export const letGo = <A>(value: A): A => {
  if (value instanceof Promise) {
    try {
      Promise.prototype.then.call(value, undefined, handled)
    } catch {
      // A Promise whose constructor getter throws: nothing more can be done for it.
    }
  }
  return value
}

/**
 * A value as a message shows it, without running its code: a number, a boolean, a short
 * quoted string, or its kind (`String(value)` runs a `toString` that may throw).
 */
export const shown = (value: unknown): string => {
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value)
  if (typeof value === "string") return JSON.stringify(Text.clip(value, 60))
  return kindOf(value)
}

/**
 * What a returned value is, in a few words, without running its code. A Promise it
 * names is let go (see {@link letGo}): the value is being refused.
 */
export const kindOf = (value: unknown): string => {
  if (value === undefined) return "undefined"
  if (value === null) return "null"
  if (isThenable(value)) {
    letGo(value)
    return "a Promise"
  }
  const type = typeof value
  if (type === "object") {
    try {
      if (Array.isArray(value)) return "an array"
    } catch {
      return "an object"
    }
    return "an object"
  }
  return type === "function" ? "a function" : `a ${type}`
}

/**
 * A defect of user code outside a tool handler (a termination policy, an approval gate,
 * a model that broke its contract): the run ends `internal_error`, and this says which
 * code and how, safely (its `safeMessage`).
 */
export class UserCodeDefect extends Error {
  override readonly name = "UserCodeDefect"
  readonly safeMessage: string
  constructor(safeMessage: string, options?: { readonly cause?: unknown }) {
    super(safeMessage, options?.cause === undefined ? undefined : { cause: options.cause })
    this.safeMessage = safeMessage
  }
}

/** Whether a defect is a {@link UserCodeDefect} (safely: a hostile value's getters are not run). */
export const isUserCodeDefect = (value: unknown): value is UserCodeDefect => {
  try {
    return value instanceof UserCodeDefect
  } catch {
    return false
  }
}

/** `what` (e.g. `the termination policy "p"`) threw `defect`. */
export const threw = (what: string, defect: unknown): UserCodeDefect =>
  new UserCodeDefect(`${what} threw ${Failure.safeDescription(defect)}`, { cause: defect })

/**
 * The failure of a call whose code returned something other than an Effect:
 * permanent (calling it again returns the same kind of thing), with the advice to fix it.
 */
export const notAnEffect = (source: Failure.Source, what: string, value: unknown, advice: string): Failure.Permanent =>
  new Failure.Permanent({
    source,
    category: "defect",
    code: "not_an_effect",
    attempts: 1,
    hint: `${what} returned ${kindOf(value)}, not an Effect; ${advice}`
  })

/**
 * Calls `f`, which must return an Effect. A throw becomes the failure `defectCode`
 * (see `Failure.fromDefect`), anything that is not an Effect the failure
 * `not_an_effect` (see {@link notAnEffect}); both as finished `Exit`s. An Effect that
 * interrupts itself fails permanently with `defectCode` (see {@link interruptedItself}).
 */
export const effect = <A, R>(
  options: CallOptions,
  f: () => Effect.Effect<A, Failure.Failure, R>
): Effect.Effect<A, Failure.Failure, R> =>
  catchSelfInterrupt(called(options, f), () =>
    Exit.fail(selfInterrupted(options.source, options.what, options.defectCode))
  )

/** What user code that must return an Effect is, for {@link effect} and {@link called}. */
export interface CallOptions {
  readonly source: Failure.Source
  readonly what: string
  readonly advice: string
  readonly defectCode: string
}

/**
 * {@link effect}, but an interruption of its own is left to the caller, which handles
 * what the code ends with in one place (a tool handler's attempt: its defects too).
 */
export const called = <A, R>(
  options: CallOptions,
  f: () => Effect.Effect<A, Failure.Failure, R>
): Effect.Effect<A, Failure.Failure, R> => {
  // Typed as declared; at run time it may be anything (JavaScript callers), hence the checks.
  let out: Effect.Effect<A, Failure.Failure, R>
  try {
    out = f()
  } catch (defect) {
    return Exit.fail(Failure.fromDefect(options.source, defect, options.defectCode))
  }
  if (!isEffect(out)) return Exit.fail(notAnEffect(options.source, options.what, out, options.advice))
  return out
}

/** The permanent failure of `what`, which interrupted itself (see {@link interruptedItself}). */
export const selfInterrupted = (source: Failure.Source, what: string, code: string): Failure.Permanent =>
  new Failure.Permanent({ source, category: "defect", code, attempts: 1, hint: interruptedItself(what) })

/**
 * Like {@link effect}, for code outside a tool handler whose failure ends the run
 * (`internal_error`): a throw or a non-Effect is a {@link UserCodeDefect} defect.
 */
export const effectOrDie = <A, E, R>(what: string, f: () => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  let out: Effect.Effect<A, E, R>
  try {
    out = f()
  } catch (defect) {
    return Exit.die(threw(what, defect))
  }
  if (!isEffect(out)) return Exit.die(new UserCodeDefect(`${what} returned ${kindOf(out)}, not an Effect`))
  return out
}

/**
 * Checks a value user code returned against its schema, or says which field is wrong:
 * `the termination policy "p" returned an invalid decision: Expected … at ["reason"]`.
 * The issue is rendered as the tool pipeline renders argument errors: paths and
 * expectations, each value cut short. `exact` refuses keys the schema does not name (an
 * option's typo).
 */
export const check = <S extends Schema.ConstraintDecoder<unknown>>(
  schema: S,
  what: string,
  options?: { readonly exact?: boolean | undefined }
): ((value: unknown) => Result.Result<S["Type"], string>) => {
  const checkValue = checkAs(schema, options)
  return (value) => checkValue(value, () => what)
}

/**
 * What a {@link check} found, as an Effect: the value, or a {@link UserCodeDefect} naming the
 * code that answered it, for an answer that ends the run (a gate's, say).
 */
export const checkedOrDie = <A>(checked: Result.Result<A, string>): Effect.Effect<A> =>
  Result.isSuccess(checked) ? Effect.succeed(checked.success) : Effect.die(new UserCodeDefect(checked.failure))

/**
 * {@link check}, with what the value is named at each call: one decoder for values of
 * many owners (the decisions of every policy), each failure naming its owner.
 */
export const checkAs = <S extends Schema.ConstraintDecoder<unknown>>(
  schema: S,
  options?: { readonly exact?: boolean | undefined }
): ((value: unknown, what: () => string) => Result.Result<S["Type"], string>) => {
  const excess = options?.exact === true ? { onExcessProperty: "error" as const } : {}
  // Decided at the first problem; every problem named only for a value small enough to hold
  // them (a value wrong in millions of places is millions of issues, R12).
  const decode = Schema.decodeUnknownResult(schema, { errors: "first", ...excess })
  const decodeAll = Schema.decodeUnknownResult(schema, { errors: "all", ...excess })
  const perValue = SchemaIssues.issuesPerValue(schema.ast)
  return (value, what) => {
    try {
      const given = letGo(value)
      return Result.mapError(decode(given), (first) => {
        const all = SchemaIssues.describable(given, perValue) ? decodeAll(given) : undefined
        const error = all !== undefined && Result.isFailure(all) ? all.failure : first
        return `${what()} is invalid: ${SchemaIssues.describe(error.issue, "").message}`
      })
    } catch (defect) {
      return Result.fail(`${what()} cannot be read (${Failure.safeDescription(defect)})`)
    }
  }
}

/**
 * What decoding with a schema of the user's (a typed output's, an artifact's) gave: the value; the schema's issue, the value's
 * fault; or what broke in the schema itself (a throw, a service it needs, an asynchronous
 * step, a stack it overflowed), its cause.
 */
export type Decoding =
  | { readonly _tag: "Decoded"; readonly value: unknown }
  | { readonly _tag: "Mismatch"; readonly error: Schema.SchemaError }
  | { readonly _tag: "Broken"; readonly cause: Cause.Cause<unknown> }

/** What `decode`, a decoding by a schema of the user's, gave (see {@link Decoding}). */
export const decodingOf = (decode: () => Exit.Exit<unknown, Schema.SchemaError>): Decoding => {
  let decoded: Exit.Exit<unknown, Schema.SchemaError>
  try {
    decoded = decode()
  } catch (defect) {
    return { _tag: "Broken", cause: Cause.die(defect) }
  }
  if (Exit.isSuccess(decoded)) return { _tag: "Decoded", value: decoded.value }
  const error = Exit.findErrorOption(decoded)
  return error._tag === "Some" && Schema.isSchemaError(error.value)
    ? { _tag: "Mismatch", error: error.value }
    : { _tag: "Broken", cause: decoded.cause }
}
