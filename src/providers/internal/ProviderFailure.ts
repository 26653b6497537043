/**
 * The provider clients' own conversions onto the failure algebra, beside the shared
 * ones of `FailureBoundary`: a transport error, a response over a size limit, and the
 * scrubbing of a failure's text (R3.1, R3.2, R12).
 */
import { Predicate, Schema } from "effect"
import type * as HttpClientError from "effect/http/HttpClientError"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import * as Redact from "./Redact.ts"

const source = "provider" as const

/**
 * A response larger than the client accepts (its body, one event of a stream, or its
 * headers): retryable, as a corrupt response is, with its own code. The request was
 * aborted at the limit, so the rest was never read.
 */
export const responseTooLarge = (what: string, limit: string): Failure.Retryable =>
  new Failure.Retryable({
    source,
    category: "response_too_large",
    code: "response_too_large",
    attempts: 1,
    hint: "the response was larger than the client accepts, and was not read to its end",
    diagnostic: `${what} passed ${limit}; the request was aborted there`
  })

const describe = (cause: unknown): string => {
  if (!Predicate.isError(cause)) return String(cause)
  const code = Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) ? ` ${cause.code}` : ""
  return `${cause.name}${code}: ${cause.message}`
}

// What node:http and undici report when the response headers pass their limit (16 KiB by default).
const headersOverflow: ReadonlySet<string> = new Set(["HPE_HEADER_OVERFLOW", "UND_ERR_HEADERS_OVERFLOW"])

// What Node reports when the server's TLS certificate does not verify (OpenSSL's verify
// results, and Node's own name check): a configuration to fix, not a failure that passes.
const certificateRefused: ReadonlySet<string> = new Set([
  "CERT_CHAIN_TOO_LONG",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REJECTED",
  "CERT_REVOKED",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CRL_HAS_EXPIRED",
  "CRL_NOT_YET_VALID",
  "CRL_SIGNATURE_FAILURE",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "ERR_TLS_CERT_ALTNAME_FORMAT",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "ERROR_IN_CERT_NOT_AFTER_FIELD",
  "ERROR_IN_CERT_NOT_BEFORE_FIELD",
  "ERROR_IN_CRL_LAST_UPDATE_FIELD",
  "ERROR_IN_CRL_NEXT_UPDATE_FIELD",
  "HOSTNAME_MISMATCH",
  "INVALID_CA",
  "INVALID_PURPOSE",
  "PATH_LENGTH_EXCEEDED",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECRYPT_CRL_SIGNATURE",
  "UNABLE_TO_GET_CRL",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE"
])

/**
 * Whether the HTTP client refused to send the request as it stands (a header value it cannot
 * carry, or another invalid part): undici's `UND_ERR_INVALID_ARG` (also inside fetch's
 * `fetch failed`), or the `TypeError` fetch throws for a header it cannot hold (`Cannot
 * convert argument to a ByteString`, `invalid header value`). The same request fails the same
 * way every time, before a byte is sent: no connection error, which a retry could mend.
 */
const refusedToSend = (code: string | undefined, cause: unknown): boolean =>
  code === "UND_ERR_INVALID_ARG" ||
  (code === undefined && cause instanceof TypeError && /ByteString|header/i.test(cause.message))

const codeOf = (cause: unknown): string | undefined =>
  Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) ? cause.code : undefined

/** The first code in a cause and the causes it wraps (fetch's `fetch failed` or `terminated` wraps undici's), a few deep. */
const codeIn = (cause: unknown): string | undefined => {
  let at = cause
  for (let depth = 0; depth < 4 && at !== undefined && at !== null; depth++) {
    const code = codeOf(at)
    if (code !== undefined) return code
    at = Predicate.hasProperty(at, "cause") ? at.cause : undefined
  }
  return undefined
}

/**
 * undici's own timeouts, by the phase they cut: its connect timeout, its wait for the
 * headers, its wait between body reads. Over fetch the global dispatcher's (10 s, 300 s,
 * 300 s) can fire before the client's own phases do; each is that phase's timeout all the
 * same, never a connection error (R4.1, R4.3).
 */
