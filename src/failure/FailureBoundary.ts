/**
 * Conversions at the edge: raw failures of providers, tools, subprocesses and stores
 * become the failure algebra here, once, so the loop never inspects an HTTP status, an
 * exception or an errno (R3.1, R3.2).
 *
 * Provider classification (R3.2):
 *
 * | what happened                      | outcome     | category         |
 * |------------------------------------|-------------|------------------|
 * | HTTP 408, 409, 429, 5xx            | Retryable   | `transient_http` |
 * | timeout (connect, first byte, read) | Retryable  | `timeout`        |
 * | connection error (reset, refused)  | Retryable   | `connection`     |
 * | corrupt or truncated JSON          | Retryable   | `corrupt_response` |
 * | another 4xx                        | Permanent   | `permanent_http` |
 * | every other failure                | Permanent   | `request_failed` |
 *
 * `Retry-After` (seconds or an HTTP date) is read into `retryAfterMillis`.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as Failure from "./Failure.ts"
import { httpDateMillis } from "./internal/HttpDate.ts"

/**
 * Reads a `Retry-After` header: delay-seconds or an HTTP-date, relative to `now`
 * (milliseconds since the epoch, from the run's `Clock`). `undefined` when absent or
 * unreadable (`-5`, `2, 30`, `Dec 2026`: a date is one of the three forms HTTP allows);
 * never negative, never more than `Number.MAX_SAFE_INTEGER`.
 *
 * @category parsing
 * @since 0.1.0
 */
export const retryAfterMillis = (header: string | null | undefined, now: number): number | undefined => {
  if (header === null || header === undefined) return undefined
  const text = header.trim()
  if (text === "") return undefined
  // A delay too long to represent is still longer than every deadline, never Infinity.
  if (/^\d+(\.\d+)?$/.test(text)) return Math.min(Math.round(Number(text) * 1000), Number.MAX_SAFE_INTEGER)
  // Only an HTTP-date: `Date.parse` reads much else as a date (`-5` is a year, `Dec 2026` a month).
  const date = httpDateMillis(text, now)
  return date === undefined ? undefined : Math.max(0, date - now)
}

/**
 * A wait as the delay-seconds {@link retryAfterMillis} reads: plain digits, never an
 * exponent (`1e+22` reads as nothing), a wait too long to represent (or infinite) capped
 * at `Number.MAX_SAFE_INTEGER` seconds: longer than any deadline.
 *
 * @category parsing
 * @since 0.3.0
 */
export const retryAfterSeconds = (millis: number): string => Math.min(millis / 1000, Number.MAX_SAFE_INTEGER).toFixed(3)

/**
 * @category predicates
 * @since 0.1.0
 */
export const isRetryableStatus = (status: number): boolean =>
  status === 408 || status === 409 || status === 429 || (status >= 500 && status <= 599)

const reasonPhrase = (status: number): string => {
  switch (status) {
    case 400:
      return "bad request"
    case 401:
      return "unauthorized: check the API key"
    case 403:
      return "forbidden"
    case 404:
      return "not found: check the base URL and model name"
    case 408:
      return "request timeout"
    case 409:
      return "conflict"
    case 413:
      return "request too large"
    case 422:
      return "unprocessable request"
    case 429:
      return "rate limited"
    default:
      if (status >= 300 && status <= 399) return "a redirect, not followed: baseUrl must name the API itself"
      if (status >= 500 && status <= 599) return "server error"
      return status >= 400 && status <= 499 ? "client error" : "a status HTTP does not define"
  }
}

/**
 * Classifies an HTTP error response from a provider.
 *
 * @category constructors
 * @since 0.1.0
 */
export const http = (options: {
  readonly status: number
  readonly retryAfter?: string | null | undefined
  readonly now: number
  readonly attempts?: number | undefined
  readonly diagnostic?: string | undefined
  /** What the provider said about it (its error envelope's message), already scrubbed and cut: it ends the hint. */
  readonly providerMessage?: string | undefined
}): Failure.Failure => {
  const { status } = options
  const said = options.providerMessage === undefined ? "" : `: ${options.providerMessage}`
  const base = {
    source: "provider" as const,
    code: `http_${status}`,
    attempts: options.attempts ?? 1,
    hint: `the provider answered HTTP ${status} (${reasonPhrase(status)})${said}`,
    diagnostic: options.diagnostic
  }
  if (isRetryableStatus(status)) {
    const wait = retryAfterMillis(options.retryAfter, options.now)
    return new Failure.Retryable({
      ...base,
      category: "transient_http",
      ...(wait === undefined ? {} : { retryAfterMillis: wait })
    })
  }
  if (status >= 400 && status <= 499) return new Failure.Permanent({ ...base, category: "permanent_http" })
  return new Failure.Permanent({ ...base, category: "request_failed", code: "request_failed" })
}

