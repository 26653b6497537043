/**
 * Runs hosted by an engine that can take them away from a process (R9): a durable
 * workflow, a cluster shard. {@link drive} starts a run of the journal under its id, or
 * goes on with it from its log, until it finishes or parks.
 *
 * - **Parked**: when every call of the run's batch that has not ended waits for a person's
 *   decision (no handler running, none about to retry), the run stops as a crash would
 *   stop it: no terminal event, the waiting calls left pending on the journal's approvals
 *   table, and its journal keeping what the last barrier committed. It holds no fiber
 *   and no memory while it waits; the host wakes it (a decision, an expiry) and drives it
 *   again, and the run finds the decision on the table.
 * - **Taken**: an interruption of `drive` (the host suspending the run, its shard moving,
 *   its process shutting down) stops the run the same way; it is never a cancel. A cancel
 *   is the host's to deliver: `drive(..., { cancel: true })` goes on with the run and
 *   stops it `cancelled` at once.
 *
 * The run's approvals go through the journal's table (see `JournalApprovals`), so every
 * process on the same journal lists the pending calls and can decide them.
 *
 * @since 0.3.0
 */
import { Clock, Duration, Effect, Fiber, Option, Result, Schedule } from "effect"
import type * as Event from "../events/Event.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Journal from "../journal/Journal.ts"
import * as JournalApprovals from "../journal/JournalApprovals.ts"
import * as Durations from "../time/Durations.ts"
import * as Approval from "../tools/Approval.ts"
import * as Permission from "../tools/Permission.ts"
import type * as Tool from "../tools/Tool.ts"
import * as FinalOutput from "./internal/FinalOutput.ts"
import * as HostPark from "./internal/HostPark.ts"
import * as Launch from "./internal/Launch.ts"
import * as RunContext from "./internal/RunContext.ts"
import * as JournalLoad from "./journal/JournalLoad.ts"
import { ResumeError } from "./ResumeError.ts"
import { InvalidRunOptions, isRunId, type Options, type Requirements, runIdRule } from "./RunOptions.ts"
import type * as RunResult from "./RunResult.ts"

/**
 * What became of a hosted run: it finished (its result is in the journal), or it parked on
 * the calls it waits on, each with its absolute expiry.
 *
 * @category models
 * @since 0.3.0
 */
export type Outcome<O = never> =
  | { readonly _tag: "Finished"; readonly result: RunResult.Typed<O> }
  | { readonly _tag: "Parked"; readonly approvals: ReadonlyArray<Approval.Request> }

/**
 * @category models
 * @since 0.3.0
 */
export interface Settings {
  /** Stop the run `cancelled` as soon as it goes on (a cancel the host delivers). */
  readonly cancel?: boolean | undefined
  /**
   * When the host was asked to start the run (milliseconds since the epoch): a run the
   * journal does not hold yet counts its deadline from then, not from when a process took
   * it up (R4.1).
   */
  readonly startedAt?: number | undefined
  /**
   * Why the host refuses to start the run (a tool it was started with that this process
   * has not): a run the journal does not hold yet ends at once, `internal_error` naming the
   * field, as a run with invalid options does.
   */
  readonly refused?: InvalidRunOptions | undefined
  /** How often a waiting call reads the table for a decision made by another process. Default 1 second. */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * A call whose approval expires sooner than this is waited for in the process instead of
   * parking the run (parking and waking cost more than so short a wait). Default 1 second.
   */
  readonly parkAfter?: Duration.Input | undefined
  /**
   * Asked when the drive is interrupted: `true` when the interruption delivers a cancel (as a
   * workflow engine's does). The run is then cancelled where it stands, as `Run.start`'s cancel
   * does (what an answer it cut off had cost is counted); else it is taken away, to go on from its last commit.
   */
  readonly cancelling?: Effect.Effect<boolean> | undefined
}

/**
 * What is wrong with `settings`, if anything: a `pollInterval` or `parkAfter` that is not
 * a positive duration (a poll of no time would spin), or a `startedAt` that is not an
 * instant (finite milliseconds), as the `InvalidRunOptions` that {@link drive} fails with.
 *
 * @category validation
 * @since 0.3.0
 */