const transportTimeouts: Readonly<Record<string, FailureBoundary.TimeoutLayer>> = {
  UND_ERR_CONNECT_TIMEOUT: "connect",
  UND_ERR_HEADERS_TIMEOUT: "first_byte",
  UND_ERR_BODY_TIMEOUT: "idle_read"
}

/**
 * Transport failures; the diagnostic names the cause, never the request (it has the
 * headers). `elapsedMillis` is how long the wait that failed had lasted, for the timeout of
 * one the HTTP client cut off itself.
 */
export const fromHttpError = (error: HttpClientError.HttpClientError, elapsedMillis: number): Failure.Failure => {
  const reason = error.reason
  const cause = "cause" in reason ? reason.cause : undefined
  const code = codeIn(cause)
  if (code !== undefined && headersOverflow.has(code)) {
    return responseTooLarge("the response headers", "the HTTP client's header size limit")
  }
  const detail = `${reason._tag}: ${cause === undefined ? (reason.description ?? "") : describe(cause)}`
  const layer = code !== undefined && Object.hasOwn(transportTimeouts, code) ? transportTimeouts[code] : undefined
  if (layer !== undefined) {
    // A wait that was cut off took some time: never reported as one not begun.
    const timedOut = FailureBoundary.timeout({ source, layer, afterMillis: Math.max(1, elapsedMillis) })
    return new Failure.Retryable({
      ...timedOut,
      diagnostic: `the HTTP client's own ${layer.replace("_", "-")} timeout fired (${code}), before the client's: ${detail}`
    })
  }
  if (code !== undefined && certificateRefused.has(code)) {
    return new Failure.Permanent({
      source,
      category: "request_failed",
      code: "request_failed",
      attempts: 1,
      hint: `the server's TLS certificate was refused (${code}): trust its issuer (NODE_EXTRA_CA_CERTS) or fix the certificate`,
      diagnostic: detail
    })
  }
  const requestFailed = (hint: string) =>
    new Failure.Permanent({
      source,
      category: "request_failed",
      code: "request_failed",
      attempts: 1,
      hint,
      diagnostic: detail
    })
  if (reason._tag === "TransportError" && refusedToSend(code, cause)) {
    return requestFailed(
      `the HTTP client refused to send the request${code === undefined ? "" : ` (${code})`}: a header value it cannot carry, or another invalid part; it was never sent, and no attempt can succeed`
    )
  }
  // The HTTP client itself closed (its scope ended: a layer provided to `Run.start` alone, say),
  // before the request or while its answer was read: no attempt over it can succeed (review 177:
  // retried as the server's fault; review 178: so was one cut mid-answer).
  const closed = code === "UND_ERR_DESTROYED" || code === "UND_ERR_CLOSED"
  if (closed && (reason._tag === "TransportError" || reason._tag === "DecodeError")) {
    return requestFailed(
      `the HTTP client was closed (${code}): the scope that made it has ended, and no request over it can succeed; a request already under way may have reached the server; provide the client where the run lives`
    )
  }
  // An answer with no body (a 204): as the body read over node:http finds it, an answer
  // that cannot be parsed, whatever the client.
  if (reason._tag === "EmptyBodyError") return FailureBoundary.corruptResponse({ source, detail })
  const programmerError = code?.startsWith("ERR_") === true
  if ((reason._tag === "TransportError" || reason._tag === "DecodeError") && !programmerError) {
    return FailureBoundary.connection({ source, detail })
  }
  const named = new Error(detail)
  named.name = reason._tag
  return FailureBoundary.unknown(source, named)
}

