/**
 * Reading a response body within a byte limit, over any `HttpClient` (R12): reading
 * stops at the limit, and a read that stops early ends the response's stream, which
 * aborts the request, so a body that never ends costs at most the limit in memory and
 * frees its connection at once.
 */
import { Clock, Effect, Pull, Stream } from "effect"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"

/**
 * What was read: the text, and whether it is the whole body (`false`: the body went on
 * past the limit, and `text` is its first `maxBytes` bytes).
 */
export interface Read {
  readonly text: string
  readonly complete: boolean
}

const decoder = new TextDecoder()

/** The length a response declares, if it declares a sensible one. */
export const declaredLength = (response: HttpClientResponse.HttpClientResponse): number | undefined => {
  const header = response.headers["content-length"]
  const length = header === undefined ? Number.NaN : Number(header)
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined
}

/** Ends a response without reading its body: ending its stream aborts the request. */
export const discard = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.scoped(Effect.asVoid(Stream.toPull(response.stream)))

const concat = (parts: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  if (parts.length === 1 && parts[0] !== undefined) return parts[0]
  const out = new Uint8Array(size)
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/**
 * Reads at most `maxBytes` of the body; `progress.bytes` counts what came, for a read cut
 * off, and `progress.lastBytesAt` says when bytes last came, for an idle-read timer.
 */
export const readUpTo = Effect.fnUntraced(function* (
  response: HttpClientResponse.HttpClientResponse,
  maxBytes: number,
  progress: { bytes: number; lastBytesAt?: number } = { bytes: 0 }
) {
  const pull = yield* Stream.toPull(response.stream)
  const parts: Array<Uint8Array> = []
  let size = 0
  while (true) {
    const chunks = yield* Pull.catchDone(pull, () => Effect.succeed(undefined))
    if (chunks === undefined) return { text: decoder.decode(concat(parts, size)), complete: true } satisfies Read
    progress.lastBytesAt = yield* Clock.currentTimeMillis
    for (const chunk of chunks) {
      progress.bytes += chunk.length
      const room = maxBytes - size
      if (chunk.length > room) {
        parts.push(chunk.subarray(0, room))
        return { text: decoder.decode(concat(parts, maxBytes)), complete: false } satisfies Read
      }
      parts.push(chunk)
      size += chunk.length
    }
  }
}, Effect.scoped)
