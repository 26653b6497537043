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
      } else if (typeof value === "object" && value !== null) {
        stack.push(...Object.values(value).reverse())
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
 * A value in the forms a result may echo it: as it is, as JSON writes it in a string (`/`
 * as it is or as `\/`), and once more escaped (JSON inside a string: a text output holding
 * JSON); longest first.
 */
const formsOf = (value: string): ReadonlyArray<string> => {
  const once = escaped(value)
  // PHP's json_encode writes `/` as `\/`.
  const slashed = once.replaceAll("/", "\\/")
  return [...new Set([escaped(slashed), escaped(once), slashed, once, value])].sort((a, b) => b.length - a.length)
}

/**
 * `\uXXXX` escapes (in either case: Python writes `\u00e9`, .NET `\u00E9`, Go `\u0026`; a
 * surrogate pair as two), once or twice escaped (JSON inside a string), read as their
 * characters.
 */
const unicodeEscape = /\\{1,2}u([0-9a-fA-F]{4})/g
const unescaped = (text: string): string =>
  text.replace(unicodeEscape, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))

/** `text` without the forms of each of `values` it holds: what is left, and the values found and not found. */
const strip = (text: string, values: ReadonlyArray<string>) => {
  let rest = text
  const found: Array<string> = []
  const missing: Array<string> = []
  // The longest first: a value within another (`report` in `report 2024`) would cut it apart.
  for (const value of [...values].sort((a, b) => b.length - a.length)) {
    const before = rest
    for (const form of formsOf(value)) rest = rest.split(form).join("")
    if (rest === before) missing.push(value)
    else found.push(value)
  }
  return { rest, found, missing }
}

/**
 * The result without what it echoes of `values`, and those it echoes. A value is looked for
 * in the result as written first (an argument may hold escape text itself: a pattern
 * `\u2019`, a path `C:\data\ucafe`), then, for those not found, in the result with its
 * `\uXXXX` escapes read; only then is what is left read that way too.
 */
const without = (text: string, values: ReadonlyArray<string>) => {
  const written = strip(text, values)
  if (written.missing.length === 0 || !written.rest.includes("\\u")) {
    return { rest: written.rest, echoed: written.found }
  }
  const read = strip(unescaped(written.rest), written.missing)
  return read.found.length === 0
    ? { rest: written.rest, echoed: written.found }
    : { rest: read.rest, echoed: [...written.found, ...read.found] }
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
