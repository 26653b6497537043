import { createServer as createHttpServer } from "node:http"
import { type AddressInfo, createServer } from "node:net"
import { gzipSync } from "node:zlib"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer } from "effect"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as ConnectionProgress from "../../../src/providers/ConnectionProgress.ts"
import * as NodeTransport from "../../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../../src/providers/OpenAiCompatible.ts"
import * as FakeOpenAiServer from "../../../src/testing/FakeOpenAiServer.ts"
import { apiKey, classOf, failureOf, request } from "../../support/provider.ts"

/** A progress that records what the transport reported, in order. */
const recorder = () => {
  const reports: Array<"started" | "queued" | "connected"> = []
  const progress: ConnectionProgress.Progress = {
    started: () => reports.push("started"),
    queued: () => reports.push("queued"),
    connected: () => reports.push("connected")
  }
  return { reports, progress }
}

const chat = (url: string) =>
  HttpClientRequest.post(`${url}/chat/completions`).pipe(
    HttpClientRequest.bodyJsonUnsafe({ model: "m", messages: [{ role: "user", content: "hi" }] })
  )

/** Sends one request reporting to `progress`, and reads the whole answer. */
const send = (request: HttpClientRequest.HttpClientRequest, progress: ConnectionProgress.Progress) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(request)
    return { status: response.status, text: yield* response.text }
  }).pipe(Effect.provideService(ConnectionProgress.CurrentProgress, progress))

