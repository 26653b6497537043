/**
 * Cutting text to a length (a hint, a detail, a name shown, an observation the model
 * reads) without cutting a character in two. A string counts UTF-16 code units: a cut
 * between the two halves of a surrogate pair (an emoji, a rare CJK character) leaves a
 * lone half, which a UTF-8 sink writes as U+FFFD and a strict JSON reader (serde's, in
 * several model servers) refuses.
 */

/** Whether a code unit is the first half of a surrogate pair. */
const isLeadingHalf = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff

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
 * `text` cut to its {@link head} of `max` code units, marked where it was cut (`…`
 * unless `mark` says otherwise); `text` itself when it is no longer.
 *
 * @category cutting
 * @since 0.3.0
 */
export const clip = (text: string, max: number, mark = "…"): string =>
  text.length > max ? `${head(text, max)}${mark}` : text