/** The same failure with its hint and diagnostic passed through `scrub`. */
export const scrubbed = (failure: Failure.Failure, scrub: (text: string) => string): Failure.Failure => {
  const hint = scrub(failure.hint)
  const diagnostic = failure.diagnostic === undefined ? undefined : scrub(failure.diagnostic)
  if (hint === failure.hint && diagnostic === failure.diagnostic) return failure
  switch (failure._tag) {
    case "Retryable":
      return new Failure.Retryable({ ...failure, hint, diagnostic })
    case "Permanent":
      return new Failure.Permanent({ ...failure, hint, diagnostic })
    case "UnknownOutcome":
      return new Failure.UnknownOutcome({ ...failure, hint, diagnostic })
  }
}

/** The `Retry-After` a response asks for, preferring OpenAI's `retry-after-ms` when it is a number of milliseconds. */
export const retryAfter = (response: HttpClientResponse.HttpClientResponse): string | undefined => {
  const ms = response.headers["retry-after-ms"]?.trim()
  if (ms === undefined || !/^\d+(\.\d+)?$/.test(ms)) return response.headers["retry-after"]
  return FailureBoundary.retryAfterSeconds(Number(ms))
}

/** A usage a failure can carry (a cost past what a run can total is none). */
const isUsage = Schema.is(Failure.Usage)

/**
 * The answer the provider itself stopped unfinished: for lack of resources (DeepSeek's
 * `insufficient_system_resource`), or with an `error` or `abort` finish reason. Retryable,
 * carrying what the answer had cost (`usage`), which counts toward the run's budgets (R2.1).
 */
export const interrupted = (
  detail: string,
  finishReason?: string,
  usage?: Failure.Retryable["usage"]
): Failure.Retryable => {
  const resources = finishReason === undefined || finishReason === "insufficient_system_resource"
  return new Failure.Retryable({
    source,
    category: "provider_interrupted",
    code: resources ? "insufficient_system_resource" : "answer_unfinished",
    attempts: 1,
    hint: resources
      ? "the provider stopped the answer for lack of resources"
      : `the provider stopped the answer unfinished (finish_reason: ${finishReason})`,
    diagnostic: detail,
    ...(usage !== undefined && isUsage(usage) ? { usage } : {})
  })
}

type StreamErrorKind =
  | "rate_limited"
  | "server_error"
  | "insufficient_quota"
  | "authentication"
  | "invalid_request"
  | "content_filtered"
  | "stream_error"

const retryableKinds: ReadonlySet<StreamErrorKind> = new Set(["rate_limited", "server_error", "stream_error"])

const kindOfStatus = (status: number): StreamErrorKind | undefined => {
  if (status === 429) return "rate_limited"
  if (status === 401 || status === 403) return "authentication"
  if (status >= 500) return "server_error"
  if (status >= 400) return "invalid_request"
  return undefined
}

const kinds: ReadonlyArray<readonly [StreamErrorKind, ReadonlyArray<string>]> = [
  ["insufficient_quota", ["insufficient_quota", "quota_exceeded", "billing_hard_limit_reached"]],
  ["rate_limited", ["rate_limit_exceeded", "rate_limit_error", "rate_limited", "requests", "tokens"]],
  ["content_filtered", ["content_filter", "content_policy_violation", "content_filtered"]],
  ["authentication", ["invalid_api_key", "authentication_error", "permission_error", "unauthorized"]],
  [
    "server_error",
    ["server_error", "internal_error", "api_error", "overloaded_error", "overloaded", "service_unavailable"]
  ],
  [
    "invalid_request",
    ["invalid_request_error", "invalid_request", "context_length_exceeded", "not_found_error", "validation"]
  ]
]

const kindOf = (error: { readonly type?: unknown; readonly code?: unknown }): StreamErrorKind => {
  // A content filter's refusal, and a spent quota, are what they are whatever status comes with them.
  if (isContentFilter(error)) return "content_filtered"
  if (isSpentQuota(error)) return "insufficient_quota"
  const status = typeof error.code === "number" ? error.code : Number(error.code)
  // A status as a number or its digits, and only one HTTP defines (a code of 1e308 is none).
  const byStatus = Number.isInteger(status) && status >= 100 && status <= 599 ? kindOfStatus(status) : undefined
  if (byStatus !== undefined) return byStatus
  const words = [error.code, error.type].filter(Predicate.isString).map((word) => word.toLowerCase())
  for (const [kind, names] of kinds) if (words.some((word) => names.includes(word))) return kind
  return "stream_error"
}

