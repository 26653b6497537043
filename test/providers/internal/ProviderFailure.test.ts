/**
 * The transport errors the provider clients classify themselves (R3.2): a TLS certificate
 * that does not verify is a configuration to fix, not a connection error that passes; the
 * HTTP client's own timeouts are the phase they cut (R4.1, R4.3).
 */
import { assert, describe, it } from "@effect/vitest"
import * as HttpClientError from "effect/http/HttpClientError"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as ProviderFailure from "../../../src/providers/internal/ProviderFailure.ts"

/** A transport error as fetch gives it: a `TypeError` whose cause carries the code. */
const transport = (code: string) => {
  const cause = Object.assign(new Error("certificate problem"), { code })
  return new HttpClientError.HttpClientError({
    reason: new HttpClientError.TransportError({
      request: HttpClientRequest.post("https://api.example.test/v1/chat/completions"),
      cause: new TypeError("fetch failed", { cause })
    })
  })
}

describe("ProviderFailure.fromHttpError", () => {
  it("R3.2 every certificate verify result is permanent and says the certificate was refused", () => {
    const codes = [
      "DEPTH_ZERO_SELF_SIGNED_CERT",
      "CERT_HAS_EXPIRED",
      "ERR_TLS_CERT_ALTNAME_INVALID",
      "ERR_TLS_CERT_ALTNAME_FORMAT",
      "UNABLE_TO_GET_CRL",
      "CERT_CHAIN_TOO_LONG",
      "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
      "PATH_LENGTH_EXCEEDED",
      "ERROR_IN_CERT_NOT_AFTER_FIELD"
    ]
    for (const code of codes) {
      const failure = ProviderFailure.fromHttpError(transport(code), 5)
      assert.deepStrictEqual([failure._tag, failure.code], ["Permanent", "request_failed"], code)
      assert.include(failure.hint, `the server's TLS certificate was refused (${code})`)
    }
  })

  it("R3.2 a connection reset is still a retryable connection error", () => {
    const failure = ProviderFailure.fromHttpError(transport("ECONNRESET"), 5)
    assert.deepStrictEqual([failure._tag, failure.code], ["Retryable", "connection_error"])
  })

  it("R3.2 a request the HTTP client refused to send (UND_ERR_INVALID_ARG, also inside fetch failed; fetch's ByteString TypeError) is permanent, not a connection error", () => {
    const refused = (cause: unknown) =>
      new HttpClientError.HttpClientError({
        reason: new HttpClientError.TransportError({
          request: HttpClientRequest.post("https://api.example.test/v1/chat/completions"),
          cause
        })
      })
    const invalidArg = () => Object.assign(new Error("invalid authorization header"), { code: "UND_ERR_INVALID_ARG" })
    const causes: ReadonlyArray<unknown> = [
      invalidArg(),
      new TypeError("fetch failed", { cause: invalidArg() }),
      new TypeError(
        "Cannot convert argument to a ByteString because the character at index 7 has a value of 65279 which is greater than 255."
      ),
      new TypeError('Headers.append: "a\\nb" is an invalid header value.')
    ]
    for (const cause of causes) {
      const failure = ProviderFailure.fromHttpError(refused(cause), 5)
      assert.deepStrictEqual([failure._tag, failure.code], ["Permanent", "request_failed"], String(cause))
      assert.include(failure.hint, "the HTTP client refused to send the request")
    }
    // fetch's own network failure stays a retryable connection error.
    const network = ProviderFailure.fromHttpError(
      refused(new TypeError("fetch failed", { cause: new Error("other side closed") })),
      5
    )
    assert.deepStrictEqual([network._tag, network.code], ["Retryable", "connection_error"])
  })

  it("R4.1 R4.3 R3.2 undici's own timeouts (fetch's global dispatcher) are the phase they cut, with the time waited, never a connection error (review 128)", () => {
    const request = HttpClientRequest.post("https://api.example.test/v1/chat/completions")
    const undici = (code: string, name: string) => Object.assign(new Error(`${name} happened`), { code, name })
    const cases: ReadonlyArray<readonly [HttpClientError.HttpClientError, string]> = [
      // fetch rejects with `fetch failed`, its cause undici's error.
      [
        new HttpClientError.HttpClientError({
          reason: new HttpClientError.TransportError({
            request,
            cause: new TypeError("fetch failed", { cause: undici("UND_ERR_CONNECT_TIMEOUT", "ConnectTimeoutError") })
          })
        }),
        "connect_timeout"
      ],
      [
        new HttpClientError.HttpClientError({
          reason: new HttpClientError.TransportError({
            request,
            cause: new TypeError("fetch failed", { cause: undici("UND_ERR_HEADERS_TIMEOUT", "HeadersTimeoutError") })
          })
        }),
        "first_byte_timeout"
      ],
      // A body read that stalls: the stream fails `terminated`, its cause undici's error.
      [
        new HttpClientError.HttpClientError({
          reason: new HttpClientError.DecodeError({
            request,
            response: HttpClientResponse.fromWeb(request, new Response("{")),
            cause: new TypeError("terminated", { cause: undici("UND_ERR_BODY_TIMEOUT", "BodyTimeoutError") })
          })
        }),
        "idle_read_timeout"
      ],
      // undici's own error, unwrapped (its own client).
      [
        new HttpClientError.HttpClientError({
          reason: new HttpClientError.TransportError({
            request,
            cause: undici("UND_ERR_HEADERS_TIMEOUT", "HeadersTimeoutError")
          })
        }),
        "first_byte_timeout"
      ]
    ]
    for (const [error, code] of cases) {
      const failure = ProviderFailure.fromHttpError(error, 10_012)
      assert.deepStrictEqual([failure._tag, failure.category, failure.code], ["Retryable", "timeout", code])
      assert.deepStrictEqual(failure.timeout, {
        layer: code.replace("_timeout", "") as never,
        elapsedMillis: 10_012,
        mayHaveSideEffects: false
      })
      assert.include(failure.diagnostic, "the HTTP client's own")
    }
  })
})
