/**
 * Server-sent events, as chat-completion endpoints stream them: a body of lines where
 * `data:` lines carry the payload, a blank line ends an event, and lines starting with
 * `:` are comments (keep-alive pings). Only the data of each event matters here; the
 * `event`, `id` and `retry` fields are read past.
 *
 * An event the body ends in the middle of is dropped, as the SSE standard says: a
 * stream cut short therefore never yields a half event.
 *
 * @since 0.1.0
 */
import { Stream } from "effect"

/**
 * The data lines of the event being read, and the text of a line not yet ended.
 *
 * @category models
 * @since 0.1.0
 */
export interface Parser {
  readonly data: Array<string>
  pending: string
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const parser = (): Parser => ({ data: [], pending: "" })

/**
 * Feeds one line (without its line ending). Returns the data of the event the line
 * completes, if it completes one.
 *
 * @category combinators
 * @since 0.1.0
 */
export const feed = (state: Parser, line: string): string | undefined => {
  if (line === "") {
    if (state.data.length === 0) return undefined
    const data = state.data.join("\n")
    state.data.length = 0
    return data
  }
  if (line.startsWith(":")) return undefined
  const colon = line.indexOf(":")
  const field = colon === -1 ? line : line.slice(0, colon)
  if (field !== "data") return undefined
  const value = colon === -1 ? "" : line.slice(colon + 1)
  state.data.push(value.startsWith(" ") ? value.slice(1) : value)
  return undefined
}

/**
 * Feeds a piece of text, cut anywhere. Lines end with LF, CRLF or CR; the rest of an
 * unended line waits for the next piece. Returns the data of the events completed.
 *
 * @category combinators
 * @since 0.1.0
 */
export const feedText = (state: Parser, text: string): Array<string> => {
  const completed: Array<string> = []
  const buffer = state.pending === "" ? text : state.pending + text
  let start = 0
  let i = 0
  while (i < buffer.length) {
    const c = buffer.charCodeAt(i)
    if (c !== 10 && c !== 13) {
      i++
      continue
    }
    // A CR at the end may be the first half of a CRLF.
    if (c === 13 && i + 1 === buffer.length) break
    const data = feed(state, buffer.slice(start, i))
    if (data !== undefined) completed.push(data)
    i += c === 13 && buffer.charCodeAt(i + 1) === 10 ? 2 : 1
    start = i
  }
  state.pending = buffer.slice(start)
  return completed
}

/**
 * The data of each complete event of a byte stream.
 *
 * @category combinators
 * @since 0.1.0
 */
export const events = <E, R>(bytes: Stream.Stream<Uint8Array, E, R>): Stream.Stream<string, E, R> =>
  bytes.pipe(
    Stream.decodeText(),
    Stream.mapAccum(parser, (state, text) => [state, feedText(state, text)] as const)
  )
