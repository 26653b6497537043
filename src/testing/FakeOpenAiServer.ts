/**
 * A real chat-completions server on 127.0.0.1 that plays a script, for testing
 * provider clients over a real socket (R10, R11): each request gets the next step, a
 * response (text and/or tool calls, with usage) or a fault on cue: an HTTP status with
 * `Retry-After`, a delay before the headers, a stall mid-stream, a connection reset,
 * corrupt JSON, a truncated body. It answers plain and streaming (`stream: true`,
 * server-sent events) requests alike, and records every request it gets, including
 * whether the client closed the connection before the answer was complete.
 *
 * The server is scoped: it listens on a random port when acquired and is closed, with
 * its connections and timers, when the scope closes. When the script runs out it
 * answers 500 with a message saying so.
 *
 * @since 0.1.0
 */

import * as Http from "node:http"
import * as Net from "node:net"
import { Worker } from "node:worker_threads"
import { Deferred, Effect, Exit, Result, Schema, type Scope } from "effect"
import type * as Model from "../Model.ts"
import * as OpenAiWire from "../providers/OpenAiWire.ts"

/**
 * A tool call the server returns. `arguments` is sent as is, so it may be malformed.
 *
 * @category models
 * @since 0.1.0
 */
export interface ToolCall {
  readonly id?: string | undefined
  readonly name: string
  readonly arguments: string
}

/**
 * One scripted answer.
 *
 * @category models
 * @since 0.1.0
 */
export type Step =
  | {
      readonly _tag: "Reply"
      readonly text: string
      readonly toolCalls: ReadonlyArray<ToolCall>
      readonly usage: { readonly input: number; readonly output: number }
    }
  | {
      readonly _tag: "Status"
      readonly status: number
      readonly retryAfter?: string | undefined
      readonly message: string
    }
  | { readonly _tag: "Delay"; readonly millis: number; readonly next: Step }
  | { readonly _tag: "Stall"; readonly afterChunks: number; readonly millis: number; readonly next: Step }
  | { readonly _tag: "Reset"; readonly afterChunks: number | undefined }
  | { readonly _tag: "Corrupt" }
  | { readonly _tag: "Truncated" }

/**
 * A response: text and/or tool calls, with token usage.
 *
 * @category constructors
 * @since 0.1.0
 */
export const reply = (options: {
  readonly text?: string | undefined
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  readonly usage?: { readonly input: number; readonly output: number } | undefined
}): Step => ({
  _tag: "Reply",
  text: options.text ?? "",
  toolCalls: options.toolCalls ?? [],
  usage: options.usage ?? { input: 10, output: 5 }
})

/**
 * An error status (429, 500, 502, 503, 400, 401, 404, …) with an OpenAI-style error body.
 *
 * @category constructors
 * @since 0.1.0
 */
export const status = (
  code: number,
  options: { readonly retryAfter?: string | undefined; readonly message?: string | undefined } = {}
): Step => ({
  _tag: "Status",
  status: code,
  retryAfter: options.retryAfter,
  message: options.message ?? `status ${code}`
})

/**
 * Waits before sending any header, then plays `next`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const delay = (millis: number, next: Step): Step => ({ _tag: "Delay", millis, next })

/**
 * Sends the headers and `afterChunks` events of `next` (for a plain answer: half its
 * body), waits `millis`, then sends the rest.
 *
 * @category constructors
 * @since 0.1.0
 */
export const stall = (options: {
  readonly afterChunks?: number
  readonly millis: number
  readonly next: Step
}): Step => ({
  _tag: "Stall",
  afterChunks: options.afterChunks ?? 1,
  millis: options.millis,
  next: options.next
})

/**
 * Destroys the connection: before any header, or after `afterChunks` events of a
 * streamed answer (half the body of a plain one).
 *
 * @category constructors
 * @since 0.1.0
 */
export const reset = (options: { readonly afterChunks?: number | undefined } = {}): Step => ({
  _tag: "Reset",
  afterChunks: options.afterChunks
})

/**
 * A 200 answer whose JSON does not parse (for a stream: one event).
 *
 * @category constructors
 * @since 0.1.0
 */
export const corrupt: Step = { _tag: "Corrupt" }

/**
 * A 200 answer that ends early but cleanly: half the JSON, or a stream without `[DONE]`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const truncated: Step = { _tag: "Truncated" }

/**
 * What the server got.
 *
 * @category models
 * @since 0.1.0
 */
