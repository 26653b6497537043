/**
 * The ways a text may write a secret (R12): a tool's output or failure may hold its secret
 * in a URL, a form body, JSON written by another language, or an `Authorization` header, not
 * only as it is. `Redaction` masks each of these forms. Private to the runtime.
 *
 * @internal
 */
import * as Text from "./Text.ts"

/** The inside of a JSON string holding `text`: its escapes, without the quotes. */
const jsonEscaped = (text: string): string => JSON.stringify(text).slice(1, -1)

/** Every character past ASCII as `\uXXXX`, as Python's `json.dumps` (lowercase) and .NET (uppercase) write it. */
const asciiOnly = (text: string, upper: boolean): string =>
  text.replace(/[\u0080-\uffff]/g, (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(4, "0")
    return `\\u${upper ? hex.toUpperCase() : hex}`
  })

/**
 * Percent-encoded as RFC 3986 has it, every character but `A-Z a-z 0-9 - . _ ~` (curl's
 * `--data-urlencode`, Python's `urlencode`, Go's `QueryEscape`): `!'()*` too, which
 * `encodeURIComponent` leaves (review 191).
 */
const strictlyEncoded = (text: string): string =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** Percent escapes in lowercase hex (`%2b`), as some encoders write them. */
const lowerHex = (text: string): string => text.replace(/%[0-9A-F]{2}/g, (code) => code.toLowerCase())

/**
 * `secret` as text may write it: as it is; inside a JSON string (`/` also as `\/`, non-ASCII
 * also as `\uXXXX` in either case, and escaped twice: JSON inside a string); and percent-encoded
 * as a URL's query, path or a form writes it (hex in either case). Base64 is found by
 * {@link maskBase64}: where a secret starts in a group of three changes all its characters.
 *
 * @internal
 */
export const formsOf = (secret: string): ReadonlyArray<string> => {
  const json = jsonEscaped(secret)
  const inJson = [json, json.replaceAll("/", "\\/"), asciiOnly(json, false), asciiOnly(json, true)]
  // encodeURI/encodeURIComponent throw on a lone surrogate: such a secret has no URL form.
  const urls = Text.wellFormed(secret)
    ? [encodeURIComponent(secret), strictlyEncoded(secret), encodeURI(secret)].flatMap((url) => [
        url,
        url.replaceAll("%20", "+")
      ])
    : []
  return [...new Set([secret, ...inJson, ...inJson.map(jsonEscaped), ...urls, ...urls.map(lowerHex)])]
}

/**
 * A run of base64 or base64url characters long enough to hold a secret of four characters or
 * more, with the group of three it may start in (`user:` before it in a Basic header), over
 * line breaks (`openssl base64` and MIME wrap lines at 64 or 76 columns: review 191).
 */
const base64Run = /[A-Za-z0-9+/_-]{6,}(?:\r?\n[A-Za-z0-9+/_-]+)*={0,2}/g

/**
 * `text` with each run of base64 characters whose bytes hold one of `secrets` replaced by
 * `mask`: the run is read from each of its first four characters (it may begin inside a
 * word), so wherever the secret starts in a group of three it is found.
 *
 * @internal
 */
export const maskBase64 = (text: string, secrets: ReadonlyArray<string>, mask: string): string =>
  secrets.length === 0
    ? text
    : text.replace(base64Run, (wrapped) => {
        const run = wrapped.replace(/\r?\n/g, "")
        for (let from = 0; from < 4 && from < run.length; from++) {
          // Node reads base64url's `-` and `_` as `+` and `/`, and stops at `=`.
          const bytes = Buffer.from(run.slice(from), "base64").toString("utf8")
          if (secrets.some((secret) => bytes.includes(secret))) return mask
        }
        return wrapped
      })
