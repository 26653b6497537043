/**
 * What the chat-completions client refuses where a bad value enters: options that cannot
 * work fail at `make` with a typed `InvalidOptions` (a key a header cannot carry, a base URL
 * with an empty query or fragment, a price too large to count, a timeout under 1 ms), a
 * request the HTTP client will not send is a permanent failure, a key echoed in a response
 * header never reaches a span, and a streamed tool name is put together piece by piece.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Redacted, Result, Scope } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as Headers from "effect/http/Headers"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as OpenAiWire from "../../src/providers/OpenAiWire.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import { apiKey, classOf, failureOf, KEY, once, request } from "../support/provider.ts"
import { memoryTracer } from "../support/tracer.ts"

const transports = [
  ["NodeTransport", NodeTransport.layer()],
  ["fetch", FetchHttpClient.layer]
] as const

const live = <E>(name: string, body: () => Effect.Effect<void, E, Scope.Scope | HttpClient.HttpClient>) => {
  for (const [transport, layer] of transports) {
    it.live(`${name} (${transport})`, () => body().pipe(Effect.provide(layer)))
  }
}

/** The `InvalidOptions` that `make` fails with for `options`. */
const refused = (options: Partial<OpenAiCompatible.Options>) =>
  Effect.flip(
    OpenAiCompatible.make({ baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey, ...options }).pipe(
      Effect.provide(NodeTransport.layer())
    )
  )

/** Every 8-character piece of `key`: none may be in what a refusal says. */
const piecesOf = (key: string) => Array.from({ length: Math.max(0, key.length - 7) }, (_, i) => key.slice(i, i + 8))

