/**
 * The shape of an explanation: what `Explain.explain` finds in a run's log. Re-exported
 * from `Explain`.
 */
import type * as Event from "../../events/Event.ts"
import type * as RunState from "../../events/RunState.ts"
import type * as StopReason from "../../events/StopReason.ts"
import type * as Failure from "../../failure/Failure.ts"

/**
 * The stop as the log records it: the policy that decided (`runtime` for hard stops,
 * `validation` when validation refuted a final answer), its detail, and when.
 *
 * @category models
 * @since 0.3.0
 */
export interface Decision {
  readonly policy: string
  readonly reason: StopReason.StopReason
  readonly detail: string
  /**
   * Whether a policy of the run's own decided (one `run.started` lists that is none of the
   * built-in policies): its stop reason is its own words, so no built-in limit is said to
   * be the one passed.
   */
  readonly own: boolean
  /** The `seq` of its `termination.decided`, when there is one. */
  readonly seq: number | undefined
  /** Milliseconds since the run started. */
  readonly atMillis: number | undefined
}

/**
 * One counter of the run beside the limit it runs against. `source` says where the limit
 * comes from: `recorded` (the run's `run.started` has it), `default` (not recorded, so the
 * default policy's value: a policy built by hand with another limit is not in the log),
 * `off` (the run's policies leave it out) or `unset` (no such limit).
 *
 * @category models
 * @since 0.3.0
 */
export interface Gauge {
  /** The counter's name in `Counters` (`tokens` is input plus output tokens). */
  readonly counter: string
  readonly value: number
  /** The limit's name: its key in `run.started`'s `limits` (the option `limits.<name>`, `time.*` for the times). */
  readonly limit: string
  readonly max: number | undefined
  /**
   * Where `max` comes from: `run.started` (which records the limits in force, defaults
   * included), the policy's default (a log written before it did), the policy removed
   * (`off`), or no limit (`unset`).
   */
  readonly source: "recorded" | "default" | "off" | "unset"
  /** This counter is the one the stop is about. */
  readonly decisive: boolean
}

/**
 * A piece of work the run had going at a moment (a stop, the end of a truncated log),
 * and what became of it afterwards.
 *
 * @category models
 * @since 0.3.0
 */
export interface InFlight {
  readonly kind: "model_call" | "tool_call" | "approval" | "retry"
  /** The model's name for a model call, else the tool's. */
  readonly name: string
  readonly callId: string | undefined
  readonly attempt: number | undefined
  /** Milliseconds since the run started, when it began. */
  readonly sinceMillis: number
  /** The deadline it was given, and the layer that set it (R4.2). */
  readonly deadlineAt: number | undefined
  readonly layer: Failure.TimeoutLayer | undefined
  /** What became of it after that moment (`cancelled`, `outcome_unknown`, `failed: step_timeout`...), if the log says. */
  readonly became: string | undefined
}

/**
 * The time layer that fired (R4.3): which, when, the deadline and the limit behind it,
 * the state the run was found in and what it had in flight.
 *
 * @category models
 * @since 0.3.0
 */
export interface Deadline {
  readonly layer: Failure.TimeoutLayer
  /** Milliseconds since the run started, when it fired. */
  readonly firedAtMillis: number | undefined
  readonly deadlineAt: number | undefined
  /** The layer's limit as recorded (`runTimeoutMillis`, `stepTimeoutMillis`, ...), when it has one. */
  readonly limitMillis: number | undefined
  /** How long the work it cut off had run, when the failure says. */
  readonly elapsedMillis: number | undefined
  /** The state the run was in (`run.stopping`), when the run was stopped from outside its loop. */
  readonly state: RunState.State | undefined
  readonly inFlight: ReadonlyArray<InFlight>
}

/**
 * A call whose action may or may not have taken effect (R3.8): the same records as the
 * result's `pendingActions`.
 *
 * @category models
 * @since 0.3.0
 */
export interface PendingAction {
  readonly callId: string
  readonly name: string
  readonly idempotencyKey: string
  readonly detail: string
  readonly seq: number
}

/**
 * What repeated: a call (`repeated_tool_call`), an observation that did not change
 * (`loop_detected`), or a failure (`repeated_tool_failure`).
 *
 * @category models
 * @since 0.3.0
 */
export type Repetition =
  | {
      readonly _tag: "call"
      readonly name: string
      readonly signature: string
      /** The arguments as the model last sent them. */
      readonly arguments: unknown
      readonly count: number
    }
  | {
      readonly _tag: "observation"
      readonly name: string
      readonly observation: string
      readonly digest: string
      /** How many times the call saw it, the first included. */
      readonly count: number
      readonly callIds: ReadonlyArray<string>
    }
  | {
      readonly _tag: "failure"
      readonly name: string
      readonly code: string
      readonly message: string
      readonly count: number
      readonly maxRetries: number
    }

