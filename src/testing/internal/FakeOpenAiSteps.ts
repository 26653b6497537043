/**
 * The script steps of `FakeOpenAiServer`: the `Step` model and its constructors (a
 * reply, an error status, an error inside a stream, a delay, a stall, a reset, a corrupt
 * or truncated body, a body given byte for byte, a body that never ends, a step chosen
 * from the request). Re-exported from `FakeOpenAiServer`, which plays them.
 */
import * as Failure from "../../failure/Failure.ts"
import * as Text from "../../failure/Text.ts"
import * as UserCode from "../../failure/UserCode.ts"
import type * as Model from "../../model/Model.ts"

/**
 * What the server got: the request as a script step reads it.
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
  /** When the request's body had arrived, in milliseconds since the epoch (real time). */
  readonly receivedAt: number
  /** The client closed the connection before the answer was complete. Set once closed. */
  closedEarly: boolean
  /** Body bytes handed to the socket so far. */
  bytesSent: number
}

/**
 * Token usage as a reply states it: `cached` input tokens read from a prompt cache and
 * `reasoning` output tokens are parts of `input` and `output`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReplyUsage {
  readonly input: number
  readonly output: number
  readonly cached?: number | undefined
  readonly reasoning?: number | undefined
}

/**
 * The error of an error body or of an error event, as the API shapes it.
 *
 * @category models
 * @since 0.1.0
 */
export interface ApiError {
  readonly message: string
  readonly type?: string | undefined
  readonly code?: string | number | null | undefined
  readonly param?: string | null | undefined
}

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
      readonly usage: ReplyUsage | "unreported"
      readonly finishReason?: string | undefined
      readonly reasoning?: string | undefined
    }
  | {
      readonly _tag: "Status"
      readonly status: number
      readonly retryAfter?: string | undefined
      readonly message: string
      readonly error?: Partial<ApiError> | undefined
    }
  | { readonly _tag: "StreamError"; readonly afterChunks: number; readonly error: ApiError }
  | { readonly _tag: "FromRequest"; readonly choose: (request: RecordedRequest) => Step }
  | { readonly _tag: "Delay"; readonly millis: number; readonly next: Step }
  | { readonly _tag: "Stall"; readonly afterChunks: number; readonly millis: number; readonly next: Step }
  | { readonly _tag: "Reset"; readonly afterChunks: number | undefined }
  | { readonly _tag: "Corrupt" }
  | { readonly _tag: "Truncated" }
  | {
      readonly _tag: "Raw"
      readonly status: number
      readonly headers: Readonly<Record<string, string>>
      readonly body: string
    }
  | {
      readonly _tag: "Endless"
      readonly status: number
      readonly headers: Readonly<Record<string, string>>
      readonly prefix: string
      readonly chunk: string
    }

/**
 * A response: text and/or tool calls, with token usage, and its finish reason (by
 * default `tool_calls` with calls, else `stop`; `length` for an answer the output cap cut
 * off, `content_filter`, or any other the API sends). In DeepSeek's thinking mode the
 * reply carries `reasoning` (a default one when the script gives none). `usage:
 * "unreported"` sends no usage at all, as some compatible servers do.
 *
 * @category constructors
 * @since 0.1.0
 */
export const reply = (options: {
  readonly text?: string | undefined
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  readonly usage?: ReplyUsage | "unreported" | undefined
  readonly finishReason?: Model.FinishReason | (string & {}) | undefined
  readonly reasoning?: string | undefined
}): Step => ({
  _tag: "Reply",
  text: options.text ?? "",
  toolCalls: options.toolCalls ?? [],
  usage: options.usage ?? { input: 10, output: 5 },
  finishReason: options.finishReason,
  reasoning: options.reasoning
})

/**
 * An error status (429, 500, 502, 503, 400, 401, 404, …) with the API's error body: the
 * `type` and `code` the API gives that status (`rate_limit_exceeded`, `server_error`,
 * `invalid_api_key`, …) unless `error` says otherwise.
 *
 * @category constructors
 * @since 0.1.0
 */
