/**
 * The run's event log: the single source of truth (principle 3, R8).
 *
 * Every transition, model call, tool call, recovery step, reminder, termination
 * decision and validation check appends one typed event. `RunState` and the
 * termination counters are folds over this log (see `Counters.fold`), a live
 * subscriber reads it as a `Stream`, and the result carries it as the timeline.
 *
 * Order within a run: `run.started` first and `run.finished` last, exactly once each.
 * Each `model.requested` is followed by `model.responded` or `model.failed`; each
 * `tool.started` by exactly one of `tool.succeeded`, `tool.failed` or `tool.blocked`
 * (blocked: the permission policy refused it and the handler never ran). `seq`
 * numbers the events from 0 without gaps.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as Model from "../model/Model.ts"
import * as Breakers from "../recovery/Breakers.ts"
import * as Recovery from "../recovery/Recovery.ts"
import * as Tool from "../tools/Tool.ts"
import * as ToolResult from "../tools/ToolResult.ts"
import * as RunState from "./RunState.ts"
import * as StopReason from "./StopReason.ts"

const base = {
  runId: Schema.String,
  seq: Schema.Int,
  /** Milliseconds since the epoch, from Effect's `Clock` (so `TestClock` in tests). */
  at: Schema.Finite
}

/**
 * @category models
 * @since 0.1.0
 */
export const RunStarted = Schema.TaggedStruct("run.started", {
  ...base,
  goal: Schema.String,
  /** The name of the model the run starts with (`Run.Options.modelName`). */
  model: Schema.String,
  tools: Schema.Array(Schema.String),
  deadlineAt: Schema.Finite,
  /** The system prompt the model is sent, when there is one. */
  system: Schema.optional(Schema.String),
  /** The termination policies, in the order they are evaluated. */
  policies: Schema.optional(Schema.Array(Schema.String)),
  /**
   * The permission policy in force: `allow_all` when no `Permission` layer is installed.
   * With `allow_all`, `unguardedTools` names the tools that write or act outside (their
   * `sideEffect` is `write` or `external`) without needing approval, and so run with
   * nothing between the model and them.
   */
  permission: Schema.optional(Schema.Literals(["allow_all", "policy"])),
  unguardedTools: Schema.optional(Schema.Array(Schema.String))
})

/**
 * @category models
 * @since 0.1.0
 */
export const StateChanged = Schema.TaggedStruct("state.changed", { ...base, from: RunState.State, to: RunState.State })

/**
 * @category models
 * @since 0.1.0
 */
export const PlanSet = Schema.TaggedStruct("plan.set", {
  ...base,
  steps: Schema.Array(Schema.Struct({ id: Schema.String, description: Schema.String, required: Schema.Boolean }))
})

/**
 * @category models
 * @since 0.1.0
 */
export const ModelRequested = Schema.TaggedStruct("model.requested", { ...base, iteration: Schema.Int })

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
  reasoning: Schema.optional(Schema.String)
})

/**
 * @category models
 * @since 0.1.0
 */
export const ModelFailed = Schema.TaggedStruct("model.failed", {
  ...base,
  iteration: Schema.Int,
  failure: Failure.Summary
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

/**
 * @category models
 * @since 0.1.0
 */
export const ToolStarted = Schema.TaggedStruct("tool.started", {
  ...base,
  /** The run's own identity of the call (see `model.responded`'s `callIds`). */
  callId: Schema.String,
  /** The id the model gave the call, which its result carries back in the conversation. */
  toolCallId: Schema.String,
  name: Schema.String,
  signature: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export const ToolSucceeded = Schema.TaggedStruct("tool.succeeded", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  sideEffect: Tool.SideEffect,
  /** A digest of the observation, so loop detection can tell "nothing changed". */
  observationDigest: Schema.String,
  /** The arguments as the model sent them, parsed, once they validated: what evidence criteria match on. */
  input: Schema.Unknown,
  output: Schema.Unknown
})

/**
 * @category models
 * @since 0.1.0
 */
export const ToolFailed = Schema.TaggedStruct("tool.failed", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  error: ToolResult.ToolError,
  /** The tool's retry limit, so the repeated-failure policy can be a pure fold. */
  maxRetries: Schema.Int
})

/**
 * @category models
 * @since 0.1.0
 */
export const ToolBlocked = Schema.TaggedStruct("tool.blocked", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  error: ToolResult.ToolError
})

/**
 * What became of one attempt of a call that was interrupted (cancel, the run or step
 * deadline, the tool's own timeout), or of a call interrupted while no attempt ran
 * (R5.2). `attempt` says which: the attempt it settles, from 1, or 0 when none was
 * running (the call waited for approval, to retry, or on its status query, or never
 * started). Follows the call's `tool.started`. A call has at most one per attempt,
 * plus one with `attempt` 0; when a timeout turned an attempt's interruption into a
 * failure, the call goes on to a retry or to its `tool.failed`; a call that ends
 * without `tool.succeeded`, `tool.failed` or `tool.blocked` ends with its last one.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolInterrupted = Schema.TaggedStruct("tool.interrupted", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  attempt: Schema.Int,
  settlement: Tool.Settlement,
  detail: Schema.String
})

/**
 * The answer of a tool's status query for a call of unknown outcome (R3.8). Follows the
 * call's failure and precedes its final `tool.succeeded` or `tool.failed`.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolReconciled = Schema.TaggedStruct("tool.reconciled", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  idempotencyKey: Schema.String,
  verdict: Schema.Literals(["applied", "not_applied", "undecidable"]),
  detail: Schema.String
})

/**
 * A call that needs approval was put on the approval gate (R7); the run is now
 * `awaiting_approval`. Follows the call's `tool.started`.
 *
 * @category models
 * @since 0.1.0
 */
export const ApprovalRequested = Schema.TaggedStruct("approval.requested", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  /** The validated arguments the person approves or rejects. */
  arguments: Schema.Unknown,
  expiresAt: Schema.Finite
})

