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
import type * as Model from "../../model/Model.ts"
import * as OpenAiWire from "../OpenAiWire.ts"
import * as Sse from "../Sse.ts"
import * as Phases from "./Phases.ts"
import * as ProviderFailure from "./ProviderFailure.ts"

const source = "provider" as const

/** How long the rest of a stream is drained after `[DONE]`, at most. */
const drainMillis = 1_000

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

/** Folds the events of a streamed answer into its response. */
export const read = Effect.fnUntraced(
  function* (
    reader: Reader,
    response: HttpClientResponse.HttpClientResponse,
    request: Model.Request,
    decoding: OpenAiWire.Decoding,
    now: number
  ) {
    const { idleMillis, maxBytes } = reader
    let done = false
    const pull = yield* Stream.toPull(response.stream)
    const idle = Phases.cap("idle_read", idleMillis, Phases.deadlineOf(request), now)
    const next = pull.pipe(
      Pull.catchDone(() => Effect.succeed(undefined)),
      Effect.mapError(ProviderFailure.fromHttpError),
      Effect.timeoutOrElse({
        duration: idle.millis,
        orElse: () => (done ? Effect.succeed(undefined) : Effect.fail(Phases.timedOut(idle)))
      })
    )
    const decoder = new TextDecoder()
    const parser = Sse.parser({ maxEventLength: maxBytes })
    const acc = OpenAiWire.accumulator()
    let received = 0
    while (!done) {
      const chunks = yield* next
      if (chunks === undefined) break
      for (const bytes of chunks) {
        received += bytes.length
        if (received > maxBytes) return yield* reader.tooLarge("the event stream")
        const events = parser.feed(decoder.decode(bytes, { stream: true }))
        if (Result.isFailure(events)) return yield* reader.tooLarge("one event of the stream")
        for (const data of events.success) {
          if (data === "[DONE]") {
            done = true
            break
          }
          const chunk = OpenAiWire.parseChunk(data)
          if (Result.isFailure(chunk)) {
            const error = OpenAiWire.parseError(data)
            if (error !== undefined) return yield* errorEvent(reader, data, error)
            return yield* FailureBoundary.corruptResponse({ source, detail: reader.said(chunk.failure) })
          }
          OpenAiWire.accumulate(acc, chunk.success)
        }
        if (done) break
      }
    }
    if (!done) {
      return yield* FailureBoundary.corruptResponse({ source, detail: "the event stream ended without [DONE]" })
    }
    // The answer is whole. Drain what follows so the connection can be reused, but only
    // briefly and within the byte limit: a server that keeps sending, stalls or resets
    // after [DONE] has still answered (stopping the read aborts its connection).
    const drain = Effect.gen(function* () {
      while (received <= maxBytes) {
        const chunks = yield* next
        if (chunks === undefined) return
        for (const bytes of chunks) received += bytes.length
      }
    })
    yield* drain.pipe(Effect.timeoutOption(Math.min(idle.millis, drainMillis)), Effect.ignore)
    return yield* Result.match(OpenAiWire.fromAccumulator(acc, decoding), {
      onFailure: (problem) => Effect.fail(reader.problem(problem)),
      onSuccess: Effect.succeed
    })
  },
  Effect.scoped,
  (effect, _reader, _response, request, _decoding, now) => {
    const deadline = Phases.deadlineOf(request)
    return Phases.within(effect, Phases.cap(deadline.layer, Number.POSITIVE_INFINITY, deadline, now))
  }
)