export const status = (
  code: number,
  options: {
    readonly retryAfter?: string | undefined
    readonly message?: string | undefined
    readonly error?: Partial<ApiError> | undefined
  } = {}
): Step =>
  checked("status", {
    _tag: "Status",
    status: code,
    retryAfter: options.retryAfter,
    message: options.message ?? `status ${code}`,
    error: options.error
  })

/**
 * A 200 stream that sends `afterChunks` events of an answer, then an error event
 * (`data: {"error": {...}}`) and ends, as the APIs do when they fail mid-answer. The answer
 * is a short one of 6 events then `[DONE]` (7 with `stream_options.include_usage`): an
 * `afterChunks` past them sends it whole, `[DONE]` included, and the error after it (which a
 * client has stopped reading). To a plain request it answers with the error as the whole body.
 *
 * @category constructors
 * @since 0.1.0
 */
export const streamError = (error: ApiError, options: { readonly afterChunks?: number | undefined } = {}): Step =>
  checked("streamError", { _tag: "StreamError", afterChunks: options.afterChunks ?? 2, error })

/**
 * A step chosen when the request arrives, from what it says (its messages, its options).
 *
 * @category constructors
 * @since 0.1.0
 */
export const fromRequest = (choose: (request: RecordedRequest) => Step): Step =>
  checked("fromRequest", { _tag: "FromRequest", choose })

/**
 * Waits before sending any header, then plays `next`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const delay = (millis: number, next: Step): Step => checked("delay", { _tag: "Delay", millis, next })

/**
 * Sends the headers and `afterChunks` events of `next` (for a plain answer: half its
 * body), waits `millis`, then sends the rest. An `afterChunks` at or past the answer's events
 * sends it whole, `[DONE]` included, then holds the connection: a server that does not close
 * after its answer. `next` is an answer (`reply`, or `fromRequest`
 * choosing one); another step is a `RangeError` here, or a 500 from the server when
 * `fromRequest` chose it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const stall = (options: { readonly afterChunks?: number; readonly millis: number; readonly next: Step }): Step =>
  checked("stall", {
    _tag: "Stall",
    afterChunks: options.afterChunks ?? 1,
    millis: options.millis,
    next: options.next
  })

/**
 * Destroys the connection: before any header, or after `afterChunks` events of a
 * streamed answer (half the body of a plain one). The answer is a short one of 6 events then
 * `[DONE]` (7 with `stream_options.include_usage`): an `afterChunks` past them resets the
 * connection after a whole answer, as a server that drops it after its answer.
 *
 * @category constructors
 * @since 0.1.0
 */
export const reset = (options: { readonly afterChunks?: number | undefined } = {}): Step =>
  checked("reset", { _tag: "Reset", afterChunks: options.afterChunks })

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
 * An answer sent exactly as given: a status (default 200), headers (the content type
 * defaults to what the request asked for) and a body, byte for byte.
 *
 * @category constructors
 * @since 0.1.0
 */
export const raw = (options: {
  readonly body: string
  readonly status?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}): Step =>
  checked("raw", { _tag: "Raw", status: options.status ?? 200, headers: options.headers ?? {}, body: options.body })

/**
 * A body that never ends: the headers, `prefix`, then `chunk` again and again, as fast
 * as the client reads it, until the client closes the connection (the server's scope
 * closing ends it too). `RecordedRequest.bytesSent` says how much got out.
 *
 * @category constructors
 * @since 0.1.0
 */
export const endless = (options: {
  readonly chunk: string
  readonly prefix?: string | undefined
  readonly status?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}): Step =>
  checked("endless", {
    _tag: "Endless",
    status: options.status ?? 200,
    headers: options.headers ?? {},
    prefix: options.prefix ?? "",
    chunk: options.chunk
  })

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isMillis = (value: unknown): boolean => typeof value === "number" && value >= 0 && Number.isFinite(value)

