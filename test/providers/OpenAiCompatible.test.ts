import { readFileSync } from "node:fs"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { createServer as createTlsServer } from "node:tls"
import { NodeServices } from "@effect/platform-node"
import * as Undici from "@effect/platform-node/Undici"
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  Clock,
  ConfigProvider,
  Effect,
  Exit,
  Fiber,
  FileSystem,
  Layer,
  Redacted,
  Result,
  Schema,
  type Scope
} from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import type * as HttpClient from "effect/http/HttpClient"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Text from "../../src/failure/Text.ts"
import * as Model from "../../src/model/Model.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as OpenAiWire from "../../src/providers/OpenAiWire.ts"
import * as OpenAiWireEncode from "../../src/providers/OpenAiWireEncode.ts"
import * as Sse from "../../src/providers/Sse.ts"
import * as Run from "../../src/run/Run.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { apiKey, classOf, failureOf, KEY, once, rawServer, request, setup } from "../support/provider.ts"

const transport = NodeTransport.layer()

/** A test on real time and real sockets, with the reporting transport. */
const live = <E>(name: string, body: () => Effect.Effect<void, E, Scope.Scope | HttpClient.HttpClient>) =>
  it.live(name, () => body().pipe(Effect.provide(transport)))

/** The response a stream of these chunks (as JSON) folds to. */
const streamed = (chunks: ReadonlyArray<unknown>) => {
  const acc = OpenAiWire.accumulator()
  for (const chunk of chunks) {
    const parsed = OpenAiWire.parseChunk(JSON.stringify(chunk))
    if (Result.isFailure(parsed)) assert.fail(parsed.failure)
    else OpenAiWire.accumulate(acc, parsed.success)
  }
  return OpenAiWire.fromAccumulator(acc, { iteration: 1 })
}

