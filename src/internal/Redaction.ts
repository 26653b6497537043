/**
 * Keeping `Redacted` values out of what the runtime derives (R3.1, R12). A tool's schema
 * may decode an argument into a `Redacted` (`Schema.RedactedFromValue`) or return one in
 * its output; the model sent the plain text and `model.responded` keeps what it sent,
 * but nothing the runtime derives from it may copy it: not a call's signature, not the
 * input or output a `tool.succeeded` records, not the arguments an approval shows, not
 * an observation or a failure's message.
 *
 * A call's secrets are the plain values of the `Redacted`s found in its decoded input
 * (and output); masking replaces each where it appears in a JSON value or a text. Values
 * are matched, not paths: a schema may rename or reshape fields, and masking a value
 * that also appears elsewhere errs on the safe side. Private to the runtime.
 */
import { Predicate, Redacted } from "effect"
import type * as Failure from "../Failure.ts"

/** What a secret is replaced with: what a `Redacted` prints as. */
export const mask = "<redacted>"

/** Secrets shorter than this are masked where they are a whole value, not inside other text. */
const minInText = 4

/** The deepest a decoded value is searched: deeper than the arguments the pipeline lets through. */
const maxDepth = 512

const plainOf = (value: unknown): string | undefined => {
  if (Predicate.isString(value)) return value
  if (Predicate.isNumber(value) || Predicate.isBoolean(value) || Predicate.isBigInt(value)) return String(value)
  try {
    return JSON.stringify(value)
  } catch {
    return undefined
  }
}

/** The plain values of the `Redacted`s in a decoded value (without recursion; never throws). */
export const secretsOf = (root: unknown): ReadonlyArray<string> => {
  const found: Array<string> = []
  try {
    const stack: Array<{ readonly value: unknown; readonly depth: number }> = [{ value: root, depth: 0 }]
    while (stack.length > 0) {
      const { value, depth } = stack.pop() as (typeof stack)[number]
      if (typeof value !== "object" || value === null || depth > maxDepth) continue
      if (Redacted.isRedacted(value)) {
        const plain = plainOf(Redacted.value(value))
        if (plain !== undefined && plain !== "") found.push(plain)
        continue
      }
      const items = Array.isArray(value) ? value : Object.values(value)
      for (const item of items) stack.push({ value: item, depth: depth + 1 })
    }
  } catch {
    // A value that cannot be walked holds no secret the runtime can see.
  }
  return found
}

/** `text` with every secret of at least four characters replaced by {@link mask}. */
export const maskText = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = text
  for (const secret of secrets) {
    if (out === secret) return mask
    if (secret.length >= minInText && out.includes(secret)) out = out.replaceAll(secret, mask)
  }
  return out
}

/**
 * A JSON value with every secret masked: a string or number equal to one, and text that
 * contains one. The value itself when there is no secret; a copy otherwise. The value
 * has passed the pipeline's JSON checks (bounded depth, no cycle).
 */
export const maskValue = (value: unknown, secrets: ReadonlyArray<string>): unknown => {
  if (secrets.length === 0) return value
  const walk = (v: unknown): unknown => {
    if (Predicate.isString(v)) return maskText(v, secrets)
    if (Predicate.isNumber(v)) return secrets.includes(String(v)) ? mask : v
    if (Array.isArray(v)) return v.map(walk)
    if (Predicate.isObject(v) && !Redacted.isRedacted(v)) {
      const out: Record<string, unknown> = {}
      for (const key of Object.keys(v)) {
        const item = walk((v as Record<string, unknown>)[key])
        // As an own key `__proto__` is data; defineProperty keeps it from touching the prototype.
        Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true })
      }
      return out
    }
    return v
  }
  return walk(value)
}

/** A failure's summary with the secrets masked in its hint. */
export const maskSummary = (summary: Failure.Summary, secrets: ReadonlyArray<string>): Failure.Summary =>
  secrets.length === 0 ? summary : { ...summary, hint: maskText(summary.hint, secrets) }
