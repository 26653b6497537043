/**
 * How a run is set going from the caller's fiber, for `Run` and `RunHost`: its context
 * prepared, its lifecycle forked detached, and its caller waiting for its ending. What an
 * interruption of the caller means is the caller's to say: a cancel (`Run.run`) or, for a
 * hosted run, its suspension. Private to the runtime.
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, type Fiber, Option, Result } from "effect"
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Journal from "../../journal/Journal.ts"
import * as Breakers from "../../recovery/Breakers.ts"
import * as Termination from "../../termination/Termination.ts"
import type * as Tool from "../../tools/Tool.ts"
import type * as Validation from "../../validation/Validation.ts"
import * as JournalLoad from "../journal/JournalLoad.ts"
import * as Lifecycle from "../lifecycle/Lifecycle.ts"
import { ResumeError } from "../ResumeError.ts"
import type { InvalidRunOptions, Options, Requirements } from "../RunOptions.ts"
import type * as RunResult from "../RunResult.ts"
import * as RunContext from "./RunContext.ts"
import { resolve } from "./resolve/Resolve.ts"

/** A run's ending: its result, or the suspension its host made of it. */
export type Done = Deferred.Deferred<RunResult.RunResult, RunContext.Suspended>

/** A run's log as its journal holds it, to go on from. */
export type Restored = Extract<JournalLoad.Loaded, { readonly _tag: "Open" }>

/** What became of a run, to its caller. */
export type Ended = Effect.Effect<RunResult.RunResult, RunContext.Suspended>

/** Why a resumed run goes on: a process restart, or a caller's `resume`. */
export interface Resume {
  readonly reason: "restart" | "manual"
}

/**
 * Stops a run from outside (a cancel) and waits for its ending, which comes within the
 * run's stop grace even when what it interrupted cannot be interrupted.
 */
export const cancel = (ctx: RunContext.RunContext, fiber: Fiber.Fiber<void>, done: Done): Ended =>
  Effect.suspend(() => {
    signalCancel(ctx, fiber)
    return Deferred.await(done)
  })

/**
 * A cancel's stop of the run, given now: the run ends within its stop grace (see {@link
 * cancel}); one writing its ending is left to write it.
 */
export const signalCancel = (ctx: RunContext.RunContext, fiber: Fiber.Fiber<void>): void => {
  if (RunContext.finishing(ctx)) return
  RunContext.stopping(ctx, "cancel")
  fiber.interruptUnsafe()
}

/** Takes a hosted run away (see `RunContext.suspend`) and waits for it to stop, as {@link cancel} does. */
export const suspend = (
  ctx: RunContext.RunContext,
  fiber: Fiber.Fiber<void>,
  done: Done,
  why: RunContext.Suspended["why"]
): Ended =>
  Effect.suspend(() => {
    // A run already ending is left to end: its result is what comes.
    if (RunContext.suspend(ctx, why)) fiber.interruptUnsafe()
    return Deferred.await(done)
  })

/** Where a launched run sets off from, and who watches it. */
export interface From {
  /** The run's log as its journal holds it, to go on from; absent for a fresh run. */
  readonly restored?: Restored | undefined
  /** Why a restored run goes on (absent: it had not started, and starts now). */
  readonly resume?: Resume | undefined
  /** A cancel its host has for it already: recorded before the run does anything. */
  readonly cancelled?: boolean | undefined
  /**
   * When its host was asked to start it (milliseconds since the epoch), if before now: a
   * fresh run's deadline counts from then (a durable run started while no runner lived).
   */
  readonly startedAt?: number | undefined
  /** Why its host refuses to start it (a tool it has not): a fresh run ends at once, as for invalid options. */
  readonly refused?: InvalidRunOptions | undefined
  /** Sees the run once it is going (a host arms its own stops there). */
  readonly watch?: ((ctx: RunContext.RunContext, fiber: Fiber.Fiber<void>, done: Done) => void) | undefined
  /** The hold its caller took on the run before reading its log, for the run's fiber to adopt. */
  readonly hold?: Hold | undefined
}

