/**
 * Canonical signatures of tool calls, failures and observations.
 *
 * Loop and repetition detection compare actions by value, not by the text the model
 * happened to write: `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` are the same call.
 * A signature is the tool name and a short digest of the canonical JSON of its
 * arguments (object keys sorted, recursively): the timeline keeps a 1 MiB argument once,
 * in the call itself, not again in each signature.
 *
 * @since 0.1.0
 */
import { createHmac } from "node:crypto"
import { Predicate } from "effect"
import { echoesIn, queryOf } from "./internal/Echoes.ts"
import * as ToolArguments from "./ToolArguments.ts"

/** As deep as the arguments the tool pipeline lets through can be (`ToolArguments.Limits.maxArgumentDepth`). */
const maxDepth = ToolArguments.deepestArguments

/** How many values a walk may still visit: a value that shares its parts may hold more paths than memory. */
interface Budget {
  left: number
}

const canonicalValue = (value: unknown, depth: number, budget: Budget): unknown => {
  if (depth > maxDepth) throw new RangeError(`Signature.canonicalJson: nested more than ${maxDepth} levels deep`)
  if (--budget.left < 0) throw new RangeError("Signature.canonicalJson: more values than the walk may visit")
  if (Array.isArray(value)) return value.map((item) => canonicalValue(item, depth + 1, budget))
  if (Predicate.isObject(value) && !Predicate.isFunction(value)) {
    const keys = Object.keys(value)
    if (keys.length > 1) keys.sort()
    const out: Record<string, unknown> = {}
    for (const key of keys) {
      const item = canonicalValue(value[key], depth + 1, budget)
      if (key === "__proto__") {
        // As an own key `__proto__` is data; defineProperty keeps it from touching the prototype.
        Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true })
      } else {
        out[key] = item
      }
    }
    return out
  }
  return value
}

/**
 * JSON with object keys sorted at every depth. Throws a `RangeError` for a value nested
 * more than 512 levels deep (the tool pipeline refuses arguments deeper than 64).
 *
 * @category constructors
 * @since 0.1.0
 */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(canonicalValue(value, 0, { left: Number.POSITIVE_INFINITY })) ?? "null"

/**
 * The most values the signature of refused arguments walks (a few milliseconds). Past it
 * they are signed by their type, so a value whose parts are shared at every level (its
 * paths double per level) is signed at once.
 */
const maxUnparsedValues = 100_000

/**
 * The signature of a call as the model sent it. Arguments that the tool pipeline would
 * refuse (not JSON, not an object, too large or too deep, a `__proto__` key) are
 * signed by a digest of their text, so a malformed call repeated still has one
 * signature, and no walk goes deeper than the pipeline allows.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolCall = (name: string, rawArguments: unknown): string => {
  const parsed = ToolArguments.parseArguments(rawArguments)
  if (parsed._tag === "Ok") return toolCallParsed(name, parsed.value)
  return unparsed(name, rawArguments)
}

/**
 * The signature of a call whose arguments could not be parsed: a digest of their text, or
 * of the canonical JSON of a value a provider handed over parsed (`{ q: NaN, page: 2 }`:
 * distinct refused calls stay distinct). A value that JSON cannot write, or nested past
 * 512 levels, or cyclic, or of more than 100,000 values, is signed by its type alone.
 *
 * @category constructors
 * @since 0.1.0
 */
export const unparsed = (name: string, rawArguments: unknown): string => {
  if (Predicate.isString(rawArguments)) return `${name}:~${digest(rawArguments)}`
  try {
    const canonical = JSON.stringify(canonicalValue(rawArguments, 0, { left: maxUnparsedValues })) ?? "null"
    return `${name}:~${digest(canonical)}`
  } catch {
    // A bigint, a cycle, a getter that throws, a depth past the walk's bound: no text to sign.
    return `${name}:~${typeof rawArguments}`
  }
}

/**
 * The signature of a call whose arguments are already parsed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolCallParsed = (name: string, args: unknown): string => `${name}:${digest(canonicalJson(args))}`

/**
 * The signature of a call of a sensitive tool: an HMAC-SHA-256, under `key`, of the tool's
 * name and the canonical JSON of the arguments as the model sent them (its secrets in
 * place), so that calls with other secrets, or the same ones in other fields, differ
 * (R2.3); the run never records its key, so the log cannot be searched for a guessed
 * secret, nor does the signature tell a secret's length (R12).
 *
 * @category constructors
 * @since 0.3.0
 */
export const toolCallKeyed = (name: string, args: unknown, key: string): string => keyed(name, canonicalJson(args), key)

/**
 * {@link toolCallKeyed} of arguments that did not parse: the text as sent, or what
 * {@link unparsed} makes of a value (bounded, and never throwing whatever the value).
 *
 * @category constructors
 * @since 0.3.0
 */
