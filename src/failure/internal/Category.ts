/**
 * The categories of failures, and how a stored one decodes. Re-exported from `Failure`.
 */
import { Schema, SchemaTransformation } from "effect"

/**
 * What kind of failure this is: the runtime decides by it (with the class and
 * `timeout.layer`), never by `code`. The library's own, by where they come from:
 *
 * - transport and provider: `transient_http`, `permanent_http`, `timeout`, `connection`,
 *   `corrupt_response`, `request_failed`, `response_too_large`, `stream_error`,
 *   `provider_interrupted`, `content_filter` (the run stops `content_filtered`),
 *   `invalid_response`, `invalid_options`;
 * - circuit breakers: `circuit_open`, `circuit_half_open` (the call never ran), `circuit_store`;
 * - tools and files: `invalid_argument`, `invalid_target`, `not_found`, `permission`,
 *   `too_large`, `io`, `invalid_output`, `not_applied`; effect/ai tools: `ai_error` (an
 *   `AiError`), `tool_failure` (a value of the tool's failure schema);
 * - subprocesses: `spawn`, `exit`, `crash`, `output`, `output_limit`;
 * - whatever is thrown: `defect`; the testing kit's scripts: `script`; a call the run's cancel
 *   cut off, recorded for what its answer had cost: `cancelled`.
 *
 * For a tool's own failures: `conflict` (the state changed: never retried by default,
 * R3.10), `rejected` (the service said no), `unavailable`, `rate_limited`,
 * `unauthorized`, and `other`. A tool's own `code` stays free text (`payment_declined`).
 *
 * @category models
 * @since 0.3.0
 */
export const Category = Schema.Literals([
  "transient_http",
  "permanent_http",
  "timeout",
  "connection",
  "corrupt_response",
  "request_failed",
  "response_too_large",
  "stream_error",
  "provider_interrupted",
  "content_filter",
  "invalid_response",
  "invalid_options",
  "circuit_open",
  "circuit_half_open",
  "circuit_store",
  "invalid_argument",
  "invalid_target",
  "not_found",
  "permission",
  "too_large",
  "io",
  "invalid_output",
  "not_applied",
  "ai_error",
  "tool_failure",
  "spawn",
  "exit",
  "crash",
  "output",
  "output_limit",
  "defect",
  "script",
  "cancelled",
  "conflict",
  "rejected",
  "unavailable",
  "rate_limited",
  "unauthorized",
  "other"
])

/**
 * @category models
 * @since 0.3.0
 */
export type Category = typeof Category.Type

const isCategory = Schema.is(Category)

/**
 * A category as stored (a timeline, a result): text. A category this version does not
 * know (written by a later one) decodes as `other`, so an old reader still reads the
 * log; its `code` and `hint` keep what it was. Built in code, a category must be one of
 * {@link Category}.
 */
export const StoredCategory = Schema.String.pipe(
  Schema.decodeTo(
    Category,
    SchemaTransformation.transform<Category, string>({
      decode: (text) => (isCategory(text) ? text : "other"),
      encode: (category) => category
    })
  )
)
