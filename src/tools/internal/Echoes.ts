/**
 * What of a call's own arguments a result echoes (R2.3): its string values, found in the
 * forms a result writes them in, and the result without them. Private to `tools/`; see
 * `Signature.observation`.
 */

/** How many string values of the arguments are looked for, how long each may be, and the longest text searched. */
const maxEchoes = 16
const maxEchoLength = 4096
export const maxSearched = 65_536

/** How many values of the arguments are visited, at most (a value handed over parsed may share its parts). */
const maxVisited = 4096

/**
 * The string values of a call's arguments of three characters or more (not their keys),
 * as the model sent them: JSON text of at most 64 KiB, parsed once, or a value.
 */
const valuesOf = (args: unknown): ReadonlyArray<string> => {
  try {
    let root: unknown = args
    if (typeof args === "string") {
      if (args.length > maxSearched) return []
      root = JSON.parse(args)
    }
    const found: Array<string> = []
    const stack: Array<unknown> = [root]
    for (let visited = 0; stack.length > 0 && found.length < maxEchoes && visited < maxVisited; visited++) {
      const value = stack.pop()
      if (typeof value === "string") {
        if (value.length >= 3 && value.length <= maxEchoLength) found.push(value)
      } else if (Array.isArray(value)) {
        stack.push(...[...value].reverse())
      } else if (typeof value === "object" && value !== null) {
        // By key, as the call's signature orders them: the same call written with its keys in another order is one.
        const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        stack.push(...entries.map(([, item]) => item).reverse())
      }
    }
    return found
  } catch {
    // Arguments that do not parse, or a value that cannot be read: nothing to look for.
    return []
  }
}

/** The inside of a JSON string holding `text`: its escapes, without the quotes. */
const escaped = (text: string): string => JSON.stringify(text).slice(1, -1)

/**
 * The characters HTML escapes in text, and how: `"` as `&quot;` or `&#34;` (Go's
 * `html.EscapeString`), `'` as `&#39;` (Python's `html.escape`, Go's) or `&#x27;` (React's).
 */