export const unparsedKeyed = (name: string, rawArguments: unknown, key: string): string =>
  keyed(name, Predicate.isString(rawArguments) ? rawArguments : unparsed(name, rawArguments), key)

const keyed = (name: string, text: string, key: string): string =>
  `${name}:#${createHmac("sha256", key).update(`${name}\u0000${text}`).digest("base64url")}`

/**
 * Whether a call's signature is a sensitive call's ({@link toolCallKeyed}): its arguments,
 * as the model sent them, hold secrets and are not to be shown.
 *
 * @category guards
 * @since 0.3.0
 */
export const isKeyed = (signature: string): boolean => keyedEnd.test(signature)

/** How a keyed signature ends: `:#` and its HMAC, after the tool's name. */
const keyedEnd = /:#[\w-]+$/

/** What follows the tool's name in a call's signature: a digest, `~` and a digest or a type (unparsed), `#` and an HMAC (keyed). */
const afterName = /:(?:~?\d+\.\d+:\d+|~[a-z]+|#[\w-]+)$/

/**
 * The name of the tool a call's signature is of. A name the model made up may hold `:`
 * (`search:1`, for no tool `search`), so it is what comes before the signature's end,
 * read from the end.
 *
 * @category getters
 * @since 0.3.0
 */
export const toolName = (signature: string): string => {
  const end = afterName.exec(signature)
  return end === null ? signature : signature.slice(0, end.index)
}

/**
 * The key of a successful call's observation for loop detection (R2.3). A result that
 * echoes its call's own string arguments (each of three characters or more, as it is or as
 * JSON writes it, once or twice escaped) is keyed by the rest of it and by those arguments
 * with their spacing, case, Unicode compatibility forms and invisible characters (zero-width
 * spaces, soft hyphens, word joiners) left out: near-identical queries
 * returning the same result set (`No results for café report 2024` for `{"q":"café report
 * 2024"}`, then for `{"q":"Café  report 2024"}`) are one result, and an echo of other words
 * is another. Any other result (or one longer than 64 KiB) is keyed by its whole text: the
 * same observation for other arguments counts too, and results that differ in anything
 * (their spacing, their case) are different.
 *
 * @category constructors
 * @since 0.3.0
 */
export const observation = (text: string, args?: unknown): string => echoKey(text, args) ?? digest(text)

/** The key of a result that echoes its call's arguments (see {@link observation}), or `undefined` when none does. */
const echoKey = (text: string, args: unknown): string | undefined => {
  const { rest, echoed } = echoesIn(text, args)
  if (echoed.length === 0) return undefined
  // In the arguments' order, as the rest marks where each was.
  const queries = echoed.map(queryOf)
  return digest(`${rest}\u0000${queries.join("\u0000")}`)
}

/**
 * Every key of a successful call's observation for loop detection (R2.3): its whole text's,
 * and, for a result that echoes its call's arguments, {@link observation}'s. An observation
 * is seen again when either is: the same text for other arguments is the same observation,
 * whatever of it those arguments happen to echo (a model that sends words of the result it
 * was shown does not make it new).
 *
 * @category constructors
 * @since 0.3.0
 */
export const observationKeys = (text: string, args?: unknown): ReadonlyArray<string> => {
  const whole = digest(text)
  const echoed = echoKey(text, args)
  return echoed === undefined ? [whole] : [whole, echoed]
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const failure = (name: string, code: string, message: string): string => `${name}|${code}|${message}`

/** murmur3's 32-bit finaliser: every bit of the input moves about half the bits of the output. */
const mix = (h: number): number => {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/**
 * A short digest of a text: equal texts have equal digests; different texts practically
 * never do (64 bits from two multiply-rotate lanes over its UTF-16 code units, each
 * finalised with the other, plus the length: `3735928559.19088743:12`). A 32-bit hash was too short: among names
 * three characters apart, distinct calls shared a signature and ended the run
 * `repeated_tool_call` (R2.3).
 *
 * @category constructors
 * @since 0.1.0
 */
export const digest = (text: string): string => {
  let a = 0x243f6a88 ^ text.length
  let b = 0x13198a2e ^ text.length
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    a = Math.imul(a ^ c, 0x9e3779b1)
    a = (a << 13) | (a >>> 19)
    b = Math.imul(b ^ c, 0x85ebca77)
    b = (b << 17) | (b >>> 15)
  }
  const high = mix(a ^ Math.imul(b, 0x27d4eb2f))
  const low = mix(b ^ Math.imul(high, 0x165667b1))
  // In decimal: V8 writes a number in another radix several times slower, on every step.
  return `${high}.${low}:${text.length}`
}
