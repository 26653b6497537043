/**
 * The lifecycle of one run around the loop: options resolved once, the run's single
 * deadline, validation, and the one terminal entry point. Private to the
 * runtime; `Run` is the public face.
 */
import { type Clock, Deferred, Effect, type Fiber, Predicate, Result } from "effect"
import * as RunLog from "../../events/RunLog.ts"
import type * as Journal from "../../journal/Journal.ts"
import type * as Model from "../../model/Model.ts"
import * as Breakers from "../../recovery/Breakers.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as RealTime from "../../time/RealTime.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as Spans from "../../tracing/Spans.ts"
import * as Validation from "../../validation/Validation.ts"
import * as Commit from "../internal/Commit.ts"
import * as RunContext from "../internal/RunContext.ts"
import { randomRunId } from "../internal/RunId.ts"
import type { Ending } from "../internal/RunOutcome.ts"
import { recordedLimits, sameLimits } from "../internal/resolve/RecordedLimits.ts"
import { defaultStopGraceMillis, type Resolved, resolve } from "../internal/resolve/Resolve.ts"
import type * as JournalLoad from "../journal/JournalLoad.ts"
import * as JournalSink from "../journal/JournalSink.ts"
import * as Loop from "../loop/Loop.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import * as RunObserver from "../RunObserver.ts"
import * as RunOptions from "../RunOptions.ts"
import { Closing, type Done, failedRun, type Given } from "./internal/Closing.ts"
import { interrupted, judged } from "./internal/Judgement.ts"
import { attach } from "./internal/Observers.ts"
import { started } from "./internal/Started.ts"

export type { CommitError, RunContext, Sink, Suspended } from "../internal/RunContext.ts"
export type { Resolved } from "../internal/resolve/Resolve.ts"
/** The internal types this module's functions take and give, and those they hold, named for their callers (ARCHITECTURE.md rule 4). */
export type { Loaded } from "../journal/JournalLoad.ts"
export type { Done } from "./internal/Closing.ts"

/** Invalid options end the run at once, saying which field and why. */
const invalid = (ctx: RunContext.RunContext, issue: RunOptions.InvalidRunOptions): Ending => {
  // The log says what the result says: an explanation from the log alone agrees with it (R13).
  RunContext.decided(ctx, "runtime", "internal_error", issue.message)
  return { status: "failed", stopReason: "internal_error", policy: "runtime", detail: issue.message }
}

/**
 * The plan's record, if the run has one. The records of this file are made by functions
 * of their own: what an event is built from stays out of the closures that outlive it.
 */
const recordPlan = (ctx: RunContext.RunContext, plan: ReadonlyArray<Validation.PlanStep>): void => {
  if (plan.length === 0) return
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "plan.set",
    steps: plan.map((s) => ({ id: s.id, description: s.description, required: s.required })),
    runId,
    seq,
    at
  }))
}

/** A resumed run's record: why it goes on, and the calls it found in doubt. */
const recordResumed = (
  ctx: RunContext.RunContext,
  reason: "restart" | "manual",
  inDoubt: ReadonlyArray<string>,
  limits: Readonly<Record<string, number>> | undefined
): void => {
  const closer = ctx.deadlineAt < RunLog.deadlineOf(ctx.events)
  // Other limits than the log says (given to the resume) are recorded: the log alone tells
  // what stopped the run (R13). The run's time limit is its deadline's, recorded apart.
  const { runTimeoutMillis: _, ...given } = limits ?? {}
  const other = limits !== undefined && !sameLimits(given, RunLog.limitsOf(ctx.events) ?? {})
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "run.resumed",
    fromSeq: seq,
    reason,
    inDoubt,
    ...(closer ? { deadlineAt: ctx.deadlineAt } : {}),
    ...(other ? { limits: given } : {}),
    runId,
    seq,
    at
  }))
}

/**
 * The run from its first phase to its ending: the plan, the loop, then validation of the
 * loop's outcome. The phases before the loop hand over to it (`flatMap`), so none of them
 * stays on the stack while it runs.
 */