/**
 * Which time layer fired (R4.3).
 *
 * @category models
 * @since 0.1.0
 */
export type TimeoutLayer = Failure.TimeoutLayer

interface TimeoutOptions {
  readonly source: Failure.Source
  readonly layer: TimeoutLayer
  /** How long the wait took before it was cut off (the failure's `timeout.elapsedMillis`). */
  readonly afterMillis: number
  /**
   * The limit of a timeout of the wait's own (`attempt`, `tool`, a transport's phase): said
   * in the hint when known. A deadline's (`run`, `step`) is the run's or the step's, not the wait's: not said.
   */
  readonly limitMillis?: number | undefined
  readonly attempts?: number | undefined
  /** What was cut off, for the hint (`"write_file"`); default: the answer. */
  readonly what?: string | undefined
}

/**
 * The limit a wait ran into, in words (R4.3): a timeout's own limit when it is known, and
 * how long the wait took when that is not the limit (code that could not be interrupted
 * held it past it, or the limit is a deadline's, or unknown). A wait that took no time was
 * never begun: its limit had passed, and nothing was asked (as a tool's waits say it).
 */
const limitWords = (options: TimeoutOptions): string => {
  const layer = options.layer.replace("_", "-")
  const kind = options.layer === "run" || options.layer === "step" ? "deadline" : "timeout"
  if (options.afterMillis === 0) return `the ${layer} ${kind}, which had passed (it was not asked)`
  const elapsed = `(cut off after ${options.afterMillis} ms)`
  if (options.layer === "run" || options.layer === "step") return `the ${layer} deadline ${elapsed}`
  const limit = options.limitMillis
  if (limit === undefined) return `the ${layer} timeout ${elapsed}`
  // Within a millisecond of the limit is on time, as `Deadline` counts it.
  return `the ${layer} timeout of ${limit} ms${options.afterMillis >= limit + 1 ? ` ${elapsed}` : ""}`
}

const timeoutFields = (options: TimeoutOptions, mayHaveSideEffects: boolean) => {
  const layer = options.layer.replace("_", "-")
  const kind = options.layer === "run" || options.layer === "step" ? "deadline" : "timeout"
  return {
    source: options.source,
    category: "timeout" as const,
    code: `${options.layer}_timeout`,
    attempts: options.attempts ?? 1,
    hint:
      options.what === undefined
        ? `no answer within ${limitWords(options)}`
        : `${options.what} was cut off by the ${layer} ${kind} after ${options.afterMillis} ms${
            mayHaveSideEffects ? "; its side effects may or may not have happened" : ""
          }`,
    timeout: { layer: options.layer, elapsedMillis: options.afterMillis, mayHaveSideEffects }
  }
}

/**
 * A timeout of a wait that cannot have left a side effect (a model call, a read): it
 * says which layer fired and after how long (R4.3), and it is retryable.
 *
 * @category constructors
 * @since 0.1.0
 */
export const timeout = (options: TimeoutOptions): Failure.Retryable =>
  new Failure.Retryable(timeoutFields(options, false))

/**
 * A timeout of an action (a tool call): `Retryable` when the action cannot have had a
 * side effect or is idempotent, and otherwise an `UnknownOutcome` (R3.8, R4.3):
 * stopping the wait does not undo the effect.
 *
 * @category constructors
 * @since 0.1.0
 */
export const actionTimeout = (
  options: TimeoutOptions & { readonly mayHaveSideEffects: boolean; readonly idempotent: boolean }
): Failure.Failure => {
  const fields = timeoutFields(options, options.mayHaveSideEffects)
  return options.mayHaveSideEffects && !options.idempotent
    ? new Failure.UnknownOutcome(fields)
    : new Failure.Retryable(fields)
}

/**
 * A model call the run's cancel cut off while its answer came (R5.1), recorded only for
 * what that answer had cost so far (R2.1): the same request, asked again, would be answered.
 *
 * @category constructors
 * @since 0.3.0
 */
