/**
 * Reading a streamed answer (server-sent events) as it arrives (R11, R12): each read
 * within the idle-read timeout, every byte within `maxResponseBytes` (so everything
 * folded from them too: text, reasoning, tool-call arguments), an error event
 * classified by what it says, and the answer whole only at `[DONE]`.
 */
import { Effect, Pull, Result, Stream } from "effect"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import type * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import * as Model from "../../model/Model.ts"
import * as OpenAiWire from "../OpenAiWire.ts"
import * as Sse from "../Sse.ts"
import * as PaidUsage from "./PaidUsage.ts"
import * as Phases from "./Phases.ts"
import * as ProviderFailure from "./ProviderFailure.ts"

const source = "provider" as const

/**
 * How long the rest of a stream is drained after `[DONE]`, at most: long enough for a
 * server that closes at once (the connection can then be reused), short, since the answer
 * is whole and waits for it; never more than half of what is left before the request's
 * deadline.
 */
const drainMillis = 100

/** What reading a stream needs from the client. */
export interface Reader {
  readonly idleMillis: number
  readonly maxBytes: number
  /** Server text for a diagnostic: scrubbed of the key, then cut. */
  readonly said: (text: string, max?: number) => string
  readonly tooLarge: (what: string) => Failure.Retryable
  /** What a failure to make a response from the answer is. */
  readonly problem: (problem: OpenAiWire.Problem) => Failure.Failure
}

/** The failure an event carrying `{ "error": ... }` stands for. */
const errorEvent = (reader: Reader, data: string, error: NonNullable<ReturnType<typeof OpenAiWire.parseError>>) => {
  const message = reader.said(error.message ?? error.type ?? "no message", 200)
  return ProviderFailure.streamError(error, message, `the stream carried an error: ${reader.said(data)}`)
}

/**
 * The events of one answer folded into its response as they come: text or bytes cut
 * anywhere, each event read as `read` says below; `true` once `[DONE]` came.
 */
const folder = (reader: Reader) => {
  const decoder = new TextDecoder()
  const parser = Sse.parser({ maxEventLength: reader.maxBytes })
  const acc = OpenAiWire.accumulator()
  const feed = (piece: Uint8Array | string): Effect.Effect<boolean, Failure.Failure> => {
    const fed = parser.feed(typeof piece === "string" ? piece : decoder.decode(piece, { stream: true }))
    if (Result.isFailure(fed)) return Effect.fail(reader.tooLarge("one event of the stream"))
    for (const data of fed.success) {
      // An event with no data (`data:`, a keep-alive) says nothing; `[DONE]` is read however it is spaced.
      const said = data.trim()
      if (said === "") continue
      if (said === "[DONE]") return Effect.succeed(true)
      const error = OpenAiWire.carriedError(data)
      if (error !== undefined) return Effect.fail(errorEvent(reader, data, error))
      const chunk = OpenAiWire.parseChunk(data)
      if (Result.isFailure(chunk)) {
        return Effect.fail(FailureBoundary.corruptResponse({ source, detail: reader.said(chunk.failure) }))
      }
      OpenAiWire.accumulate(acc, chunk.success)
    }
    return Effect.succeed(false)
  }
  return { acc, feed }
}

/** What an answer cut off cost as far as it came: its prompt at least, once its 200 came (review 163). */
const paidSoFar = (acc: OpenAiWire.Accumulator, decoding: OpenAiWire.Decoding) =>
  OpenAiWire.partialUsage(acc, decoding) ?? PaidUsage.ofBytes(0, decoding)

/** The response the events folded into make, paid for when it makes none (a call with no name, R2.1). */
const responseOf = (reader: Reader, acc: OpenAiWire.Accumulator, decoding: OpenAiWire.Decoding) =>
  Result.match(OpenAiWire.fromAccumulator(acc, decoding), {
    onFailure: (problem) =>
      Effect.fail(FailureBoundary.withUsage(reader.problem(problem), OpenAiWire.partialUsage(acc, decoding))),
    onSuccess: Effect.succeed
  })

/**
 * Folds the events of a streamed answer into its response. One loop reads to `[DONE]`,
 * then drains what follows (so the connection can be reused) until the stream ends or
 * the drain's time is up, whatever the server does next: after `[DONE]` the answer is
 * whole, a reset, a stall or bytes that keep coming change nothing.
 */