/**
 * What became of a call waiting for approval (R7): `approved` (the exact call runs
 * next), `rejected` (the run ends `approval_rejected`), `expired` (no decision in time;
 * `layer` says which deadline: `approval` ends the run `approval_expired`, `step`
 * ends it `step_timeout`), or `withdrawn` (the run was cancelled or hit its deadline).
 *
 * @category models
 * @since 0.1.0
 */
export const ApprovalDecided = Schema.TaggedStruct("approval.decided", {
  ...base,
  callId: Schema.String,
  name: Schema.String,
  decision: Schema.Literals(["approved", "rejected", "expired", "withdrawn"]),
  by: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String),
  layer: Schema.optional(Failure.TimeoutLayer)
})

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryKind = Recovery.Kind

/**
 * Whether a recovery asks the model to correct itself (see `Recovery.isCorrection`).
 *
 * @category predicates
 * @since 0.1.0
 */
export const isCorrection = Recovery.isCorrection

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryStarted = Schema.TaggedStruct("recovery.started", {
  ...base,
  /** The tool call being retried or corrected; absent for a model call. */
  callId: Schema.optional(Schema.String),
  kind: RecoveryKind,
  attempt: Schema.Int,
  delayMillis: Schema.Finite,
  cause: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryCompleted = Schema.TaggedStruct("recovery.completed", {
  ...base,
  /** The tool call being retried or corrected; absent for a model call. */
  callId: Schema.optional(Schema.String),
  kind: RecoveryKind,
  attempt: Schema.Int
})

/**
 * @category models
 * @since 0.1.0
 */
export const RecoveryFailed = Schema.TaggedStruct("recovery.failed", {
  ...base,
  /** The tool call being retried or corrected; absent for a model call. */
  callId: Schema.optional(Schema.String),
  kind: RecoveryKind,
  attempts: Schema.Int,
  cause: Schema.String,
  /** `run`: a budget the whole run shares is spent (the run stops); `call`: only this call gave up. */
  scope: Schema.Literals(["call", "run"])
})

/**
 * @category models
 * @since 0.1.0
 */
export const ReminderInjected = Schema.TaggedStruct("reminder.injected", {
  ...base,
  kind: Schema.String,
  text: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export const TerminationDecided = Schema.TaggedStruct("termination.decided", {
  ...base,
  policy: Schema.String,
  reason: StopReason.StopReason,
  detail: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export const Check = Schema.Struct({
  name: Schema.String,
  kind: Schema.Literals(["plan_step", "stop_hook", "artifact", "evidence"]),
  passed: Schema.Boolean,
  detail: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export type Check = typeof Check.Type

/**
 * @category models
 * @since 0.1.0
 */
export const ValidationChecked = Schema.TaggedStruct("validation.checked", { ...base, check: Check })

/**
 * @category models
 * @since 0.1.0
 */
export const RunFinished = Schema.TaggedStruct("run.finished", {
  ...base,
  status: RunState.Status,
  stopReason: StopReason.StopReason
})

/**
 * @category models
 * @since 0.1.0
 */
export const Event = Schema.Union([
  RunStarted,
  StateChanged,
  PlanSet,
  ModelRequested,
  ModelResponded,
  ModelFailed,
  ModelFallback,
  CircuitChanged,
  ToolStarted,
  ToolSucceeded,
  ToolFailed,
  ToolBlocked,
  ToolInterrupted,
  ToolReconciled,
  ApprovalRequested,
  ApprovalDecided,
  RecoveryStarted,
  RecoveryCompleted,
  RecoveryFailed,
  ReminderInjected,
  TerminationDecided,
  ValidationChecked,
  RunFinished
])

/**
 * @category models
 * @since 0.1.0
 */
export type Event = typeof Event.Type

/**
 * An event before the run stamps it with its id, sequence number and time.
 *
 * @category models
 * @since 0.1.0
 */
export type Draft = Event extends infer E ? (E extends Event ? Omit<E, "runId" | "seq" | "at"> : never) : never

/**
 * The events of one tag.
 *
 * @category models
 * @since 0.1.0
 */
export type Of<Tag extends Event["_tag"]> = Extract<Event, { readonly _tag: Tag }>