/**
 * A run held for this process by its caller (see `Journal.LiveRuns`) before it read the
 * log, until the fiber that drives the run adopts the hold: the run is then let go when
 * that fiber ends, which may be after its result (a handler that ignores interruption).
 */
export interface Hold {
  readonly release: () => void
  adopted: boolean
}

/**
 * `use` with the run `runId` held for this process, or `onHeld` when this process drives
 * it already. The hold is let go when `use` ends, unless the run it launched adopted it.
 */
export const holding = <A, E, R>(
  journal: Journal.Service,
  runId: string,
  use: (hold: Hold) => Effect.Effect<A, E, R>,
  onHeld: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  // Taken and given its release in one step: an interruption between the two would keep the run held for good.
  Effect.uninterruptibleMask((restore) => {
    const release = journal.live.hold(runId)
    if (release === undefined) return restore(onHeld)
    const hold: Hold = { release, adopted: false }
    // `use` is built inside the ensuring: one that throws while being built (options it cannot read) lets the run go.
    return Effect.ensuring(
      restore(Effect.suspend(() => use(hold))),
      Effect.sync(() => {
        if (!hold.adopted) release()
      })
    )
  })

/**
 * The arguments of a resume, read once (R12): options that are an object, each field read
 * once (a getter that throws is a typed error, not a defect), and a known reason.
 */
export const readResume = <A extends object>(
  runId: string,
  options: A,
  reason: unknown
): Result.Result<A, ResumeError> => {
  const invalid = (detail: string) => Result.fail(new ResumeError({ runId: String(runId), reason: "invalid", detail }))
  if (reason !== "restart" && reason !== "manual") {
    return invalid(`the reason of a resume is "restart" or "manual", not ${UserCode.kindOf(reason)}`)
  }
  if (typeof options !== "object" || options === null) {
    return invalid(`the options of a resume are an object ({ tools, ... }), not ${UserCode.kindOf(options)}`)
  }
  try {
    return Result.succeed({ ...options })
  } catch (error) {
    return invalid(`its options could not be read: ${UserCode.threw("a getter", error).safeMessage}`)
  }
}

/** `runId` is driven by this process already: a second driver is refused. */
export const running = (runId: string): ResumeError =>
  new ResumeError({
    runId,
    reason: "running",
    detail:
      "this process drives the run now (Run.run, Run.start, Run.resume or a host): wait for its result, or cancel it before resuming it"
  })

/** What a run not held here does with its fork: nothing. */
const unheld = (_: Fiber.Fiber<void>): void => {}

/**
 * The run's fiber holds the run until it ends: the caller's hold, or for a fresh run one
 * taken now if the run is free (a run id live already fails at its first commit, which
 * finds the run created). Taken before the run is forked, with how a host's cancel reaches
 * it meanwhile (R5.1, the journal's live runs): that cancel waits for the fork, which the
 * function returned is given. A host's cancel then stops this run, not a second driver of it.
 */
export const adopt = (
  ctx: RunContext.RunContext,
  done: Done,
  journal: Journal.Service | undefined,
  hold: Hold | undefined
): ((fiber: Fiber.Fiber<void>) => void) => {
  const release = hold?.release ?? journal?.live.hold(ctx.runId)
  if (hold !== undefined) hold.adopted = true
  if (release === undefined || journal === undefined) return unheld
  const forked = Deferred.makeUnsafe<Fiber.Fiber<void>>()
  journal.live.cancelWith(ctx.runId, Effect.ignore(Effect.flatMap(Deferred.await(forked), (f) => cancel(ctx, f, done))))
  return (fiber) => {
    fiber.addObserver(release)
    Deferred.doneUnsafe(forked, Exit.succeed(fiber))
  }
}

/** A fresh run, not resumed and not cancelled: shared by every such run. */
const fresh: From = {}

/** What a run takes from the fiber that starts it: its clock, its circuit breakers and its journal. */
export const environmentOf = (caller: Fiber.Fiber<unknown, unknown>) => ({
  clock: caller.getRef(Clock.Clock),
  breakers: caller.getRef(Breakers.Breakers),
  journal: Option.getOrUndefined(Context.getOption(caller.context, Journal.Journal))
})

/**
 * A run, fresh or resumed from its journal's log, set going in a fiber of its own, so that
 * its deadline and cancellation can interrupt everything it started and still produce a
 * result. An interruption of the caller is handed to `onInterrupt`, and the caller then
 * waits for the run to stop.
 */
export const launch = <T extends Tool.Any, RV, O>(
  options: Options<T, RV, O>,
  onInterrupt: (ctx: RunContext.RunContext, fiber: Fiber.Fiber<void>, done: Done) => Ended,
  from: From = fresh
): Effect.Effect<RunResult.RunResult, RunContext.Suspended, Requirements<T, RV>> =>
  Effect.withFiber((caller) => {
    const { clock, breakers, journal } = environmentOf(caller)
    const { ctx, resolved } = Lifecycle.prepare(options, clock, breakers, journal, from.restored, from)
    const done: Done = Deferred.makeUnsafe()
    // Uninterruptible until the wait: an interruption between the fork and the wait would
    // leave the run's fiber behind, detached.
    return Effect.uninterruptibleMask((restore) => {
      const adopted = adopt(ctx, done, journal, from.hold)
      return Effect.flatMap(Lifecycle.fork(ctx, resolved, done, from), (fiber) => {
        adopted(fiber)
        from.watch?.(ctx, fiber, done)
        return Effect.onInterrupt(restore(Deferred.await(done)), () => onInterrupt(ctx, fiber, done))
      })
    })
  })

/** Why options cannot start a run (the field and the reason), or `undefined` when they can. */
export const checkOptions = <T extends Tool.Any, RV, O>(options: Options<T, RV, O>): InvalidRunOptions | undefined => {
  const resolved = resolve(options)
  return Result.isFailure(resolved) ? resolved.failure : undefined
}

/**
 * Why the plan a resumed run is given is not the one its log recorded (R6, R9), if it is
 * not: a run is judged by the plan it started with, which its log's `plan.set` says (a log
 * that reached `planning` without one: no plan). A run resumed before `planning` records
 * the plan it is given then.
 */
const planIssue = (
  events: ReadonlyArray<Event.Event>,
  plan: ReadonlyArray<Validation.PlanStep>
): string | undefined => {
  if (!events.some((e) => e._tag === "state.changed" && e.from === "initializing")) return undefined
  const recorded = events.findLast((e): e is Event.Of<"plan.set"> => e._tag === "plan.set")?.steps ?? []
  const same =
    recorded.length === plan.length &&
    recorded.every(
      (r, i) => r.id === plan[i]?.id && r.description === plan[i]?.description && r.required === plan[i]?.required
    )
  if (same) return undefined
  const shown = (steps: ReadonlyArray<{ readonly id: string; readonly required: boolean }>) =>
    steps.length === 0 ? "none" : steps.map((s) => JSON.stringify(s.id) + (s.required ? "" : " (optional)")).join(", ")
  return (
    `its validation.plan (steps ${shown(plan)}) is not the plan the run started with (steps ${shown(recorded)}, ` +
    "as its plan.set records them): a run is judged by the plan it started with, so give that one"
  )
}

/**
 * Why a resume given no `policies` would not go on under the termination policies the run
 * started with (R2.2, R9), if it would not: its `run.started` names policies of the user's
 * (`ownPolicies`: code, which the log cannot keep), or a list the defaults are not (one
 * removed, or moved). A resume that says nothing of them would change them silently, and
 * the loops they stopped would run on. A resume that gives `policies` chooses them.
 */
const droppedPolicies = (
  started: Event.Of<"run.started"> | undefined,
  resolved: { readonly loop: { readonly policies: ReadonlyArray<Termination.Policy> } }
): string | undefined => {
  const recorded = started?.policies
  if (recorded === undefined) return undefined
  const now = Termination.names(resolved.loop.policies)
  const own = started?.ownPolicies ?? recorded.filter((name) => !now.includes(name))
  const same = recorded.length === now.length && recorded.every((name, i) => name === now[i])
  if (own.length === 0 && same) return undefined
  const shown = (names: ReadonlyArray<string>) => names.map((name) => JSON.stringify(name)).join(", ")
  const which =
    own.length > 0
      ? `policies of its own (${shown(own)}, as its run.started records them)`
      : `other termination policies than the defaults (${shown(recorded)}, as its run.started records them)`
  return (
    `the run started with ${which}, which its resume, given no policies, would not go on under: ` +
    "a policy is code, which the log cannot keep; give the run's policies again (or a list of your choice)"
  )
}

/**
 * The options a run of the journal goes on under: the caller's, and where they are silent,
 * those it started with (its `run.started`). Options the caller gave that do not resolve
 * are the caller's to fix (`invalid`): nothing is written, and the run stays in its journal
 * as it was, its calls in doubt still there for a resume that can go on (review 88: it
 * ended as a fresh run does, with a result its journal did not hold). Recorded options
 * that no longer resolve are the log's damage (`corrupt`). A plan other than the one
 * the run started with is refused (`invalid`), and so are no policies for a run that started
 * with its own; not for a run resumed to be cancelled (`cancelling`), which runs nothing.
 */
export const resumedOptions = <T extends Tool.Any, RV, O>(
  runId: string,
  options: Omit<Options<T, RV, O>, "goal" | "system" | "runId">,
  loaded: Restored,
  /** A run resumed to be cancelled runs nothing: no plan judges it, no policy stops it. */
  cancelling = false
): Result.Result<Options<T, RV, O>, ResumeError> => {
  const invalid = (why: string) =>
    Result.fail(
      new ResumeError({ runId, reason: "invalid", detail: `${why}; nothing was written, the run is as it was` })
    )
  // `given`, and where it is silent the options the run started with (its `run.started`, or
  // for a run that never began its loop, its header's).
  const withStarted = (given: typeof options): Options<T, RV, O> => {
    const startedAs = loaded.started === undefined ? loaded.startedAs : undefined
    // The limits in force: those a resume went on under, when one recorded them (its `run.resumed`).
    const inForce =
      loaded.started === undefined ? undefined : { ...loaded.started, limits: RunLog.limitsOf(loaded.events) }
    const withRecorded = { ...JournalLoad.startedWith(given, inForce ?? startedAs), goal: loaded.goal }
    // A run that starts again under the options its header kept keeps its time limit too (its
    // deadline, absolute, is kept by `Lifecycle.prepare`), so that its new `run.started` says the same.
    return startedAs?.limits?.runTimeoutMillis === undefined || given.time?.run !== undefined
      ? withRecorded
      : { ...withRecorded, time: { ...withRecorded.time, run: Duration.millis(startedAs.limits.runTimeoutMillis) } }
  }
  // The caller's options first, alone: what they cannot be (read, or work) is theirs to fix.
  const own = resolve({ ...options, goal: loaded.goal }, "resumed")
  if (Result.isFailure(own)) return invalid(`its options cannot work (${own.failure.message})`)
  const otherPlan = cancelling ? undefined : planIssue(loaded.events, own.success.validation.plan ?? [])
  if (otherPlan !== undefined) return invalid(otherPlan)
  let merged: Options<T, RV, O>
  try {
    merged = withStarted(options)
  } catch (error) {
    // A getter that answered the check above and throws now (R12).
    return invalid(`its options could not be read (${UserCode.threw("a getter", error).safeMessage})`)
  }
  const resolved = resolve(merged, "resumed")
  if (Result.isSuccess(resolved)) {
    const dropped =
      options.policies === undefined && !cancelling
        ? droppedPolicies(loaded.started ?? loaded.startedAs, resolved.success)
        : undefined
    return dropped === undefined ? Result.succeed(merged) : invalid(dropped)
  }
  // Each resolves, the two together do not: whose they are, the record alone tells (review 89:
  // a policy of the caller's that conflicted with a recorded limit was called the log's damage).
  const recordedAlone = resolve(withStarted({ tools: options.tools }), "resumed")
  if (Result.isSuccess(recordedAlone)) {
    return invalid(`its options do not fit those the run started with (${resolved.failure.message})`)
  }
  const detail = `the options recorded in run.started do not resolve: ${resolved.failure.message}`
  return Result.fail(new ResumeError({ runId, reason: "corrupt", detail }))
}
