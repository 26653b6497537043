/**
 * The watchdog of a streamed answer on `TestClock` (R4.2, R11): the request's deadline
 * ends a read that receives nothing, also from a fractional time where the clock ends a
 * sleep for what is left a hair before the deadline.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as HttpClientResponse from "effect/http/HttpClientResponse"
import { TestClock } from "effect/testing"
import * as Failure from "../../../src/failure/Failure.ts"
import * as EventStream from "../../../src/providers/internal/EventStream.ts"

const reader: EventStream.Reader = {
  idleMillis: 60_000,
  maxBytes: 1_000_000,
  said: (text) => text,
  tooLarge: (what) =>
    new Failure.Retryable({
      source: "provider",
      category: "response_too_large",
      code: "too_large",
      attempts: 1,
      hint: what
    }),
  problem: (problem) =>
    new Failure.Permanent({
      source: "provider",
      category: "corrupt_response",
      code: "problem",
      attempts: 1,
      hint: String(problem)
    })
}

/** A response whose body sends `text`, then nothing more, never ending. */
const sendsThenHolds = (text: string) => {
  let sent = false
  return HttpClientResponse.fromWeb(
    HttpClientRequest.post("http://model.invalid/v1/chat/completions"),
    new Response(
      new ReadableStream<Uint8Array>({
        pull: (controller) => {
          if (sent) return new Promise(() => {})
          sent = true
          controller.enqueue(new TextEncoder().encode(text))
        }
      })
    )
  )
}

/** A response whose body never sends a byte. */
const silent = () =>
  HttpClientResponse.fromWeb(
    HttpClientRequest.post("http://model.invalid/v1/chat/completions"),
    new Response(new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) }))
  )

describe("EventStream.read", () => {
  it.effect(
    "R4.2 R4.3 a silent stream fails at the request's deadline, also from a fractional time, saying the whole wait",
    () =>
      Effect.gen(function* () {
        const now = 929.2320599999999
        yield* TestClock.setTime(now)
        // The request started at 900; its headers came at `now`.
        const deadline = { at: 1_000, layer: "step", start: 900 } as const
        const fiber = yield* Effect.forkChild(
          EventStream.read(reader, silent(), deadline, { _tag: "text" } as never, now),
          {
            startImmediately: true
          }
        )
        yield* TestClock.adjust(71)
        const exit = fiber.pollUnsafe()
        assert.isDefined(exit, "the read is still waiting after its deadline")
        if (exit === undefined) return yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isFailure(exit))
        const failure = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
        assert.strictEqual(failure?._tag === "Some" ? failure.value.code : undefined, "step_timeout")
        // The whole wait, from the request's start, not what was left when the headers came (review 87).
        assert.strictEqual(failure?._tag === "Some" ? failure.value.timeout?.elapsedMillis : undefined, 100)
      })
  )

  it.effect("R4.2 R11 a whole answer near the deadline is not held by the drain until the deadline cuts it", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(940)
      const events = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "done" }, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`
      const deadline = { at: 1_000, layer: "run", start: 0 } as const
      const fiber = yield* Effect.forkChild(
        EventStream.read(reader, sendsThenHolds(events), deadline, { _tag: "text" } as never, 940),
        { startImmediately: true }
      )
      // `[DONE]` came 60 ms before the deadline: the drain may take half of that, never all of it (review 87).
      yield* TestClock.adjust(30)
      const exit = fiber.pollUnsafe()
      assert.isDefined(exit, "the answer is still held at 970")
      if (exit === undefined) return yield* Fiber.interrupt(fiber)
      assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text : String(exit), "done")
    })
  )
})
