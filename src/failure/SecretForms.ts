/**
 * The ways a text may write a secret (R12): a tool's output or failure may hold its secret
 * in a URL, a form body, JSON written by another language, or an `Authorization` header, not
 * only as it is. `Redaction` masks each of these forms. Private to the runtime.
 *
 * @internal
 */
import { RegExp as RegExps } from "effect"

/** The inside of a JSON string holding `text`: its escapes, without the quotes. */
const jsonEscaped = (text: string): string => JSON.stringify(text).slice(1, -1)

/** Every character past ASCII as `\uXXXX`, as Python's `json.dumps` (lowercase) and .NET (uppercase) write it. */
const asciiOnly = (text: string, upper: boolean): string =>
  text.replace(/[\u0080-\uffff]/g, (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(4, "0")
    return `\\u${upper ? hex.toUpperCase() : hex}`
  })

/**
 * `secret` as text may write it as a string: as it is, and inside a JSON string (`/` also as
 * `\/`, non-ASCII also as `\uXXXX` in either case, and escaped twice: JSON inside a string).
 * Percent-encoding and base64 are found by {@link masker}: an encoder may leave some of the
 * secret's characters as they are (review 192: Python's `quote` keeps `/`, Go's `PathEscape`
 * keeps `+`), and where a secret starts in base64's group of three changes all its characters.
 *
 * @internal
 */
export const formsOf = (secret: string): ReadonlyArray<string> => {
  const json = jsonEscaped(secret)
  const inJson = [json, json.replaceAll("/", "\\/"), asciiOnly(json, false), asciiOnly(json, true)]
  return [...new Set([secret, ...inJson, ...inJson.map(jsonEscaped)])]
}

/** Characters no encoder needs to escape (RFC 3986's unreserved). */
const unreserved = /^[A-Za-z0-9\-._~]$/

/** A percent escape of `byte`, its hex digits in either case. */
const escapeOf = (byte: number): string =>
  `%${[...byte.toString(16).toUpperCase().padStart(2, "0")].map((d) => (/[A-F]/.test(d) ? `[${d}${d.toLowerCase()}]` : d)).join("")}`

const encoder = new TextEncoder()

/**
 * The secret percent-encoded however an encoder chose its characters: each character as it is
 * or as the `%XX` of its UTF-8 bytes (hex in either case), a space also as `+`. `undefined` for
 * a secret of characters no encoder escapes: it is written as it is.
 */
const percentPattern = (secret: string): RegExp | undefined => {
  const characters = [...secret]
  if (characters.every((c) => unreserved.test(c))) return undefined
  const pattern = characters
    .map((c) => {
      const literal = RegExps.escape(c)
      if (unreserved.test(c)) return literal
      const escaped = [...encoder.encode(c)].map(escapeOf).join("")
      return `(?:${literal}|${escaped}${c === " " ? "|\\+" : ""})`
    })
    .join("")
  return new RegExp(pattern, "g")
}

/** One line of base64 or base64url characters. */
const base64Line = /^[A-Za-z0-9+/_-]+={0,2}$/

/**
 * Lines of base64 wrapped at one width (`openssl base64` at 64 columns, MIME at 76): every
 * line but the last as wide as the first, a multiple of four from 16 to 256 characters.
 */
const wrappedBlock = /(?<=^|\n)(?:[A-Za-z0-9+/]{16,}\r?\n)+[A-Za-z0-9+/]*={0,2}(?=\r?\n|$)/g

const isSteady = (lines: ReadonlyArray<string>): boolean => {
  const width = lines[0]?.length ?? 0
  return (
    width % 4 === 0 &&
    width <= 256 &&
    lines.every(
      (line, i) => base64Line.test(line) && (i < lines.length - 1 ? line.length === width : line.length <= width)
    )
  )
}

/**
 * A masker of `secrets` (each of four characters or more) in the forms an encoder writes
 * them: percent-encoded, and in base64 or base64url, on one line or wrapped at one width. A run
 * of base64 whose bytes hold a secret is masked whole; it is read from each of its first four
 * characters (it may begin inside a word), so wherever the secret starts in a group of three
 * it is found. Runs too short to hold the shortest secret are not decoded (review 192: every
 * word of six letters was, four times).
 *
 * @internal
 */
export const masker = (secrets: ReadonlyArray<string>): ((text: string, mask: string) => string) => {
  if (secrets.length === 0) return (text) => text
  const percent = secrets.flatMap((secret) => percentPattern(secret) ?? [])
  const shortest = Math.min(...secrets.map((secret) => encoder.encode(secret).length))
  const run = new RegExp(`[A-Za-z0-9+/_-]{${Math.max(6, Math.floor((4 * shortest) / 3) - 2)},}={0,2}`, "g")
  const holds = (base64: string) => {
    for (let from = 0; from < 4 && from < base64.length; from++) {
      // Node reads base64url's `-` and `_` as `+` and `/`, and stops at `=`.
      const bytes = Buffer.from(base64.slice(from), "base64").toString("utf8")
      if (secrets.some((secret) => bytes.includes(secret))) return true
    }
    return false
  }
  return (text, mask) => {
    let out = percent.reduce((acc, pattern) => acc.replace(pattern, mask), text)
    out = out.replace(wrappedBlock, (block) => {
      const lines = block.split(/\r?\n/)
      return isSteady(lines) && holds(lines.join("")) ? mask : block
    })
    return out.replace(run, (found) => (holds(found) ? mask : found))
  }
}
