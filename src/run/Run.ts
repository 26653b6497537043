/**
 * A run: the lifecycle around the agent loop, as one Effect that always ends with a
 * {@link RunResult.RunResult} (principle 1).
 *
 * created → initializing → planning → the loop (model_thinking ⇄ tool_executing, with
 * recovering between) → validating → a terminal status. Every way a run can end maps
 * to a result: a final answer that validation backs is `completed`; a final answer
 * that validation refutes is `failed` with `validation_failed`; a budget or hard stop
 * is `partial` when some plan steps were done and `failed` otherwise; cancellation is
 * `cancelled`; a defect anywhere is `failed` with `internal_error`. Nothing escapes as
 * an unhandled rejection and nothing hangs past the run deadline.
 *
 * `run` runs inline; `start` runs in the background and returns a {@link Handle} with
 * the live timeline as a `Stream`, the result, and `cancel`.
 *
 * @since 0.1.0
 */
import { Deferred, Effect, Exit, type Fiber, Predicate, PubSub, Result, Schema, type Scope, Stream } from "effect"
import type * as Event from "../events/Event.ts"
import type * as RunState from "../events/RunState.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Journal from "../journal/Journal.ts"
import * as Approval from "../tools/Approval.ts"
import * as Tool from "../tools/Tool.ts"
import * as FinalOutput from "./internal/FinalOutput.ts"
import * as Launch from "./internal/Launch.ts"
import * as RunContext from "./internal/RunContext.ts"
import * as ScopedRuns from "./internal/ScopedRuns.ts"
import * as JournalLoad from "./journal/JournalLoad.ts"
import * as Lifecycle from "./lifecycle/Lifecycle.ts"
import { ResumeError } from "./ResumeError.ts"
import type { InvalidRunOptions, Options, Requirements } from "./RunOptions.ts"
import * as RunResult from "./RunResult.ts"

export { isResumeError, ResumeError } from "./ResumeError.ts"
export type { Limits, Options, Recovery, Requirements, Time } from "./RunOptions.ts"
export { InvalidRunOptions } from "./RunOptions.ts"

/**
 * Checks run options as {@link run} does when it starts, without running anything but
 * a `policies` function: fails with `InvalidRunOptions` naming the first field that
 * cannot work (`limits.maxIterations`, `tools[1].name`) and why. For options read from
 * a file or built by a program, checked before a run is started.
 *
 * @category validation
 * @since 0.3.0
 */
export const validateOptions = <T extends Tool.Any, RV = never, O = never>(
  options: Options<T, RV, O>
): Effect.Effect<void, InvalidRunOptions> =>
  Effect.suspend(() => {
    const invalid = Launch.checkOptions(options)
    return invalid === undefined ? Effect.void : Effect.fail(invalid)
  })

/**
 * The run's result, typed by its output schema. Erased boundary: the run decoded its
 * `output` with the schema of `O` it was given (see `Run.Options.output`). A run without a
 * host is suspended only when its journal stopped its process (`RunContext.died`): its
 * caller is interrupted, as that process's death would stop it, with no result.
 */
const typed = <O, R>(
  ended: Effect.Effect<RunResult.RunResult, RunContext.Suspended, R>
): Effect.Effect<RunResult.Typed<O>, never, R> =>
  Effect.catch(ended, () => Effect.interrupt) as Effect.Effect<RunResult.Typed<O>, never, R>

/**
 * Runs an agent to its end. The run works in a fiber of its own, so that its deadline and
 * cancellation can interrupt everything it started and still produce a result, and so
 * that user code that cannot be interrupted never holds the caller past the run's stop
 * grace. Interrupting the caller cancels the run and waits for it to stop; the caller
 * then gets no result: to cancel and still read the result, use {@link start}.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = <T extends Tool.Any, RV = never, O = never>(
  options: Options<T, RV, O>
): Effect.Effect<RunResult.Typed<O>, never, Requirements<T, RV>> => typed(Launch.launch(options, Launch.cancel))

/**
 * What {@link resume} needs of a run's options: the same as {@link run}'s, less what the
 * log keeps (the goal, the system prompt, the run id). The tools must be the ones the
 * run used (same names, input schemas and side-effect classes).
 *
 * @category models
 * @since 0.3.0
 */
export type ResumeOptions<T extends Tool.Any = Tool.Any, RV = never, O = never> = Omit<
  Options<T, RV, O>,
  "goal" | "system" | "runId"
