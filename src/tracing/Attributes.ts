/**
 * Every span name and attribute name the runtime writes, in one place: the OpenTelemetry
 * GenAI semantic conventions where they have a name (they are still moving, so a rename
 * is one line here), and the `agent_runtime.` prefix where they have none.
 *
 * @since 0.1.0
 */

/** The prefix of the names the conventions do not have. */
const ours = "agent_runtime"

/**
 * Span names. `invoke_agent`, `chat {model}` and `execute_tool {tool}` are the GenAI
 * conventions' operation spans; the others are ours.
 *
 * @category names
 * @since 0.1.0
 */
export const span = {
  run: "invoke_agent",
  step: `${ours}.step`,
  chat: (model: string) => `chat ${model}`,
  tool: (tool: string) => `execute_tool ${tool}`,
  backoff: `${ours}.backoff`,
  approval: `${ours}.approval`,
  validation: `${ours}.validation`
} as const

/**
 * GenAI semantic-convention attribute names.
 *
 * @category names
 * @since 0.1.0
 */
export const genAi = {
  operation: "gen_ai.operation.name",
  conversationId: "gen_ai.conversation.id",
  requestModel: "gen_ai.request.model",
  finishReasons: "gen_ai.response.finish_reasons",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolType: "gen_ai.tool.type",
  /** Content: written only when content is opted in (`Tracing.RecordContent`). */
  inputMessages: "gen_ai.input.messages",
  outputMessages: "gen_ai.output.messages",
  toolArguments: "gen_ai.tool.call.arguments",
  toolResult: "gen_ai.tool.call.result"
} as const

/**
 * The general semantic-convention attribute for what a failure was: the failure's code
 * (`http_429`, `first_byte_timeout`, `tool_failed`).
 *
 * @category names
 * @since 0.1.0
 */
export const errorType = "error.type"

/**
 * Our attributes, where the conventions have no name.
 *
 * @category names
 * @since 0.1.0
 */
export const runtime = {
  status: `${ours}.run.status`,
  stopReason: `${ours}.run.stop_reason`,
  policy: `${ours}.run.policy`,
  iterations: `${ours}.run.iterations`,
  toolCalls: `${ours}.run.tool_calls`,
  toolErrors: `${ours}.run.tool_errors`,
  recoveries: `${ours}.run.recovery_attempts`,
  cachedInputTokens: `${ours}.usage.cached_input_tokens`,
  reasoningTokens: `${ours}.usage.reasoning_tokens`,
  costUsd: `${ours}.usage.cost_usd`,
  iteration: `${ours}.iteration`,
  attempt: `${ours}.attempt`,
  outcome: `${ours}.tool.outcome`,
  code: `${ours}.tool.code`,
  sideEffect: `${ours}.tool.side_effect`,
  delayMillis: `${ours}.backoff.delay_ms`,
  cause: `${ours}.backoff.cause`,
  /** What the wait is for: `provider_retry`, `tool_retry`, ... (`Recovery.Kind`). */
  backoffKind: `${ours}.backoff.kind`,
  approval: `${ours}.approval.decision`,
  checks: `${ours}.validation.checks`,
  failedChecks: `${ours}.validation.failed_checks`
} as const

/**
 * Metric names and their attribute keys.
 *
 * @category names
 * @since 0.1.0
 */
export const metric = {
  runs: `${ours}.runs`,
  steps: `${ours}.steps`,
  toolCalls: `${ours}.tool_calls`,
  retries: `${ours}.retries`,
  /** Not the GenAI conventions' `gen_ai.client.token.usage`, a histogram per call: a run's tokens per call are on its `chat` spans. */
  tokens: `${ours}.tokens`,
  costUsd: `${ours}.cost_usd`,
  runDuration: `${ours}.run.duration`,
  stepDuration: `${ours}.step.duration`,
  /** Attribute keys of the metrics. */
  status: "status",
  stopReason: "stop_reason",
  outcome: "outcome",
  kind: "kind",
  cause: "cause",
  tokenType: "gen_ai.token.type"
} as const

/** A class name or a code as code writes it (`ProviderError`, `http_429`). */
const identifier = /^[A-Za-z_$][\w$]{0,63}$/

/**
 * A name (a failure's code, an error's tag) as a span or a metric shows it: as it is when it
 * reads as one (an identifier of at most 64 characters), else `otherwise`. A code a tool built
 * from what it was given (`not found: <path>`) would put that on a span, and make a metric
 * series of each value (review 187).
 *
 * @category attributes
 * @since 0.3.0
 */
export const nameShown = (name: string, otherwise: string): string => (identifier.test(name) ? name : otherwise)
