import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, type Layer, Result, type Scope } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import type * as HttpClient from "effect/http/HttpClient"
import type * as Failure from "../../src/failure/Failure.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as Sse from "../../src/providers/Sse.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import { apiKey, classOf, failureOf, KEY, once, request, setup } from "../support/provider.ts"

const MiB = 1024 * 1024
/** Far more than reading to a cap takes; reading to a deadline would hold what the server sent meanwhile. */
const DEADLINE = 5_000
const transports: ReadonlyArray<readonly [string, Layer.Layer<HttpClient.HttpClient, NodeTransport.InvalidOptions>]> = [
  ["NodeTransport", NodeTransport.layer()],
  ["fetch", FetchHttpClient.layer]
]

/** A test on real time and real sockets, once per transport. */
const live = <E>(name: string, body: () => Effect.Effect<void, E, Scope.Scope | HttpClient.HttpClient>) => {
  for (const [transport, layer] of transports) {
    it.live(`${name} (${transport})`, () => body().pipe(Effect.provide(layer)))
  }
}

const tooLarge = ["Retryable", "response_too_large", "response_too_large"]

/** How far past the cap the server may get: what the sockets buffer between the two ends. */
const SLACK = 8 * MiB

const chunkEvent = (chunk: object) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: chunk }] })}\n\n`

describe("OpenAiCompatible limits", () => {
  describe("memory is bounded by maxResponseBytes, not by the server (R12, R4.1)", () => {
    live("R12 a plain body that never ends fails response_too_large at the default cap, and the read is aborted", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.endless({
          prefix: '{"choices": [{"message": {"content": "',
          chunk: "x".repeat(65_536)
        })
        const { exit, server } = yield* once(step, {}, DEADLINE)
        assert.deepStrictEqual(classOf(failureOf(exit)), tooLarge)
        const record = yield* server.whenClosed(0).pipe(Effect.timeout("5 seconds"))
        assert.isTrue(record.closedEarly)
        assert.isBelow(record.bytesSent, 16 * MiB + SLACK)
      })
    )

    live("R12 a plain body declared longer than maxResponseBytes fails before it is read", () =>
      Effect.gen(function* () {
        const body = JSON.stringify({ choices: [{ message: { content: "y".repeat(2 * MiB) } }] })
        const headers = { "content-length": String(body.length) }
        const { exit } = yield* once(FakeOpenAiServer.raw({ body, headers }), { maxResponseBytes: MiB })
        assert.deepStrictEqual(classOf(failureOf(exit)), tooLarge)
        assert.include(failureOf(exit).diagnostic, `the declared body length (${body.length} bytes)`)
        assert.include(failureOf(exit).diagnostic, `${MiB} bytes`)
      })
    )

    live("R12 an error body that never ends is read up to 64 KiB: the status still classifies it", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.endless({ status: 503, chunk: "z".repeat(65_536) })
        const { exit, server } = yield* once(step, {}, DEADLINE)
        const failure = failureOf(exit)
        assert.deepStrictEqual(classOf(failure), ["Retryable", "transient_http", "http_503"])
        assert.include(failure.diagnostic, "HTTP 503")
        const record = yield* server.whenClosed(0).pipe(Effect.timeout("5 seconds"))
        assert.isTrue(record.closedEarly)
        assert.isBelow(record.bytesSent, 64 * 1024 + SLACK)
      })
    )

    live("R12 an event-stream line that never ends fails response_too_large", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.endless({ prefix: "data: ", chunk: "x".repeat(65_536) })
        const { exit, server } = yield* once(step, { stream: true, maxResponseBytes: MiB }, DEADLINE)
        assert.deepStrictEqual(classOf(failureOf(exit)), tooLarge)
        const record = yield* server.whenClosed(0).pipe(Effect.timeout("5 seconds"))
        assert.isBelow(record.bytesSent, MiB + SLACK)
      })
    )

    live("R12 a stream of small events past maxResponseBytes fails response_too_large (argument deltas too)", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.endless({
          prefix: chunkEvent({ tool_calls: [{ index: 0, id: "a", function: { name: "echo", arguments: "" } }] }),
          chunk: chunkEvent({ tool_calls: [{ index: 0, function: { arguments: "x".repeat(1_000) } }] })
        })
        const { exit, server } = yield* once(step, { stream: true, maxResponseBytes: MiB }, DEADLINE)
        assert.deepStrictEqual(classOf(failureOf(exit)), tooLarge)
        const record = yield* server.whenClosed(0).pipe(Effect.timeout("5 seconds"))
        assert.isBelow(record.bytesSent, MiB + SLACK)
      })
    )

    live("R12 response headers past the transport's limit fail response_too_large", () =>
      Effect.gen(function* () {
        const body = JSON.stringify({ choices: [{ message: { content: "ok" } }] })
        const step = FakeOpenAiServer.raw({ body, headers: { "x-filler": "h".repeat(128 * 1024) } })
        const { exit } = yield* once(step)
        assert.deepStrictEqual(classOf(failureOf(exit)), tooLarge)
      })
    )

    it.effect("R12 maxResponseBytes must be a whole number of bytes, at least 1: else a typed InvalidOptions", () =>
      Effect.gen(function* () {
        for (const maxResponseBytes of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
          const error = yield* Effect.flip(
            OpenAiCompatible.make({ baseUrl: "http://127.0.0.1:9", model: "m", apiKey, maxResponseBytes })
          )
          assert.instanceOf(error, OpenAiCompatible.InvalidOptions, String(maxResponseBytes))
          assert.include(error.message, "maxResponseBytes")
        }
      }).pipe(Effect.provide(NodeTransport.layer()))
    )

    live("R11 R3.2 a streamed event with no data is skipped, and [DONE] is read however it is spaced", () =>
      Effect.gen(function* () {
        for (const [empty, done] of [
          ["data:\n\n", "data: [DONE]\n\n"],
          ["data: \n\n", "data:  [DONE]\n\n"],
          ["data:\r\n\r\n", "data:[DONE] \r\n\r\n"]
        ] as const) {
          const body = `${empty}${chunkEvent({ content: "a" })}${empty}${chunkEvent({ content: "b" })}${done}`
          const { exit } = yield* once(FakeOpenAiServer.raw({ body }), { stream: true })
          assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text : exit.cause, "ab", JSON.stringify([empty, done]))
        }
      })
    )

    live("R11 an answer just under maxResponseBytes is whole, plain and streamed", () =>
      Effect.gen(function* () {
        const text = "w".repeat(MiB - 4 * 1024)
        for (const stream of [false, true]) {
          const body = stream
            ? `${chunkEvent({ content: text })}data: [DONE]\n\n`
            : JSON.stringify({ choices: [{ message: { content: text } }] })
          const { exit } = yield* once(FakeOpenAiServer.raw({ body }), { stream, maxResponseBytes: MiB })
          assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text.length : exit.cause, text.length)
        }
      })
    )
  })

  describe("after [DONE] the answer is whole (R4.2, R12)", () => {
    const whole = `${chunkEvent({ content: "answered" })}data: [DONE]\n\n`
    live("R4.2 a server that keeps sending, holds the connection or resets it after [DONE] has still answered", () =>
      Effect.gen(function* () {
        const steps = [
          FakeOpenAiServer.endless({ prefix: whole, chunk: `: ${"p".repeat(1_000)}\n` }),
          FakeOpenAiServer.stall({
            afterChunks: 99,
            millis: 10_000,
            next: FakeOpenAiServer.reply({ text: "answered" })
          }),
          FakeOpenAiServer.reset({ afterChunks: 99 })
        ]
        const texts = ["answered", "answered", "this answer is cut by a reset"]
        for (const [i, step] of steps.entries()) {
          // The idle-read timeout is longer than the deadline: only the drain's own bound can end the read in time.
          const { exit } = yield* once(
            step,
            { stream: true, maxResponseBytes: MiB, timeouts: { idleRead: 20_000 } },
            3_000
          )
          assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text : String(exit.cause), texts[i])
        }
      })
    )
  })

  describe("server-sent events (R11, R12)", () => {
    it("R11 one 1 MiB event parses whole however it is cut, with CRLF and comments around it", () => {
      const data = `{"content":"${"q".repeat(MiB)}"}`
      const text = `: keep-alive\r\ndata: ${data}\r\n\r\ndata: [DONE]\r\n\r\n`
      for (const size of [65_536, 1_000, 7]) {
        const parser = Sse.parser({ maxEventLength: 2 * MiB })
        const events: Array<string> = []
        for (let i = 0; i < text.length; i += size) {
          const fed = parser.feed(text.slice(i, i + size))
          if (Result.isFailure(fed)) assert.fail("an event under the cap was refused")
          else events.push(...fed.success)
        }
        assert.deepStrictEqual(events, [data, "[DONE]"], `pieces of ${size}`)
      }
    })

    it("R12 an event over the cap is refused, and the parser holds no more than the cap", () => {
      const parser = Sse.parser({ maxEventLength: 1_000 })
      assert.deepStrictEqual(parser.feed("data: small\n\n"), Result.succeed(["small"]))
      const fed = Array.from({ length: 20 }, () => parser.feed("x".repeat(100)))
      // The eleventh piece takes the pending line past 1,000 characters.
      assert.deepStrictEqual(
        fed.map((r) => r._tag),
        [...Array(10).fill("Success"), ...Array(10).fill("Failure")]
      )
    })
  })

  describe("the wire is decoded strictly (R2.1, R3.2)", () => {
    live("R2.1 token usage that is negative, fractional or not a number is a corrupt_response, never a count", () =>
      Effect.gen(function* () {
        const usages: ReadonlyArray<unknown> = [
          { prompt_tokens: -5, completion_tokens: 1 },
          { prompt_tokens: 1.5, completion_tokens: 1 },
          { prompt_tokens: "12", completion_tokens: 1 }
          // A count left out or null is a usage in part, counted for what it has (review 128).
        ]
        for (const usage of usages) {
          for (const stream of [false, true]) {
            const body = stream
              ? `${chunkEvent({ content: "hi" })}data: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`
              : JSON.stringify({ choices: [{ message: { content: "hi" } }], usage })
            const { exit } = yield* once(FakeOpenAiServer.raw({ body }), { stream })
            const failure = failureOf(exit)
            assert.deepStrictEqual(classOf(failure), ["Retryable", "corrupt_response", "corrupt_response"])
            assert.include(failure.diagnostic, "usage")
          }
        }
      })
    )

    live("R11 text, a tool-call name or an id that is not a string, or an empty name, is a corrupt_response", () =>
      Effect.gen(function* () {
        const messages: ReadonlyArray<unknown> = [
          { content: 42 },
          { content: ["parts"] },
          { content: null, tool_calls: [{ id: "a", function: { name: 7, arguments: "{}" } }] },
          { content: null, tool_calls: [{ id: "a", function: { name: "", arguments: "{}" } }] },
          { content: null, tool_calls: [{ id: { x: 1 }, function: { name: "echo", arguments: "{}" } }] }
        ]
        for (const message of messages) {
          const { exit } = yield* once(FakeOpenAiServer.raw({ body: JSON.stringify({ choices: [{ message }] }) }))
          assert.deepStrictEqual(classOf(failureOf(exit)), ["Retryable", "corrupt_response", "corrupt_response"])
        }
      })
    )

    live("R3.2 a Retry-After that is huge or nonsense never breaks the failure", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [string, (ms: number | undefined) => boolean]> = [
          ["9".repeat(400), (ms) => ms !== undefined && ms >= Number.MAX_SAFE_INTEGER],
          ["soon", (ms) => ms === undefined],
          ["-3", (ms) => ms === undefined],
          ["2, 30", (ms) => ms === undefined]
        ]
        for (const [header, expected] of cases) {
          const { exit } = yield* once(FakeOpenAiServer.status(429, { retryAfter: header }))
          const failure = failureOf(exit)
          assert.deepStrictEqual(classOf(failure), ["Retryable", "transient_http", "http_429"])
          const ms = failure._tag === "Retryable" ? failure.retryAfterMillis : undefined
          assert.isTrue(expected(ms), `Retry-After: ${header.slice(0, 12)} gave ${ms}`)
        }
      })
    )
  })

  describe("where the request goes, and what the answer says it is (R3.2, R11)", () => {
    live("R3.2 a retry-after-ms that is no number leaves Retry-After to say the wait", () =>
      Effect.gen(function* () {
        const headers = { "retry-after-ms": "", "retry-after": "30" }
        const { exit } = yield* once(FakeOpenAiServer.raw({ status: 429, headers, body: "{}" }))
        const failure = failureOf(exit)
        assert.strictEqual(failure._tag === "Retryable" ? failure.retryAfterMillis : undefined, 30_000)
      })
    )

    live("R3.2 a retry-after-ms too large to represent is longer than any deadline, and small ones are exact", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [string, number]> = [
          // It was "1e+19" seconds, which no reader takes: the wait was lost, and the run backed off 50 ms.
          [`1${"0".repeat(25)}`, Number.MAX_SAFE_INTEGER],
          ["1500", 1_500],
          ["0.5", 1]
        ]
        for (const [ms, expected] of cases) {
          const headers = { "retry-after-ms": ms, "retry-after": "30" }
          const { exit } = yield* once(FakeOpenAiServer.raw({ status: 429, headers, body: "{}" }))
          const failure = failureOf(exit)
          assert.strictEqual(failure._tag === "Retryable" ? failure.retryAfterMillis : undefined, expected, ms)
        }
      })
    )

    live("R3.2 a redirect is not followed: a permanent failure saying so, nothing sent elsewhere", () =>
      Effect.gen(function* () {
        const elsewhere = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "from elsewhere" })])
        const headers = { location: `${elsewhere.url}/chat/completions` }
        for (const status of [302, 307]) {
          const { exit } = yield* once(FakeOpenAiServer.raw({ status, headers, body: "" }))
          const failure = failureOf(exit)
          assert.strictEqual(failure._tag, "Permanent", `${status}: ${failure.hint}`)
          assert.include(failure.hint, "a redirect, not followed")
        }
        assert.lengthOf(yield* elsewhere.requests, 0)
      })
    )

    live("R3.2 an answer with no body (204) is a corrupt response on every client, retryable", () =>
      Effect.gen(function* () {
        const { exit } = yield* once(FakeOpenAiServer.raw({ status: 204, body: "" }))
        assert.deepStrictEqual(classOf(failureOf(exit)), ["Retryable", "corrupt_response", "corrupt_response"])
      })
    )

    live("R11 a stream whose content type is written in capitals is read as a stream", () =>
      Effect.gen(function* () {
        const body = `${chunkEvent({ content: "hi" })}data: [DONE]\n\n`
        const headers = { "content-type": "Text/Event-Stream; charset=UTF-8" }
        const { exit } = yield* once(FakeOpenAiServer.raw({ headers, body }), { stream: true })
        assert.isTrue(Exit.isSuccess(exit) && exit.value.text === "hi", String(exit))
      })
    )

    live(
      "R3.1 R12 an error in the stream with a huge type: the hint keeps 200 characters of it, never half of one",
      () =>
        Effect.gen(function* () {
          const body = `data: ${JSON.stringify({ error: { message: "no", type: "t".repeat(100_000) } })}\n\n`
          const headers = { "content-type": "text/event-stream" }
          const { exit } = yield* once(FakeOpenAiServer.raw({ headers, body }), { stream: true })
          assert.isBelow(failureOf(exit).hint.length, 400)
          // A message cut where an emoji stands keeps no half of it (review 87).
          const emoji = `data: ${JSON.stringify({ error: { message: `${"m".repeat(199)}${"😀".repeat(5)}` } })}\n\n`
          const cut = failureOf((yield* once(FakeOpenAiServer.raw({ headers, body: emoji }), { stream: true })).exit)
          assert.include(cut.hint, `${"m".repeat(199)}…`)
          assert.notMatch(cut.hint, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/)
        })
    )
  })

  describe("the API key never survives a cut (R3.1)", () => {
    /** Every 8-character piece of the key: none may be left in what a failure shows. */
    const pieces = Array.from({ length: KEY.length - 7 }, (_, i) => KEY.slice(i, i + 8))
    const assertNoKey = (failure: Failure.Failure) => {
      for (const text of [failure.hint, failure.diagnostic ?? "", failure.message, JSON.stringify(failure)]) {
        for (const piece of pieces) assert.notInclude(text, piece)
      }
    }

    live(
      "R3.1 a key the server echoes at the 300-character cut, or as a Bearer header, or cut itself, is scrubbed",
      () =>
        Effect.gen(function* () {
          const steps = [
            // Not an error envelope: the raw text is cut for the diagnostic, right inside the key.
            FakeOpenAiServer.raw({ status: 400, body: `${"e".repeat(290)}${KEY} is not valid`, headers: {} }),
            FakeOpenAiServer.raw({ status: 401, body: `${"e".repeat(290)}${KEY}`, headers: {} }),
            // An envelope whose message puts the key at the cut.
            FakeOpenAiServer.status(401, { message: `${"m".repeat(495)}Incorrect API key provided: ${KEY}` }),
            FakeOpenAiServer.status(401, { message: `the header was Authorization: Bearer ${KEY}` }),
            // The server cut the key itself.
            FakeOpenAiServer.status(401, { message: `Incorrect API key provided: ${KEY.slice(0, 17)}...` }),
            // A 200 body that does not decode: the decoder's message quotes it.
            FakeOpenAiServer.raw({ body: JSON.stringify({ choices: `${"c".repeat(480)}${KEY}` }) })
          ]
          const { model } = yield* setup(steps)
          for (const _ of steps) assertNoKey(failureOf(yield* Effect.exit(model.generate(yield* request()))))
        })
    )

    live(
      "R12 R3.1 a key-shaped run of millions of characters in an error is scrubbed whole, and the failure stays typed",
      () =>
        Effect.gen(function* () {
          // `sk-` and 6,000,000 more: a scrubber's pattern that backtracks over it overflowed the stack (review 87).
          const message = `sk-${"a".repeat(6_000_000)} and the end`
          const envelope = JSON.stringify({ error: { message, type: "server_error" } })
          // A 200 whose body is an error envelope is read as a stream's error event is.
          for (const [body, stream] of [
            [envelope, false],
            [`data: ${envelope}\n\n`, true]
          ] as const) {
            const failure = failureOf((yield* once(FakeOpenAiServer.raw({ body }), { stream })).exit)
            assert.deepStrictEqual(classOf(failure), ["Retryable", "stream_error", "server_error"])
            assert.include(failure.hint, "<redacted> and the end")
            assert.notInclude(failure.diagnostic ?? "", "aaaaaaaa")
          }
        })
    )

    live("R3.1 a key in an error event of a stream is scrubbed before the cut", () =>
      Effect.gen(function* () {
        const event = `data: ${JSON.stringify({ error: { message: `${"s".repeat(460)}${KEY}` } })}\n\n`
        const { exit } = yield* once(FakeOpenAiServer.raw({ body: event }), { stream: true })
        const failure = failureOf(exit)
        assert.deepStrictEqual(classOf(failure), ["Retryable", "stream_error", "stream_error"])
        assertNoKey(failure)
      })
    )
  })
})