>

/**
 * Resumes a run from its journal (R9) and runs it to its end: the log is read back and
 * checked against the code (a tool gone or changed, another model, a newer journal
 * format, a damaged row: a `ResumeError`), folded, and the run goes on from where it
 * stopped, under its original deadline. A model request without its response is asked
 * again; a call with a result is not run again; a call whose handler was running is in
 * doubt: it runs again only when that is safe (idempotent, or it cannot act), else its
 * status query decides, and without one the run ends `unknown_outcome` with the call
 * pending, never resent blindly (R3.8). A pending approval is put back with its original
 * expiry. A finished run gives its stored result. Where `options` are silent, the run goes
 * on under the limits, time limits and concurrency it started with (its `run.started`).
 *
 * @category combinators
 * @since 0.3.0
 */
export const resume = <T extends Tool.Any, RV = never, O = never>(
  runId: string,
  given: ResumeOptions<T, RV, O>,
  reason: "restart" | "manual" = "manual"
): Effect.Effect<RunResult.Typed<O>, ResumeError, Requirements<T, RV> | Journal.Journal> =>
  Effect.flatMap(Effect.service(Journal.Journal), (journal) => {
    // Read once, before the run is held: arguments it cannot read are a typed error (R12).
    const read = Launch.readResume(runId, given, reason)
    if (Result.isFailure(read)) return Effect.fail(read.failure)
    const options = read.success
    // Held from before its log is read: a run this process drives already is not driven twice.
    return Launch.holding(
      journal,
      runId,
      (hold) =>
        Effect.flatMap(JournalLoad.load(journal, runId, options.tools, options.modelName), (loaded) => {
          // Erased boundary: the stored result is the run's own, its `output` decoded by the schema of `O` it ran with.
          if (loaded._tag === "Finished") {
            return Effect.succeed(FinalOutput.restored(loaded.result, options.output) as RunResult.Typed<O>)
          }
          const merged = Launch.resumedOptions(runId, options, loaded)
          if (Result.isFailure(merged)) return Effect.fail(merged.failure)
          return typed<O, Requirements<T, RV>>(
            Launch.launch(merged.success, Launch.cancel, {
              restored: loaded,
              resume: loaded.started === undefined ? undefined : { reason },
              hold
            })
          )
        }),
      Effect.fail(Launch.running(runId))
    )
  })

/**
 * Resumes every unfinished run of the journal (R9), after a crash or a restart, each
 * with the same options, and gives each one's result, or why it cannot be resumed.
 * The runs go on concurrently.
 *
 * @category combinators
 * @since 0.3.0
 */
export const recover = <T extends Tool.Any, RV = never, O = never>(
  options: ResumeOptions<T, RV, O>
): Effect.Effect<
  ReadonlyArray<Result.Result<RunResult.Typed<O>, ResumeError>>,
  ResumeError,
  Requirements<T, RV> | Journal.Journal
> =>
  Effect.flatMap(Effect.service(Journal.Journal), (journal) => {
    // Options it cannot read fail the recovery at once: each run's resume would refuse them.
    const read = Launch.readResume("*", options, "restart")
    if (Result.isFailure(read)) return Effect.fail(read.failure)
    return Effect.flatMap(
      Effect.mapError(
        journal.unfinished,
        (e) => new ResumeError({ runId: "*", reason: e.isRetryable ? "unavailable" : "failed", detail: e.message })
      ),
      (ids) =>
        Effect.forEach(ids, (id) => Effect.result(resume(id, read.success, "restart")), { concurrency: "unbounded" })
    )
  })

/**
 * {@link run} for code that wants only a completed run: a run that ends in any other status
 * fails with `RunResult.RunStopped`, which carries the whole result (stop reason, timeline,
 * pending actions), so `Effect.catchTag("RunStopped", ...)` can still read it. Like `run`,
 * it never fails for any other reason.
 *
 * @category combinators
 * @since 0.2.0
 */
export const runOrFail = <T extends Tool.Any, RV = never, O = never>(
  options: Options<T, RV, O>
): Effect.Effect<RunResult.Typed<O>, RunResult.RunStopped, Requirements<T, RV>> =>
  Effect.flatMap(run(options), (result) =>
    RunResult.isCompleted(result) ? Effect.succeed(result) : Effect.fail(new RunResult.RunStopped({ result }))
  )

