/**
 * Scrubbing credentials out of text a server sent (an error body, an error event, a
 * decoder's message quoting a body) before it goes into a failure's `diagnostic`
 * (R3.1). A server may echo the key whole, as a `Bearer` header, encoded (in a URL, as
 * JSON, in base64), or cut; each of its forms, and every piece of the key of {@link PIECE}
 * characters or more, is replaced, wherever it stands. Without
 * a known key (an effect/ai provider holds its own), `Bearer` values and keys of the
 * common `sk-…` shape are still replaced.
 *
 * Scrub before cutting: a cut made first can leave a part of the key that no longer
 * matches it whole.
 */

import { RegExp as RegExps } from "effect"
import * as SecretForms from "../../failure/SecretForms.ts"
import * as Text from "../../failure/Text.ts"

/** Shorter pieces of a key say too little to matter (a masked key's last 4 characters). */
export const PIECE = 8

const REDACTED = "<redacted>"
const BEARER = /\b(Bearer\s+)[^\s"'`,;]+/gi
// Sixteen characters, then the rest of the run: `{16,}` overflows V8's backtracking stack on a
// run of a few million (a server's error message), where a plain `*` does not.
const KEY_SHAPED = /\bsk-[A-Za-z0-9_-]{16}[A-Za-z0-9_-]*/g

/**
 * A short key (a local server's `"a"`, `"ollama"`) where it stands on its own: not inside a
 * word or a number, where it would be no key but the text's own (review 146: the key `"0"`
 * turned "HTTP 400" into "HTTP 4<redacted><redacted>", and `"a"` every "answered").
 */
const standing = (secret: string): RegExp => {
  return new RegExp(`(?<![A-Za-z0-9_-])${RegExps.escape(secret)}(?![A-Za-z0-9_-])`, "g")
}

/** A scrubber of `secret` (none if `undefined` or empty). */
export const redactor = (secret: string | undefined): ((text: string) => string) => {
  const pieces = new Set<string>()
  if (secret !== undefined) for (let i = 0; i + PIECE <= secret.length; i++) pieces.add(secret.slice(i, i + PIECE))
  const shortSecret = secret !== undefined && secret !== "" && secret.length < PIECE ? standing(secret) : undefined
  // The key as a server may write it back: JSON-escaped (`forms`), percent-encoded or in base64
  // (`encoded`) (review 190: a key with symbols echoed percent-encoded kept every piece between escapes).
  const forms =
    secret === undefined || pieces.size === 0
      ? []
      : SecretForms.formsOf(secret)
          .filter((form) => form !== secret)
          .sort((a, b) => b.length - a.length)
  const encoded = SecretForms.masker(secret === undefined || pieces.size === 0 ? [] : [secret])
  return (text) => {
    let scrubbed = text.replace(BEARER, `$1${REDACTED}`).replace(KEY_SHAPED, REDACTED)
    if (shortSecret !== undefined) return scrubbed.replace(shortSecret, REDACTED)
    if (pieces.size === 0) return scrubbed
    for (const form of forms) scrubbed = scrubbed.replaceAll(form, REDACTED)
    scrubbed = encoded(scrubbed, REDACTED)
    let out = ""
    let kept = 0
    let i = 0
    while (i + PIECE <= scrubbed.length) {
      if (!pieces.has(scrubbed.slice(i, i + PIECE))) {
        i++
        continue
      }
      // Extend over every following window that is a piece of the key too.
      let end = i + PIECE
      while (end < scrubbed.length && pieces.has(scrubbed.slice(end + 1 - PIECE, end + 1))) end++
      out += scrubbed.slice(kept, i) + REDACTED
      kept = end
      i = end
    }
    return out + scrubbed.slice(kept)
  }
}

/** Cuts text to `max` characters, marking the cut. Scrub first. */
export const clip = (text: string, max = 500): string => Text.clip(text, max)