describe("NodeTransport", () => {
  it.live("R4.1 reports the start and the connection of each request; a reused keep-alive socket at once", () =>
    Effect.gen(function* () {
      const texts = ["one", "two", "three"]
      const server = yield* FakeOpenAiServer.make(texts.map((text) => FakeOpenAiServer.reply({ text })))
      const connections: Array<number> = []
      for (const text of texts) {
        const { reports, progress } = recorder()
        const answer = yield* send(chat(server.url), progress)
        assert.strictEqual(answer.status, 200)
        assert.include(answer.text, text)
        assert.deepStrictEqual(reports, ["started", "connected"])
        connections.push(yield* server.connections)
      }
      // undici opens a second socket for the second request (it does so without this
      // transport too); the third reuses one, and is reported connected all the same.
      assert.strictEqual(connections[2], connections[1], "the last request reused a socket")
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live("R4.1 a connect that does not complete is started but never reported connected", () =>
    Effect.gen(function* () {
      const { url } = yield* FakeOpenAiServer.unreachable
      const { reports, progress } = recorder()
      const fiber = yield* Effect.forkChild(send(chat(url), progress))
      yield* Effect.sleep(200)
      assert.deepStrictEqual(reports, ["started"])
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live(
    "R5.1 a connection stuck in its TLS handshake is closed once the request that waited for it is interrupted",
    () =>
      Effect.gen(function* () {
        // Accepts TCP and reads the ClientHello, never answering it.
        const closed: Array<boolean> = []
        const server = createServer((socket) => {
          const at = closed.push(false) - 1
          socket.resume()
          socket.on("error", () => {})
          socket.on("close", () => {
            closed[at] = true
          })
        })
        yield* Effect.acquireRelease(
          Effect.callback<void>((resume) => {
            server.listen(0, "127.0.0.1", () => resume(Effect.void))
          }),
          () => Effect.sync(() => server.close())
        )
        const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
        const fiber = yield* Effect.forkChild(send(chat(url), recorder().progress))
        yield* Effect.sleep(200)
        yield* Fiber.interrupt(fiber)
        // undici's own connect timeout (2 minutes) is not what ends it: nobody waits for it any more.
        for (let i = 0; i < 100 && !(closed.length === 1 && closed[0]); i++) yield* Effect.sleep(20)
        assert.deepStrictEqual(closed, [true])
      }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live("R11 requests without progress hooks (another caller of the same client) are sent as they are", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "plain" })])
      const client = yield* HttpClient.HttpClient
      const response = yield* client.execute(chat(server.url))
      assert.strictEqual(response.status, 200)
      assert.include(yield* response.text, "plain")
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live(
    "R11 the body is asked for as it is: a server that would compress it for a client silent on codings does not",
    () =>
      Effect.gen(function* () {
        const seen: Array<string | undefined> = []
        // As RFC 9110 lets a server do: no accept-encoding, any coding; this one gzips then.
        const server = createHttpServer((request, response) => {
          const asked = request.headers["accept-encoding"]
          seen.push(asked)
          const body = JSON.stringify({ ok: true })
          if (asked === undefined || asked.includes("gzip")) {
            response.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" })
            response.end(gzipSync(body))
          } else {
            response.writeHead(200, { "content-type": "application/json" })
            response.end(body)
          }
        })
        yield* Effect.acquireRelease(
          Effect.callback<void>((resume) => {
            server.listen(0, "127.0.0.1", () => resume(Effect.void))
          }),
          () => Effect.sync(() => server.close())
        )
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
        const client = yield* HttpClient.HttpClient
        const plain = yield* client.execute(chat(url))
        assert.deepStrictEqual(yield* plain.json, { ok: true })
        // A caller that asks for a coding itself gets what it asked for, to decode itself.
        const asked = yield* client.execute(chat(url).pipe(HttpClientRequest.setHeader("accept-encoding", "gzip")))
        assert.strictEqual(asked.headers["content-encoding"], "gzip")
        assert.deepStrictEqual(seen, ["identity", "gzip"])
      }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer()))
  )

  it.live("R11 maxSockets bounds the connections per origin", () =>
    Effect.gen(function* () {
      const steps = Array.from({ length: 4 }, () => FakeOpenAiServer.delay(50, FakeOpenAiServer.reply({ text: "x" })))
      const server = yield* FakeOpenAiServer.make(steps)
      const answers = yield* Effect.forEach(steps, () => send(chat(server.url), recorder().progress), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(
        answers.map((a) => a.status),
        [200, 200, 200, 200]
      )
      assert.strictEqual(yield* server.connections, 1)
    }).pipe(Effect.provide(NodeTransport.layer({ maxSockets: 1 })))
  )

  it.live(
    "R4.1 with maxSockets, a request waiting for a free connection is reported queued, then started as it leaves the queue",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.delay(300, FakeOpenAiServer.reply({ text: "first" })),
          FakeOpenAiServer.reply({ text: "second" })
        ])
        const first = recorder()
        const second = recorder()
        const busy = yield* Effect.forkChild(send(chat(server.url), first.progress))
        yield* Effect.sleep(50)
        const answer = yield* send(chat(server.url), second.progress)
        assert.include(answer.text, "second")
        assert.include((yield* Fiber.join(busy)).text, "first")
        assert.deepStrictEqual(first.reports, ["started", "connected"])
        assert.deepStrictEqual(second.reports, ["started", "queued", "started", "connected"])
      }).pipe(Effect.provide(NodeTransport.layer({ maxSockets: 1 })))
  )

  it.live(
    "R4.1 R11 a request waiting for one of maxSockets' connections is bounded by its deadline, not by the connect timeout",
    () =>
      Effect.gen(function* () {
        // Review 117: queued behind a 1.5 s answer, the second failed connect_timeout, the server reachable.
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.delay(1_500, FakeOpenAiServer.reply({ text: "slow" })),
          FakeOpenAiServer.reply({ text: "queued" }),
          FakeOpenAiServer.delay(1_500, FakeOpenAiServer.reply({ text: "slow again" })),
          FakeOpenAiServer.reply({ text: "never sent" })
        ])
        const model = yield* OpenAiCompatible.make({
          baseUrl: server.url,
          model: "m",
          apiKey,
          timeouts: { connect: 300 }
        })
        const pair = (deadlineIn: number) =>
          Effect.all(
            [
              Effect.exit(Effect.flatMap(request({ deadlineIn: 10_000 }), model.generate)),
              Effect.exit(Effect.delay(Effect.flatMap(request({ deadlineIn }), model.generate), 50))
            ],
            { concurrency: 2 }
          )
        const [slow, queued] = yield* pair(10_000)
        assert.strictEqual(Exit.isSuccess(slow) ? slow.value.text : undefined, "slow")
        assert.strictEqual(Exit.isSuccess(queued) ? queued.value.text : undefined, "queued")
        // A deadline that passes while it waits ends it, naming the deadline's layer.
        const [, late] = yield* pair(700)
        assert.deepStrictEqual(classOf(failureOf(late)), ["Retryable", "timeout", "attempt_timeout"])
      }).pipe(Effect.provide(NodeTransport.layer({ maxSockets: 1 })))
  )

  it.effect("R11 a maxSockets that cannot work is a typed InvalidOptions naming the field", () =>
    Effect.gen(function* () {
      for (const maxSockets of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        const exit = yield* Effect.exit(Layer.build(NodeTransport.layer({ maxSockets })))
        assert.isTrue(Exit.isFailure(exit), String(maxSockets))
        const error = yield* Effect.flip(Layer.build(NodeTransport.layer({ maxSockets })))
        assert.instanceOf(error, NodeTransport.InvalidOptions)
        assert.include(error.message, "maxSockets")
      }
    }).pipe(Effect.scoped)
  )
})