export const checkSettings = (settings: Omit<Settings, "cancel" | "refused">): InvalidRunOptions | undefined => {
  if (typeof settings !== "object" || settings === null) {
    return new InvalidRunOptions({
      path: [],
      reason: `Expected the host's settings as an object, got ${String(settings)}`
    })
  }
  const { startedAt } = settings
  // A caller without types may pass anything: a string is not coerced, NaN is no instant.
  if (startedAt !== undefined && !(typeof startedAt === "number" && Number.isFinite(startedAt))) {
    const given = typeof startedAt === "string" ? JSON.stringify(startedAt) : String(startedAt)
    return new InvalidRunOptions({ path: ["startedAt"], reason: `Expected finite epoch milliseconds, got ${given}` })
  }
  for (const name of ["pollInterval", "parkAfter"] as const) {
    const given = settings[name]
    if (given === undefined) continue
    const millis = Durations.millisOf(given) ?? Number.NaN
    // A poll must come some time (`parkAfter` may be never: the run then never parks).
    if (!(millis > 0) || (name === "pollInterval" && !Number.isFinite(millis))) {
      // Positive, but less than effect counts (`1e-9`): refused as what it is, not as one that is not positive.
      const expected = Durations.belowResolution(given)
        ? `a duration of ${Durations.atLeastOneNanosecond}`
        : name === "pollInterval"
          ? "a positive, finite duration"
          : "a positive duration"
      return new InvalidRunOptions({ path: [name], reason: `Expected ${expected}, got ${UserCode.shown(given)}` })
    }
  }
  const { cancelling } = settings
  if (cancelling !== undefined && !Effect.isEffect(cancelling)) {
    return new InvalidRunOptions({
      path: ["cancelling"],
      reason: `Expected an Effect, got ${UserCode.shown(cancelling)}`
    })
  }
  return undefined
}

/** The run id a host drives, checked as `Run.Options.runId` is. */
const checkRunId = (runId: unknown): InvalidRunOptions | undefined =>
  isRunId(runId)
    ? undefined
    : new InvalidRunOptions({
        path: ["runId"],
        reason: `Expected ${runIdRule}, got ${UserCode.shown(runId)}`
      })

/** Options a caller without types gave: an object, before a field of it is read. */
const checkObject = (options: unknown): InvalidRunOptions | undefined =>
  typeof options === "object" && options !== null
    ? undefined
    : new InvalidRunOptions({ path: [], reason: `Expected object, got ${UserCode.shown(options)}` })

/** A store out of reach when a run has ended is read again for about a second and a half. */
const readAgain = Schedule.max([Schedule.exponential("50 millis"), Schedule.recurs(5)])

/**
 * Why a run that ended is not finished for its engine: the journal holds its own log less
 * its ending (or nothing of it), its last commits not got through. A store out of reach:
 * the engine drives it again, from that log, rather than finish a run its journal will
 * never show finished (`unavailable`). A store that refused them (`refused`): driven again,
 * it would only ask its model again and again (`failed`: the engine suspends it).
 */
const unrecorded = (runId: string, stopReason: string, refused: string | undefined): ResumeError =>
  refused === undefined
    ? new ResumeError({
        runId,
        reason: "unavailable",
        detail: `the journal did not record the run's ending (${stopReason}); it goes on from its last commit`
      })
    : new ResumeError({
        runId,
        reason: "failed",
        detail: `the journal refused the run's commits, so its ending (${stopReason}) is not recorded: ${refused}`
      })

/**
 * A drive another process overtook (its commit fenced off), which has not ended the run yet:
 * the run is that process's, and a drive again would take it back (review 134).
 */
const overtaken = (runId: string, why: string): ResumeError =>
  new ResumeError({
    runId,
    reason: "taken",
    detail: `another process drives the run now (${why}): its ending is that process's to record; driving it again would take it back`
  })

/** Whether `stored` is a prefix of `timeline`: the same events, by `seq` and kind. */
const isPrefixOf = (stored: ReadonlyArray<Event.Event>, timeline: ReadonlyArray<Event.Event>): boolean =>
  stored.length < timeline.length && stored.every((e, i) => e.seq === timeline[i]?.seq && e._tag === timeline[i]?._tag)

/**
 * Drives the run `runId` of the journal: starts it from `options` when the journal does not
 * hold it yet, goes on from its log when it does (the tools must be the ones it used, as for
 * `Run.resume`; `goal` and `system` then come from the log), and gives its stored result when
 * it has finished. Fails with a `ResumeError` when its log cannot be gone on with, and
 * with one that is `unavailable` when the run ended but the journal did not record its
 * ending (its store out of reach at the last commit): driven again, it goes on from its
 * last commit. One that is `running` when this process drives the run already (the drive
 * before, taken, whose handler has not stopped yet; a `Run.resume`): drive it again later.
 * One that is `taken` when another process took the run over meanwhile (this drive's commits
 * were fenced off) and has not ended it: it is that process's (its ending, once recorded, is
 * what a drive then gives). A cancel (`settings.cancel`) is delivered all the same: to the run
 * this process drives, whose ending it is then given.
 *
 * @category combinators
 * @since 0.3.0
 */
