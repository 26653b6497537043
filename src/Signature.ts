/**
 * Canonical signatures of tool calls, failures and observations.
 *
 * Loop and repetition detection compare actions by value, not by the text the model
 * happened to write: `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` are the same call.
 * A signature is the tool name and the canonical JSON of its arguments (object keys
 * sorted, recursively).
 *
 * @since 0.1.0
 */
import { Hash, Predicate } from "effect"

const canonicalValue = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(canonicalValue)
  if (Predicate.isObject(value) && !Predicate.isFunction(value)) {
    const keys = Object.keys(value)
    if (keys.length > 1) keys.sort()
    const out: Record<string, unknown> = {}
    for (const key of keys) {
      const item = canonicalValue((value as Record<string, unknown>)[key])
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
 * JSON with object keys sorted at every depth.
 *
 * @category constructors
 * @since 0.1.0
 */
export const canonicalJson = (value: unknown): string => JSON.stringify(canonicalValue(value)) ?? "null"

/**
 * The arguments as the model sent them, parsed when they are JSON text.
 * Text that does not parse stays text, so a malformed call still has a signature.
 *
 * @category constructors
 * @since 0.1.0
 */
export const parsedArguments = (raw: unknown): unknown => {
  if (!Predicate.isString(raw)) return raw
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const toolCall = (name: string, rawArguments: unknown): string =>
  `${name}:${canonicalJson(parsedArguments(rawArguments))}`

/**
 * The signature of a call whose arguments are already parsed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolCallParsed = (name: string, args: unknown): string => `${name}:${canonicalJson(args)}`

/**
 * @category constructors
 * @since 0.1.0
 */
export const failure = (name: string, code: string, message: string): string => `${name}|${code}|${message}`

/**
 * A short digest of a text: equal texts have equal digests; different texts almost
 * never do (32-bit hash plus the length).
 *
 * @category constructors
 * @since 0.1.0
 */
export const digest = (text: string): string => `${hex(Hash.string(text) >>> 0)}:${text.length}`

const hexByte = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))
const hexDigit = Array.from({ length: 16 }, (_, i) => i.toString(16))

/** `n.toString(16)` for a 32-bit unsigned `n`, a byte at a time (`toString(16)` is slow in V8). */
const hex = (n: number): string => {
  let out = ""
  while (n >= 0x100) {
    out = `${hexByte[n & 0xff]}${out}`
    n >>>= 8
  }
  return `${n < 0x10 ? hexDigit[n] : hexByte[n]}${out}`
}
