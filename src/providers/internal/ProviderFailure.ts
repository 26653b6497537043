/**
 * The provider clients' own conversions onto the failure algebra, beside the shared
 * ones of `FailureBoundary`: a transport error, a response over a size limit, and the
 * scrubbing of a failure's text (R3.1, R3.2, R12).
 */
import { Predicate } from "effect"
import type * as HttpClientError from "effect/http/HttpClientError"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"

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

const codeOf = (cause: unknown): string | undefined =>
  Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) ? cause.code : undefined

/** Transport failures; the diagnostic names the cause, never the request (it has the headers). */
export const fromHttpError = (error: HttpClientError.HttpClientError): Failure.Failure => {
  const reason = error.reason
  const cause = "cause" in reason ? reason.cause : undefined
  const code = codeOf(cause) ?? codeOf(Predicate.hasProperty(cause, "cause") ? cause.cause : undefined)
  if (code !== undefined && headersOverflow.has(code)) {
    return responseTooLarge("the response headers", "the HTTP client's header size limit")
  }
  const detail = `${reason._tag}: ${cause === undefined ? (reason.description ?? "") : describe(cause)}`
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

/** The `Retry-After` a response asks for, preferring OpenAI's `retry-after-ms`. */
export const retryAfter = (response: HttpClientResponse.HttpClientResponse): string | undefined => {
  const ms = Number(response.headers["retry-after-ms"])
  return Number.isFinite(ms) && ms >= 0 ? String(ms / 1000) : response.headers["retry-after"]
}
