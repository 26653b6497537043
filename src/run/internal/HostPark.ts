/**
 * Where a hosted run's log stands on its calls waiting for a person (R7, R9.3): the calls of
 * its open batch that wait now, and whether a run parked on them is parked still, so that a
 * drive of it (a wake that decided nothing: a recheck, its shard moving) parks it again as it
 * is, recording nothing. Private to the run host.
 */
import { Clock, Effect } from "effect"
import * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import type * as Journal from "../../journal/Journal.ts"
import * as JournalApprovals from "../../journal/JournalApprovals.ts"
import type * as Approval from "../../tools/Approval.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"

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
 * take it up: every call of its open batch without a result waits for a person (none waits for
 * a place: a resume's concurrency may take it up), every call with one succeeded (a failure may
 * stop the run: review 148), it is not stopping and its deadline has not passed, and the table
 * holds each waiting call undecided, expiring later than `parkAfterMillis` from now. A store out
 * of reach says take it up: the drive waits the store out.
 */
export const parkedStill = (
  journal: Journal.Service,
  loaded: { readonly runId: string; readonly events: ReadonlyArray<Event.Event> },
  parkAfterMillis: number
): Effect.Effect<ReadonlyArray<Approval.Request> | undefined> =>
  Effect.gen(function* () {
    const { runId, events } = loaded
    const log = RunLog.fold(events)
    const batch = log.batch
    if (log.stopping !== undefined || batch === undefined || batch.closed) return undefined
    if (events.some((e) => e._tag === "run.finished")) return undefined
    const from = events.findLastIndex((e) => e._tag === "model.responded")
    const tail = events.slice(from)
    const waiting = batch.callIds.filter((_, i) => batch.observations[i] === undefined)
    if (waiting.length === 0) return undefined
    if (!waiting.every((callId) => ToolExecutor.standingOf(tail, callId)._tag === "Waiting")) return undefined
    if (tail.some((e) => Event.isResult(e) && e._tag !== "tool.succeeded")) return undefined
    const now = yield* Clock.currentTimeMillis
    if (RunLog.deadlineOf(events) <= now) return undefined
    const rows = yield* Effect.orElseSucceed(journal.pendingApprovals({ runId }), () => [])
    const requests = waiting.map((callId) => rows.find((row) => row.callId === callId))
    return requests.every((row) => row !== undefined && row.expiresAt - now > parkAfterMillis)
      ? requests.flatMap((row) => (row === undefined ? [] : [JournalApprovals.requestOf(row)]))
      : undefined
  })