/**
 * A run started in the background.
 *
 * @category models
 * @since 0.1.0
 */
export interface Handle<O = never> {
  readonly runId: string
  /** Every event from the first, then live ones, ending with `run.finished`. */
  readonly events: Stream.Stream<Event.Event>
  /** The run's current state, for a UI that shows the phase (R1.3). */
  readonly state: Effect.Effect<RunState.State>
  /** Waits for the result. */
  readonly result: Effect.Effect<RunResult.Typed<O>>
  /** Cancels the run (R5.1) and waits for its result, which is then `cancelled` unless it had already ended. */
  readonly cancel: Effect.Effect<RunResult.Typed<O>>
  /**
   * Approves the call `callId` this run is waiting on (R7): the run resumes and runs
   * that exact call. Fails with `NotPending` when the call is not waiting (or its expiry
   * has come), and with `InvalidDecision` for a `by` that cannot be kept. A gate of the
   * user's whose `decide` throws or returns no Effect (a Promise) is a defect naming it.
   */
  readonly approve: (
    callId: string,
    options?: { readonly by?: string | undefined }
  ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision | Approval.Unavailable>
  /** Rejects the call `callId` this run is waiting on (R7): the run ends `approval_rejected`. */
  readonly reject: (
    callId: string,
    reason: string,
    options?: { readonly by?: string | undefined }
  ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision | Approval.Unavailable>
  /**
   * The calls of this run waiting for approval now (`PendingUnavailable`: its gate's store out
   * of reach). A gate of the user's whose `pending` is no Effect (a Promise) is a defect naming it.
   */
  readonly pendingApprovals: Effect.Effect<ReadonlyArray<Approval.Request>, Approval.PendingUnavailable>
}

/**
 * Every event of a started run from the first, then live ones, ending with `run.finished`;
 * or where the run was suspended (its process's store died at a commit): no event follows.
 */
const timeline = Effect.fnUntraced(function* (
  ctx: RunContext.RunContext,
  feed: Effect.Effect<PubSub.PubSub<Event.Event>>,
  done: Launch.Done
) {
  const subscription = yield* PubSub.subscribe(yield* feed)
  const past = ctx.events.slice()
  const live = Stream.fromSubscription(subscription).pipe(Stream.filter((e) => e.seq >= past.length))
  const suspended = Effect.flatMap(Effect.exit(Deferred.await(done)), (exit) =>
    Exit.isSuccess(exit) ? Effect.never : Effect.void
  )
  return Stream.concat(Stream.fromIterable(past), live).pipe(
    Stream.takeUntil((e) => e._tag === "run.finished"),
    Stream.interruptWhen(suspended)
  )
})

/**
 * The calls a gate lists (its `pending`), checked where they enter (R12), as its decisions
 * are: a list of requests, each made the handle's own copy of what was checked. A list that
 * is none, or whose reading throws, is the gate's defect, named.
 */
const checkPending = UserCode.check(
  Schema.Array(
    Schema.Struct({
      runId: Schema.String,
      callId: Schema.String,
      tool: Schema.String,
      arguments: Schema.Record(Schema.String, Schema.Unknown),
      sideEffect: Tool.SideEffect,
      requestedAt: Schema.Number,
      expiresAt: Schema.Number
    })
  ),
  "the approval gate's pending"
)

/**
 * The calls of `runId` a gate lists (every run's), picked out before they are checked and copied
 * (review 196); what is no other run's request is checked.
 */
const pendingOf = (listed: unknown, runId: string): Effect.Effect<ReadonlyArray<Approval.Request>> => {
  let own: unknown = listed
  try {
    if (Array.isArray(listed))
      own = listed.filter((r) => !Predicate.isObject(r) || typeof r.runId !== "string" || r.runId === runId)
  } catch {} // A list whose reading throws: the check names it.
  return UserCode.checkedOrDie(checkPending(own))
}

/**
 * A started run's handle: one object, its operations made when they are used (a parked
 * run keeps its handle, and a handle of closures made up front would cost it more).
 */
class RunHandle<O> implements Handle<O> {
  readonly runId: string
  readonly #ctx: RunContext.RunContext
  readonly #done: Launch.Done
  readonly #fiber: Fiber.Fiber<void>
  readonly #gate: Approval.Gate
  /** The live feed: it exists only once somebody subscribes; the past comes from the log. */
  #pubsub: PubSub.PubSub<Event.Event> | undefined = undefined

  constructor(ctx: RunContext.RunContext, done: Launch.Done, fiber: Fiber.Fiber<void>, gate: Approval.Gate) {
    this.runId = ctx.runId
    this.#ctx = ctx
    this.#done = done
    this.#fiber = fiber
    this.#gate = gate
  }

  get events(): Stream.Stream<Event.Event> {
    const feed = Effect.suspend(() => {
      if (this.#pubsub !== undefined) return Effect.succeed(this.#pubsub)
      return Effect.map(PubSub.unbounded<Event.Event>(), (created) => {
        this.#pubsub = created
        this.#ctx.listeners.push((event) => {
          PubSub.publishUnsafe(created, event)
        })
        return created
      })
    })
    return Stream.unwrap(timeline(this.#ctx, feed, this.#done))
  }

  get state(): Effect.Effect<RunState.State> {
    return Effect.sync(() => RunContext.state(this.#ctx))
  }

  get result(): Effect.Effect<RunResult.Typed<O>> {
    return typed<O, never>(Deferred.await(this.#done))
  }

  get cancel(): Effect.Effect<RunResult.Typed<O>> {
    return Effect.andThen(Effect.ignore(Launch.cancel(this.#ctx, this.#fiber, this.#done)), this.result)
  }

  // The gate is user code (R12): one that breaks its contract (a Promise, a throw, a failure
  // that is not `PendingUnavailable`) is a defect naming it.
  get pendingApprovals(): Effect.Effect<ReadonlyArray<Approval.Request>, Approval.PendingUnavailable> {
    const what = "the approval gate's pending"
    return Effect.map(
      Effect.flatMap(
        UserCode.orDieExcept(
          what,
          [Approval.PendingUnavailable],
          UserCode.effectOrDie(what, () => this.#gate.pending)
        ),
        (listed) => pendingOf(listed, this.runId)
      ),
      (all) => all.filter((request) => request.runId === this.runId)
    )
  }

  // Functions that work detached from the handle (`const { approve } = handle`), as fields did.
  get approve(): Handle<O>["approve"] {
    return (callId, options) =>
      Effect.flatMap(Approval.byOf(this.runId, callId, options), (by) => this.#decide(callId, Approval.approved(by)))
  }

  get reject(): Handle<O>["reject"] {
    return (callId, reason, options) =>
      Effect.flatMap(Approval.byOf(this.runId, callId, options), (by) =>
        this.#decide(callId, Approval.rejected(reason, by))
      )
  }

  /** A decision checked before it reaches the gate: one it cannot keep decides nothing. */
  #decide(
    callId: string,
    decision: Approval.Decision
  ): Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision | Approval.Unavailable> {
    const invalid = Approval.checkDecision(this.runId, callId, decision)
    if (invalid !== undefined) return Effect.fail(invalid)
    const what = "the approval gate's decide"
    return UserCode.orDieExcept(
      what,
      [Approval.NotPending, Approval.InvalidDecision, Approval.Unavailable],
      UserCode.effectOrDie(what, () => this.#gate.decide(this.runId, callId, decision))
    )
  }
}

/**
 * Starts a run in the background, in the current scope: closing the scope cancels it.
 *
 * @category combinators
 * @since 0.1.0
 */
export const start = <T extends Tool.Any, RV = never, O = never>(
  options: Options<T, RV, O>
): Effect.Effect<Handle<O>, never, Requirements<T, RV> | Scope.Scope> =>
  // Uninterruptible until the finalizer is in the scope: an interruption between the hold, the
  // fork and the finalizer would leave the run held, or its fiber behind, detached.
  Effect.uninterruptible(
    Effect.withFiber((caller) => {
      const { clock, breakers, journal } = Launch.environmentOf(caller)
      const { ctx, resolved } = Lifecycle.prepare(options, clock, breakers, journal)
      const done: Launch.Done = Deferred.makeUnsafe()
      const adopted = Launch.adopt(ctx, done, journal, undefined)
      return Effect.flatMap(Lifecycle.fork(ctx, resolved, done), (fiber) => {
        adopted(fiber)
        return Effect.as(
          // The cancel needs nothing of the caller's context: added to the scope as it is.
          Effect.flatMap(Effect.scope, (scope) => ScopedRuns.add(scope, { ctx, fiber, done })),
          new RunHandle<O>(ctx, done, fiber, caller.getRef(Approval.ApprovalGate))
        )
      })
    })
  )
