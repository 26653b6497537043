/**
 * Text as stores, logs and readers take it. Cutting text to a length (a hint, a detail, a
 * name shown, an observation the model reads) without cutting a character in two: a
 * string counts UTF-16 code units, and a cut between the two halves of a surrogate pair
 * (an emoji, a rare CJK character) leaves a lone half, which a UTF-8 sink writes as U+FFFD
 * and a strict JSON reader (serde's, in several model servers) refuses. And the ids that
 * stores key rows by.
 */

// A code point in the surrogate range: with the `u` flag only a lone half of a pair is one.
const loneHalf = /\p{Surrogate}/u

/**
 * Whether a text is well-formed (no half of a surrogate pair without its other half): a
 * store keeps text as UTF-8 and replaces a lone half with U+FFFD, so what it gives back
 * would differ from what was given.
 *
 * @category checks
 * @since 0.3.0
 */
export const wellFormed = (text: string): boolean => !loneHalf.test(text)

/** Whether a code unit is the first half of a surrogate pair. */
const isLeadingHalf = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff

/** Whether a code unit is the second half of a surrogate pair. */
const isTrailingHalf = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff

/**
 * The first `max` code units of `text`, one fewer when the last of them would be the
 * first half of a pair; `text` itself when it is no longer.
 *
 * @category cutting
 * @since 0.3.0
 */
export const head = (text: string, max: number): string => {
  if (text.length <= max) return text
  const end = max > 0 && isLeadingHalf(text.charCodeAt(max - 1)) ? max - 1 : max
  return text.slice(0, end)
}

/**
 * The last `max` code units of `text`, one fewer when the first of them would be the
 * second half of a pair; `text` itself when it is no longer.
 *
 * @category cutting
 * @since 0.3.0
 */
export const tail = (text: string, max: number): string => {
  if (text.length <= max) return text
  const start = text.length - max
  return text.slice(isTrailingHalf(text.charCodeAt(start)) ? start + 1 : start)
}

/**
 * `text` cut to its {@link head} of `max` code units, marked where it was cut (`…`
 * unless `mark` says otherwise); `text` itself when it is no longer.
 *
 * @category cutting
 * @since 0.3.0
 */
export const clip = (text: string, max: number, mark = "…"): string =>
  text.length > max ? `${head(text, max)}${mark}` : text

/**
 * What an id a store keys rows by may be (a run's, an approval's call): 1 to 256
 * characters, none of them a control character (a NUL, a line break) or half of a
 * surrogate pair. Every store keeps it as text, and logs and URLs carry it; a store
 * replaces a lone surrogate, so two ids would share one row, and PostgreSQL refuses a NUL.
 *
 * @category ids
 * @since 0.3.0
 */
export const isId = (id: unknown): id is string =>
  typeof id === "string" &&
  id.length >= 1 &&
  id.length <= 256 &&
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is refused.
  !/[\u0000-\u001f\u007f-\u009f]/.test(id) &&
  wellFormed(id)