/** Whether an error's code or type is one of the words of `kind`, whatever status it also gives. */
const says = (kind: StreamErrorKind) => {
  const words: ReadonlySet<string> = new Set(kinds.find(([k]) => k === kind)?.[1] ?? [])
  return (error: { readonly type?: unknown; readonly code?: unknown }): boolean =>
    [error.code, error.type].some((word) => Predicate.isString(word) && words.has(word.toLowerCase()))
}

/**
 * Whether an error the provider sent says its content filter refused, by its code or type,
 * whatever status it also gives (`{ code: 400, type: "content_policy_violation" }`).
 */
export const isContentFilter = says("content_filtered")

/**
 * Whether an error the provider sent says the account's quota is spent, by its code or type
 * (OpenAI's `429` with `code: "insufficient_quota"`): waiting does not bring it back.
 */
export const isSpentQuota = says("insufficient_quota")

/**
 * A request refused because the account's quota is spent, whatever its status (a 429 as
 * OpenAI sends it): permanent, as the same error in a stream is, never retried as a rate
 * limit would be (R3.2), so a fallback model is asked at once.
 */
export const spentQuota = (status: number, message: string | undefined, diagnostic: string): Failure.Permanent =>
  new Failure.Permanent({
    source: "provider",
    category: "permanent_http",
    code: "insufficient_quota",
    attempts: 1,
    hint: `the provider refused the request: the account's quota is spent (HTTP ${status})${message === undefined ? "" : `: ${message}`}`,
    diagnostic
  })

/**
 * A request the provider's content filter refused with an error status (Azure OpenAI's 400
 * with `code: "content_filter"`): permanent, as a filtered answer is, and its own stop
 * reason, `content_filtered`, never a plain `http_400` (R11).
 */
export const filteredRequest = (status: number, message: string | undefined, diagnostic: string): Failure.Permanent =>
  new Failure.Permanent({
    source: "provider",
    category: "content_filter",
    code: "content_filtered",
    attempts: 1,
    hint: `the provider's content filter refused the request (HTTP ${status})${message === undefined ? "" : `: ${message}`}`,
    diagnostic
  })

/**
 * An error the provider sent inside a 200 stream (`data: {"error": {...}}`), classified
 * by what it says (R3.2): a rate limit or a server error is retryable, as are errors of
 * no known kind (the request was accepted, the server failed after); an invalid request,
 * a key refused, a spent quota or a content filter is permanent. The provider's own
 * message, scrubbed of the key and cut, is the hint's last part, so it reaches the
 * timeline (`safeMessage`).
 */
export const streamError = (
  error: { readonly message?: string | null | undefined; readonly type?: unknown; readonly code?: unknown },
  safeMessage: string,
  diagnostic: string
): Failure.Failure => {
  const kind = kindOf(error)
  // The provider's words, cut as its message is: a type or a code may be anything it sends.
  const label = Redact.clip(
    [error.type, error.code].filter((v) => Predicate.isString(v) || Predicate.isNumber(v)).join(", "),
    200
  )
  const fields = {
    source,
    // A filtered answer has its own category, as a `finish_reason: content_filter` has: the run stops on it (R11).
    category: kind === "content_filtered" ? ("content_filter" as const) : ("stream_error" as const),
    code: kind,
    attempts: 1,
    hint: `the provider reported an error in the stream${label === "" ? "" : ` (${label})`}: ${safeMessage}`,
    diagnostic
  }
  return retryableKinds.has(kind) ? new Failure.Retryable(fields) : new Failure.Permanent(fields)
}

/** A request the client will not send, because the API would refuse it (the hint says why, in the client's words). */
export const invalidRequest = (reason: string): Failure.Permanent =>
  new Failure.Permanent({ source, category: "invalid_options", code: "invalid_options", attempts: 1, hint: reason })
