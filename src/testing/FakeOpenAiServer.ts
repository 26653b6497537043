/**
 * A real chat-completions server on 127.0.0.1 that plays a script, for testing
 * provider clients over a real socket (R10, R11): each request gets the next step, a
 * response (text and/or tool calls, with usage and a finish reason) or a fault on cue:
 * an HTTP status with `Retry-After`, an error inside a stream, a delay before the
 * headers, a stall mid-stream, a connection reset, corrupt JSON, a truncated body, a
 * body given byte for byte, a body that never ends. A step may be chosen from the
 * request itself. It answers plain and streaming (`stream: true`, server-sent events)
 * requests alike, and records every request it gets, including when it arrived, whether
 * the client closed the connection before the answer was complete and how many body
 * bytes it sent.
 *
 * It is as strict as the API it plays (`api`: OpenAI by default, or DeepSeek): a request
 * the API would refuse gets the API's 400 body and plays no step (see
 * `internal/FakeOpenAiValidation.ts`: roles, tool messages that answer the calls of the
 * turn before, tool schemas, options that need tools or a stream, and DeepSeek's
 * `reasoning_content` rule in thinking mode). Answers carry `total_tokens` and the usage
 * details (none for a reply with `usage: "unreported"`), the usage chunk of a stream only when the request sets
 * `stream_options.include_usage`, a completion id unique across the script, and in
 * DeepSeek's thinking mode a `reasoning_content`. Error statuses carry the API's error
 * body (`type`, `code`, `param`).
 *
 * Tool calls without a scripted id get `call_0`, `call_1`, ... numbered across the
 * whole script, as real providers give ids unique in a conversation; an id the script
 * gives is sent as is (so a test can reuse one on purpose).
 *
 * The server is scoped: it listens on a random port when acquired and is closed, with
 * its connections and timers, when the scope closes. When the script runs out it
 * answers 500 with a message saying so.
 *
 * @since 0.1.0
 */

import * as Http from "node:http"
import { Deferred, Effect, Exit, Result, Schema, type Scope } from "effect"
import type * as Answers from "./internal/FakeOpenAiAnswers.ts"
import { type Playback, play } from "./internal/FakeOpenAiPlay.ts"
import * as Steps from "./internal/FakeOpenAiSteps.ts"
import { type RecordedRequest, type Step, status } from "./internal/FakeOpenAiSteps.ts"
import * as Validation from "./internal/FakeOpenAiValidation.ts"

/**
 * The steps and their constructors live in `internal/FakeOpenAiSteps.ts`; they are
 * re-exported here.
 *
 * @since 0.1.0
 */
export {
  type ApiError,
  corrupt,
  delay,
  endless,
  fromRequest,
  type RecordedRequest,
  type ReplyUsage,
  raw,
  reply,
  reset,
  type Step,
  stall,
  status,
  streamError,
  type ToolCall,
  truncated
} from "./internal/FakeOpenAiSteps.ts"

/**
 * @category models
 * @since 0.1.0
 */
export type Api = Validation.Api

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /**
   * The API the server plays: `openai` (default) or `deepseek` (its roles, usage fields,
   * ids, `reasoning_content` in thinking mode, and the rule that a thinking-mode tool
   * turn carries its `reasoning_content` back).
   */
  readonly api?: Api | undefined
  /** Refuse, with the API's 400, a request the API would refuse. Default `true`. */
  readonly validate?: boolean | undefined
}

/**
 * @category models
 * @since 0.1.0
 */
export interface FakeOpenAiServer {
  /** The base URL to give a client, `http://127.0.0.1:<port>/v1`. */
  readonly url: string
  readonly port: number
  /** The requests so far, in order (those refused with a 400 too). */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Waits until the answer to request `index` (from 0) is closed, and returns its record. */
  readonly whenClosed: (index: number) => Effect.Effect<RecordedRequest>
  /** TCP connections accepted so far (keep-alive reuses them). */
  readonly connections: Effect.Effect<number>
}

/**
 * The script: steps played one per accepted request, or a function of the step's
 * index (from 0, counting accepted requests) and of the request.
 *
 * @category models
 * @since 0.1.0
 */
export type Script = ReadonlyArray<Step> | ((index: number, request: RecordedRequest) => Step)

const parseJson = Schema.decodeUnknownResult(Schema.fromJsonString(Schema.Unknown))

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Starts the server on 127.0.0.1 with a random port; it closes with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (script: Script, options: Options = {}): Effect.Effect<FakeOpenAiServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ server: Http.Server; handle: FakeOpenAiServer; timers: Set<NodeJS.Timeout> }>((resume) => {
      const api = options.api ?? "openai"
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
      let played = 0
      const nextCallId = () => `call_${ids++}`
      const stepFor = (record: RecordedRequest): Step => {
        const index = played++
        if (typeof script === "function") {
          // The test's own code: what it throws is answered as a 500 naming it, never left to crash the process.
          try {
            return script(index, record)
          } catch (error) {
            return Steps.scriptBroke(index, "the script", error)
          }
        }
        return (
          script[index] ??
          status(500, {
            message: `FakeOpenAiServer: the script has ${script.length} steps and got request ${index + 1}`
          })
        )
      }
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
            stream: isObject(body) && body.stream === true,
            receivedAt: Date.now(),
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
          const answering: Answers.Answering = {
            api,
            thinking: api === "deepseek" && isObject(body) && Validation.thinkingMode(body),
            streamed: record.stream,
            includeUsage: isObject(body) && isObject(body.stream_options) && body.stream_options.include_usage === true,
            nextCallId,
            completion: index
          }
          const playback: Playback = { res, later, destroy, record, answering }
          if (req.method !== "POST" || !(req.url ?? "").endsWith("/chat/completions")) {
            const lost = status(404, { message: `no route ${req.method} ${req.url}`, error: { code: null } })
            play(lost, { ...playback, answering: { ...answering, streamed: false } })
            return
          }
          const invalid = options.validate === false ? undefined : Validation.check(body, api)
          if (invalid !== undefined) {
            play(status(400, { message: invalid.message, error: { param: invalid.param, code: invalid.code } }), {
              ...playback,
              answering: { ...answering, streamed: false }
            })
            return
          }
          play(stepFor(record), playback)
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