export const drive = <T extends Tool.Any, RV = never, O = never>(
  runId: string,
  options: Omit<Options<T, RV, O>, "runId">,
  settings: Settings = {}
): Effect.Effect<Outcome<O>, ResumeError | InvalidRunOptions, Requirements<T, RV> | Journal.Journal> =>
  Effect.gen(function* () {
    const invalid = checkSettings(settings) ?? checkRunId(runId) ?? checkObject(options)
    if (invalid !== undefined) return yield* Effect.fail(invalid)
    const journal = yield* Journal.Journal
    const cancelled = settings.cancel === true
    /** The drive, the run held for this process when it was free. */
    const driveHeld = (
      hold: Launch.Hold | undefined
    ): Effect.Effect<Outcome<O>, ResumeError | InvalidRunOptions, Requirements<T, RV>> =>
      Effect.gen(function* () {
        const checked = yield* Effect.catchIf(
          JournalLoad.load(journal, runId, options.tools, options.modelName),
          (e) => e.reason === "not_found" || (cancelled && e.reason === "incompatible"),
          (e) => Effect.succeed(e)
        )
        // A run this process cannot go on with (a tool of it changed, or is gone) can still be
        // cancelled (R5.1): it ends `cancelled` with none of its tools, so none of them runs.
        const unrunnable = checked instanceof ResumeError && checked.reason === "incompatible"
        const loaded =
          checked instanceof ResumeError
            ? unrunnable
              ? yield* JournalLoad.load(journal, runId, [], options.modelName, false)
              : undefined
            : checked
        // Erased boundary: the stored result is the run's own, its `output` decoded by the schema of `O` it ran with.
        if (loaded?._tag === "Finished") {
          return {
            _tag: "Finished",
            result: FinalOutput.restored(loaded.result, options.output) as RunResult.Typed<O>
          } as const
        }

        /** The run's ending as the journal holds it, once another process took the run over (`why`). */
        const theirs = (why: string) =>
          Effect.flatMap(Effect.result(JournalLoad.load(journal, runId, options.tools, options.modelName)), (stored) =>
            Result.isSuccess(stored) && stored.success._tag === "Finished"
              ? Effect.succeed({
                  _tag: "Finished",
                  // Erased boundary: the stored result is the run's own, its `output` decoded by the schema of `O` it ran with.
                  result: FinalOutput.restored(stored.success.result, options.output) as RunResult.Typed<O>
                } as const)
              : Effect.fail(overtaken(runId, why))
          )
        const parkAfterMillis = Duration.toMillis(Duration.fromInputUnsafe(settings.parkAfter ?? "1 second"))
        // The calls waiting long enough to park on, and the run once it is going.
        const waiting = new Map<string, Approval.Request>()
        let run: { readonly ctx: RunContext.RunContext; readonly fiber: Fiber.Fiber<void> } | undefined
        let parkedOn: ReadonlyArray<Approval.Request> = []
        // Checked when a call starts waiting and after every commit: the run parks once nothing else goes
        // on and all it recorded is in the journal (what a park drops is what the last commit left out).
        const parkIfIdle = () => {
          // A run another process took over (a commit fenced off) stops by itself (`RunContext.fence`).
          if (run === undefined || run.ctx.fenced !== undefined) return
          // A call's result has stopped the run: its batch stops, and lets the waiting calls go.
          if (waiting.size === 0 || run.ctx.stopFound) return
          if (run.ctx.committed < run.ctx.events.length) return
          const asked = HostPark.waitingIn(run.ctx.log, run.ctx.events)
          // The gate holds a call just before the run records that it waits, and puts it on the table
          // after: park only when the log's waiting calls and the table's are the same.
          if (asked === undefined || asked.length !== waiting.size || !asked.every((callId) => waiting.has(callId)))
            return
          const pending = [...waiting.values()]
          if (RunContext.suspend(run.ctx, "parked")) {
            parkedOn = pending
            run.fiber.interruptUnsafe()
          }
        }
        // A suspended run's calls stay on the table (`Approval.HandedOn`): it waits for them again when it goes on.
        const inner = JournalApprovals.make(journal, {
          pollInterval: settings.pollInterval,
          // A call may park the run only once it is on the table: a park before the store has
          // answered (PostgreSQL answers later) would interrupt the insert and leave the run
          // parked on a call nobody sees.
          onPutUp: (request) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Effect.sync(() => {
                if (request.expiresAt - now <= parkAfterMillis) return
                waiting.set(request.callId, request)
                parkIfIdle()
              })
            )
        })
        const gate: Approval.Gate = {
          ...inner,
          request: (request) =>
            Effect.ensuring(
              inner.request(request),
              Effect.sync(() => {
                waiting.delete(request.callId)
              })
            )
        }
        const watch = (ctx: RunContext.RunContext, fiber: Fiber.Fiber<void>) => {
          run = { ctx, fiber }
          ctx.onCommitted = parkIfIdle
          // The run went as far as it could before it was watched: a call may wait already.
          parkIfIdle()
        }
        const taken = (ctx: RunContext.RunContext, fiber: Fiber.Fiber<void>, done: Launch.Done) =>
          Effect.flatMap(HostPark.isCancel(settings.cancelling), (cancel) =>
            cancel ? Launch.cancel(ctx, fiber, done) : Launch.suspend(ctx, fiber, done, "taken")
          )

        let going: Effect.Effect<RunResult.RunResult, RunContext.Suspended, Requirements<T, RV>>
        if (loaded === undefined) {
          // Options that cannot start a run are the caller's to fix: nothing is written, the engine does not retry.
          const refusedOptions = Launch.checkOptions({ ...options, runId })
          if (refusedOptions !== undefined) return yield* Effect.fail(refusedOptions)
          going = Launch.launch({ ...options, runId }, taken, {
            cancelled,
            watch,
            startedAt: settings.startedAt,
            refused: settings.refused,
            hold
          })
        } else {
          const merged = Launch.resumedOptions(
            runId,
            unrunnable ? { ...options, tools: [] } : options,
            loaded,
            cancelled
          )
          if (Result.isFailure(merged)) return yield* Effect.fail(merged.failure)
          // A run parked on calls nothing has decided (a recheck woke it, its shard moved) parks again as
          // it is: nothing is resumed or recorded (review 159: a `run.resumed` per wake). Under a policy
          // of its own, the run asks it of its waiting calls first (review 161: one that now denies).
          const still =
            cancelled || (yield* Permission.Permission) !== Permission.allowAll
              ? undefined
              : yield* HostPark.parkedStill(journal, loaded, merged.success, parkAfterMillis)
          if (still !== undefined) return { _tag: "Parked", approvals: still } as const
          const resume = loaded.started === undefined ? undefined : ({ reason: "restart" } as const)
          going = Launch.launch(merged.success, taken, { restored: loaded, resume, cancelled, watch, hold })
        }
        const ended = yield* Effect.result(Effect.provideService(going, Approval.ApprovalGate, gate))
        // Fenced off, the run is another process's: its ending if it has one, else that process's to end.
        if (run?.ctx.fenced !== undefined) return yield* theirs(run.ctx.fenced)
        if (Result.isFailure(ended)) {
          // Taken away, the run stopped with its caller, which is interrupted: only a park comes back.
          if (ended.failure.why !== "parked") return yield* Effect.interrupt
          // Parked with nothing running: its fiber ends at once, and with it the process's hold, so
          // that the drive that wakes it is not refused as `running` (a few seconds at most).
          if (run !== undefined) yield* Effect.timeoutOption(Fiber.await(run.fiber), "5 seconds")
          return { _tag: "Parked", approvals: parkedOn } as const
        }
        const readBack = yield* Effect.result(
          journal.read(runId).pipe(Effect.retry({ schedule: readAgain, while: (e) => e.isRetryable }))
        )
        if (Result.isFailure(readBack)) {
          // Nobody knows whether the ending got through: the engine drives the run again, which
          // finds it finished, or goes on from its last commit.
          return yield* Effect.fail(
            new ResumeError({
              runId,
              reason: "unavailable",
              detail: `the journal could not be read back after the run ended (${ended.success.stopReason}): ${readBack.failure.message}`
            })
          )
        }
        const stored = readBack.success
        const finished = Option.isSome(stored) && Option.isSome(stored.value.result)
        if (!finished && (Option.isNone(stored) || isPrefixOf(stored.value.events, ended.success.timeline))) {
          return yield* Effect.fail(unrecorded(runId, ended.success.stopReason, run?.ctx.refused))
        }
        // Fenced off by another writer: the journal's ending is the run's, not this view of it;
        // without one, the run is that writer's now (review 133: it was given as finished).
        if (ended.success.unrecorded !== undefined) return yield* theirs(ended.success.unrecorded)
        // Erased boundary: the run decoded its `output` with the schema of `O` it was given.
        return { _tag: "Finished", result: ended.success as RunResult.Typed<O> } as const
      })
    // Held from before its log is read: a run this process drives already (the drive before
    // this one, taken, whose handler ignores interruption; a `Run.resume` from this process)
    // is not driven twice, `running` (the engine tries again later). A cancel goes on all the
    // same: it reaches the run this process drives, which records what its calls did as it
    // stops (R5.2), and its ending is then read; a run that gave no way to reach it (taken
    // already) is ended at once by a driver that runs nothing (review 123).
    const live = cancelled ? journal.live.cancelOf(runId) : undefined
    const cancelHeld =
      live === undefined
        ? driveHeld(undefined)
        : Effect.andThen(live, Launch.holding(journal, runId, driveHeld, driveHeld(undefined)))
    return yield* Launch.holding(journal, runId, driveHeld, cancelled ? cancelHeld : Effect.fail(Launch.running(runId)))
  })