/**
 * The failure the stop is about: the last failed or blocked call, or the last failed model call.
 *
 * @category models
 * @since 0.3.0
 */
export interface FailureSeen {
  readonly source: "model" | "tool"
  readonly name: string
  readonly callId: string | undefined
  readonly code: string
  readonly classification: "retryable" | "permanent" | "unknown" | undefined
  readonly hint: string
  readonly timeout: Failure.Timeout | undefined
  readonly seq: number
}

/**
 * A plan step as validation left it.
 *
 * @category models
 * @since 0.3.0
 */
export interface PlanItem {
  readonly id: string
  readonly description: string
  readonly required: boolean
  /** The check's detail, or why it was not checked. */
  readonly detail: string
}

/**
 * @category models
 * @since 0.3.0
 */
export interface ValidationSeen {
  readonly failed: ReadonlyArray<Event.Check>
  readonly completed: ReadonlyArray<PlanItem>
  readonly unfinished: ReadonlyArray<PlanItem>
}

/**
 * The decision on a call that needed approval (R7).
 *
 * @category models
 * @since 0.3.0
 */
export interface ApprovalSeen {
  readonly callId: string
  readonly name: string
  readonly arguments: unknown
  readonly decision: "approved" | "rejected" | "expired" | "withdrawn"
  readonly by: string | undefined
  readonly reason: string | undefined
  readonly layer: Failure.TimeoutLayer | undefined
  readonly requestedAtMillis: number
  readonly expiresAt: number
  readonly decidedAtMillis: number
}

/**
 * @category models
 * @since 0.3.0
 */
export interface Cancellation {
  /** Milliseconds since the run started. */
  readonly atMillis: number
  /** The state the cancel found the run in. */
  readonly state: RunState.State | undefined
  /** Who cancelled: the log does not record it yet, so always `undefined` for now. */
  readonly by: string | undefined
  readonly inFlight: ReadonlyArray<InFlight>
}

/**
 * What to do next, safely: `reconcile` the pending actions before anything else,
 * `resume` a run whose log has no ending, `raise_limit` (which one in `limit`),
 * `change_approach` when raising a limit would only repeat the same actions, `fix` a
 * tool, a check or code, `decide` an approval, `retry` later, `rerun` a cancelled run,
 * or `none`.
 *
 * @category models
 * @since 0.3.0
 */
export interface NextStep {
  readonly kind:
    | "none"
    | "reconcile"
    | "resume"
    | "raise_limit"
    | "change_approach"
    | "fix"
    | "decide"
    | "retry"
    | "rerun"
  /** The option to change (`limits.maxIterations`, `time.step`, ...), when one would help. */
  readonly limit: string | undefined
  /** The calls it is about. */
  readonly callIds: ReadonlyArray<string>
  readonly text: string
}

/**
 * Why a run stopped, from its log alone.
 *
 * @category models
 * @since 0.3.0
 */
export interface Explanation {
  readonly runId: string
  /** Whether the log ends with `run.finished`. A log without it is a run still going, or one that stopped without an ending (a crash). */
  readonly ended: boolean
  readonly status: RunState.Status | undefined
  readonly stopReason: StopReason.StopReason | undefined
  /** The last state the log reached. */
  readonly state: RunState.State
  /** One sentence: `StopReason.describe`, or what a log without an ending means. */
  readonly summary: string
  readonly decision: Decision | undefined
  readonly elapsedMillis: number
  /**
   * When the run started, in milliseconds since the epoch by the run's `Clock`: the other
   * times (`...Millis`) count from it; deadlines (`deadlineAt`, `expiresAt`) are absolute.
   */
  readonly startedAt: number
  /** How many times the run went on from its journal (`run.resumed`). */
  readonly resumes: number
  readonly gauges: ReadonlyArray<Gauge>
  readonly repetition: Repetition | undefined
  readonly failure: FailureSeen | undefined
  readonly deadline: Deadline | undefined
  readonly approval: ApprovalSeen | undefined
  readonly cancellation: Cancellation | undefined
  /** Work going when the log ends without `run.finished`. */
  readonly inFlight: ReadonlyArray<InFlight>
  readonly pendingActions: ReadonlyArray<PendingAction>
  readonly validation: ValidationSeen | undefined
  readonly next: NextStep
}