export const read = Effect.fnUntraced(function* (
  reader: Reader,
  response: HttpClientResponse.HttpClientResponse,
  deadline: Phases.Deadline,
  decoding: OpenAiWire.Decoding,
  now: number
) {
  const { idleMillis, maxBytes } = reader
  const limits = Phases.idleLimits(idleMillis, deadline, now)
  const clock = yield* Effect.clockWith(Effect.succeed)
  const progress: Phases.Reading = { lastBytesAt: now, doneAt: undefined }
  const pull = yield* Stream.toPull(response.stream)
  const next = pull.pipe(
    Pull.catchDone(() => Effect.succeed(undefined)),
    Effect.mapError((error) =>
      ProviderFailure.fromHttpError(error, clock.currentTimeMillisUnsafe() - progress.lastBytesAt)
    )
  )
  const events = folder(reader)
  const acc = events.acc
  let received = 0
  /** Folds one piece of the body in; `true` once it held `[DONE]`. */
  const fold = (bytes: Uint8Array): Effect.Effect<boolean, Failure.Failure> => {
    received += bytes.length
    if (received > maxBytes) return Effect.fail(reader.tooLarge("the event stream"))
    return events.feed(bytes)
  }
  const reading = Effect.gen(function* () {
    while (progress.doneAt === undefined) {
      const chunks = yield* next
      if (chunks === undefined) {
        return yield* FailureBoundary.corruptResponse({ source, detail: "the event stream ended without [DONE]" })
      }
      progress.lastBytesAt = clock.currentTimeMillisUnsafe()
      for (const bytes of chunks) {
        if (yield* fold(bytes)) {
          progress.doneAt = progress.lastBytesAt
          break
        }
      }
    }
    // The drain: bounded in bytes, and in time so that the whole answer it holds is never
    // the one the deadline cuts off (at most half of what is left); a failure now is no failure.
    const drain = Effect.gen(function* () {
      while (received <= maxBytes) {
        const chunks = yield* Effect.orElseSucceed(next, () => undefined)
        if (chunks === undefined) return
        for (const bytes of chunks) received += bytes.length
      }
    })
    const left = deadline.at - clock.currentTimeMillisUnsafe()
    yield* Effect.timeoutOption(drain, Math.max(0, Math.min(drainMillis, limits.idle.millis, left / 2)))
  })
  // An answer cut off (a reset, a stall, an error event, no `[DONE]`) was paid for as far as
  // it came: its failure carries that usage, for the run's budgets (R2.1); so does the
  // report of one the run's own timers interrupt. Its 200 came: before its first event, its
  // prompt was billed (review 163), as a plain answer's is.
  yield* Effect.raceFirst(reading, Phases.idleWatch(progress, limits, deadline)).pipe(
    Effect.mapError((failure) => FailureBoundary.withUsage(failure, paidSoFar(acc, decoding))),
    Effect.onInterrupt(() => Model.reportCutOff(paidSoFar(acc, decoding)))
  )
  return yield* responseOf(reader, acc, decoding)
}, Effect.scoped)

/**
 * Whether a body read whole is an event stream all the same: its first line that is not
 * blank is a field of one (`data:`, `event:`, `id:`, `retry:`) or a comment (`:`). A proxy
 * may label a stream `text/plain`, `application/json`, `application/octet-stream` or not
 * at all (review 190: it failed corrupt_response); a JSON body starts with `{`.
 */
export const isEventText = (text: string): boolean =>
  /^\uFEFF?\s*(?::|(?:data|event|id|retry)(?::|\r?\n|\r|$))/.test(text)

/**
 * A whole body that is an event stream (see `isEventText`), read as `read` reads one as
 * it comes: an answer only if it holds `[DONE]`, paid for as far as it came if not.
 */
export const fromText = (
  reader: Reader,
  text: string,
  decoding: OpenAiWire.Decoding
): Effect.Effect<Model.Response, Failure.Failure> => {
  const events = folder(reader)
  // The stream's end ends its last event, as a blank line would.
  const fed = Effect.flatMap(events.feed(`${text}\n\n`), (done) =>
    done ? Effect.void : FailureBoundary.corruptResponse({ source, detail: "the event stream ended without [DONE]" })
  )
  // What it cost as far as it came, as a stream read as it comes is paid for: never its raw
  // text as output (review 195: 50 KB of keep-alives were charged 12,501 output tokens).
  return Effect.mapError(Effect.andThen(fed, responseOf(reader, events.acc, decoding)), (failure) =>
    FailureBoundary.withUsage(failure, paidSoFar(events.acc, decoding))
  )
}