export interface RecordedRequest {
  readonly index: number
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** The body as parsed JSON, or as text if it is not JSON. */
  readonly body: unknown
  readonly rawBody: string
  readonly stream: boolean
  /** The client closed the connection before the answer was complete. Set once closed. */
  closedEarly: boolean
}

/**
 * @category models
 * @since 0.1.0
 */
export interface FakeOpenAiServer {
  /** The base URL to give a client, `http://127.0.0.1:<port>/v1`. */
  readonly url: string
  readonly port: number
  /** The requests so far, in order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Waits until the answer to request `index` (from 0) is closed, and returns its record. */
  readonly whenClosed: (index: number) => Effect.Effect<RecordedRequest>
  /** TCP connections accepted so far (keep-alive reuses them). */
  readonly connections: Effect.Effect<number>
}

/**
 * The script: steps played one per request, or a function of the request's index.
 *
 * @category models
 * @since 0.1.0
 */
export type Script = ReadonlyArray<Step> | ((index: number) => Step)

const MODEL = "fake-model"

const parseJson = Schema.decodeUnknownResult(Schema.fromJsonString(Schema.Unknown))

const asResponse = (step: Extract<Step, { _tag: "Reply" }>): Model.Response => ({
  text: step.text,
  toolCalls: step.toolCalls.map((call, i) => ({
    id: call.id ?? `call_${i}`,
    name: call.name,
    arguments: call.arguments
  })),
  usage: { inputTokens: step.usage.input, outputTokens: step.usage.output }
})

const errorBody = (message: string) => JSON.stringify({ error: { message, type: "fake_server_error" } })

/** Plays one step on one response. `later` schedules on the server's timers. */
const play = (
  step: Step,
  streamed: boolean,
  res: Http.ServerResponse,
  later: (ms: number, f: () => void) => void,
  destroy: () => void
): void => {
  if (res.destroyed) return
  const headers = (code: number, extra: Record<string, string> = {}) =>
    res.writeHead(code, { "content-type": streamed ? "text/event-stream" : "application/json", ...extra })
  /** The body of a 200 answer as parts: events for a stream, two halves of the JSON otherwise. */
  const parts = (reply: Extract<Step, { _tag: "Reply" }>): Array<string> => {
    if (streamed) return OpenAiWire.chunkData(asResponse(reply), MODEL).map((data) => `data: ${data}\n\n`)
    const json = JSON.stringify(OpenAiWire.completionBody(asResponse(reply), MODEL))
    return [json.slice(0, json.length >> 1), json.slice(json.length >> 1)]
  }
  const cut = (afterChunks: number) => (streamed ? afterChunks : 1)
  switch (step._tag) {
    case "Reply":
      headers(200)
      res.end(parts(step).join(""))
      return
    case "Status":
      res.writeHead(step.status, {
        "content-type": "application/json",
        ...(step.retryAfter === undefined ? {} : { "retry-after": step.retryAfter })
      })
      res.end(errorBody(step.message))
      return
    case "Delay":
      later(step.millis, () => play(step.next, streamed, res, later, destroy))
      return
    case "Stall": {
      if (step.next._tag !== "Reply") {
        play(step.next, streamed, res, later, destroy)
        return
      }
      const all = parts(step.next)
      headers(200)
      res.write(all.slice(0, cut(step.afterChunks)).join(""))
      later(step.millis, () => {
        if (!res.destroyed) res.end(all.slice(cut(step.afterChunks)).join(""))
      })
      return
    }
    case "Reset": {
      if (step.afterChunks === undefined) {
        destroy()
        return
      }
      const all = parts({
        _tag: "Reply",
        text: "this answer is cut by a reset",
        toolCalls: [],
        usage: { input: 1, output: 1 }
      })
      headers(200)
      res.write(all.slice(0, cut(step.afterChunks)).join(""))
      // Let the written bytes leave before the reset.
      later(20, destroy)
      return
    }
    case "Corrupt":
      headers(200)
      res.end(
        streamed ? `data: {"choices": [{"delta": {"content": "hel\n\ndata: [DONE]\n\n` : `{"choices": [{"message": `
      )
      return
    case "Truncated": {
      const all = parts({
        _tag: "Reply",
        text: "an answer that stops short",
        toolCalls: [],
        usage: { input: 1, output: 1 }
      })
      headers(200)
      res.end((streamed ? all.slice(0, -1) : all.slice(0, 1)).join(""))
      return
    }
  }
}

