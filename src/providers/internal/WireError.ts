/**
 * The error envelopes of the chat-completions wire format: an error response's body, or an
 * error event in a stream. Re-exported from `OpenAiWire`.
 */
import { Result, Schema } from "effect"

const Nullable = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

/**
 * The error envelope of an error response or of an error event in a stream:
 * `{ error: { message, type, code, param } }`. Gateways put a status in `code`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ErrorBody = Schema.Struct({
  error: Schema.Struct({
    message: Nullable(Schema.String),
    type: Nullable(Schema.String),
    code: Nullable(Schema.Union([Schema.String, Schema.Finite])),
    param: Nullable(Schema.String)
  })
})

/**
 * @category schemas
 * @since 0.1.0
 */
export type ErrorBody = typeof ErrorBody.Type

/**
 * The error of Hugging Face's text-generation-inference and servers like it: the message
 * itself as `error`, its kind beside it (`{ "error": "Input validation error: ...",
 * "error_type": "validation" }`).
 *
 * @category schemas
 * @since 0.3.0
 */
export const PlainErrorBody = Schema.Struct({
  error: Schema.String,
  error_type: Nullable(Schema.String)
})

const decodeError = Schema.decodeUnknownResult(Schema.fromJsonString(ErrorBody))
const decodePlainError = Schema.decodeUnknownResult(Schema.fromJsonString(PlainErrorBody))

/**
 * The error a body or an event carries, when it is one; a plain one ({@link PlainErrorBody})
 * as the envelope's fields.
 *
 * @category decoding
 * @since 0.1.0
 */
export const parseError = (text: string): ErrorBody["error"] | undefined => {
  const decoded = decodeError(text)
  if (Result.isSuccess(decoded)) return decoded.success.error
  // An empty one says nothing, as an empty envelope does.
  const plain = decodePlainError(text)
  return Result.isSuccess(plain) && plain.success.error !== ""
    ? { message: plain.success.error, type: plain.success.error_type ?? null }
    : undefined
}

/**
 * The error a body or an event carries, whatever else it holds: an error envelope beside
 * `choices` is an error, never an answer; an empty one (no message, type or code) says
 * nothing. Only a text that names an `error` key is decoded.
 *
 * @category decoding
 * @since 0.3.0
 */
export const carriedError = (text: string): ErrorBody["error"] | undefined => {
  const error = text.includes('"error"') ? parseError(text) : undefined
  return error !== undefined && (error.message != null || error.type != null || error.code != null) ? error : undefined
}

/**
 * The provider's own error message in an error body, when it has one.
 *
 * @category decoding
 * @since 0.1.0
 */
export const errorMessage = (text: string): string | undefined => {
  const error = parseError(text)
  return error === undefined ? undefined : (error.message ?? error.type ?? undefined)
}
