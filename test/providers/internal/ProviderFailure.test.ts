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
})
