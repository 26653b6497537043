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
 * A value in the forms a result may echo it: as it is, as JSON writes it in a string, and
 * once more escaped (JSON inside a string: a text output holding JSON); longest first.
 */
const formsOf = (value: string): ReadonlyArray<string> => {
  const once = escaped(value)
  return [...new Set([escaped(once), once, value])]
}

/** The longest form looked for with its characters' `\uXXXX` escapes too (a pattern a character each). */
const maxEscapedForm = 256

/** What escapers write as `\uXXXX` besides non-ASCII: Go `<`, `>`, `&`; .NET also `'`, `+`, `=`. */
const escapedByEscapers = new Set(["&", "<", ">", "'", "+", "="])

/**
 * A form as a pattern that also matches its characters written as `\uXXXX` escapes (of any
 * case, once or twice escaped: Python, Go and .NET write them): the result's other text is
 * left as it is.
 */
const escapable = (form: string): RegExp =>
  new RegExp(
    Array.from(form, (c) => {
      const literal = c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      const code = c.charCodeAt(0)
      if (c.length > 1 || (code < 0x80 && !escapedByEscapers.has(c))) return literal
      const hex = Array.from(code.toString(16).padStart(4, "0"), (h) => (h >= "a" ? `[${h}${h.toUpperCase()}]` : h))
      return `(?:${literal}|\\\\{1,2}u${hex.join("")})`
    }).join(""),
    "g"
  )

/** The result without what it echoes of `values`, and those it echoes. */
const without = (text: string, values: ReadonlyArray<string>) => {
  const escapes = text.includes("\\u")
  let rest = text
  const echoed: Array<string> = []
  for (const value of values) {
    let found = false
    for (const form of formsOf(value)) {
      const left =
        escapes && form.length <= maxEscapedForm ? rest.replace(escapable(form), "") : rest.split(form).join("")
      found = found || left !== rest
      rest = left
    }
    if (found) echoed.push(value)
  }
  return { rest, echoed }
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
