/**
 * What text shows nothing, for `Model.isBlank`. Private to `model/`.
 */

/** Unicode's noncharacters, for a character class: `U+FDD0` to `U+FDEF`, and the last two code points of every plane. */
const noncharacters = (): string => {
  const lastTwo = Array.from({ length: 17 }, (_, plane) => plane * 0x10000 + 0xfffe)
  return `\\ufdd0-\\ufdef${lastTwo.map((at) => `\\u{${at.toString(16)}}\\u{${(at + 1).toString(16)}}`).join("")}`
}

/**
 * A character that shows: none of whitespace and separators, control characters (NUL
 * included), format characters (zero-width spaces and joiners, word joiners, byte order
 * marks, soft hyphens), combining marks with nothing to mark, and the letters drawn blank
 * (the Hangul fillers, the blank Braille pattern), nor what no font draws: lone surrogate
 * halves and Unicode's noncharacters (`U+FDD0` to `U+FDEF`, and the last two of every
 * plane). Private-use characters show (icon fonts draw them). Searched for, never matched
 * across the whole text: `^[...]*$` keeps a backtrack entry a character, and overflowed the
 * stack on a 4 MB answer (review 47).
 */
const shows = new RegExp(
  `[^\\s\\p{Z}\\p{Cc}\\p{Cf}\\p{M}\\p{Cs}\\u115f\\u1160\\u3164\\uffa0\\u2800${noncharacters()}]`,
  "u"
)

/** Whether `text` shows nothing (see `shows` above). */
export const isBlank = (text: string): boolean => !shows.test(text)