export const cancelled = (options: {
  readonly source: Failure.Source
  readonly afterMillis: number
}): Failure.Retryable =>
  new Failure.Retryable({
    source: options.source,
    category: "cancelled",
    code: "cancelled",
    attempts: 1,
    hint: `the answer was cut off by the run's cancel after ${options.afterMillis} ms`
  })

/**
 * A connection error (reset, refused, DNS): retryable.
 *
 * @category constructors
 * @since 0.1.0
 */
export const connection = (options: {
  readonly source: Failure.Source
  readonly detail: string
  readonly attempts?: number | undefined
}): Failure.Retryable =>
  new Failure.Retryable({
    source: options.source,
    category: "connection",
    code: "connection_error",
    attempts: options.attempts ?? 1,
    hint: "the connection failed before a complete answer arrived",
    diagnostic: options.detail
  })

/**
 * A response that does not parse (corrupt or truncated JSON, a broken event stream):
 * retryable, with its own code so it can be told apart from transport errors.
 *
 * @category constructors
 * @since 0.1.0
 */
export const corruptResponse = (options: {
  readonly source: Failure.Source
  readonly detail: string
  readonly attempts?: number | undefined
}): Failure.Retryable =>
  new Failure.Retryable({
    source: options.source,
    category: "corrupt_response",
    code: "corrupt_response",
    attempts: options.attempts ?? 1,
    hint: "the response could not be parsed (corrupt or truncated)",
    diagnostic: options.detail
  })

/**
 * Anything not classified above: a permanent request failure. The detail stays in
 * `diagnostic`; the hint only names the error's class.
 *
 * @category constructors
 * @since 0.1.0
 */
export const unknown = (source: Failure.Source, error: unknown): Failure.Failure => {
  if (Failure.isFailure(error)) return error
  return new Failure.Permanent({
    source,
    category: "request_failed",
    code: "request_failed",
    attempts: 1,
    hint: `the request failed (${Failure.safeDescription(error)})`,
    diagnostic: Failure.diagnosticOf(error)
  })
}

/** The same failure with some of its fields changed. */
const changed = (
  failure: Failure.Failure,
  fields: Partial<Pick<Failure.Failure, "attempts" | "usage">>
): Failure.Failure => {
  switch (failure._tag) {
    case "Retryable":
      // A circuit's refusal stays one: its summary says so, and a replay refuses as the run did (review 142).
      return failure instanceof Failure.Refusal
        ? new Failure.Refusal({ ...failure, ...fields })
        : new Failure.Retryable({ ...failure, ...fields })
    case "Permanent":
      return new Failure.Permanent({ ...failure, ...fields })
    case "UnknownOutcome":
      return new Failure.UnknownOutcome({ ...failure, ...fields })
  }
}

/**
 * The same failure, with the number of attempts its owner already made (R3.4): an
 * outer layer reads it and does not retry again.
 *
 * @category combinators
 * @since 0.1.0
 */
export const withAttempts = (failure: Failure.Failure, attempts: number): Failure.Failure =>
  changed(failure, { attempts })

/**
 * The same failure, carrying what the answer it cut off had cost (R2.1): a stream that
 * broke, stalled or carried an error after the provider had begun to answer was paid for,
 * and counts toward the run's budgets as a response does. The failure's own usage stands
 * when it has one; `undefined` changes nothing.
 *
 * @category combinators
 * @since 0.3.0
 */
export const withUsage = (failure: Failure.Failure, usage: typeof Failure.Usage.Type | undefined): Failure.Failure =>
  // A usage no failure may carry (counts past the safe integers) changes nothing: the failure stands.
  usage === undefined || failure.usage !== undefined || !isUsage(usage) ? failure : changed(failure, { usage })

const isUsage = Schema.is(Failure.Usage)

/**
 * The same failure with `usage` in place of its own, as the run counts it (a part a model
 * reported beside its whole, counted beside it: R2.1).
 *
 * @category combinators
 * @since 0.3.0
 */
export const withUsageCounted = (
  failure: Failure.Failure,
  count: (usage: typeof Failure.Usage.Type) => typeof Failure.Usage.Type
): Failure.Failure => {
  if (failure.usage === undefined) return failure
  const counted = count(failure.usage)
  return counted === failure.usage || !isUsage(counted) ? failure : changed(failure, { usage: counted })
}
