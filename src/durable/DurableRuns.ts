/**
 * The operations on durable runs, from any process on the same storage: start, poll,
 * result, events, watch, approve, reject, cancel, pending. `DurableRun` provides them
 * (`DurableRun.layer` on a runner, `DurableRun.layerClient` elsewhere) and re-exports
 * this module's members.
 *
 * @since 0.3.0
 */
import { Context, type Duration, type Effect, type Option, Schema, type Stream } from "effect"
import type * as Event from "../events/Event.ts"
import type * as RunOptions from "../run/RunOptions.ts"
import type * as RunResult from "../run/RunResult.ts"
import type * as Approval from "../tools/Approval.ts"

/**
 * What a durable run is started with: the data of its options (its code is what the runner
 * registered with {@link layer}). Limits and time limits given here win over the
 * registered ones.
 *
 * @category models
 * @since 0.3.0
 */
export interface StartOptions {
  readonly goal: string
  readonly system?: string | undefined
  /**
   * Default: a random UUID. Starting again under a run id already started starts nothing; once
   * that run has begun, a start with another goal or system prompt is `DurableRunError` `invalid`.
   */
  readonly runId?: string | undefined
  readonly limits?: Readonly<Record<string, number>> | undefined
  /**
   * The names of the registered tools this run may use (default: all of them). A name the
   * runner did not register is `InvalidRunOptions` at `start`.
   */
  readonly tools?: ReadonlyArray<string> | undefined
  /** As `Run.Options.time`: milliseconds, or a duration such as `"2 days"`. */
  readonly time?: Readonly<Record<string, number | string>> | undefined
}

/**
 * Why an operation on a durable run could not be done: no run of that id (`not_found`),
 * the store out of reach (`unavailable`), or a stored result that does not read back
 * (`corrupt`).
 *
 * @category errors
 * @since 0.3.0
 */
export class DurableRunError extends Schema.TaggedError<DurableRunError>()("DurableRunError", {
  runId: Schema.String,
  reason: Schema.Literals(["not_found", "unavailable", "corrupt", "failed", "invalid"]),
  detail: Schema.String
}) {
  override get message(): string {
    return `durable run ${this.runId}: ${this.reason}: ${this.detail}`
  }
}

/**
 * The operations on durable runs, from any process on the same storage.
 *
 * @category models
 * @since 0.3.0
 */
export interface Service {
  /** Starts a run (its options checked first: a bad one is `InvalidRunOptions`) and gives its id. */
  readonly start: (options: StartOptions) => Effect.Effect<string, RunOptions.InvalidRunOptions | DurableRunError>
  /** The run's result once it has finished. */
  readonly poll: (runId: string) => Effect.Effect<Option.Option<RunResult.RunResult>, DurableRunError>
  /** Waits for the run's result, reading the journal every `pollInterval` (default 200 ms to 5 s). */
  readonly result: (runId: string) => Effect.Effect<RunResult.RunResult, DurableRunError>
  /** The run's events its journal holds so far (its committed log). */
  readonly events: (runId: string) => Effect.Effect<ReadonlyArray<Event.Event>, DurableRunError>
  /**
   * The run's committed events from `fromSeq` on (default 0), then each one as it is
   * committed, ending with `run.finished`: a feed for a UI or a server-sent event stream
   * (resume one from its last event's `seq + 1`). The journal is read every `pollInterval`
   * (default 500 ms) while nothing new has come.
   *
   * Only committed events are sent, so a feed resumed after a crash never shows an event
   * that the resumed run replaced. They come at the run's commit barriers: each model
   * response, each call's result, the intent record before a call that changes the world,
   * approvals, each iteration's end. A read-only call's `tool.started` therefore arrives
   * with its result.
   */
  readonly watch: (
    /**
     * A `fromSeq` that is not a number, or a `pollInterval` that is not a positive
     * duration, fails the stream at once with `DurableRunError` (`invalid`).
     */
    runId: string,
    options?: { readonly fromSeq?: number | undefined; readonly pollInterval?: Duration.Input | undefined }
  ) => Stream.Stream<Event.Event, DurableRunError>
  /**
   * Approves the call `callId` the run waits on, and wakes the run on its owner. A `by`
   * holding a NUL character is refused (`InvalidDecision`): no store keeps it whole.
   */
  readonly approve: (
    runId: string,
    callId: string,
    options?: { readonly by?: string | undefined }
  ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision | DurableRunError>
  /** Rejects the call `callId` the run waits on: the run ends `approval_rejected`. As `approve` for `by` and `reason`. */
  readonly reject: (
    runId: string,
    callId: string,
    reason: string,
    options?: { readonly by?: string | undefined }
  ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision | DurableRunError>
  /** Cancels the run wherever it is (running, parked, between owners); it ends `cancelled` unless it had ended. */
  readonly cancel: (runId: string) => Effect.Effect<void, DurableRunError>
  /** The calls waiting for approval: of one run, or of every run. */
  readonly pending: (runId?: string) => Effect.Effect<ReadonlyArray<Approval.Request>, DurableRunError>
}

/**
 * @category services
 * @since 0.3.0
 */
export class DurableRuns extends Context.Service<DurableRuns, Service>()("effect-agent-runtime/DurableRuns") {}