const lifecycle = <RV, R>(ctx: RunContext.RunContext, checked: Checked<RV, R>) =>
  Effect.flatMap(RunContext.transition(ctx, "initializing"), () => {
    if (Result.isFailure(checked)) return Effect.succeed(invalid(ctx, checked.failure))
    const resolved = checked.success
    // Cancelled before it began (a host's cancel that came first): it ends so at once.
    if (ctx.log.stopping !== undefined) return interrupted(ctx, resolved.validation, resolved.loop.registry.tools)
    return Effect.flatMap(RunContext.transition(ctx, "planning"), () => {
      recordPlan(ctx, resolved.validation.plan ?? [])
      // A durable run is in its journal before the model is first asked: a crash from here on
      // leaves a run to resume, and an id the journal holds already stops it before any call (R9).
      return Effect.andThen(Commit.barrier(ctx), () =>
        Effect.flatMap(Loop.run(ctx, resolved.loop), (outcome) => judged(ctx, resolved, outcome))
      )
    })
  })

/**
 * The stop the loop of a restored log had decided (its `termination.decided`) before
 * the log stopped, with the final answer it decided on: the run goes on to validation.
 */
const decidedIn = (ctx: RunContext.RunContext): Loop.Outcome | undefined => {
  const decided = ctx.events.findLast((e) => e._tag === "termination.decided")
  if (decided?._tag !== "termination.decided") return undefined
  const answer = ctx.events.findLast((e) => e._tag === "model.responded")
  return {
    reason: decided.reason,
    policy: decided.policy,
    detail: decided.detail,
    finalAnswer: decided.reason === "goal_reached" && answer?._tag === "model.responded" ? answer.text : undefined
  }
}

/**
 * A resumed run from where its committed log stopped (R9): the phases it had not reached
 * yet, then its loop from the fold (or, if the loop had decided, that stop), then
 * validation. A run whose log says it was being stopped ends as that stop.
 */
const resumedLifecycle = Effect.fnUntraced(function* <RV, R>(ctx: RunContext.RunContext, checked: Checked<RV, R>) {
  if (Result.isFailure(checked)) return invalid(ctx, checked.failure)
  const resolved = checked.success
  // Stopped (its host's cancel, a stop its log recorded) or decided, it is judged once the waits
  // its log left open have ended, as a live run's waits end first (R1.2, R5.3, R6.3; review 125).
  if (ctx.log.stopping !== undefined) {
    yield* ToolExecutor.settleUntaken(ctx, resolved.registry)
    return yield* interrupted(ctx, resolved.validation, resolved.registry.tools)
  }
  if (RunContext.state(ctx) === "created") yield* RunContext.transition(ctx, "initializing")
  if (RunContext.state(ctx) === "initializing") {
    yield* RunContext.transition(ctx, "planning")
    recordPlan(ctx, resolved.validation.plan ?? [])
  }
  const decided = decidedIn(ctx)
  if (decided !== undefined) yield* ToolExecutor.settleUntaken(ctx, resolved.registry)
  return yield* judged(ctx, resolved, decided ?? (yield* Loop.run(ctx, resolved.loop, true)))
})

/**
 * How long a run resumed past its deadline gives the status queries of its calls in doubt,
 * each also within its tool's own timeout (DURABILITY.md §5a, resume step 8).
 */
const lateGraceMillis = 5_000

/**
 * A run resumed past its deadline with calls in doubt that a status query can settle
 * (R3.8, R3.11): recording the truth is not waiting, so each is asked, within
 * {@link lateGraceMillis} (the run's alarm then stops what is left), and none is sent
 * again; then the run ends `run_timeout`, as its deadline says.
 */
const lateLifecycle = <RV, R>(ctx: RunContext.RunContext, resolved: Resolved<RV, R>, until: number) =>
  Effect.andThen(Deadline.run(Loop.reconcileLate(ctx, resolved.loop), until), RunContext.expire(ctx))

/** The options resolved, or the field that cannot work. */
type Checked<RV, R> = Result.Result<Resolved<RV, R>, RunOptions.InvalidRunOptions>

/** The run id options give, when it is one (read safely: a caller without types may give whatever). */
const givenRunId = (options: unknown): string | undefined => {
  try {
    const id = Predicate.hasProperty(options, "runId") ? options.runId : undefined
    return RunOptions.isRunId(id) ? id : undefined
  } catch {
    return undefined
  }
}

/**
 * The run's context, with its options resolved once; the clock is the caller's. With a
 * journal, the run commits to it (R9); a run resumed from its journal's log (`restored`)
 * goes on from the log's fold, under its own id and its original deadline.
 */