describe("OpenAiCompatible", () => {
  describe("wire format", () => {
    it("R11 server-sent events come out the same however the text is cut (LF, CRLF, CR, comments, multi-line data)", () => {
      const text =
        ': ping\r\ndata: {"a":1}\r\n\r\nevent: x\nid: 7\ndata: line1\ndata:line2\n\ndata: [DONE]\r\rdata: cut'
      const expected = ['{"a":1}', "line1\nline2", "[DONE]"]
      const feedAll = (parts: ReadonlyArray<string>) => {
        const parser = Sse.parser({ maxEventLength: 1_000 })
        return parts.flatMap((part) => Result.getOrThrow(parser.feed(part)))
      }
      assert.deepStrictEqual(feedAll([text]), expected)
      assert.deepStrictEqual(feedAll([...text]), expected)
      for (let i = 0; i <= text.length; i++) {
        assert.deepStrictEqual(feedAll([text.slice(0, i), text.slice(i)]), expected, `cut at ${i}`)
      }
    })

    it("R11 a response encodes to the wire and decodes back, plain and streamed", () => {
      const response: Model.Response = {
        text: "some text, longer than one piece",
        toolCalls: [
          { id: "a", name: "echo", arguments: '{"text": "hi"}' },
          { id: "b", name: "broken", arguments: '{"unterminated' }
        ],
        usage: { inputTokens: 12, outputTokens: 34, cachedInputTokens: 4, reasoningTokens: 7 },
        finishReason: "tool_calls",
        reasoning: "first I think, then I call"
      }
      for (const dialect of ["openai", "deepseek"] as const) {
        const plain = OpenAiWire.parseCompletion(
          JSON.stringify(OpenAiWireEncode.completionBody(response, { model: "m", dialect }))
        )
        assert.deepStrictEqual(
          Result.flatMap(plain, (c) => OpenAiWire.fromCompletion(c, { iteration: 1 })),
          Result.succeed(response)
        )
        const acc = OpenAiWire.accumulator()
        const data = OpenAiWireEncode.chunkData(response, { model: "m", dialect, pieceSize: 5 })
        assert.strictEqual(data[data.length - 1], "[DONE]")
        for (const d of data.slice(0, -1)) {
          const chunk = OpenAiWire.parseChunk(d)
          if (Result.isSuccess(chunk)) OpenAiWire.accumulate(acc, chunk.success)
          else assert.fail(chunk.failure)
        }
        assert.deepStrictEqual(OpenAiWire.fromAccumulator(acc, { iteration: 1 }), Result.succeed(response))
      }
    })

    it("R11 an answer whose content is a list of parts (Mistral's reasoning models) reads as the text of its text parts", () => {
      const parts = [
        { type: "thinking", thinking: [{ type: "text", text: "let me see" }] },
        { type: "text", text: "The answer " },
        { type: "text", text: "is 4." }
      ]
      const plain = OpenAiWire.parseCompletion(
        JSON.stringify({ choices: [{ message: { role: "assistant", content: parts }, finish_reason: "stop" }] })
      )
      const response = Result.flatMap(plain, (c) => OpenAiWire.fromCompletion(c, { iteration: 1 }))
      assert.strictEqual(Result.isSuccess(response) ? response.success.text : undefined, "The answer is 4.")
      const acc = OpenAiWire.accumulator()
      const pieces = [
        [{ type: "thinking", thinking: [] }],
        [{ type: "text", text: "The answer " }],
        "is ",
        [{ type: "text", text: "4." }]
      ]
      for (const content of pieces) {
        const chunk = OpenAiWire.parseChunk(JSON.stringify({ choices: [{ index: 0, delta: { content } }] }))
        if (Result.isFailure(chunk)) assert.fail(chunk.failure)
        else OpenAiWire.accumulate(acc, chunk.success)
      }
      assert.strictEqual(acc.text, "The answer is 4.")
      // A list holding what is no part at all is still corrupt.
      assert.isTrue(
        Result.isFailure(
          OpenAiWire.parseCompletion(
            JSON.stringify({ choices: [{ message: { content: [5] }, finish_reason: "stop" }] })
          )
        )
      )
    })

    it("R11 R12 a streamed piece never ends in half of a surrogate pair: each piece is well-formed text a strict reader takes", () => {
      const text = "1234567🎉89🎉"
      const data = OpenAiWireEncode.chunkData(
        { text, toolCalls: [{ id: "c", name: "echo", arguments: '{"x":"abcdefg🎉"}' }] },
        { model: "m", dialect: "openai", pieceSize: 8 }
      )
      const deltas = data.slice(0, -1).map((d) => JSON.parse(d).choices?.[0]?.delta ?? {})
      const content: Array<string> = deltas.flatMap((d) => (typeof d.content === "string" ? [d.content] : []))
      const args: Array<string> = deltas.flatMap((d) =>
        (d.tool_calls ?? []).flatMap((c: { function?: { arguments?: string } }) => c.function?.arguments ?? [])
      )
      for (const piece of [...content, ...args]) {
        assert.isTrue(Text.wellFormed(piece), `a piece holds half of a pair: ${JSON.stringify(piece)}`)
      }
      assert.strictEqual(content.join(""), text)
      assert.strictEqual(args.join(""), '{"x":"abcdefg🎉"}')
    })

    it("R11 R12 a streamed tool call's index past 32 bits is a corrupt chunk, never two calls in one slot (review 146)", () => {
      for (const index of [2 ** 31, Number.MAX_SAFE_INTEGER, -(2 ** 31) - 1]) {
        const chunk = {
          choices: [{ delta: { tool_calls: [{ index, id: "a", function: { name: "echo", arguments: "{}" } }] } }]
        }
        assert.isTrue(Result.isFailure(OpenAiWire.parseChunk(JSON.stringify(chunk))), String(index))
      }
      const within = {
        choices: [{ delta: { tool_calls: [{ index: 2 ** 31 - 1, id: "a", function: { name: "echo" } }] } }]
      }
      assert.isTrue(Result.isSuccess(OpenAiWire.parseChunk(JSON.stringify(within))))
    })

    it("R11 streamed tool calls without an index, or reusing one under a new id, stay apart; a name sent again is not doubled", () => {
      const fold = (chunks: ReadonlyArray<unknown>) => {
        const response = streamed(chunks)
        return Result.isSuccess(response) ? response.success.toolCalls.map((c) => [c.id, c.name, c.arguments]) : []
      }
      const delta = (call: object) => ({ choices: [{ delta: { tool_calls: [call] } }] })
      const expected = [
        ["a", "echo", '{"x":"1"}'],
        ["b", "echo", '{"x":"2"}']
      ]
      // No index at all (as some gateways send): a new id starts a new call, a piece without one adds to the last.
      assert.deepStrictEqual(
        fold([
          delta({ id: "a", function: { name: "echo", arguments: '{"x":' } }),
          delta({ function: { arguments: '"1"}' } }),
          delta({ id: "b", function: { name: "echo", arguments: '{"x":"2"}' } })
        ]),
        expected
      )
      // Two calls come to hold one id (the first took it late): a delta of that id without an
      // index goes to the last one opened.
      assert.deepStrictEqual(
        fold([
          delta({ index: 1, function: { name: "echo", arguments: '{"x":"1"}' } }),
          delta({ index: 3, id: "a", function: { name: "echo", arguments: '{"x":' } }),
          delta({ index: 1, id: "a" }),
          delta({ id: "a", function: { arguments: '"2"}' } })
        ]),
        [
          ["a", "echo", '{"x":"1"}'],
          ["a", "echo", '{"x":"2"}']
        ]
      )
      // Index 0 reused under a new id, the name repeated in every delta.
      assert.deepStrictEqual(
        fold([
          delta({ index: 0, id: "a", function: { name: "echo", arguments: '{"x":"1"}' } }),
          delta({ index: 0, id: "b", function: { name: "echo", arguments: '{"x":' } }),
          delta({ index: 0, id: "b", function: { name: "echo", arguments: '"2"}' } })
        ]),
        expected
      )
      // Index 0 for every call, the id on each call's first delta only (Ollama and other gateways):
      // a piece without an id goes to the call that last opened under its index (review 117).
      assert.deepStrictEqual(
        fold([
          delta({ index: 0, id: "a", type: "function", function: { name: "echo", arguments: "" } }),
          delta({ index: 0, function: { arguments: '{"x":' } }),
          delta({ index: 0, function: { arguments: '"1"}' } }),
          delta({ index: 0, id: "b", type: "function", function: { name: "echo", arguments: "" } }),
          delta({ index: 0, function: { arguments: '{"x":' } }),
          delta({ index: 0, function: { arguments: '"2"}' } })
        ]),
        expected
      )
      // The same with a third call under index 1, a position the second call took: it stays apart.
      assert.deepStrictEqual(
        fold([
          delta({ index: 0, id: "a", function: { name: "echo", arguments: '{"x":"1"}' } }),
          delta({ index: 0, id: "b", function: { name: "echo", arguments: '{"x":' } }),
          delta({ index: 1, id: "c", function: { name: "echo", arguments: '{"x":"3"}' } }),
          delta({ index: 0, function: { arguments: '"2"}' } })
        ]),
        [...expected, ["c", "echo", '{"x":"3"}']]
      )
      // A call that never gets a name names no tool: the answer is corrupt, streamed or not.
      const unnamed = OpenAiWire.accumulator()
      const chunk = OpenAiWire.parseChunk(JSON.stringify(delta({ index: 0, id: "a", function: { arguments: "{}" } })))
      if (Result.isSuccess(chunk)) OpenAiWire.accumulate(unnamed, chunk.success)
      const refused = OpenAiWire.fromAccumulator(unnamed, { iteration: 1 })
      assert.isTrue(Result.isFailure(refused) && refused.failure.kind === "corrupt")
    })

    it("R2.1 R2.3 a stream's usage reported in parts counts each part as reported, never an estimate below it (review 177)", () => {
      const usageOf = (chunks: ReadonlyArray<object>) => {
        const response = streamed(chunks)
        return Result.isSuccess(response) ? response.success.usage : undefined
      }
      const text = { choices: [{ delta: { content: "four" }, finish_reason: "stop" }] }
      // The prompt's count early, the completion's late: before, the 1000 was lost to an estimate of 1.
      const split = usageOf([
        { choices: [], usage: { prompt_tokens: 1000 } },
        text,
        { choices: [], usage: { completion_tokens: 7 } }
      ])
      assert.deepStrictEqual([split?.inputTokens, split?.outputTokens], [1000, 7])
      // The same count reported twice, growing: the later, larger one stands.
      const twice = usageOf([
        { choices: [], usage: { prompt_tokens: 10, completion_tokens: 1 } },
        text,
        { choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 4 } } }
      ])
      assert.deepStrictEqual([twice?.inputTokens, twice?.outputTokens, twice?.cachedInputTokens], [10, 5, 4])
      // An early running count of 0 outputs, then a final report that gives the output by its total
      // alone (review 178: the stale 0 stood, and 500 reported tokens were not counted).
      const running = usageOf([
        { choices: [], usage: { prompt_tokens: 1000, completion_tokens: 0, total_tokens: 1000 } },
        text,
        { choices: [], usage: { prompt_tokens: 1000, total_tokens: 1500 } }
      ])
      assert.deepStrictEqual([running?.inputTokens, running?.outputTokens], [1000, 500])
      const totalOnly = usageOf([
        { choices: [], usage: { prompt_tokens: 1000, completion_tokens: 1 } },
        text,
        { choices: [], usage: { total_tokens: 1500 } }
      ])
      assert.strictEqual((totalOnly?.inputTokens ?? 0) + (totalOnly?.outputTokens ?? 0), 1500)
      // Cached tokens beside a smaller prompt, the same report twice: as once, never past the total (review 179).
      const report = {
        prompt_tokens: 10,
        completion_tokens: 50,
        total_tokens: 150,
        prompt_tokens_details: { cached_tokens: 90 }
      }
      const repeated = usageOf([{ choices: [], usage: report }, text, { choices: [], usage: report }])
      assert.deepStrictEqual([repeated?.inputTokens, repeated?.outputTokens], [100, 50])
    })

    it("R4.2 R12 a stream of 200,000 tool-call deltas folds each in its call, one look-up each (no defect, every call in order)", () => {
      // Each delta used to scan every call before it (quadratic: 40,000 calls held the event
      // loop 18 s past every deadline) and spread their indexes into Math.max (a stack overflow).
      const n = 200_000
      const acc = OpenAiWire.accumulator()
      for (let i = 0; i < n; i++) {
        const first = { index: i, id: `c${i}`, type: "function", function: { name: "echo", arguments: '{"i":' } }
        const rest = { index: i, function: { arguments: `${i}}` } }
        for (const part of [first, rest]) {
          const parsed = OpenAiWire.parseChunk(JSON.stringify({ choices: [{ delta: { tool_calls: [part] } }] }))
          if (Result.isFailure(parsed)) assert.fail(parsed.failure)
          else OpenAiWire.accumulate(acc, parsed.success)
        }
      }
      const response = OpenAiWire.fromAccumulator(acc, { iteration: 1 })
      if (Result.isFailure(response)) return assert.fail(response.failure.detail)
      const calls = response.success.toolCalls
      assert.strictEqual(calls.length, n)
      assert.deepStrictEqual(calls[n - 1], { id: `c${n - 1}`, name: "echo", arguments: `{"i":${n - 1}}` })
      assert.isTrue(calls.every((c, i) => c.id === `c${i}`))
    })

    it("R11 an answer cut off or withheld is never final, whatever the server calls it; the first finish reason stands", () => {
      const finish = (reasons: ReadonlyArray<string>, choices?: ReadonlyArray<number>) => {
        const acc = OpenAiWire.accumulator()
        reasons.forEach((reason, i) => {
          const chunk = { choices: [{ index: choices?.[i] ?? 0, delta: { content: "x" }, finish_reason: reason }] }
          const parsed = OpenAiWire.parseChunk(JSON.stringify(chunk))
          if (Result.isSuccess(parsed)) OpenAiWire.accumulate(acc, parsed.success)
        })
        const response = OpenAiWire.fromAccumulator(acc, { iteration: 1 })
        return Result.isSuccess(response) ? (response.success.finishReason ?? "none") : response.failure.kind
      }
      const lengths = ["length", "LENGTH", "max_tokens", "model_length", "MAX_TOKENS", "max_length", "token_limit"]
      for (const reason of lengths) assert.strictEqual(finish([reason]), "length", reason)
      // Gemini's, Anthropic's and Bedrock's own filter names too (review 87: `blocklist`, `spii` were final answers).
      const filters = ["content_filter", "SAFETY", "recitation", "BLOCKLIST", "spii", "refusal", "guardrail_intervened"]
      for (const reason of filters) assert.strictEqual(finish([reason]), "content_filter", reason)
      assert.strictEqual(finish(["IMAGE_PROHIBITED_CONTENT"]), "content_filter")
      for (const reason of ["error", "abort", "MALFORMED_FUNCTION_CALL", "other", "LANGUAGE", "NO_IMAGE"]) {
        assert.strictEqual(finish([reason]), "interrupted", reason)
      }
      assert.strictEqual(finish(["length", "stop"]), "length")
      // An empty finish reason is none: it hides no later one.
      assert.strictEqual(finish(["", "length"]), "length")
      // Only the first choice is the answer: a second choice's `stop` does not make it whole.
      assert.strictEqual(finish(["length", "stop"], [0, 1]), "length")
      assert.strictEqual(finish(["constructor"]), "none")
    })

    it("R11 R12 a streamed chunk checked by hand is accepted exactly when the schema accepts it", () => {
      const decode = Schema.decodeUnknownResult(OpenAiWire.Chunk)
      const call = { index: 0, id: "c", type: "function", function: { name: "f", arguments: "{" } }
      const chunks: ReadonlyArray<unknown> = [
        { choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }], usage: null },
        { choices: [{ delta: { reasoning_content: "r" } }] },
        { choices: [{ delta: { tool_calls: [call] }, finish_reason: "tool_calls" }] },
        { choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 1 } } },
        { choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, prompt_cache_hit_tokens: 2 } },
        // A usage chunk without choices, and a usage in part (review 128).
        { usage: { prompt_tokens: 3, completion_tokens: 2 } },
        { choices: null, usage: { prompt_tokens: 3, completion_tokens: 2 } },
        {},
        { choices: [], usage: { prompt_tokens: 3 } },
        { choices: [], usage: { prompt_tokens: 3, completion_tokens: null, total_tokens: 5 } },
        { choices: [], usage: { total_tokens: 5 } },
        { choices: [{ delta: null }] },
        { choices: [], usage: { prompt_tokens: -1, completion_tokens: 2 } },
        { choices: [], usage: { prompt_tokens: 1.5, completion_tokens: 2 } },
        {
          choices: [],
          usage: { prompt_tokens: 1, completion_tokens: 2, prompt_tokens_details: { cached_tokens: -2 } }
        },
        { choices: [{ delta: { content: 7 } }] },
        { choices: [{ delta: { tool_calls: [{ ...call, index: 0.5 }] } }] },
        { choices: [{ delta: { tool_calls: [{ ...call, function: { name: 1 } }] } }] },
        { choices: [{ finish_reason: 3 }] },
        { choices: "none" },
        { choices: [7] },
        [],
        null,
        "text"
      ]
      for (const chunk of chunks) {
        const fast = OpenAiWire.parseChunk(JSON.stringify(chunk))
        assert.strictEqual(Result.isSuccess(fast), Result.isSuccess(decode(chunk)), JSON.stringify(chunk))
      }
      assert.isTrue(Result.isFailure(OpenAiWire.parseChunk("{not json")))
    })

    live("R11 sends the conversation, tool definitions and the key as a bearer token", () =>
      Effect.gen(function* () {
        const { server, model } = yield* setup([FakeOpenAiServer.reply({ text: "ok" })], { temperature: 0.2 })
        const messages: ReadonlyArray<Model.Message> = [
          { _tag: "system", content: "be brief" },
          { _tag: "user", content: "echo hi" },
          { _tag: "assistant", content: "", toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
          { _tag: "tool", toolCallId: "c1", name: "echo", content: "hi" }
        ]
        const parameters = { type: "object", properties: { text: { type: "string" } }, required: ["text"] }
        yield* model.generate({
          ...(yield* request({ messages })),
          tools: [{ name: "echo", description: "Echo", parameters }]
        })
        const [recorded] = yield* server.requests
        assert.strictEqual(recorded?.path, "/v1/chat/completions")
        assert.strictEqual(recorded?.headers.authorization, `Bearer ${KEY}`)
        assert.include(String(recorded?.headers["content-type"]), "application/json")
        assert.deepStrictEqual(recorded?.body, {
          model: "fake-model",
          messages: [
            { role: "system", content: "be brief" },
            { role: "user", content: "echo hi" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "c1", type: "function", function: { name: "echo", arguments: '{"text":"hi"}' } }]
            },
            { role: "tool", tool_call_id: "c1", content: "hi" }
          ],
          tools: [{ type: "function", function: { name: "echo", description: "Echo", parameters } }],
          temperature: 0.2
        })
      })
    )

    live("R11 a plain answer gives text, raw tool-call arguments, usage and cost", () =>
      Effect.gen(function* () {
        const { exit } = yield* once(
          FakeOpenAiServer.reply({
            text: "calling",
            toolCalls: [{ id: "c9", name: "echo", arguments: '{"text": "unterminated' }],
            usage: { input: 1_000, output: 500 }
          }),
          { costPerMillionTokens: { input: 2, output: 8 } }
        )
        assert.deepStrictEqual(Exit.isSuccess(exit) ? exit.value : exit.cause, {
          text: "calling",
          toolCalls: [{ id: "c9", name: "echo", arguments: '{"text": "unterminated' }],
          usage: { inputTokens: 1_000, outputTokens: 500, cachedInputTokens: 0, reasoningTokens: 0, costUsd: 0.006 },
          finishReason: "tool_calls"
        })
      })
    )

    live("R11 a streamed answer adds up text and tool-call deltas by index, with usage from the last chunk", () =>
      Effect.gen(function* () {
        const { exit, requests } = yield* once(
          FakeOpenAiServer.reply({
            text: "two calls coming up",
            toolCalls: [
              { id: "a", name: "echo", arguments: '{"text": "a fairly long first argument"}' },
              { id: "b", name: "read_file", arguments: '{"name": "notes.txt"}' }
            ],
            usage: { input: 42, output: 17 }
          }),
          { stream: true }
        )
        assert.deepStrictEqual(Exit.isSuccess(exit) ? exit.value : exit.cause, {
          text: "two calls coming up",
          toolCalls: [
            { id: "a", name: "echo", arguments: '{"text": "a fairly long first argument"}' },
            { id: "b", name: "read_file", arguments: '{"name": "notes.txt"}' }
          ],
          usage: { inputTokens: 42, outputTokens: 17, cachedInputTokens: 0, reasoningTokens: 0 },
          finishReason: "tool_calls"
        })
        const body = requests[0]?.body
        assert.deepInclude(body, { stream: true, stream_options: { include_usage: true } })
      })
    )
  })

  describe("classification (R3.2)", () => {
    for (const stream of [false, true]) {
      const mode = stream ? "streamed" : "plain"
      live(`R3.2 R3.4 a 429 is retryable with Retry-After, in exactly one request (${mode})`, () =>
        Effect.gen(function* () {
          const { exit, requests } = yield* once(FakeOpenAiServer.status(429, { retryAfter: "1" }), { stream })
          const failure = failureOf(exit)
          assert.deepStrictEqual(classOf(failure), ["Retryable", "transient_http", "http_429"])
          assert.strictEqual(failure._tag === "Retryable" ? failure.retryAfterMillis : undefined, 1_000)
          assert.strictEqual(requests.length, 1)
        })
      )

      live(`R3.2 a 429 that says the quota is spent is permanent: no wait brings it back (${mode})`, () =>
        Effect.gen(function* () {
          const { exit, requests } = yield* once(
            FakeOpenAiServer.status(429, {
              retryAfter: "1",
              message: "You exceeded your current quota",
              error: { type: "insufficient_quota", code: "insufficient_quota" }
            }),
            { stream }
          )
          const failure = failureOf(exit)
          assert.deepStrictEqual(classOf(failure), ["Permanent", "permanent_http", "insufficient_quota"])
          assert.include(failure.hint, "the account's quota is spent (HTTP 429): You exceeded your current quota")
          assert.strictEqual(requests.length, 1)
        })
      )

      live(`R3.2 a reset before the headers and one mid-body are retryable connection errors (${mode})`, () =>
        Effect.gen(function* () {
          for (const step of [FakeOpenAiServer.reset(), FakeOpenAiServer.reset({ afterChunks: 2 })]) {
            const { exit, requests } = yield* once(step, { stream })
            assert.deepStrictEqual(classOf(failureOf(exit)), ["Retryable", "connection", "connection_error"])
            assert.strictEqual(requests.length, 1)
          }
        })
      )

      live(`R3.2 corrupt and truncated bodies are retryable corrupt_response (${mode})`, () =>
        Effect.gen(function* () {
          for (const step of [FakeOpenAiServer.corrupt, FakeOpenAiServer.truncated]) {
            const { exit } = yield* once(step, { stream })
            assert.deepStrictEqual(classOf(failureOf(exit)), ["Retryable", "corrupt_response", "corrupt_response"])
          }
        })
      )
    }

    live("R3.2 R3.4 408, 409 and 5xx are retryable; other 4xx are permanent; one request each", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [number, string, string]> = [
          [408, "Retryable", "transient_http"],
          [409, "Retryable", "transient_http"],
          [500, "Retryable", "transient_http"],
          [502, "Retryable", "transient_http"],
          [503, "Retryable", "transient_http"],
          [400, "Permanent", "permanent_http"],
          [401, "Permanent", "permanent_http"],
          [404, "Permanent", "permanent_http"]
        ]
        for (const [status, tag, category] of cases) {
          const { exit, requests } = yield* once(FakeOpenAiServer.status(status, { message: `said ${status}` }))
          const failure = failureOf(exit)
          assert.deepStrictEqual(classOf(failure), [tag, category, `http_${status}`])
          assert.include(failure.diagnostic, `said ${status}`)
          assert.strictEqual(requests.length, 1)
        }
      })
    )

    live("R11 R3.2 a 400 whose error says the content filter refused is content_filtered, not a plain http_400", () =>
      Effect.gen(function* () {
        for (const error of [
          { message: "The prompt was filtered.", type: null, code: "content_filter", param: "prompt" },
          { message: "The prompt was filtered.", type: "content_policy_violation", code: 400 }
        ]) {
          const { exit } = yield* once(FakeOpenAiServer.raw({ status: 400, body: JSON.stringify({ error }) }))
          const failure = failureOf(exit)
          assert.deepStrictEqual(classOf(failure), ["Permanent", "content_filter", "content_filtered"])
          assert.include(failure.hint, "The prompt was filtered.")
        }
      })
    )

    it.live(
      "R3.2 a server whose TLS certificate does not verify is a permanent failure saying so, over either transport",
      () =>
        Effect.gen(function* () {
          const fixtures = join(import.meta.dirname, "..", "fixtures", "tls")
          const server = createTlsServer({
            key: readFileSync(join(fixtures, "self-signed.key.pem")),
            cert: readFileSync(join(fixtures, "self-signed.cert.pem"))
          })
          server.on("tlsClientError", () => {})
          yield* Effect.acquireRelease(
            Effect.callback<void>((resume) => {
              server.listen(0, "127.0.0.1", () => resume(Effect.void))
            }),
            () => Effect.sync(() => server.close())
          )
          const port = (server.address() as AddressInfo).port
          for (const client of [NodeTransport.layer(), FetchHttpClient.layer]) {
            const failure = yield* Effect.gen(function* () {
              const model = yield* OpenAiCompatible.make({
                baseUrl: `https://127.0.0.1:${port}/v1`,
                model: "m",
                apiKey
              })
              return failureOf(yield* Effect.exit(model.generate(yield* request())))
            }).pipe(Effect.provide(client))
            // A self-signed certificate was a retryable connection error: retried, counted by the breaker.
            assert.deepStrictEqual(classOf(failure), ["Permanent", "request_failed", "request_failed"])
            assert.include(failure.hint, "the server's TLS certificate was refused (DEPTH_ZERO_SELF_SIGNED_CERT)")
          }
        })
    )

    live("R3.2 a refused connection is a retryable connection error", () =>
      Effect.gen(function* () {
        const { url } = yield* Effect.scoped(FakeOpenAiServer.make([]).pipe(Effect.map((s) => ({ url: s.url }))))
        const model = yield* OpenAiCompatible.make({ baseUrl: url, model: "m", apiKey })
        const failure = failureOf(yield* Effect.exit(model.generate(yield* request())))
        assert.deepStrictEqual(classOf(failure), ["Retryable", "connection", "connection_error"])
        assert.include(failure.diagnostic, "ECONNREFUSED")
      })
    )
  })

  describe("timeouts (R4.1, R4.2)", () => {
    live("R4.1 headers later than the first-byte timeout fail first_byte, and the request is aborted", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.delay(2_000, FakeOpenAiServer.reply({ text: "late" }))
        const { exit, elapsed, server } = yield* once(step, { timeouts: { firstByte: 100 } })
        assert.deepStrictEqual(classOf(failureOf(exit)), ["Retryable", "timeout", "first_byte_timeout"])
        assert.isBelow(elapsed, 1_000)
        assert.isTrue((yield* server.whenClosed(0).pipe(Effect.timeout("2 seconds"))).closedEarly)
      })
    )

    live("R4.1 a stream that stalls longer than the idle-read timeout fails idle_read", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.stall({
          afterChunks: 2,
          millis: 2_000,
          next: FakeOpenAiServer.reply({ text: "x" })
        })
        const { exit, elapsed, server } = yield* once(step, { stream: true, timeouts: { idleRead: 100 } })
        assert.deepStrictEqual(classOf(failureOf(exit)), ["Retryable", "timeout", "idle_read_timeout"])
        assert.isBelow(elapsed, 1_000)
        assert.isTrue((yield* server.whenClosed(0).pipe(Effect.timeout("2 seconds"))).closedEarly)
      })
    )

    live(
      "R3.2 R4.1 an error status whose body stalls is classified by its status at once: the body, only words, gets 2 s at most",
      () =>
        Effect.gen(function* () {
          // A 429 whose body starts and never ends (review 117): it was held the whole idle-read period.
          const baseUrl = yield* rawServer((_, res) => {
            res.writeHead(429, { "content-type": "application/json", "retry-after": "1" })
            res.write("{")
          })
          const model = yield* OpenAiCompatible.make({
            baseUrl,
            model: "m",
            apiKey,
            timeouts: { idleRead: 30_000 }
          })
          const start = yield* Clock.currentTimeMillis
          const failure = failureOf(yield* Effect.exit(model.generate(yield* request({ deadlineIn: 60_000 }))))
          assert.deepStrictEqual(classOf(failure), ["Retryable", "transient_http", "http_429"])
          assert.strictEqual(failure._tag === "Retryable" ? failure.retryAfterMillis : undefined, 1_000)
          assert.isBelow((yield* Clock.currentTimeMillis) - start, 10_000)
        })
    )

    live("R4.1 a stall shorter than the idle-read timeout is only slow", () =>
      Effect.gen(function* () {
        const step = FakeOpenAiServer.stall({ millis: 100, next: FakeOpenAiServer.reply({ text: "slow but whole" }) })
        const { exit } = yield* once(step, { stream: true, timeouts: { idleRead: 1_000 } })
        assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text : undefined, "slow but whole")
      })
    )

    live("R4.1 R11 a plain answer after empty lines that keep the connection alive is no idle read (review 190)", () =>
      Effect.gen(function* () {
        // DeepSeek under load: the headers at once, an empty line every 100 ms, the body after 1.5 s.
        const body = JSON.stringify({
          id: "x",
          object: "chat.completion",
          choices: [{ index: 0, message: { role: "assistant", content: "late but whole" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
        })
        const baseUrl = yield* rawServer((_, res) => {
          res.writeHead(200, { "content-type": "application/json" })
          const beat = setInterval(() => res.write("\n"), 100)
          setTimeout(() => {
            clearInterval(beat)
            res.end(body)
          }, 1_500)
          res.on("close", () => clearInterval(beat))
        })
        const model = yield* OpenAiCompatible.make({ baseUrl, model: "m", apiKey, timeouts: { idleRead: 500 } })
        const exit = yield* Effect.exit(model.generate(yield* request({ deadlineIn: 30_000 })))
        // Before, the body had one idle-read period to come whole: idle_read_timeout at 500 ms.
        assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text : failureOf(exit).hint, "late but whole")
        // A body that stops coming is idle as before.
        const stalled = yield* rawServer((_, res) => {
          res.writeHead(200, { "content-type": "application/json" })
          res.write("\n")
        })
        const stalling = yield* OpenAiCompatible.make({
          baseUrl: stalled,
          model: "m",
          apiKey,
          timeouts: { idleRead: 300 }
        })
        const idle = failureOf(yield* Effect.exit(stalling.generate(yield* request({ deadlineIn: 30_000 }))))
        assert.deepStrictEqual(classOf(idle), ["Retryable", "timeout", "idle_read_timeout"])
      })
    )

    live("R11 R12 a stream a proxy labels otherwise is read as the stream it is (review 190)", () =>
      Effect.gen(function* () {
        const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`
        const stream = [
          ": keep-alive\n\n",
          event({ choices: [{ index: 0, delta: { role: "assistant", content: "labelled " }, finish_reason: null }] }),
          event({ choices: [{ index: 0, delta: { content: "wrong" }, finish_reason: "stop" }] }),
          event({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }),
          "data: [DONE]\n\n"
        ].join("")
        const serve = (contentType: string | undefined, body: string) =>
          rawServer((_, res) => {
            res.writeHead(200, contentType === undefined ? {} : { "content-type": contentType })
            res.end(body)
          })
        const generate = (baseUrl: string) =>
          Effect.gen(function* () {
            const model = yield* OpenAiCompatible.make({ baseUrl, model: "m", apiKey, stream: true })
            return yield* Effect.exit(model.generate(yield* request({ deadlineIn: 30_000 })))
          })
        for (const contentType of ["text/plain", "application/json", "application/octet-stream", undefined]) {
          const exit = yield* generate(yield* serve(contentType, stream))
          // Before, each failed corrupt_response: the body was read as one JSON completion.
          assert.strictEqual(
            Exit.isSuccess(exit) ? exit.value.text : failureOf(exit).hint,
            "labelled wrong",
            contentType
          )
          assert.strictEqual(Exit.isSuccess(exit) ? exit.value.usage?.outputTokens : undefined, 2, contentType)
        }
        // Read as a stream is read: one cut before [DONE] is no answer, an error event is what it says.
        const cut = failureOf(yield* generate(yield* serve("text/plain", stream.replace("data: [DONE]\n\n", ""))))
        assert.deepStrictEqual(classOf(cut), ["Retryable", "corrupt_response", "corrupt_response"])
        assert.include(cut.diagnostic ?? "", "without [DONE]")
        // Paid for as a stream is, as far as it came: keep-alives are no output (review 195: 12,501 tokens).
        const idle = failureOf(yield* generate(yield* serve("text/plain", ": keep-alive\n\n".repeat(4_000))))
        assert.deepStrictEqual(classOf(idle), ["Retryable", "corrupt_response", "corrupt_response"])
        assert.strictEqual(idle.usage?.outputTokens, 0)
        const error = failureOf(
          yield* generate(yield* serve(undefined, event({ error: { message: "overloaded", type: "server_error" } })))
        )
        assert.include(error.hint, "overloaded")
        // A JSON body that is no stream is read as before, its leading blank lines included.
        const plain = JSON.stringify({
          choices: [{ index: 0, message: { role: "assistant", content: "plain" }, finish_reason: "stop" }]
        })
        const json = yield* generate(yield* serve("text/plain", `\n\n${plain}`))
        assert.strictEqual(Exit.isSuccess(json) ? json.value.text : failureOf(json).hint, "plain")
      })
    )

    live("R4.1 a connect that does not complete fails connect, not first_byte", () =>
      Effect.gen(function* () {
        const { url } = yield* FakeOpenAiServer.unreachable
        const model = yield* OpenAiCompatible.make({ baseUrl: url, model: "m", apiKey, timeouts: { connect: 100 } })
        const start = yield* Clock.currentTimeMillis
        const failure = failureOf(yield* Effect.exit(model.generate(yield* request())))
        assert.deepStrictEqual(classOf(failure), ["Retryable", "timeout", "connect_timeout"])
        assert.isBelow((yield* Clock.currentTimeMillis) - start, 1_000)
      })
    )

    live("R4.2 every phase is capped by the request's deadline, and then reports the attempt layer", () =>
      Effect.gen(function* () {
        const long = { connect: 10_000, firstByte: 10_000, idleRead: 10_000 }
        const late = yield* once(FakeOpenAiServer.delay(3_000, FakeOpenAiServer.reply({})), { timeouts: long }, 150)
        assert.deepStrictEqual(classOf(failureOf(late.exit)), ["Retryable", "timeout", "attempt_timeout"])
        // The time left when the request starts: at most the 150 ms given, less on a loaded machine.
        const left = Number(/attempt timeout of (\d+) ms/.exec(failureOf(late.exit).hint)?.[1])
        assert.isTrue(left > 0 && left <= 150, `attempt timeout of ${left} ms`)
        assert.isBelow(late.elapsed, 1_000)
        const stalled = yield* once(
          FakeOpenAiServer.stall({ millis: 3_000, next: FakeOpenAiServer.reply({ text: "x" }) }),
          { stream: true, timeouts: long },
          150
        )
        assert.deepStrictEqual(classOf(failureOf(stalled.exit)), ["Retryable", "timeout", "attempt_timeout"])
        assert.isBelow(stalled.elapsed, 1_000)
        const { url } = yield* FakeOpenAiServer.unreachable
        const model = yield* OpenAiCompatible.make({ baseUrl: url, model: "m", apiKey, timeouts: long })
        const unconnected = failureOf(yield* Effect.exit(model.generate(yield* request({ deadlineIn: 150 }))))
        assert.deepStrictEqual(classOf(unconnected), ["Retryable", "timeout", "attempt_timeout"])
        const past = yield* once(FakeOpenAiServer.reply({}), {}, -1)
        assert.strictEqual(failureOf(past.exit).code, "attempt_timeout")
        assert.strictEqual(past.requests.length, 0)
      })
    )

    live("R4.3 a deadline that fires after the headers came reports the whole wait, from the request's start", () =>
      Effect.gen(function* () {
        const long = { connect: 10_000, firstByte: 10_000, idleRead: 10_000 }
        for (const stream of [false, true]) {
          // Headers (and half a plain body) at 300 ms of a 600 ms deadline, then silence.
          const step = FakeOpenAiServer.delay(
            300,
            FakeOpenAiServer.stall({ afterChunks: 0, millis: 5_000, next: FakeOpenAiServer.reply({ text: "x" }) })
          )
          const { exit } = yield* once(step, { stream, timeouts: long }, 600)
          const failure = failureOf(exit)
          assert.deepStrictEqual(classOf(failure), ["Retryable", "timeout", "attempt_timeout"])
          // It said what was left when the headers came (about 300 ms), as if that were the timeout (review 87).
          const waited = failure.timeout?.elapsedMillis ?? 0
          assert.isTrue(waited > 450 && waited <= 600, `stream ${stream}: waited ${waited} ms`)
          assert.include(failure.hint, `attempt timeout of ${waited} ms`)
        }
      })
    )

    live("R4.3 a deadline that is the step's or the run's is reported as that layer", () =>
      Effect.gen(function* () {
        const long = { connect: 10_000, firstByte: 10_000, idleRead: 10_000 }
        for (const layer of ["step", "run"] as const) {
          const { model } = yield* setup([FakeOpenAiServer.delay(3_000, FakeOpenAiServer.reply({}))], {
            timeouts: long
          })
          const failure = failureOf(
            yield* Effect.exit(model.generate(yield* request({ deadlineIn: 100, deadlineLayer: layer })))
          )
          assert.strictEqual(failure.code, `${layer}_timeout`)
          assert.strictEqual(failure.timeout?.layer, layer)
        }
      })
    )
  })

  describe("cancellation (R5.1)", () => {
    live("R5.1 interrupting the fiber aborts the request: the server sees the connection close", () =>
      Effect.gen(function* () {
        for (const [step, stream] of [
          [FakeOpenAiServer.delay(5_000, FakeOpenAiServer.reply({})), false],
          [FakeOpenAiServer.stall({ millis: 5_000, next: FakeOpenAiServer.reply({ text: "x" }) }), true]
        ] as const) {
          const { server, model } = yield* setup([step], { stream })
          const fiber = yield* Effect.forkChild(model.generate(yield* request()))
          yield* Effect.sleep(100)
          yield* Fiber.interrupt(fiber)
          const record = yield* server.whenClosed(0).pipe(Effect.timeout("2 seconds"))
          assert.isTrue(record.closedEarly)
        }
      })
    )
  })

  describe("the API key (R3.1)", () => {
    live("R3.1 the key is only in the Authorization header, and in no failure, even when the server echoes it", () =>
      Effect.gen(function* () {
        const steps = [
          FakeOpenAiServer.status(401, { message: `Incorrect API key provided: ${KEY}` }),
          FakeOpenAiServer.status(429, { retryAfter: "1" }),
          FakeOpenAiServer.status(500),
          FakeOpenAiServer.reset(),
          FakeOpenAiServer.reset({ afterChunks: 1 }),
          FakeOpenAiServer.corrupt,
          FakeOpenAiServer.truncated,
          FakeOpenAiServer.delay(1_000, FakeOpenAiServer.reply({}))
        ]
        const { server, model } = yield* setup(steps, { stream: true, timeouts: { firstByte: 50 } })
        const failures: Array<Failure.Failure> = []
        for (const _ of steps) failures.push(failureOf(yield* Effect.exit(model.generate(yield* request()))))
        for (const failure of failures) {
          const shown = [
            JSON.stringify(failure),
            String(failure),
            failure.message,
            failure.hint,
            failure.diagnostic ?? ""
          ]
          for (const text of shown) assert.notInclude(text, KEY)
          assert.notInclude(JSON.stringify(Schema.encodeSync(Failure.Failure)(failure)), KEY)
        }
        assert.include(failures[0]?.diagnostic, "Incorrect API key provided: <redacted>")
        for (const recorded of yield* server.requests) {
          const { authorization, ...others } = recorded.headers
          assert.strictEqual(authorization, `Bearer ${KEY}`)
          assert.notInclude(JSON.stringify(others), KEY)
          assert.notInclude(recorded.rawBody, KEY)
          assert.notInclude(recorded.path, KEY)
        }
      })
    )
  })

  describe("the API key, as a server writes it back (R3.1, R12)", () => {
    live("R3.1 R12 a key the server echoes URL-encoded, JSON-escaped or in base64 is scrubbed too (review 190)", () =>
      Effect.gen(function* () {
        // A password-style key (vLLM's --api-key, openssl rand -base64): symbols between the pieces.
        const key = "Tr0u+b4d/or&3!x=Yq#9"
        const echoes = [
          `invalid api_key=${encodeURIComponent(key)}`,
          `invalid api_key=${encodeURIComponent(key).replace(/%[0-9A-F]{2}/g, (code) => code.toLowerCase())}`,
          `invalid key ${JSON.stringify(JSON.stringify({ key }))}`,
          `invalid credentials ${Buffer.from(`user:${key}`).toString("base64")}`
        ]
        const { model } = yield* setup(
          echoes.map((message) => FakeOpenAiServer.status(401, { message })),
          { apiKey: Redacted.make(key) }
        )
        for (const echo of echoes) {
          const failure = failureOf(yield* Effect.exit(model.generate(yield* request())))
          const shown = `${failure.hint} ${failure.diagnostic ?? ""}`
          assert.include(shown, "<redacted>", echo)
          for (const piece of ["Tr0u", "b4d", "Yq", "VHIwd"]) assert.notInclude(shown, piece, echo)
        }
      })
    )
  })

  describe("configuration", () => {
    it("R11 presets fill the base URL and the model", () => {
      const openai = OpenAiCompatible.openai({ apiKey })
      assert.strictEqual(openai.baseUrl, "https://api.openai.com/v1")
      assert.strictEqual(openai.model, "gpt-4o-mini")
      const deepseek = OpenAiCompatible.deepseek({ apiKey, model: "deepseek-reasoner", stream: true })
      assert.deepInclude(deepseek, { baseUrl: "https://api.deepseek.com", model: "deepseek-reasoner", stream: true })
    })

    live("R11 layerConfig reads the key, base URL and model from the environment", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "configured" })])
        const env = { DEEPSEEK_API_KEY: KEY, DEEPSEEK_BASE_URL: server.url, DEEPSEEK_MODEL: "deepseek-chat" }
        const response = yield* Effect.gen(function* () {
          return yield* (yield* Model.Model).generate(yield* request())
        }).pipe(
          Effect.provide(OpenAiCompatible.layerConfig("deepseek")),
          Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
        )
        assert.strictEqual(response.text, "configured")
        const [recorded] = yield* server.requests
        assert.strictEqual(recorded?.headers.authorization, `Bearer ${KEY}`)
        assert.deepInclude(recorded?.body, { model: "deepseek-chat" })
      })
    )

    live("R11 layerConfig without a key fails naming the missing variable, and never prints a key", () =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(
          Layer.build(OpenAiCompatible.layerConfig(OpenAiCompatible.OpenAi)).pipe(
            Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} })))
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "OPENAI_API_KEY is not set")
      })
    )

    live("R11 any HttpClient works: over effect's FetchHttpClient a plain answer and an abort", () =>
      Effect.gen(function* () {
        const { server, model } = yield* setup([
          FakeOpenAiServer.reply({ text: "via fetch" }),
          FakeOpenAiServer.delay(2_000, FakeOpenAiServer.reply({}))
        ])
        const response = yield* model.generate(yield* request())
        assert.strictEqual(response.text, "via fetch")
        const failure = failureOf(
          yield* Effect.exit(
            OpenAiCompatible.make({
              baseUrl: server.url,
              model: "m",
              apiKey,
              timeouts: { connect: 50, firstByte: 50 }
            }).pipe(Effect.flatMap((m) => Effect.flatMap(request(), m.generate)))
          )
        )
        // Without connection reports, connect and first byte are one wait (here 100 ms), reported as first_byte,
        // with the whole of it as its length (it said 50 ms).
        assert.strictEqual(failure.code, "first_byte_timeout")
        assert.deepStrictEqual(failure.timeout, { layer: "first_byte", elapsedMillis: 100, mayHaveSideEffects: false })
        assert.isTrue((yield* server.whenClosed(1).pipe(Effect.timeout("3 seconds"))).closedEarly)
      }).pipe(Effect.provide(FetchHttpClient.layer))
    )

    it.live(
      "R4.1 R4.3 over fetch, undici's own connect, headers and body timeouts are the phase they cut, never a connection error (review 128)",
      () =>
        Effect.gen(function* () {
          // fetch's dispatcher as it is once undici is loaded (as `@effect/platform-node` loads
          // it): an undici Agent, in the wrapper Node's fetch takes, here with timeouts short
          // enough for a test (the global one's are 10 s, 300 s and 300 s).
          const dispatcher = yield* Effect.acquireRelease(
            Effect.sync(
              () =>
                new Undici.Dispatcher1Wrapper(
                  new Undici.Agent({ connect: { timeout: 100 }, headersTimeout: 200, bodyTimeout: 200 })
                )
            ),
            (agent) => Effect.promise(() => agent.destroy())
          )
          const { url: nowhere } = yield* FakeOpenAiServer.unreachable
          const server = yield* FakeOpenAiServer.make([
            FakeOpenAiServer.delay(10_000, FakeOpenAiServer.reply({ text: "late" })),
            FakeOpenAiServer.stall({ millis: 10_000, next: FakeOpenAiServer.reply({ text: "slow body" }) }),
            FakeOpenAiServer.stall({ afterChunks: 1, millis: 10_000, next: FakeOpenAiServer.reply({ text: "slow" }) })
          ])
          // Every phase of the client's own far longer: undici's fire first.
          const timeouts = { connect: "30 seconds", firstByte: "30 seconds", idleRead: "30 seconds" } as const
          const failed = (baseUrl: string, stream: boolean) =>
            OpenAiCompatible.make({ baseUrl, model: "m", apiKey, stream, timeouts }).pipe(
              Effect.flatMap((model) => Effect.flatMap(request({ deadlineIn: 20_000 }), model.generate)),
              Effect.exit,
              Effect.map(failureOf),
              // Node's types know an earlier undici's dispatcher: the wrapper is what bridges them.
              Effect.provideService(FetchHttpClient.RequestInit, { dispatcher } as unknown as RequestInit)
            )
          const cases = [
            [nowhere, false, "connect"],
            [server.url, false, "first_byte"],
            [server.url, false, "idle_read"],
            [server.url, true, "idle_read"]
          ] as const
          for (const [baseUrl, stream, layer] of cases) {
            const failure = yield* failed(baseUrl, stream)
            assert.deepStrictEqual(classOf(failure), ["Retryable", "timeout", `${layer}_timeout`], failure.diagnostic)
            assert.strictEqual(failure.timeout?.layer, layer)
            assert.isAbove(failure.timeout?.elapsedMillis ?? 0, 50)
            assert.isBelow(failure.timeout?.elapsedMillis ?? 0, 5_000)
            assert.include(failure.diagnostic, "the HTTP client's own")
          }
        }).pipe(Effect.provide(FetchHttpClient.layer)),
      30_000
    )
  })
})

const WireMessages = Schema.Struct({
  messages: Schema.Array(Schema.Struct({ role: Schema.String, tool_call_id: Schema.optional(Schema.String) }))
})
const Insight = Schema.Struct({ title: Schema.String, rows: Schema.Array(Schema.Number) })
const writeReport = (args: string, id: string): FakeOpenAiServer.Step =>
  FakeOpenAiServer.reply({
    toolCalls: [{ id, name: "write_json_file", arguments: args }],
    usage: { input: 100, output: 20 }
  })
const goodArgs = JSON.stringify({ path: "insight_report.json", content: { title: "Insights", rows: [1, 2, 3] } })

/** The seed task, driven by the real client against the fake server. */
const seedRun = (script: ReadonlyArray<FakeOpenAiServer.Step>, options: Partial<OpenAiCompatible.Options> = {}) =>
  Effect.gen(function* () {
    const server = yield* FakeOpenAiServer.make(script)
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.makeTempDirectoryScoped({ prefix: "provider-e2e-" })
    const tools = yield* FileTools.make({ root })
    const model = OpenAiCompatible.layer({ baseUrl: server.url, model: "fake-model", apiKey, ...options })
    const result = yield* Run.run({
      goal: "Write insight_report.json",
      tools: tools.all,
      time: { run: "20 seconds" },
      validation: {
        root,
        plan: [Validation.step("write-report", "write the report", [Criterion.toolSucceeded("write_json_file")])],
        artifacts: [Validation.artifact("insight_report.json", { schema: Insight })]
      }
    }).pipe(Effect.provide(Permission.layer({ roots: [root] })), Effect.provide(model))
    return { result, requests: yield* server.requests }
  }).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, transport)))

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Extract<Event.Event, { _tag: T }> => e._tag === tag)

describe("OpenAiCompatible in a full run", () => {
  live("R11 R6.1 a run with a real tool, driven over HTTP, writes the artifact and completes after validation", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* seedRun([
        writeReport(goodArgs, "w1"),
        FakeOpenAiServer.reply({ text: "The report is written." })
      ])
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.stopReason, "goal_reached")
      assert.strictEqual(result.finalAnswer, "The report is written.")
      assert.isTrue(result.checks.every((c) => c.passed))
      assert.strictEqual(result.counters.inputTokens, 110)
      assert.strictEqual(requests.length, 2)
      // The second request carries the tool result back under its call id.
      const { messages } = Schema.decodeUnknownSync(WireMessages)(requests[1]?.body)
      assert.isTrue(messages.some((m) => m.role === "tool" && m.tool_call_id === "w1"))
      assert.notInclude(JSON.stringify(result), KEY)
    })
  )

  live("R3.5 malformed argument JSON from the provider is a correctable invalid_arguments result, then corrected", () =>
    Effect.gen(function* () {
      const { result } = yield* seedRun(
        [
          writeReport('{"path": "insight_report.json", "content": {"title": "Ins', "bad"),
          writeReport(goodArgs, "good"),
          FakeOpenAiServer.reply({ text: "done" })
        ],
        { stream: true }
      )
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.callId, "bad")
      assert.strictEqual(failed?.error.code, "invalid_arguments")
      assert.isTrue(failed?.error.correctable)
      assert.strictEqual(result.status, "completed")
    })
  )

  live("R3.3 R11 a run recovers from a 429 and a stalled stream, each retried once, and completes", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* seedRun(
        [
          FakeOpenAiServer.status(429, { retryAfter: "0.05" }),
          writeReport(goodArgs, "w1"),
          FakeOpenAiServer.stall({ millis: 5_000, next: FakeOpenAiServer.reply({ text: "never" }) }),
          FakeOpenAiServer.reply({ text: "done after recovering" })
        ],
        { stream: true, timeouts: { idleRead: 150 } }
      )
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.finalAnswer, "done after recovering")
      assert.deepStrictEqual(
        ofTag(result.timeline, "recovery.started").map((e) => [e.kind, e.cause]),
        [
          ["provider_retry", "http_429"],
          ["provider_retry", "idle_read_timeout"]
        ]
      )
      assert.strictEqual(requests.length, 4)
    })
  )

  live("R3.4 a permanent 401 ends the run model_error after exactly one request", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* seedRun([FakeOpenAiServer.status(401, { message: "bad key" })])
      assert.strictEqual(result.stopReason, "model_error")
      assert.include(result.detail, "HTTP 401")
      assert.strictEqual(requests.length, 1)
      assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
    })
  )
})
