/**
 * The transport errors the provider clients classify themselves (R3.2): a TLS certificate
 * that does not verify is a configuration to fix, not a connection error that passes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as HttpClientError from "effect/http/HttpClientError"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
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
      const failure = ProviderFailure.fromHttpError(transport(code))
      assert.deepStrictEqual([failure._tag, failure.code], ["Permanent", "request_failed"], code)
      assert.include(failure.hint, `the server's TLS certificate was refused (${code})`)
    }
  })

  it("R3.2 a connection reset is still a retryable connection error", () => {
    const failure = ProviderFailure.fromHttpError(transport("ECONNRESET"))
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
      const failure = ProviderFailure.fromHttpError(refused(cause))
      assert.deepStrictEqual([failure._tag, failure.code], ["Permanent", "request_failed"], String(cause))
      assert.include(failure.hint, "the HTTP client refused to send the request")
    }
    // fetch's own network failure stays a retryable connection error.
    const network = ProviderFailure.fromHttpError(
      refused(new TypeError("fetch failed", { cause: new Error("other side closed") }))
    )
    assert.deepStrictEqual([network._tag, network.code], ["Retryable", "connection_error"])
  })
})
