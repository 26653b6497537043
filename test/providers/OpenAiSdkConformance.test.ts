/**
 * The official `openai` SDK as a client of `FakeOpenAiServer`: whatever the fake sends,
 * the API's own client reads as the API's (R10, R11). If the fake drifted from the real
 * API, this file would be the first to say so.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI, { APIConnectionError, APIError, BadRequestError, InternalServerError, RateLimitError } from "openai"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"

const clientOf = (server: FakeOpenAiServer.FakeOpenAiServer, maxRetries = 0) =>
  new OpenAI({ apiKey: "sk-conformance", baseURL: server.url, maxRetries, timeout: 5_000 })

const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "hi" }]

const echoTool: OpenAI.Chat.ChatCompletionTool = {
  type: "function",
  function: {
    name: "echo",
    description: "Echo the text",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] }
  }
}

/** The SDK call's outcome: its value, or the error it threw. */
const attempt = <A>(f: () => Promise<A>) =>
  Effect.promise(() =>
    f().then(
      (value) => ({ value, error: undefined }),
      (error: unknown) => ({ value: undefined, error })
    )
  )

const longArguments = JSON.stringify({ text: "an argument long enough to be cut into many pieces of a stream" })

describe("FakeOpenAiServer, read by the official openai SDK (R10, R11)", () => {
  it.live("R11 a plain text answer, with its usage and finish reason", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reply({ text: "hello there", usage: { input: 12, output: 3, cached: 4 } })
      ])
      const { value } = yield* attempt(() => clientOf(server).chat.completions.create({ model: "m", messages }))
      assert.strictEqual(value?.object, "chat.completion")
      assert.strictEqual(value?.choices[0]?.message.content, "hello there")
      assert.strictEqual(value?.choices[0]?.finish_reason, "stop")
      assert.strictEqual(value?.usage?.total_tokens, 15)
      assert.strictEqual(value?.usage?.prompt_tokens_details?.cached_tokens, 4)
    })
  )

  it.live("R11 a streamed text answer, with the usage chunk when include_usage asks for it", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reply({ text: "a streamed answer in many pieces", usage: { input: 9, output: 7 } }),
        FakeOpenAiServer.reply({ text: "no usage this time" })
      ])
      const client = clientOf(server)
      const { value } = yield* attempt(async () => {
        const stream = await client.chat.completions.create({
          model: "m",
          messages,
          stream: true,
          stream_options: { include_usage: true }
        })
        const chunks: Array<OpenAI.Chat.ChatCompletionChunk> = []
        for await (const chunk of stream) chunks.push(chunk)
        return chunks
      })
      const text = (value ?? []).map((c) => c.choices[0]?.delta.content ?? "").join("")
      assert.strictEqual(text, "a streamed answer in many pieces")
      assert.deepInclude(value?.[value.length - 1]?.usage, { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 })
      const ids = new Set((value ?? []).map((c) => c.id))
      assert.strictEqual(ids.size, 1)
      // Without include_usage, no chunk carries a usage.
      const plain = yield* attempt(async () => {
        const stream = await client.chat.completions.create({ model: "m", messages, stream: true })
        const chunks: Array<OpenAI.Chat.ChatCompletionChunk> = []
        for await (const chunk of stream) chunks.push(chunk)
        return chunks
      })
      assert.isTrue((plain.value ?? []).every((c) => c.usage === undefined || c.usage === null))
      assert.notInclude([...ids], plain.value?.[0]?.id)
    })
  )

  it.live("R11 tool calls, plain, in the SDK's own types", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reply({
          toolCalls: [
            { name: "echo", arguments: '{"text":"a"}' },
            { name: "echo", arguments: '{"text":"b"}' }
          ]
        })
      ])
      const { value } = yield* attempt(() =>
        clientOf(server).chat.completions.create({ model: "m", messages, tools: [echoTool] })
      )
      const message = value?.choices[0]?.message
      assert.strictEqual(value?.choices[0]?.finish_reason, "tool_calls")
      assert.isNull(message?.content)
      assert.deepStrictEqual(
        message?.tool_calls?.map((c) => (c.type === "function" ? [c.id, c.function.name, c.function.arguments] : [])),
        [
          ["call_0", "echo", '{"text":"a"}'],
          ["call_1", "echo", '{"text":"b"}']
        ]
      )
    })
  )

  it.live("R11 streamed tool calls: the SDK reassembles each call's arguments from the deltas", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reply({
          text: "calling two tools",
          toolCalls: [
            { name: "echo", arguments: longArguments },
            { id: "own_id", name: "echo", arguments: '{"text":"second"}' }
          ],
          usage: { input: 30, output: 20, reasoning: 5 }
        })
      ])
      const { value } = yield* attempt(async () => {
        const stream = clientOf(server).chat.completions.stream({
          model: "m",
          messages,
          tools: [echoTool],
          stream_options: { include_usage: true }
        })
        return stream.finalChatCompletion()
      })
      const message = value?.choices[0]?.message
      assert.strictEqual(message?.content, "calling two tools")
      assert.deepStrictEqual(
        message?.tool_calls?.map((c) => (c.type === "function" ? [c.id, c.function.arguments] : [])),
        [
          ["call_0", longArguments],
          ["own_id", '{"text":"second"}']
        ]
      )
      assert.strictEqual(value?.choices[0]?.finish_reason, "tool_calls")
      assert.strictEqual(value?.usage?.completion_tokens_details?.reasoning_tokens, 5)
    })
  )

  it.live("R3.2 a 429 with Retry-After: the SDK waits as told, then gets the answer", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.status(429, { retryAfter: "0.3", message: "Rate limit reached" }),
        FakeOpenAiServer.reply({ text: "after the wait" })
      ])
      const { value } = yield* attempt(() => clientOf(server, 1).chat.completions.create({ model: "m", messages }))
      assert.strictEqual(value?.choices[0]?.message.content, "after the wait")
      const [first, second] = yield* server.requests
      assert.isAtLeast((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0), 290)
      // Without retries the SDK shows the API's error: its class, status, type and code.
      const once = yield* FakeOpenAiServer.make([FakeOpenAiServer.status(429, { retryAfter: "2", message: "slow" })])
      const { error } = yield* attempt(() => clientOf(once).chat.completions.create({ model: "m", messages }))
      assert.instanceOf(error, RateLimitError)
      const rate = error as RateLimitError
      assert.strictEqual(rate.status, 429)
      assert.strictEqual(rate.code, "rate_limit_exceeded")
      assert.strictEqual(rate.headers?.get("retry-after"), "2")
    })
  )

  it.live("R3.2 a 500 is the SDK's InternalServerError, a 400 its BadRequestError with the param", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.status(500, { message: "The server had an error" })
      ])
      const { error } = yield* attempt(() => clientOf(server).chat.completions.create({ model: "m", messages }))
      assert.instanceOf(error, InternalServerError)
      assert.strictEqual((error as APIError).type, "server_error")
      // A request the API refuses: the fake refuses it the same way.
      const strictServer = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "never" })])
      const refused = yield* attempt(() =>
        clientOf(strictServer).chat.completions.create({
          model: "m",
          messages: [...messages, { role: "tool", tool_call_id: "nobody", content: "x" }]
        })
      )
      assert.instanceOf(refused.error, BadRequestError)
      assert.strictEqual((refused.error as APIError).param, "messages.[1].role")
      assert.include((refused.error as APIError).message, "must be a response to a preceeding message")
    })
  )

  it.live("R3.2 a connection reset is the SDK's APIConnectionError, before the headers and mid-stream", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reset(),
        FakeOpenAiServer.reset({ afterChunks: 2 })
      ])
      const client = clientOf(server)
      const before = yield* attempt(() => client.chat.completions.create({ model: "m", messages }))
      assert.instanceOf(before.error, APIConnectionError)
      const mid = yield* attempt(async () => {
        const stream = await client.chat.completions.create({ model: "m", messages, stream: true })
        for await (const _ of stream) {
          // read to the cut
        }
      })
      assert.isDefined(mid.error)
    })
  )

  it.live("R3.2 an error event inside a 200 stream is the SDK's APIError with the provider's message", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.streamError({ message: "The server is overloaded", type: "server_error", code: null })
      ])
      const { error } = yield* attempt(async () => {
        const stream = await clientOf(server).chat.completions.create({ model: "m", messages, stream: true })
        for await (const _ of stream) {
          // read to the error
        }
      })
      assert.instanceOf(error, APIError)
      assert.include((error as APIError).message, "The server is overloaded")
      assert.strictEqual((error as APIError).type, "server_error")
    })
  )

  it.live("R11 a cut-off answer and DeepSeek's reasoning_content reach the SDK as the APIs send them", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make(
        [FakeOpenAiServer.reply({ text: "The answer is", finishReason: "length", reasoning: "let me see" })],
        { api: "deepseek" }
      )
      const { value } = yield* attempt(() =>
        clientOf(server).chat.completions.create({ model: "deepseek-v4-flash", messages, max_tokens: 5 })
      )
      assert.strictEqual(value?.choices[0]?.finish_reason, "length")
      const message = value?.choices[0]?.message as { readonly reasoning_content?: string } | undefined
      assert.strictEqual(message?.reasoning_content, "let me see")
      assert.include(value?.usage as object, { prompt_cache_hit_tokens: 0, prompt_cache_miss_tokens: 10 })
    })
  )
})
