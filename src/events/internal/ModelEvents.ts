/**
 * The events of model calls: requests, responses, failures, fallbacks, circuit changes. Re-exported from `Event`.
 */
import { Schema } from "effect"
import * as Failure from "../../failure/Failure.ts"
import * as Model from "../../model/Model.ts"
import * as Breakers from "../../recovery/Breakers.ts"
import { base } from "./EventBase.ts"

/**
 * A model attempt begins: which attempt of the iteration's call it is (1 for the first,
 * more for retries after `recovery.started`), and the deadline it was given, with the
 * layer that set it (R4.2).
 *
 * @category models
 * @since 0.1.0
 */
export const ModelRequested = Schema.TaggedStruct("model.requested", {
  ...base,
  iteration: Schema.Int,
  attempt: Schema.Int,
  deadlineAt: Schema.Number,
  layer: Failure.TimeoutLayer
})

/**
 * @category models
 * @since 0.1.0
 */
export const ModelResponded = Schema.TaggedStruct("model.responded", {
  ...base,
  iteration: Schema.Int,
  text: Schema.String,
  /** The tool calls as the model sent them, with the model's own ids. */
  toolCalls: Schema.Array(Model.ToolCall),
  /**
   * The run's own identity of each tool call, in call order: unique in the run, whatever
   * ids the model reuses, and the `callId` every later event of the call carries (R3.8).
   */
  callIds: Schema.Array(Schema.String),
  /** Canonical signature of each tool call, in call order (tool name + canonical JSON). */
  signatures: Schema.Array(Schema.String),
  usage: Model.Usage,
  /** Why the model stopped, when it said (`length`: cut off by its output token limit). */
  finishReason: Schema.optional(Model.FinishReason),
  /** The model's reasoning (`reasoning_content`): sent back with the conversation, never observed. */
  reasoning: Schema.optional(Schema.String),
  /** The reasoning's parts with what their provider attached to them (see `Model.ReasoningPart`): sent back as they came. */
  reasoningParts: Schema.optional(Schema.Array(Model.ReasoningPart))
})

/**
 * @category models
 * @since 0.1.0
 */
export const ModelFailed = Schema.TaggedStruct("model.failed", {
  ...base,
  iteration: Schema.Int,
  failure: Failure.Summary,
  /** What the failed answer had cost, when the provider stopped it unfinished (R2.1): it counts as a response's does. */
  usage: Schema.optional(Model.Usage)
})

/**
 * The run switched to its next fallback model (R3.9), for the rest of the run, after
 * the model in use failed for good (`failure`) or its circuit was open.
 *
 * @category models
 * @since 0.1.0
 */
export const ModelFallback = Schema.TaggedStruct("model.fallback", {
  ...base,
  iteration: Schema.Int,
  from: Schema.String,
  to: Schema.String,
  failure: Failure.Summary
})

/**
 * A circuit breaker changed state (R3.9) because of one of this run's calls: `closed`
 * → `open` (with how long it stays open), `open` → `half_open` (a probe goes through),
 * `half_open` → `closed` or `open`.
 *
 * @category models
 * @since 0.1.0
 */
export const CircuitChanged = Schema.TaggedStruct("circuit.changed", { ...base, ...Breakers.Transition.fields })