export const prepare = <T extends Tool.Any, RV, O>(
  options: RunOptions.Options<T, RV, O>,
  clock: Clock.Clock,
  breakers: Breakers.Service | undefined,
  journal?: Journal.Service | undefined,
  restored?: Extract<JournalLoad.Loaded, { readonly _tag: "Open" }>,
  host: {
    /** When the run's host was asked to start it: a fresh run's deadline counts from then. */
    readonly startedAt?: number | undefined
    /** Why its host refuses the start (a tool it has not): the run ends at once, as for invalid options. */
    readonly refused?: RunOptions.InvalidRunOptions | undefined
  } = {}
): {
  readonly ctx: RunContext.RunContext
  readonly resolved: Checked<RV, Tool.Requirements<T>>
} => {
  const started = restored?.started
  const { startedAt, refused } = host
  const checked = resolve(
    restored === undefined
      ? options
      : {
          ...options,
          runId: restored.runId,
          goal: started?.goal ?? restored.goal,
          ...((started?.system ?? restored.system) === undefined ? {} : { system: started?.system ?? restored.system })
        },
    restored === undefined ? "fresh" : "resumed",
    restored?.secretKey
  )
  const resolved = refused === undefined || restored !== undefined ? checked : Result.fail(refused)
  const valid = Result.getOrUndefined(checked)
  // Options refused for another field keep the run id they give: the result and the log are found under it.
  const runId = valid?.runId ?? givenRunId(options) ?? randomRunId()
  const now = clock.currentTimeMillisUnsafe()
  // A run its host was asked to start earlier counts its time from then (never from a later time).
  const fresh =
    (startedAt === undefined || restored !== undefined ? now : Math.min(startedAt, now)) + (valid?.timeoutMillis ?? 0)
  // A resumed run keeps its deadline (absolute, in its log); a `time.run` its resume gives
  // may only bring it closer: from now, if that is sooner (the resume's options are
  // silent on `run` unless the caller set it).
  const recorded = started !== undefined ? RunLog.deadlineOf(restored?.events ?? []) : restored?.startedAs?.deadlineAt
  const deadlineAt =
    recorded === undefined ? fresh : options.time?.run === undefined ? recorded : Math.min(recorded, fresh)
  const ctx = RunContext.make({
    runId,
    clock,
    deadlineAt,
    stopGraceMillis: valid?.stopGraceMillis ?? defaultStopGraceMillis,
    breakers,
    // Options that cannot start a run write nothing: the id stays free for the corrected start,
    // and a run resumed with them stays in its journal as it was (R9, R12).
    journal:
      journal === undefined || valid === undefined
        ? undefined
        : JournalSink.sink(
            journal,
            runId,
            valid.registry.tools.values(),
            restored !== undefined,
            valid.registry.secretKey
          ),
    restored: restored?.events
  })
  return { ctx, resolved }
}

/**
 * The run's one deadline, on the run's `Clock` (the live clock and `TestClock` take this
 * same path): an alarm that records that it found the run there, then interrupts the
 * run's fiber. No wait inside the run needs a timer for the run layer.
 */
const deadline = (ctx: RunContext.RunContext, run: Fiber.Fiber<unknown, unknown>, at: number) =>
  Deadline.alarm(at, () => {
    // A run writing its ending is left to write it: it is in time.
    if (RunContext.finishing(ctx)) return
    RunContext.stopping(ctx, "deadline")
    run.interruptUnsafe()
  })

/**
 * How a run sets off: fresh, or going on from its journal's log (`resume`: a process
 * restart, a caller's `resume`); `cancelled` when its host has a cancel for it already.
 */
export interface Start {
  readonly resume?: { readonly reason: "restart" | "manual" } | undefined
  readonly cancelled?: boolean | undefined
}

/** A fresh start, shared by every run started so (a default `{}` would be one more object kept per run). */
const fresh: Start = {}

/**
 * The whole run, to be run in its own fiber: the lifecycle, interruptible by the run's
 * one deadline (an alarm on its clock that interrupts this fiber) and by `cancel`; then,
 * uninterruptibly, the ending, which completes `done` (the fiber's own exit is an
 * interruption when it was interrupted).
 *
 * The fiber is also watched from outside: however it ends, even skipping its own ending
 * (see `Closing`), `done` gets a result (R12). Stopped from outside, the run gives
 * its result within the stop grace, even if what it interrupted cannot be interrupted.
 * A run its host suspended (`RunContext.suspend`) ends `done` with that suspension
 * instead, and writes nothing more.
 */