/**
 * Starts the server on 127.0.0.1 with a random port; it closes with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (script: Script): Effect.Effect<FakeOpenAiServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ server: Http.Server; handle: FakeOpenAiServer; timers: Set<NodeJS.Timeout> }>((resume) => {
      const recorded: Array<RecordedRequest> = []
      const closed = new Map<number, Deferred.Deferred<RecordedRequest>>()
      const closedOf = (index: number) => {
        let d = closed.get(index)
        if (d === undefined) {
          d = Deferred.makeUnsafe<RecordedRequest>()
          closed.set(index, d)
        }
        return d
      }
      const timers = new Set<NodeJS.Timeout>()
      const later = (ms: number, f: () => void) => {
        const timer = setTimeout(() => {
          timers.delete(timer)
          f()
        }, ms)
        timers.add(timer)
      }
      let connections = 0
      const server = Http.createServer({ keepAlive: true }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const rawBody = Buffer.concat(chunks).toString("utf8")
          const parsed = parseJson(rawBody)
          const body: unknown = Result.isSuccess(parsed) ? parsed.success : rawBody
          const index = recorded.length
          const record: RecordedRequest = {
            index,
            method: req.method ?? "",
            path: req.url ?? "",
            headers: { ...req.headers },
            body,
            rawBody,
            stream: typeof body === "object" && body !== null && "stream" in body && body.stream === true,
            closedEarly: false
          }
          recorded.push(record)
          let destroyedByServer = false
          res.on("close", () => {
            record.closedEarly = !res.writableFinished && !destroyedByServer
            Deferred.doneUnsafe(closedOf(index), Exit.succeed(record))
          })
          const destroy = () => {
            destroyedByServer = true
            req.socket.destroy()
          }
          const step: Step =
            typeof script === "function"
              ? script(index)
              : (script[index] ??
                status(500, {
                  message: `FakeOpenAiServer: the script has ${script.length} steps and got request ${index + 1}`
                }))
          if (req.method !== "POST" || !(req.url ?? "").endsWith("/chat/completions")) {
            play(status(404, { message: `no route ${req.method} ${req.url}` }), false, res, later, destroy)
            return
          }
          play(step, record.stream, res, later, destroy)
        })
      })
      server.on("connection", () => {
        connections++
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(
          Effect.succeed({
            server,
            timers,
            handle: {
              url: `http://127.0.0.1:${port}/v1`,
              port,
              requests: Effect.sync(() => [...recorded]),
              whenClosed: (index) => Deferred.await(closedOf(index)),
              connections: Effect.sync(() => connections)
            }
          })
        )
      })
    }),
    ({ server, timers }) =>
      Effect.callback<void>((resume) => {
        for (const timer of timers) clearTimeout(timer)
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ handle }) => handle))

/**
 * An address on 127.0.0.1 where TCP connects hang (a listener that never accepts and
 * whose backlog is full), to test connect timeouts without leaving the machine.
 *
 * @category constructors
 * @since 0.1.0
 */
export const unreachable: Effect.Effect<{ readonly url: string }, never, Scope.Scope> = Effect.acquireRelease(
  Effect.callback<{ url: string; worker: Worker; gate: Int32Array; fillers: Array<Net.Socket> }>((resume) => {
    const gate = new Int32Array(new SharedArrayBuffer(4))
    // The listener lives on a worker thread that then blocks, so nothing ever accepts.
    const worker = new Worker(
      `const net = require("node:net"); const { parentPort, workerData } = require("node:worker_threads")
       const server = net.createServer(); server.listen({ host: "127.0.0.1", port: 0, backlog: 1 }, () => {
         parentPort.postMessage(server.address().port); Atomics.wait(workerData, 0, 0); server.close() })`,
      { eval: true, workerData: gate }
    )
    const fillers: Array<Net.Socket> = []
    worker.once("message", (port: number) => {
      let settled = false
      const done = () => {
        if (settled) return
        settled = true
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, worker, gate, fillers }))
      }
      // Fill the accept queue until a connect no longer completes (bounded).
      const fill = (tries: number) => {
        const socket = Net.connect({ host: "127.0.0.1", port })
        socket.on("error", () => {})
        fillers.push(socket)
        const timer = setTimeout(done, 50)
        socket.once("connect", () => {
          clearTimeout(timer)
          if (settled) return
          if (tries > 0) fill(tries - 1)
          else done()
        })
      }
      fill(8)
    })
  }),
  ({ worker, gate, fillers }) =>
    Effect.promise(() => {
      for (const socket of fillers) socket.destroy()
      Atomics.store(gate, 0, 1)
      Atomics.notify(gate, 0)
      return worker.terminate()
    }).pipe(Effect.asVoid)
).pipe(Effect.map(({ url }) => ({ url })))
