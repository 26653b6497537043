/**
 * The events of tool calls and their approvals. Re-exported from `Event`.
 */
import { Schema } from "effect"
import * as Failure from "../../failure/Failure.ts"
import * as Tool from "../../tools/Tool.ts"
import * as ToolResult from "../../tools/ToolResult.ts"
import { base } from "./EventBase.ts"

/**
 * An attempt of a call's handler begins, after its checks (and its approval), and again for
 * each retry: its number from 1, and the deadline it was given, with the layer that set it
 * (R4.2). A call refused before its handler (`tool.blocked`, or a `tool.failed` of its
 * arguments) has none. The call itself is announced by its `model.responded`.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolStarted = Schema.TaggedStruct("tool.started", {
  ...base,
  /** The run's own identity of the call (see `model.responded`'s `callIds`). */
  callId: Schema.String,
  name: Schema.String,
  attempt: Schema.Int,
  deadlineAt: Schema.Number,
  layer: Failure.TimeoutLayer
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
  /**
   * The observation the model was sent: the rendered output, masked and cut to the run's
   * limit. Loop detection folds its digest (`Signature.digest`).
   */
  observation: Schema.String,
  /** Only in logs of development builds before the 0.3.0 release, read as they were: the digest of `observation`, which the fold computes. */
  observationDigest: Schema.optional(Schema.String),
  /**
   * The arguments as the log may show them, only where they differ from what the call's
   * `model.responded` holds: a sensitive tool's, with its secrets masked. Absent otherwise
   * (the arguments are stored once, R9); `Event.inputOf` reads them either way. Logs of
   * development builds before the 0.3.0 release carry it for every call.
   */
  input: Schema.optional(Schema.Unknown),
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
  maxRetries: Schema.Int,
  /**
   * What the tool reported when it passed its output schema and the call failed all the
   * same: its postcondition contradicted it (`inconsistent_result`), or its observation
   * could not be rendered. Kept as a success keeps its output.
   */
  output: Schema.optional(Schema.Unknown),
  /**
   * The tool's side-effect class, only when its handler returned before the call failed
   * (its output broke its schema, its rendering failed, or its postcondition did not
   * hold): what the handler did took place, and a `write` or `external` call is among the
   * run's `sideEffects` (R6.3).
   */
  sideEffect: Schema.optional(Tool.SideEffect)
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
 * started). Follows the `model.responded` that asked for the call. A call has at most one per attempt,
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
  detail: Schema.String,
  /**
   * The tool's side-effect class, only when the call's action took place (`completed`: its
   * handler had finished, or said so): a `write` or `external` call is among the run's
   * `sideEffects` (R6.3).
   */
  sideEffect: Schema.optional(Tool.SideEffect)
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
  detail: Schema.String,
  /**
   * For an idempotent call asked about once its retries gave up while an earlier attempt
   * may have acted: the failure its last attempt ended with, which the log shows nowhere
   * else when the query found it applied or not applied.
   *
   * @since 0.3.0
   */
  after: Schema.optional(Failure.Summary)
})

/**
 * A call that needs approval was put on the approval gate (R7); the run is now
 * `awaiting_approval`. Follows the `model.responded` that asked for the call; its
 * `tool.started` follows an approval.
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
  expiresAt: Schema.Finite,
  /**
   * Which deadline sets `expiresAt` (R4.2): `approval`, `step` or `run`. A resumed run
   * that puts the request back expires it as that layer (R9).
   */
  layer: Schema.optional(Failure.TimeoutLayer)
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