export const execute = <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Checked<RV, R>,
  done: Done,
  start: Start = fresh
): Effect.Effect<void, never, R | RV | Model.Model> =>
  // `done` is completed once the run's span has ended: a caller that exports it on return has it.
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Spans.run(execution(ctx, resolved, done, start, restore), ctx.runId, failedRun), (exit) =>
      exit === undefined ? Effect.void : Deferred.done(done, exit)
    )
  )

/** Lets the lifecycle be interrupted inside the uninterruptible run. */
type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** The run, to its ending: what `done` gets, or nothing when it was given outside this fiber. */
const execution = <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Checked<RV, R>,
  done: Done,
  // Read once here: the closures of the run keep what they read, not its host's `Start`.
  { resume, cancelled }: Start,
  restore: Restore
): Effect.Effect<Given | undefined, never, R | RV | Model.Model> =>
  Effect.withFiber((self) => {
    const valid = Result.getOrUndefined(resolved)
    const grace = valid?.stopGraceMillis ?? defaultStopGraceMillis
    const closing = new Closing(
      ctx,
      done,
      valid?.registry,
      attach(ctx, self.getRef(RunObserver.RunObservers), grace),
      self.context,
      self.getRef(RealTime.Waits),
      grace
    )
    if (valid !== undefined) {
      const graceMillis = valid.stopGraceMillis
      const plan = valid.validation.plan
      // Another process taking the run over interrupts it too, bound by the stop grace (reviews 134, 137).
      ctx.onStop = (fenced) => {
        if (fenced === true) self.interruptUnsafe()
        closing.stopped(graceMillis, plan)
      }
    }
    // However the fiber ends, even skipping its own ending, `done` gets a result (R12).
    self.addObserver((exit) => closing.fiberEnded(exit))
    // When a run resumed past its deadline stops asking its calls in doubt what they did.
    let lateUntil: number | undefined
    if (resume === undefined) started(ctx, valid, self.getRef(Permission.Permission) === Permission.allowAll)
    else {
      // The calls in doubt are recorded as the process's stop left them: pending until settled (R3.8).
      const doubts = valid === undefined ? [] : Loop.inDoubt(ctx, valid.loop)
      recordResumed(
        ctx,
        resume.reason,
        doubts.map((d) => d.call.id),
        valid === undefined ? undefined : recordedLimits(valid)
      )
      for (const d of doubts) if (!d.recorded) ToolExecutor.recordStopped(ctx, d.call, d.attempt, d.mayHaveActed)
      const asks = doubts.some((d) => d.mayHaveActed && d.reconciles)
      if (asks && cancelled !== true && ctx.log.stopping === undefined && RunContext.deadlinePassed(ctx)) {
        lateUntil = RunContext.now(ctx) + lateGraceMillis
      }
    }
    // A cancel that came before the run went on: recorded before it does anything.
    if (cancelled === true) RunContext.stopping(ctx, "cancel")
    // With circuit breakers, the changes this run's calls cause reach its timeline (R3.9).
    const phases =
      resume === undefined
        ? lifecycle(ctx, resolved)
        : valid !== undefined && lateUntil !== undefined
          ? lateLifecycle(ctx, valid, lateUntil)
          : resumedLifecycle(ctx, resolved)
    const body =
      ctx.breakers === undefined
        ? phases
        : Effect.provideService(phases, Breakers.Observer, (transition) => {
            RunContext.emit(ctx, ({ runId, seq, at }) => ({ _tag: "circuit.changed", ...transition, runId, seq, at }))
          })
    const validation = valid?.validation ?? Validation.empty
    // Invalid options end the run at once: no deadline to watch.
    if (valid === undefined) return Effect.flatMap(Effect.exit(restore(body)), (exit) => closing.end(exit, validation))
    return Effect.flatMap(deadline(ctx, self, lateUntil ?? ctx.deadlineAt), (alarm) =>
      Effect.flatMap(Effect.exit(restore(body)), (exit) => {
        Deadline.clearAlarm(alarm)
        return closing.end(exit, validation)
      })
    )
  })

/**
 * Starts {@link execute} in a fiber of its own, detached, under the run's deadline: the
 * fiber starts with the deadline in its context, so nothing of providing it stays on the
 * run's stack.
 */
export const fork = <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Checked<RV, R>,
  done: Done,
  start?: Start
): Effect.Effect<Fiber.Fiber<void>, never, R | RV | Model.Model> =>
  Effect.forkDetach(execute(ctx, resolved, done, start), { startImmediately: true }).pipe(Deadline.run(ctx.deadlineAt))
