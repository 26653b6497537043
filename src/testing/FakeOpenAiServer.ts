/**
 * A real chat-completions server on 127.0.0.1 that plays a script, for testing
 * provider clients over a real socket (R10, R11): each request gets the next step, a
 * response (text and/or tool calls, with usage) or a fault on cue: an HTTP status with
 * `Retry-After`, a delay before the headers, a stall mid-stream, a connection reset,
 * corrupt JSON, a truncated body, a body given byte for byte, a body that never ends.
 * It answers plain and streaming (`stream: true`, server-sent events) requests alike,
 * and records every request it gets, including whether the client closed the
 * connection before the answer was complete and how many body bytes it sent.
 *
 * Tool calls without an id get `call_0`, `call_1`, ... numbered across the whole
 * script, as real providers give ids unique in a conversation; an id the script gives
 * is sent as is (so a test can reuse one on purpose).
 *
 * The server is scoped: it listens on a random port when acquired and is closed, with
 * its connections and timers, when the scope closes. When the script runs out it
 * answers 500 with a message saying so.
 *
 * @since 0.1.0
 */

import * as Http from "node:http"
import { Deferred, Effect, Exit, Result, Schema, type Scope } from "effect"
import type * as Model from "../model/Model.ts"
import * as OpenAiWire from "../providers/OpenAiWire.ts"
import { type Step, status } from "./internal/FakeOpenAiSteps.ts"

/**
 * The steps and their constructors live in `internal/FakeOpenAiSteps.ts`; they are
 * re-exported here.
 *
 * @since 0.1.0
 */
export {
  corrupt,
  delay,
  endless,
  raw,
  reply,
  reset,
  type Step,
  stall,
  status,
  type ToolCall,
  truncated
} from "./internal/FakeOpenAiSteps.ts"

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
  /** Body bytes handed to the socket so far. */
  bytesSent: number
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

type Reply = Extract<Step, { _tag: "Reply" }>

const asResponse = (step: Reply, nextId: () => string): Model.Response => ({
  text: step.text,
  toolCalls: step.toolCalls.map((call) => ({
    id: call.id ?? nextId(),
    name: call.name,
    arguments: call.arguments
  })),
  usage: { inputTokens: step.usage.input, outputTokens: step.usage.output }
})

const errorBody = (message: string) => JSON.stringify({ error: { message, type: "fake_server_error" } })

/** What playing a step needs: the response, the server's timers and id counter, the record. */
interface Playback {
  readonly res: Http.ServerResponse
  readonly streamed: boolean
  /** Schedules on the server's timers, cleared when it closes. */
  readonly later: (ms: number, f: () => void) => void
  /** Destroys the connection from the server's side. */
  readonly destroy: () => void
  readonly nextId: () => string
  readonly record: RecordedRequest
}

/** Plays one step on one response. */
const play = (step: Step, playback: Playback): void => {
  const { res, streamed, later, destroy, record } = playback
  if (res.destroyed) return
  const write = (text: string): boolean => {
    record.bytesSent += Buffer.byteLength(text)
    return res.write(text)
  }
  const end = (text: string) => {
    write(text)
    res.end()
  }
  const contentType = { "content-type": streamed ? "text/event-stream" : "application/json" }
  const headers = (code: number, extra: Record<string, string> = {}) =>
    res.writeHead(code, { ...contentType, ...extra })
  /** The body of a 200 answer as parts: events for a stream, two halves of the JSON otherwise. */
  const parts = (reply: Reply): Array<string> => {
    const response = asResponse(reply, playback.nextId)
    if (streamed) return OpenAiWire.chunkData(response, MODEL).map((data) => `data: ${data}\n\n`)
    const json = JSON.stringify(OpenAiWire.completionBody(response, MODEL))
    return [json.slice(0, json.length >> 1), json.slice(json.length >> 1)]
  }
  const cut = (afterChunks: number) => (streamed ? afterChunks : 1)
  switch (step._tag) {
    case "Reply":
      headers(200)
      end(parts(step).join(""))
      return
    case "Status":
      res.writeHead(step.status, {
        "content-type": "application/json",
        ...(step.retryAfter === undefined ? {} : { "retry-after": step.retryAfter })
      })
      end(errorBody(step.message))
      return
    case "Delay":
      later(step.millis, () => play(step.next, playback))
      return
    case "Stall": {
      if (step.next._tag !== "Reply") {
        play(step.next, playback)
        return
      }
      const all = parts(step.next)
      headers(200)
      write(all.slice(0, cut(step.afterChunks)).join(""))
      later(step.millis, () => {
        if (!res.destroyed) end(all.slice(cut(step.afterChunks)).join(""))
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
      write(all.slice(0, cut(step.afterChunks)).join(""))
      // Let the written bytes leave before the reset.
      later(20, destroy)
      return
    }
    case "Corrupt":
      headers(200)
      end(streamed ? `data: {"choices": [{"delta": {"content": "hel\n\ndata: [DONE]\n\n` : `{"choices": [{"message": `)
      return
    case "Truncated": {
      const all = parts({
        _tag: "Reply",
        text: "an answer that stops short",
        toolCalls: [],
        usage: { input: 1, output: 1 }
      })
      headers(200)
      end((streamed ? all.slice(0, -1) : all.slice(0, 1)).join(""))
      return
    }
    case "Raw":
      headers(step.status, step.headers)
      end(step.body)
      return
    case "Endless": {
      headers(step.status, step.headers)
      write(step.prefix)
      // As fast as the client reads: write until the socket pushes back, then wait for it to drain.
      const pump = () => {
        while (!res.destroyed) {
          if (!write(step.chunk)) {
            res.once("drain", pump)
            return
          }
        }
      }
      pump()
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
      let ids = 0
      const nextId = () => `call_${ids++}`
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
            closedEarly: false,
            bytesSent: 0
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
          const playback = { res, streamed: record.stream, later, destroy, nextId, record }
          if (req.method !== "POST" || !(req.url ?? "").endsWith("/chat/completions")) {
            play(status(404, { message: `no route ${req.method} ${req.url}` }), { ...playback, streamed: false })
            return
          }
          play(step, playback)
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
 * `unreachable` lives in `internal/Unreachable.ts`; it is re-exported here.
 *
 * @since 0.1.0
 */
export { unreachable } from "./internal/Unreachable.ts"
