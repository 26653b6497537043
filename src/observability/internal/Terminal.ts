/**
 * Fitting text to a terminal's rows: a frame is redrawn in place by moving the cursor up
 * one row per line, so a line must never wrap onto a second row. Private to
 * `observability/` (see `LiveView`).
 */

/** Code points a terminal draws two cells wide: the East Asian wide and fullwidth ranges, and emoji shown as emoji. */
const wide =
  /[\p{Emoji_Presentation}\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{20000}-\u{3fffd}]/u

/** Code points a terminal draws on no cell of their own: marks that combine without spacing, format characters. */
const none = /[\p{Mn}\p{Me}\p{Cf}]/u

const cellsOf = (codePoint: string): number => (none.test(codePoint) ? 0 : wide.test(codePoint) ? 2 : 1)

/**
 * The line as it fits in `columns` cells on one row, its last cell left free (some terminals
 * wrap on writing it): cut, with `…`, when it would not; as it is when the width is not known.
 */
export const fitToRow = (line: string, columns: number | undefined): string => {
  if (columns === undefined || !Number.isFinite(columns) || columns < 3) return line
  const room = columns - 1
  // A line of one-cell characters that fits needs no count.
  if (line.length <= room && /^[\x20-\x7e]*$/.test(line)) return line
  let used = 0
  let cut: number | undefined
  let end = 0
  for (const codePoint of line) {
    used += cellsOf(codePoint)
    if (used > room) return `${line.slice(0, cut ?? end)}…`
    end += codePoint.length
    // Where to cut, should the line not fit: with a cell left for the `…`.
    if (used <= room - 1) cut = end
  }
  return line
}
