import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

/** A bare `fetch` to the server, outside any client under test. */
const post = (url: string, body: unknown, init: { signal?: AbortSignal } = {}) =>
  Effect.tryPromise(() =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer sk-fake" },
      body: JSON.stringify(body),
      ...init
    }).then((r) => r.text().then((text): Answer => ({ status: r.status, headers: r.headers, text })))
  )

const chat = (server: FakeOpenAiServer.FakeOpenAiServer, stream = false) =>
  post(`${server.url}/chat/completions`, {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    ...(stream ? { stream: true } : {})
  })

/** Can a TCP connection to the port be made within `millis`? */
const connects = (port: number, millis: number) =>
  Effect.callback<boolean>((resume) => {
    const socket = Net.connect({ host: "127.0.0.1", port })
    const done = (ok: boolean) => {
      clearTimeout(timer)
      socket.destroy()
      resume(Effect.succeed(ok))
    }
    const timer = setTimeout(() => done(false), millis)
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
    return Effect.sync(() => done(false))
  })

describe("FakeOpenAiServer", () => {
  describe("answers", () => {
    it.live("R11 answers a plain completion with text, tool calls and usage, and records the request", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.reply({
            text: "hello",
            toolCalls: [{ id: "c1", name: "echo", arguments: '{"text": "hi"' }],
            usage: { input: 7, output: 3 }
          })
        ])
        assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/)
        const answer = yield* chat(server)
        assert.strictEqual(answer.status, 200)
        const json = JSON.parse(answer.text)
        assert.deepStrictEqual(json.choices[0].message, {
          role: "assistant",
          content: "hello",
          tool_calls: [{ id: "c1", type: "function", function: { name: "echo", arguments: '{"text": "hi"' } }]
        })
        assert.deepStrictEqual(json.usage, { prompt_tokens: 7, completion_tokens: 3 })
        const [recorded] = yield* server.requests
        assert.strictEqual(recorded?.method, "POST")
        assert.strictEqual(recorded?.path, "/v1/chat/completions")
        assert.strictEqual(recorded?.headers.authorization, "Bearer sk-fake")
        assert.deepStrictEqual(recorded?.body, { model: "m", messages: [{ role: "user", content: "hi" }] })
        assert.isFalse(recorded?.stream)
        assert.isFalse((yield* server.whenClosed(0)).closedEarly)
      })
    )

    it.live("R11 streams server-sent events ending with [DONE] when the request asks for a stream", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.reply({ text: "a longer streamed answer", toolCalls: [{ name: "echo", arguments: "{}" }] })
        ])
        const answer = yield* chat(server, true)
        assert.include(answer.headers.get("content-type") ?? "", "text/event-stream")
        const data = answer.text
          .split("\n\n")
          .filter((e) => e !== "")
          .map((e) => e.replace(/^data: /, ""))
        assert.strictEqual(data[data.length - 1], "[DONE]")
        const chunks = data.slice(0, -1).map((d) => JSON.parse(d))
        const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")
        assert.strictEqual(text, "a longer streamed answer")
        assert.deepStrictEqual(chunks[chunks.length - 1].usage, { prompt_tokens: 10, completion_tokens: 5 })
        assert.isTrue((yield* server.requests)[0]?.stream)
      })
    )

    it.live("R10 answers an error status with Retry-After and an OpenAI-style error body", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.status(429, { retryAfter: "1", message: "slow down" })
        ])
        const answer = yield* chat(server)
        assert.strictEqual(answer.status, 429)
        assert.strictEqual(answer.headers.get("retry-after"), "1")
        assert.deepStrictEqual(JSON.parse(answer.text), { error: { message: "slow down", type: "fake_server_error" } })
      })
    )

    it.live("R10 answers 500 with a clear message once the script runs out, and 404 off the route", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "one" })])
        yield* chat(server)
        const exhausted = yield* chat(server)
        assert.strictEqual(exhausted.status, 500)
        assert.include(exhausted.text, "the script has 1 steps and got request 2")
        const lost = yield* post(`${server.url}/completions`, {})
        assert.strictEqual(lost.status, 404)
        assert.strictEqual((yield* server.requests).length, 3)
      })
    )

    for (const stream of [false, true]) {
      it.live(
        `R3.8 numbers tool-call ids across the whole script and keeps the script's own (${stream ? "streamed" : "plain"})`,
        () =>
          Effect.gen(function* () {
            const call = (id?: string) => ({ ...(id === undefined ? {} : { id }), name: "echo", arguments: "{}" })
            const server = yield* FakeOpenAiServer.make([
              FakeOpenAiServer.reply({ toolCalls: [call(), call()] }),
              FakeOpenAiServer.reply({ toolCalls: [call("reused"), call()] }),
              FakeOpenAiServer.reply({ toolCalls: [call(), call("reused")] })
            ])
            const ids: Array<string> = []
            for (let turn = 0; turn < 3; turn++) {
              const answer = yield* chat(server, stream)
              if (!stream) {
                for (const c of JSON.parse(answer.text).choices[0].message.tool_calls) ids.push(c.id)
                continue
              }
              for (const event of answer.text.split("\n\n")) {
                const data = event.replace(/^data: /, "")
                if (data === "" || data === "[DONE]") continue
                for (const c of JSON.parse(data).choices[0]?.delta.tool_calls ?? [])
                  if (c.id !== undefined) ids.push(c.id)
              }
            }
            assert.deepStrictEqual(ids, ["call_0", "call_1", "reused", "call_2", "call_3", "reused"])
          })
      )
    }

    it.live("R10 plays a script function for every request", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make((i) => FakeOpenAiServer.reply({ text: `answer ${i}` }))
        for (let i = 0; i < 3; i++) {
          const answer = yield* chat(server)
          assert.strictEqual(JSON.parse(answer.text).choices[0].message.content, `answer ${i}`)
        }
      })
    )
  })

  describe("faults", () => {
    it.live("R10 a delay holds the headers back", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.delay(150, FakeOpenAiServer.reply({ text: "late" }))
        ])
        const started = Date.now()
        const answer = yield* chat(server)
        assert.isAtLeast(Date.now() - started, 140)
        assert.strictEqual(JSON.parse(answer.text).choices[0].message.content, "late")
      })
    )

    it.live("R10 a stall sends the first events, waits, then the rest", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.stall({ afterChunks: 2, millis: 150, next: FakeOpenAiServer.reply({ text: "stalled" }) })
        ])
        const started = Date.now()
        const answer = yield* chat(server, true)
        assert.isAtLeast(Date.now() - started, 140)
        assert.isTrue(answer.text.endsWith("data: [DONE]\n\n"))
      })
    )

    it.live("R10 a reset, corrupt JSON and a truncated stream break the answer as scripted", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.reset(),
          FakeOpenAiServer.corrupt,
          FakeOpenAiServer.truncated,
          FakeOpenAiServer.reset({ afterChunks: 1 })
        ])
        assert.isTrue(Exit.isFailure(yield* Effect.exit(chat(server))))
        const corrupt = yield* chat(server)
        assert.throws(() => JSON.parse(corrupt.text))
        const truncated = yield* chat(server, true)
        assert.notInclude(truncated.text, "[DONE]")
        assert.isTrue(Exit.isFailure(yield* Effect.exit(chat(server, true))))
        const records = yield* server.requests
        assert.strictEqual(records.length, 4)
        // A reset by the server is not the client closing early.
        assert.isFalse((yield* server.whenClosed(0)).closedEarly)
      })
    )

    it.live("R10 a raw step sends its status, headers and body as given", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.raw({ status: 418, headers: { "x-teapot": "yes" }, body: "not json at all" })
        ])
        const answer = yield* chat(server)
        assert.strictEqual(answer.status, 418)
        assert.strictEqual(answer.headers.get("x-teapot"), "yes")
        assert.strictEqual(answer.text, "not json at all")
        assert.strictEqual((yield* server.whenClosed(0)).bytesSent, "not json at all".length)
      })
    )

    it.live("R10 an endless body goes on as fast as it is read, until the client closes", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.endless({ prefix: "[", chunk: "1," })])
        const read = yield* Effect.tryPromise(async () => {
          const response = await fetch(`${server.url}/chat/completions`, { method: "POST", body: "{}" })
          const reader = response.body?.getReader()
          let bytes = 0
          while (reader !== undefined && bytes < 1_000_000) bytes += (await reader.read()).value?.length ?? 0
          await reader?.cancel()
          return bytes
        })
        const record = yield* server.whenClosed(0).pipe(Effect.timeout("2 seconds"))
        assert.isTrue(record.closedEarly)
        assert.isAtLeast(record.bytesSent, read)
      })
    )

    it.live("R5.1 records that the client closed the connection before the answer was complete", () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.delay(5_000, FakeOpenAiServer.reply({}))])
        const controller = new AbortController()
        setTimeout(() => controller.abort(), 50)
        const exit = yield* Effect.exit(
          post(`${server.url}/chat/completions`, { messages: [] }, { signal: controller.signal })
        )
        assert.isTrue(Exit.isFailure(exit))
        const record = yield* server.whenClosed(0).pipe(Effect.timeout("2 seconds"))
        assert.isTrue(record.closedEarly)
      })
    )
  })

  describe("lifecycle", () => {
    it.live("R10 the server stops listening when its scope closes", () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.delay(5_000, FakeOpenAiServer.reply({}))]).pipe(
          Scope.provide(scope)
        )
        assert.isTrue(yield* connects(server.port, 500))
        // A request still waiting on a delay does not hold the close up.
        yield* Effect.forkChild(Effect.exit(chat(server)))
        yield* Effect.sleep(30)
        yield* Scope.close(scope, Exit.void).pipe(Effect.timeout("2 seconds"))
        assert.isFalse(yield* connects(server.port, 500))
      })
    )

    it.live("R4.1 unreachable gives an address on 127.0.0.1 whose connects hang", () =>
      Effect.gen(function* () {
        const { url } = yield* FakeOpenAiServer.unreachable
        const port = Number(new URL(url).port)
        assert.isFalse(yield* connects(port, 200))
      })
    )
  })
})