/** Why a hand-made reply cannot be sent, or `undefined`. */
const replyProblem = (step: Record<string, unknown>): string | undefined => {
  if (typeof step.text !== "string") return "a reply's text must be a string"
  const calls = step.toolCalls
  if (
    !Array.isArray(calls) ||
    !calls.every((c) => isObject(c) && typeof c.name === "string" && typeof c.arguments === "string")
  ) {
    return "a reply's toolCalls must be an array of { name, arguments } (both text)"
  }
  const usage = step.usage
  const counts = isObject(usage) && typeof usage.input === "number" && typeof usage.output === "number"
  return usage === "unreported" || counts ? undefined : 'a reply\'s usage must be { input, output } or "unreported"'
}

/**
 * Why `step` cannot be played, or `undefined`: a test's script (a value of whatever type) made
 * by hand or by a function, checked before it is played, and by the constructors.
 */
/** A count of events a fault sends before it (review 178: a negative or NaN one was taken). */
const isChunks = (value: unknown): boolean => Number.isSafeInteger(value) && Number(value) >= 0

const chunksProblem = (value: unknown) => `afterChunks must be an integer >= 0, got ${UserCode.shown(value)}`

export const stepProblem = (step: unknown): string | undefined => {
  if (!isObject(step))
    return `a step must be one of FakeOpenAiServer's steps, got ${step === null ? "null" : typeof step}`
  switch (step._tag) {
    case "Reply":
      return replyProblem(step)
    case "Status":
    case "Raw":
      // A 1xx is no answer (the client waits for the real one); Node refuses past 999, HTTP's end at 599.
      if (!(Number.isInteger(step.status) && Number(step.status) >= 200 && Number(step.status) <= 599)) {
        return `a status must be an HTTP status from 200 to 599, got ${UserCode.shown(step.status)}`
      }
      return step._tag === "Raw" && (typeof step.body !== "string" || !isObject(step.headers))
        ? "a raw answer needs a body (text) and headers"
        : undefined
    case "FromRequest":
      return typeof step.choose === "function" ? undefined : "fromRequest needs a function choosing the step"
    case "Delay":
    case "Stall":
      if (!isMillis(step.millis)) return `millis must be a finite number >= 0, got ${UserCode.shown(step.millis)}`
      if (step._tag === "Stall" && !isChunks(step.afterChunks)) return chunksProblem(step.afterChunks)
      // A stall cuts an answer in two: another step played at once would pass a stall test for nothing (review 146).
      if (
        step._tag === "Stall" &&
        isObject(step.next) &&
        step.next._tag !== "Reply" &&
        step.next._tag !== "FromRequest"
      ) {
        return `a stall's next must be an answer to cut (reply, or fromRequest choosing one), got ${String(step.next._tag)}`
      }
      return stepProblem(step.next)
    case "Endless":
      // Node takes an empty write as written at once: the server would write it forever, never yielding.
      return typeof step.chunk === "string" && step.chunk !== ""
        ? undefined
        : "an endless body's chunk must be a non-empty string"
    case "StreamError":
      return isChunks(step.afterChunks) ? undefined : chunksProblem(step.afterChunks)
    case "Reset":
      return step.afterChunks === undefined || isChunks(step.afterChunks) ? undefined : chunksProblem(step.afterChunks)
    case "Corrupt":
    case "Truncated":
      return undefined
    default:
      return `a step must be one of FakeOpenAiServer's steps, got one tagged ${String(step._tag)}`
  }
}

/** `step`, or a `RangeError` naming what is wrong with it (a step that cannot work is refused when it is made). */
export const checked = (what: string, step: Step): Step => {
  const problem = stepProblem(step)
  if (problem !== undefined) throw new RangeError(`FakeOpenAiServer.${what}: ${problem}`)
  return step
}

/** The 500 a request gets when the test's script broke at it: `what` broke, and what it threw, if anything. */
export const scriptBroke = (index: number, what: string, error?: unknown): Step => {
  // What it threw: its kind and its own message (no secret), cut; a value that throws when read says nothing more.
  let said = ""
  try {
    if (error instanceof Error) said = `: ${Text.head(String(error.message), 500)}`
  } catch {}
  const kind = error === undefined ? "" : ` threw ${Failure.describeDefect(error).type}`
  return status(500, { message: `FakeOpenAiServer: ${what}${kind} at request ${index + 1}${said}` })
}
