/**
 * Where a hosted run's log stands on its calls waiting for a person (R7, R9.3): the calls of
 * its open batch that wait now, and whether a run parked on them is parked still, so that a
 * drive of it (a wake that decided nothing: a recheck, its shard moving) parks it again as it
 * is, recording nothing. Private to the run host.
 */
import { Clock, Deferred, Effect, Exit, Result } from "effect"
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import type * as Journal from "../../journal/Journal.ts"
import * as JournalApprovals from "../../journal/JournalApprovals.ts"
import * as RealTime from "../../time/RealTime.ts"
import type * as Approval from "../../tools/Approval.ts"
import * as Loop from "../loop/Loop.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import { recordedLimits, sameLimits } from "./resolve/RecordedLimits.ts"
import * as Resolve from "./resolve/Resolve.ts"

/**
 * The calls of the open batch that wait for a person now, or `undefined` while the run goes
 * on without one: a call taken up by the batch and not waiting for a decision (its checks, an
 * approved call about to run, a handler running, a retry's wait). A call not taken up yet
 * (the batch's places, the run's concurrency or its resume's, are held by calls waiting for
 * a person) waits with them (R7: an approved call is not held back by its
 * siblings' waits), its request left on the table as it was.
 */
export const waitingIn = (log: RunLog.State, events: ReadonlyArray<Event.Event>): ReadonlyArray<string> | undefined => {
  const batch = log.batch
  if (batch === undefined || batch.closed) return undefined
  const from = events.findLastIndex((e) => e._tag === "model.responded")
  const tail = events.slice(from)
  const taken = RunLog.inPlace(tail, RunLog.concurrencyOf(events.slice(0, from)))
  const open = batch.callIds.filter((callId, i) => batch.observations[i] === undefined && taken.has(callId))
  const waiting = open.filter((callId) => ToolExecutor.standingOf(tail, callId)._tag === "Waiting")
  return waiting.length === open.length ? waiting : undefined
}

/**
 * The requests a run whose log is `events` is parked on still, or `undefined` when a drive must
 * take it up: its open batch's calls wait for a person, or for a place among them, as a live run
 * parks ({@link waitingIn}); no result of the batch stops the run
 * ({@link stopsTheRun}); it is not stopping and its deadline has not passed; the options it would go on
 * with resolve to the limits its log records, and bring its deadline no closer (review 163: an
 * argument limit lowered refuses a call, a `time.run` ends the run); and the table holds each
 * waiting call undecided, as its log asked it (within the run's deadline and its step's end, as
 * a request put back is), expiring later than `parkAfterMillis` from now.
 * A store out of reach says take it up: the drive waits the store out.
 */
export const parkedStill = (
  journal: Journal.Service,
  loaded: { readonly runId: string; readonly goal: string; readonly events: ReadonlyArray<Event.Event> },
  options: Parameters<typeof Resolve.resolve>[0],
  parkAfterMillis: number
): Effect.Effect<ReadonlyArray<Approval.Request> | undefined> =>
  Effect.gen(function* () {
    const { runId, events } = loaded
    const log = RunLog.fold(events)
    if (log.stopping !== undefined || events.some((e) => e._tag === "run.finished")) return undefined
    const waiting = waitingIn(log, events)
    if (waiting === undefined || waiting.length === 0) return undefined
    const now = yield* Clock.currentTimeMillis
    const deadlineAt = RunLog.deadlineOf(events)
    if (deadlineAt <= now) return undefined
    const resolved = Resolve.resolve({ ...options, runId, goal: loaded.goal }, "resumed")
    if (Result.isFailure(resolved)) return undefined
    if (stopsTheRun(resolved.success.loop, log.batch?.callIds ?? [], events)) return undefined
    if (options.time?.run !== undefined && now + resolved.success.timeoutMillis < deadlineAt) return undefined
    if (!sameLimits(recordedLimits(resolved.success), RunLog.limitsOf(events) ?? {})) return undefined
    // A request put back expires by the run's deadline and its step's end, where they come first (review 168).
    const stepMillis = resolved.success.registry.time.stepMillis
    const began = events.find((e) => e._tag === "model.requested" && e.iteration === log.counters.iterations)
    const bound = Math.min(
      deadlineAt,
      stepMillis === undefined || began === undefined ? Infinity : began.at + stepMillis
    )
    const rows = yield* Effect.orElseSucceed(journal.pendingApprovals({ runId }), () => [])
    const requests = waiting.map((callId) => {
      const row = rows.find((r) => r.callId === callId)
      const asked = events.findLast((e) => e._tag === "approval.requested" && e.callId === callId)
      // The expiry the log asked, within those bounds (as the request put back says).
      const same =
        row !== undefined && asked?._tag === "approval.requested" && Math.min(asked.expiresAt, bound) === row.expiresAt
      return same && row.expiresAt - now > parkAfterMillis ? row : undefined
    })
    return requests.every((row) => row !== undefined)
      ? requests.flatMap((row) => (row === undefined ? [] : [JournalApprovals.requestOf(row)]))
      : undefined
  })

/**
 * Whether the open batch's log holds a stop (R3.11, R7): going on would stop the run (review
 * 148). A failure the model is to correct (bad arguments, a tool that hands its errors back)
 * lets it park on (review 161: every recheck of a run parked beside one resumed it).
 */
const stopsTheRun = <R>(config: Loop.Config<R>, callIds: ReadonlyArray<string>, events: ReadonlyArray<Event.Event>) => {
  const tail = events.slice(events.findLastIndex((e) => e._tag === "model.responded"))
  const standings = callIds.map((callId) => ToolExecutor.standingOf(tail, callId))
  return Loop.holdsStop(config, tail, standings)
}

/** How long, in real time, a drive being interrupted waits to learn whether a cancel interrupts it. */
const cancelAskMillis = 2_000

/** Waits in real time that nobody is told of. */
const untold: RealTime.Waits = { begin: () => () => {} }

/**
 * Whether the interruption of a drive delivers a cancel, as its host's `cancelling` says (it
 * runs as the drive is interrupted, where nothing can be interrupted): a check that fails, dies
 * or gives no answer within 2 s of real time says no, and the run is taken away (review 161: one
 * that died left the run running, one that hung held the interruption for ever).
 */
export const isCancel = (cancelling: Effect.Effect<boolean> | undefined): Effect.Effect<boolean> =>
  cancelling === undefined
    ? Effect.succeed(false)
    : Effect.gen(function* () {
        const answer = yield* Deferred.make<boolean>()
        const said = (exit: Exit.Exit<boolean>) => Deferred.succeed(answer, Exit.isSuccess(exit) && exit.value === true)
        const asking = yield* Effect.forkDetach(Effect.flatMap(Effect.exit(cancelling), said), {
          startImmediately: true
        })
        // Told to no test-clock driver: one would hold its clock still, and a check that waits on it never answer (review 163).
        const sleep = Effect.provideService(RealTime.sleep(cancelAskMillis), RealTime.Waits, untold)
        const bound = yield* Effect.forkDetach(Effect.andThen(sleep, Deferred.succeed(answer, false)))
        const cancel = yield* Deferred.await(answer)
        asking.interruptUnsafe()
        bound.interruptUnsafe()
        return cancel
      })