const html = /[&<>"']/g
const htmlEscapes = (doubleQuote: string, quote: string): Record<string, string> => ({
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': doubleQuote,
  "'": quote
})
const htmlForms = [htmlEscapes("&quot;", "&#39;"), htmlEscapes("&quot;", "&#x27;"), htmlEscapes("&#34;", "&#39;")]

/**
 * A value in the forms a result may echo it: as it is, as JSON writes it in a string (`/`
 * as it is or as `\/`), once more escaped (JSON inside a string: a text output holding
 * JSON), and as HTML writes it in a page; longest first.
 */
const formsOf = (value: string): ReadonlyArray<string> => {
  const once = escaped(value)
  // PHP's json_encode writes `/` as `\/`.
  const slashed = once.replaceAll("/", "\\/")
  const pages = htmlForms.map((escapes) => value.replace(html, (c) => escapes[c] ?? c))
  return [...new Set([escaped(slashed), escaped(once), slashed, once, value, ...pages])].sort(
    (a, b) => b.length - a.length
  )
}

/**
 * `\uXXXX` escapes (in either case: Python writes `\u00e9`, .NET `\u00E9`, Go `\u0026`; a
 * surrogate pair as two), once or twice escaped (JSON inside a string).
 */
const unicodeEscape = /\\{1,2}u([0-9a-fA-F]{4})/g

/**
 * A text with its escapes read as their characters, and where each of its UTF-16 units
 * starts and ends in the text as written.
 */
const readEscapes = (text: string) => {
  let read = ""
  const starts = new Int32Array(text.length)
  const ends = new Int32Array(text.length)
  let from = 0
  const copy = (to: number) => {
    for (let i = from; i < to; i++) {
      starts[read.length + i - from] = i
      ends[read.length + i - from] = i + 1
    }
    read += text.slice(from, to)
  }
  for (const match of text.matchAll(unicodeEscape)) {
    copy(match.index)
    starts[read.length] = match.index
    from = match.index + match[0].length
    ends[read.length] = from
    read += String.fromCharCode(Number.parseInt(match[1] ?? "", 16))
  }
  copy(text.length)
  return { read, starts: starts.subarray(0, read.length), ends: ends.subarray(0, read.length) }
}

/** Where `text` holds `form`, left to right without overlaps (as `split` finds them): each start. */
const placesOf = (text: string, form: string): Array<number> => {
  const places: Array<number> = []
  for (let at = text.indexOf(form); at !== -1; at = text.indexOf(form, at + form.length)) places.push(at)
  return places
}

/**
 * What stands where the value of position `index` among the call's string arguments was cut:
 * the rest keeps where each echo was, and which (`from X to Y` is not `from Y to X`), and
 * what was on either side of one is not joined into a new match.
 */
const markOf = (index: number): string => `\u0000${index}\u0000`

/** `text` with each span `[start, end)` replaced by its mark (in whatever order; one inside another goes with it). */
const replaced = (text: string, spans: ReadonlyArray<readonly [number, number, string]>): string => {
  let rest = ""
  let from = 0
  for (const [start, end, mark] of [...spans].sort((a, b) => a[0] - b[0])) {
    if (end <= from) continue
    rest += text.slice(from, Math.max(from, start)) + mark
    from = end
  }
  return rest + text.slice(from)
}

/** `text` without the forms of each value it holds (longest first), each replaced by its mark: what is left, and the values found. */
const strip = (text: string, values: ReadonlyArray<Value>) => {
  let rest = text
  const found: Array<string> = []
  for (const { value, index } of values) {
    const before = rest
    for (const form of formsOf(value)) rest = rest.split(form).join(markOf(index))
    if (rest !== before) found.push(value)
  }
  return { rest, found }
}

/**
 * `text` without the forms of each value it holds once its escapes are read, each replaced
 * by its mark in the text as written: the rest keeps its own escapes, so lines that differ
 * only in them still differ. In the text read, a place found becomes one unit standing for
 * its span, so no later form is found across it.
 */
const stripRead = (text: string, values: ReadonlyArray<Value>) => {
  let { read, starts, ends } = readEscapes(text)
  const spans: Array<readonly [number, number, string]> = []
  const found: Array<string> = []
  for (const { value, index } of values) {
    const before = spans.length
    for (const form of formsOf(value)) {
      const places = placesOf(read, form).map((at) => [at, at + form.length] as const)
      if (places.length === 0) continue
      // Both hold a position for each unit of `read`.
      for (const [start, end] of places) spans.push([starts[start] ?? 0, ends[end - 1] ?? 0, markOf(index)])
      read = replaced(
        read,
        places.map(([start, end]) => [start, end, "\u0000"])
      )
      starts = collapsed(starts, places, "first")
      ends = collapsed(ends, places, "last")
    }
    if (spans.length > before) found.push(value)
  }
  return { rest: replaced(text, spans), found }
}

/** `units` with each span `[start, end)` (in order, not overlapping) collapsed to one: its first or its last. */
const collapsed = (
  units: Int32Array<ArrayBuffer>,
  spans: ReadonlyArray<readonly [number, number]>,
  keep: "first" | "last"
): Int32Array<ArrayBuffer> => {
  const rest = new Int32Array(units.length)
  let length = 0
  let from = 0
  for (const [start, end] of spans) {
    rest.set(units.subarray(from, start), length)
    length += start - from
    rest[length++] = units[keep === "first" ? start : end - 1] ?? 0
    from = end
  }
  rest.set(units.subarray(from), length)
  return rest.subarray(0, length + units.length - from)
}

/** White space, and white space as JSON writes it in a string (`\n`, `\r`, `\t`). */
const spacing = /\s+|\\[nrt]/g

/**
 * What no font draws as a character of its own: Unicode's default-ignorable code points (zero-
 * width spaces and joiners, word joiners, soft hyphens, byte order marks, variation selectors,
 * the Hangul fillers, tag characters), except a flag of a region (a black flag and its tags,
 * which tell England's from Scotland's: review 184), kept whole (the first alternative). Not the
 * format characters that show (the Arabic number sign).
 */
const invisible = /(\u{1F3F4}[\u{E0020}-\u{E007E}]+\u{E007F})|\p{Default_Ignorable_Code_Point}/gu

/** `value` without what {@link invisible} finds, a region's flag kept. */
const withoutInvisible = (value: string): string =>
  value.replace(invisible, (_, flag: string | undefined) => flag ?? "")

/**
 * A value as a query: its spacing, case, Unicode compatibility forms and the characters that
 * show nothing left out (`caf\u200be report` is `café report` on screen, review 181).
 */
export const queryOf = (value: string): string =>
  withoutInvisible(value).normalize("NFKC").toLowerCase().replace(spacing, "")

/** A string value of the call's arguments, and its position among them (the first of those alike). */
interface Value {
  readonly value: string
  readonly index: number
}

/**
 * The result without what it echoes of `values`, and those it echoes, in the arguments'
 * order. Each value is looked for in the result as written first (an argument may hold
 * escape text itself: a pattern `\u2019`, a path `C:\data\ucafe`), then in what is left
 * with its `\uXXXX` escapes read (an echo may be written both ways). Values are looked for
 * longest first: a value within another (`report` in `report 2024`) would cut it apart.
 */
const without = (text: string, values: ReadonlyArray<string>) => {
  // Values alike but for spacing, case or compatibility forms share a mark: `rust` and `Rust` are one query.
  const keys = values.map(queryOf)
  const longestFirst = values
    .map((value, i) => ({ value, index: keys.indexOf(keys[i] ?? "") }))
    .sort((a, b) => b.value.length - a.value.length)
  const written = strip(text, longestFirst)
  if (!written.rest.includes("\\u")) {
    return { rest: written.rest, echoed: values.filter((value) => written.found.includes(value)) }
  }
  const read = stripRead(written.rest, longestFirst)
  return {
    rest: read.rest,
    echoed: values.filter((value) => written.found.includes(value) || read.found.includes(value))
  }
}

/**
 * The result without what it echoes of the call's string arguments, and those it echoes
 * (none: the result as it is).
 */
export const echoesIn = (
  text: string,
  args: unknown
): { readonly rest: string; readonly echoed: ReadonlyArray<string> } => {
  if (text.length > maxSearched) return { rest: text, echoed: [] }
  const values = valuesOf(args)
  if (values.length === 0) return { rest: text, echoed: [] }
  return without(text, values)
}
