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

/** A response whose body never sends a byte. */
const silent = () =>
  HttpClientResponse.fromWeb(
    HttpClientRequest.post("http://model.invalid/v1/chat/completions"),
    new Response(new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) }))
  )

describe("EventStream.read", () => {
  it.effect("R4.2 a silent stream fails at the request's deadline, also from a fractional time", () =>
    Effect.gen(function* () {
      const now = 929.2320599999999
      yield* TestClock.setTime(now)
      const request = {
        runId: "r",
        iteration: 1,
        messages: [],
        tools: [],
        deadlineAt: 1_000,
        deadlineLayer: "step"
      } as const
      const fiber = yield* Effect.forkChild(
        EventStream.read(reader, silent(), request, { _tag: "text" } as never, now),
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
    })
  )
})
