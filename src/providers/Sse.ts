/**
 * Server-sent events, as chat-completion endpoints stream them: a body of lines where
 * `data:` lines carry the payload, a blank line ends an event, and lines starting with
 * `:` are comments (keep-alive pings). Only the data of each event matters here; the
 * `event`, `id` and `retry` fields are read past.
 *
 * The parsing is effect's own (`effect/encoding/Sse`): it handles text cut anywhere
 * (a CRLF split between two pieces included), reads each piece once, so an event of
 * any size costs time linear in its size, and holds at most `maxEventLength`
 * characters of a pending event. An event the body ends in the middle of is dropped, as the SSE
 * standard says: a stream cut short therefore never yields a half event.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import * as EffectSse from "effect/encoding/Sse"

/**
 * An event longer than the parser's cap.
 *
 * @category models
 * @since 0.1.0
 */
export interface EventTooLarge {
  readonly _tag: "EventTooLarge"
  readonly maxEventLength: number
}

/**
 * A parser of one stream. Once it has refused an event it refuses everything after:
 * the rest of that stream cannot be trusted to line up.
 *
 * @category models
 * @since 0.1.0
 */
export interface Parser {
  /** Feeds a piece of text, cut anywhere; returns the data of the events it completes. */
  readonly feed: (text: string) => Result.Result<Array<string>, EventTooLarge>
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const parser = (options: {
  /** UTF-16 code units of one event; a decoded text never has more of them than it had UTF-8 bytes. */
  readonly maxEventLength: number
}): Parser => {
  let completed: Array<string> = []
  let refused: EventTooLarge | undefined
  const inner = EffectSse.makeParser(
    (event) => {
      if (event._tag === "Event") completed.push(event.data)
    },
    { maxEventSize: options.maxEventLength }
  )
  return {
    feed: (text) => {
      if (refused === undefined && inner.feed(text) !== undefined) {
        refused = { _tag: "EventTooLarge", maxEventLength: options.maxEventLength }
      }
      if (refused !== undefined) return Result.fail(refused)
      const out = completed
      completed = []
      return Result.succeed(out)
    }
  }
}
