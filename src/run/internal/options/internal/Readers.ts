/**
 * The readers the run's options Schema is built of: values of the user checked as they
 * are (`opaque`, `fn`), objects read once (`readOnce`), values passed on or decoded
 * (`dispatch`), lists of unique names, counts and durations. Private to `options/`.
 */
import { Effect, Predicate, Schema, type SchemaAST, SchemaIssue, SchemaParser } from "effect"
import * as Durations from "../../../../time/Durations.ts"

/** A value of type `T`, checked by `is` alone: functions, schemas and services of the user. */
export const opaque = <T>(is: (u: unknown) => boolean, expected: string) =>
  Schema.declare((u: unknown): u is T => is(u), { expected })

export const fn = <F>(expected = "a function") => opaque<F>(Predicate.isFunction, expected)

/**
 * A list whose items' `field` (a name, an id) is unique: the second item that repeats one
 * is refused at its field's path, so the message names where (`tools[2].name`).
 */
export const uniqueBy = <K extends string>(field: K, repeated: (value: string) => string) =>
  Schema.makeFilter((items: ReadonlyArray<{ readonly [F in K]: string }>) => {
    const seen = new Set<string>()
    for (let i = 0; i < items.length; i++) {
      const value = items[i]?.[field] ?? ""
      if (seen.has(value)) return { path: [i, field], issue: repeated(value) }
      seen.add(value)
    }
    return undefined
  })

/**
 * The options' own objects refuse a key they do not have (a misspelt or moved option);
 * the objects of user code inside them (a tool, a policy, a criterion) may carry more.
 */
const lenient = (options: SchemaAST.ParseOptions): SchemaAST.ParseOptions => ({
  ...options,
  onExcessProperty: "ignore"
})

/**
 * A user object read once through `shape`, then made into what the run keeps by
 * `build`, which also gets the object it was read from (to call its methods on).
 */
export const readOnce = <S extends Schema.Constraint, T>(shape: S, build: (read: S["Type"], from: unknown) => T) =>
  Schema.declareConstructor<T, unknown>()(
    [shape],
    ([codec]) =>
      (input, _ast, options) =>
        Effect.map(SchemaParser.decodeUnknownEffect(codec)(input, lenient(options)), (read) => build(read, input))
  )

/** An integer of at least `minimum`. */
export const Count = (minimum: number) => Schema.Int.check(Schema.isGreaterThanOrEqualTo(minimum))

/**
 * The longest time limit, 1,000 years: a deadline counted from now stays a whole number of
 * milliseconds a number holds exactly, and so does every expiry a store keeps (review 182: a run
 * of 9,999,999,999 days set an approval's expiry SQLite could not read back, and the run ended
 * `internal_error` at its first approval).
 */
export const maxMillis = 1000 * 365.25 * 24 * 3600 * 1000

/** The milliseconds of a positive duration of at most {@link maxMillis}, or `undefined`. */
const positiveMillisOf = (input: unknown): number | undefined => {
  const millis = Durations.millisOf(input)
  return millis !== undefined && millis > 0 && millis <= maxMillis ? millis : undefined
}

const aDuration = 'a positive duration of at most 365250 days (1000 years; "30 seconds", or milliseconds)'

/** A positive `Duration.Input` of at most 1,000 years, read as milliseconds. */
export const Millis = Schema.declareConstructor<number, unknown>()([], () => (input) => {
  const millis = positiveMillisOf(input)
  if (millis !== undefined) return Effect.succeed(millis)
  // Positive, but less than effect counts (`1e-9`): refused as what it is, not as a duration that is not positive.
  const expected = Durations.belowResolution(input) ? `a duration of ${Durations.atLeastOneNanosecond}` : aDuration
  return Effect.fail(new SchemaIssue.InvalidValue({ expected }))
})

/** The stop grace is a real-time timer: at most 2^31 - 1 ms (24.8 days), what one can wait. */
export const Grace = Millis.check(
  Schema.isLessThanOrEqualTo(2_147_483_647, { expected: "a positive duration of at most 24 days" })
)

// Every effect Schema carries its AST.
const isSchema = (value: unknown): boolean => Predicate.hasProperty(value, "ast") && Predicate.isObject(value.ast)

export const SchemaValue = opaque<Schema.Codec<unknown, unknown>>(isSchema, "a Schema")

/** A value that is either passed on as it is (`keep`) or decoded by `codec`, or refused as not `expected`. */
export const dispatch = <S extends Schema.Constraint, K>(
  schema: S,
  keep: (u: unknown) => u is K,
  isCandidate: (u: unknown) => boolean,
  expected: string
) =>
  Schema.declareConstructor<S["Type"] | K, unknown>()([schema], ([codec]) => (input, _ast, options) => {
    if (keep(input)) return Effect.succeed(input)
    if (!isCandidate(input)) return Effect.fail(new SchemaIssue.InvalidValue({ expected }))
    return SchemaParser.decodeUnknownEffect(codec)(input, options)
  })

/** A name the log records (a policy's, a model's): not blank. */
export const NotBlank = Schema.String.check(
  Schema.makeFilter((name) => name.trim() !== "", { expected: "a name that is not blank" })
)
