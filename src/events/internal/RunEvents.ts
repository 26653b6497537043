/**
 * The events of the run itself: its start, its phases, its plan, reminders, its stop and its validation. Re-exported from `Event`.
 */
import { Schema } from "effect"
import * as RunState from "../RunState.ts"
import * as StopReason from "../StopReason.ts"
import { base } from "./EventBase.ts"

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
   * Those of `policies` that are the user's own (not built in), a built-in's name included
   * when a policy of the user's replaced it: code the log cannot keep, which a resume must
   * be given again.
   *
   * @since 0.3.0
   */
  ownPolicies: Schema.optional(Schema.Array(Schema.String)),
  /**
   * The permission policy in force: `allow_all` when no `Permission` layer is installed.
   * With `allow_all`, `unguardedTools` names the tools that write or act outside (their
   * `sideEffect` is `write` or `external`) without needing approval, and so run with
   * nothing between the model and them.
   */
  permission: Schema.optional(Schema.Literals(["allow_all", "policy"])),
  unguardedTools: Schema.optional(Schema.Array(Schema.String)),
  /**
   * The limits the run resolved its options to, by name (counts, sizes, and time limits
   * in milliseconds); a limit that is not set is absent.
   */
  limits: Schema.optional(Schema.Record(Schema.String, Schema.Finite))
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
 * The run is being stopped from outside its loop: its deadline passed (`deadline`) or
 * it was cancelled (`cancel`), and the state it was found in. What it interrupts records
 * its own ending after this event; the run's `termination.decided` follows.
 *
 * @category models
 * @since 0.3.0
 */
export const RunStopping = Schema.TaggedStruct("run.stopping", {
  ...base,
  by: Schema.Literals(["deadline", "cancel"]),
  state: RunState.State
})

/**
 * The run goes on from its committed log (R9): in a new process after a crash or a
 * restart, or asked to by hand. `fromSeq` is the first event of this continuation;
 * `inDoubt` lists the calls whose handler was running when the log stopped: they go
 * through reconciliation, or run again when that is safe (R3.8). `deadlineAt` is there
 * when the resume brought the run's deadline closer (a `time.run` it was given): the run's
 * deadline from then on. `limits` is there when the run goes on under other limits than
 * those the log said (given to the resume): the limits in force from then on, as
 * `run.started` records them (its `runTimeoutMillis` left to `deadlineAt`).
 *
 * @category models
 * @since 0.3.0
 */
export const RunResumed = Schema.TaggedStruct("run.resumed", {
  ...base,
  fromSeq: Schema.Int,
  reason: Schema.Literals(["restart", "manual"]),
  inDoubt: Schema.Array(Schema.String),
  deadlineAt: Schema.optional(Schema.Number),
  limits: Schema.optional(Schema.Record(Schema.String, Schema.Finite))
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
  detail: Schema.String,
  /**
   * `true` when a policy of the run's own decided, one the user made (`Termination.make`),
   * even under a built-in's name: no limit of the runtime was passed (R13). Left out for
   * the built-in policies and the runtime, and in logs written before it was recorded.
   */
  own: Schema.optional(Schema.Boolean)
})

/**
 * @category models
 * @since 0.1.0
 */
export const Check = Schema.Struct({
  name: Schema.String,
  kind: Schema.Literals(["plan_step", "stop_hook", "artifact", "evidence", "output"]),
  passed: Schema.Boolean,
  detail: Schema.String,
  /**
   * Set on a plan step whose criteria held: whether tool results of the run back it
   * (R6.2). Only a step done with evidence counts as completed (R6.3).
   */
  backed: Schema.optional(Schema.Boolean)
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