describe("OpenAiCompatible refuses at its boundary", () => {
  it.effect(
    "R12 R3.1 an API key a header cannot carry (a BOM, a pasted en dash, Cyrillic letters, DEL, a tab, a space at an end) is a typed InvalidOptions at make, never quoting the key",
    () =>
      Effect.gen(function* () {
        const keys: ReadonlyArray<readonly [string, string]> = [
          [`\uFEFF${KEY}`, "a byte-order mark (U+FEFF, which a file saved with one starts with) at character 1"],
          [`sk\u2013${KEY.slice(3)}`, "a character outside ASCII"],
          [`sk-ключ-${KEY.slice(3)}`, "a character outside ASCII"],
          [`${KEY}\x7f`, "a control character"],
          [`${KEY.slice(0, 6)}\t${KEY.slice(6)}`, "a control character"],
          [` ${KEY}`, "a space at its start or end"],
          [`${KEY} `, "a space at its start or end"]
        ]
        for (const [key, says] of keys) {
          const error = yield* refused({ apiKey: Redacted.make(key) })
          assert.instanceOf(error, OpenAiCompatible.InvalidOptions, JSON.stringify(key))
          assert.include(error.message, `apiKey holds ${says}`)
          for (const piece of [...piecesOf(key), ...piecesOf(KEY)]) assert.notInclude(error.message, piece)
        }
        // A key of printable ASCII, spaces inside included (some local servers take any text), is taken.
        for (const key of [KEY, "not needed", ""]) {
          const made = yield* Effect.exit(
            OpenAiCompatible.make({ baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey: Redacted.make(key) })
          )
          assert.isTrue(Exit.isSuccess(made), key)
        }
      }).pipe(Effect.provide(NodeTransport.layer()))
  )

  live(
    "R3.2 a request the HTTP client will not send (a header value it cannot carry) is a permanent failure, not a retryable connection error",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "never" })])
        const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "m", apiKey }).pipe(
          // The app's own middleware adds a header no HTTP request can carry.
          Effect.updateService(
            HttpClient.HttpClient,
            HttpClient.mapRequest(HttpClientRequest.setHeader("x-trace-note", "caf\u00e9 \u2013 \u043a"))
          )
        )
        const failure = failureOf(yield* Effect.exit(model.generate(yield* request())))
        assert.deepStrictEqual(classOf(failure), ["Permanent", "request_failed", "request_failed"])
        assert.include(failure.hint, "the HTTP client refused to send the request")
        assert.lengthOf(yield* server.requests, 0)
      })
  )

  it.effect(
    "R11 a baseUrl with a query or a fragment, even an empty `?` or `#`, is a typed InvalidOptions at make",
    () =>
      Effect.gen(function* () {
        for (const suffix of ["?", "#", "/?", "?#", "?api-version=1", "#frag"]) {
          const error = yield* refused({ baseUrl: `https://example.com/v1${suffix}` })
          assert.instanceOf(error, OpenAiCompatible.InvalidOptions, suffix)
          assert.include(error.message, "baseUrl must not have a query or a fragment", suffix)
        }
      })
  )

  it.live("R11 a baseUrl with spaces around it still sends to its /chat/completions", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "here" })])
      const model = yield* OpenAiCompatible.make({ baseUrl: ` ${server.url}/ `, model: "m", apiKey })
      const response = yield* model.generate(yield* request())
      assert.strictEqual(response.text, "here")
      assert.deepStrictEqual(
        (yield* server.requests).map((r) => r.path),
        ["/v1/chat/completions"]
      )
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.effect(
    "R2.1 R11 a price over a million USD per million tokens, which no answer's cost could be counted at, is a typed InvalidOptions at make",
    () =>
      Effect.gen(function* () {
        for (const prices of [
          { input: 1e300, output: 1 },
          { input: 1, output: 1_000_001 },
          { input: 1, output: 1, cachedInput: 1e7 },
          { input: Number.POSITIVE_INFINITY, output: 1 }
        ]) {
          const error = yield* refused({ costPerMillionTokens: prices })
          assert.instanceOf(error, OpenAiCompatible.InvalidOptions, JSON.stringify(prices))
          assert.include(error.message, "costPerMillionTokens.")
        }
        const made = yield* Effect.exit(
          OpenAiCompatible.make({
            baseUrl: "http://127.0.0.1:9/v1",
            model: "m",
            apiKey,
            costPerMillionTokens: { input: OpenAiCompatible.maxPricePerMillionTokens, output: 0 }
          })
        )
        assert.isTrue(Exit.isSuccess(made))
      }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.effect("R4.1 a timeout under 1 ms (0.0001 ms, 1 ns, 999 µs) is a typed InvalidOptions at make", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [OpenAiCompatible.Timeouts, string]> = [
        [{ connect: 0.0001 }, "timeouts.connect"],
        [{ idleRead: "1 nanos" }, "timeouts.idleRead"],
        [{ firstByte: "999 micros" }, "timeouts.firstByte"]
      ]
      for (const [timeouts, field] of cases) {
        const error = yield* refused({ timeouts })
        assert.include(error.message, `${field} must be at least 1 millisecond`)
      }
      const made = yield* Effect.exit(
        OpenAiCompatible.make({ baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey, timeouts: { connect: 1 } })
      )
      assert.isTrue(Exit.isSuccess(made))
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  live(
    "R12 R3.1 a key the server echoes in a response header never reaches the request's span, even when the app traces headers; authorization stays redacted",
    () =>
      Effect.gen(function* () {
        const echoed = { "x-debug-auth": `Bearer ${KEY}`, "x-key": KEY }
        const steps = [
          FakeOpenAiServer.raw({ status: 401, headers: echoed, body: JSON.stringify({ error: { message: "no" } }) }),
          FakeOpenAiServer.raw({
            headers: { ...echoed, "content-type": "application/json" },
            body: JSON.stringify({ choices: [{ message: { content: "hi" }, finish_reason: "stop" }] })
          })
        ]
        // An app that traces every header, with effect's redacted names, then with none of its own.
        for (const [step, redacted] of steps.flatMap(
          (step) =>
            [
              [step, undefined],
              [step, []]
            ] as const
        )) {
          const { tracer, spans } = memoryTracer()
          const traced = once(step).pipe(
            Effect.provideService(HttpClient.TracerHeaderFilter, () => true),
            Effect.withTracer(tracer)
          )
          yield* redacted === undefined ? traced : Effect.provideService(traced, Headers.CurrentRedactedNames, redacted)
          const attributes = spans.flatMap((span) => [...span.attributes.entries()])
          const names = attributes.map(([name]) => name)
          // The app's request headers are traced as it asked, the key redacted; no response header is.
          assert.include(names, "http.request.header.accept")
          assert.deepInclude(attributes, ["http.request.header.authorization", "<redacted>"])
          assert.isFalse(
            names.some((name) => name.startsWith("http.response.header.")),
            names.join(", ")
          )
          for (const [, value] of attributes) {
            for (const piece of piecesOf(KEY)) assert.notInclude(String(value), piece)
          }
        }
      })
  )

  it("R11 a tool name streamed in two equal pieces ('tar' + 'tar') is 'tartar'; one resent whole with its id is not doubled", () => {
    const fold = (deltas: ReadonlyArray<object>) => {
      const acc = OpenAiWire.accumulator()
      for (const call of deltas) {
        const parsed = OpenAiWire.parseChunk(JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [call] } }] }))
        if (Result.isFailure(parsed)) assert.fail(parsed.failure)
        else OpenAiWire.accumulate(acc, parsed.success)
      }
      const response = OpenAiWire.fromAccumulator(acc, { iteration: 1 })
      return Result.isSuccess(response) ? response.success.toolCalls.map((c) => [c.id, c.name, c.arguments]) : []
    }
    assert.deepStrictEqual(
      fold([
        { index: 0, id: "c1", type: "function", function: { name: "tar", arguments: "" } },
        { index: 0, function: { name: "tar" } },
        { index: 0, function: { arguments: "{}" } }
      ]),
      [["c1", "tartar", "{}"]]
    )
    // A server that sends each delta with the call's id and whole name.
    assert.deepStrictEqual(
      fold([
        { index: 0, id: "c1", function: { name: "tartar", arguments: "{" } },
        { index: 0, id: "c1", function: { name: "tartar", arguments: "}" } }
      ]),
      [["c1", "tartar", "{}"]]
    )
    // One that resends the whole name, without the id, beside each piece of the arguments (review 74).
    assert.deepStrictEqual(
      fold([
        { index: 0, id: "c1", function: { name: "read_file", arguments: "" } },
        { index: 0, function: { name: "read_file", arguments: '{"path":' } },
        { index: 0, function: { name: "read_file", arguments: '"a"}' } }
      ]),
      [["c1", "read_file", '{"path":"a"}']]
    )
  })
})

describe("a transport whose scope has ended (R3.2)", () => {
  it.effect(
    "R3.2 a request over a closed NodeTransport is a permanent request_failed naming it, never retried as the server's fault (review 177)",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const client = yield* NodeTransport.make().pipe(Scope.provide(scope))
        const model = yield* OpenAiCompatible.make({ baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey }).pipe(
          Effect.provideService(HttpClient.HttpClient, client)
        )
        yield* Scope.close(scope, Exit.void)
        const failure = failureOf(yield* Effect.exit(model.generate(yield* request())))
        // Before: a retryable connection_error, and a run spent its retries blaming the server.
        assert.deepStrictEqual([failure?._tag, failure?.code], ["Permanent", "request_failed"])
        assert.include(failure?.hint, "the HTTP client was closed (UND_ERR_DESTROYED)")
      })
  )
})
