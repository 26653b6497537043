/**
 * The script steps of `FakeOpenAiServer`: the `Step` model and its constructors (a
 * reply, an error status, a delay, a stall, a reset, a corrupt or truncated body, a
 * body given byte for byte, a body that never ends). Re-exported from
 * `FakeOpenAiServer`, which plays them.
 */

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
}): Step => ({ _tag: "Raw", status: options.status ?? 200, headers: options.headers ?? {}, body: options.body })

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
}): Step => ({
  _tag: "Endless",
  status: options.status ?? 200,
  headers: options.headers ?? {},
  prefix: options.prefix ?? "",
  chunk: options.chunk
})
