/**
 * One run's log, private to the runtime: the events and their fold. Only the run's own
 * fiber (and the fibers of its tool batch) appends to it; every fact goes through
 * `emit`, and every decision reads the fold (`ctx.log`), so the log stays the single
 * source of truth (principle 3): the state is never kept beside it.
 */
import { type Clock, Effect, Result, type Semaphore } from "effect"
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import * as RunState from "../../events/RunState.ts"
import type * as StopReason from "../../events/StopReason.ts"
import type * as Breakers from "../../recovery/Breakers.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as CallId from "./CallId.ts"
import * as OwnCopy from "./OwnCopy.ts"

export interface RunContext {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly startedAt: number
  /** The run deadline (absolute, on `clock`). */
  readonly deadlineAt: number
  /** How long a run stopped from outside is given to end before it is left behind (its `stopGrace`). */
  readonly stopGraceMillis: number
  readonly events: Array<Event.Event>
  /** The fold of `events` (see `RunLog`), replaced at each event. Read it, never write it. */
  log: RunLog.State
  /** The identities given to tool calls so far (see `CallId`): an index of the log's `callIds`. */
  readonly callIds: CallId.Identities
  readonly listeners: Array<(event: Event.Event) => void>
  /**
   * The number of events of `events` the listeners were handed, and whether they are being handed
   * one: an event a listener causes (a cancel from an observer's callback) waits its turn,
   * so that every listener sees the events in the log's order (R8).
   */
  delivered: number
  delivering: boolean
  /** The application's circuit breakers (R3.9), when it has breakers. */
  readonly breakers: Breakers.Service | undefined
  /**
   * Called when the run starts being stopped from outside (`run.stopping`, a suspension): arms
   * the stop grace, which gives the caller a result even if what is interrupted never stops.
   * With `fenced` (see {@link fence}), it also interrupts the run, whatever it waits on.
   */
  onStop: ((fenced?: boolean) => void) | undefined
  /** Called after each commit that reached the journal (a host waits for one before it parks the run). */
  onCommitted: (() => void) | undefined
  /** Where a durable run commits its log; `undefined` for a run without a journal. */
  readonly journal: Sink | undefined
  /** How many events of `events` the journal holds. */
  committed: number
  /** Whether a commit is with the store now (a run left behind while one is was held by its store). */
  committing: boolean
  /** Why the run may write no more (another process owns it, or its id was taken), once a commit was fenced off: a whole clause. */
  fenced: string | undefined
  /** Whether a call's result stops the run, known before it is committed: a host parks no run that is stopping (review 148). */
  stopFound: boolean
  /** Why the store refused the run's last failed commit, when it refused it (not out of reach). */
  refused: string | undefined
  /**
   * Set once the run's host took it away (see {@link suspend}): its log is frozen from then
   * on, and its journal keeps what the last barrier committed.
   */
  suspended: Suspended | undefined
}

/**
 * Why a run was suspended: a hosted run parked on approvals (`parked`), or its host took
 * it away (`taken`: the process stops owning it); any run whose journal stopped its
 * process at a commit (`died`, see {@link died}). A suspended run ends as a crash would
 * end it, with no terminal event, to be resumed from its journal.
 */
export interface Suspended {
  readonly _tag: "Suspended"
  readonly why: "parked" | "taken" | "died"
}

/**
 * The part of the journal one run writes to: `commit` appends the events from `fromSeq`
 * on in one transaction, fenced on `fromSeq`, with the run's state and, once it has ended,
 * its result. Commits of one run never overlap (the calls of a batch reach their
 * barriers concurrently): the sink holds them one at a time.
 */
export interface Sink {
  readonly commit: (batch: {
    readonly fromSeq: number
    readonly events: ReadonlyArray<Event.Event>
    readonly state: RunState.State
    readonly result?: unknown
  }) => Effect.Effect<void, CommitError>
  /** The sink's one permit: a commit reads what to send and sends it holding it. */
  readonly commits: Semaphore.Semaphore
}

/**
 * Why a commit did not happen: another writer owns the run (`Conflict`), the store cannot
 * be reached now (`Unavailable`, retryable), or it refused the commit (`Failed`).
 */
export interface CommitError {
  readonly _tag: "Conflict" | "Unavailable" | "Failed"
  readonly detail: string
}

export const make = (options: {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly deadlineAt: number
  readonly stopGraceMillis: number
  readonly breakers?: Breakers.Service | undefined
  readonly journal?: Sink | undefined
  /** The committed log of a run being resumed: the run goes on from its fold. */
  readonly restored?: ReadonlyArray<Event.Event> | undefined
}): RunContext => {
  // Facts, as the run's own events are (see `emit`): read back from a journal, they are frozen too.
  const events = options.restored === undefined ? [] : options.restored.map(OwnCopy.deepFreeze)
  return {
    runId: options.runId,
    clock: options.clock,
    startedAt: options.clock.currentTimeMillisUnsafe(),
    deadlineAt: options.deadlineAt,
    stopGraceMillis: options.stopGraceMillis,
    events,
    log: RunLog.fold(events),
    callIds: CallId.replay(events),
    listeners: [],
    delivered: events.length,
    delivering: false,
    breakers: options.breakers,
    onStop: undefined,
    onCommitted: undefined,
    journal: options.journal,
    committed: events.length,
    committing: false,
    fenced: undefined,
    stopFound: false,
    refused: undefined,
    suspended: undefined
  }
}

export const now = (ctx: RunContext): number => ctx.clock.currentTimeMillisUnsafe()

/**
 * What every event carries besides its own fields: the run it belongs to, its place in the
 * log and the time it happened.
 */
export interface Stamp {
  readonly runId: string
  readonly seq: number
  readonly at: number
}

/**
 * An event as an emit site writes it: one literal with its stamp among its fields
 * (`({ runId, seq, at }) => ({ _tag: ..., runId, seq, at })`), so that the event is built
 * whole, in one shape, rather than a draft copied with the stamp added to it.
 */
export type Build = (stamp: Stamp) => Event.Event

/**
 * The events of every step, whose nested parts (the calls, the usage, the output) are frozen
 * where they are built; `test/run/HandedOut.test.ts` checks every event of a run is frozen
 * all the way down.
 */
const stepEvents: ReadonlySet<Event.Event["_tag"]> = new Set([
  "state.changed",
  "model.requested",
  "model.responded",
  "tool.started",
  "tool.succeeded"
])

/**
 * Builds the event with the run id, the next sequence number and the time, appends it
 * and folds it. The log ends with `run.finished`: code still running after the run's
 * result was given (user code that could not be interrupted) cannot change it; nor can
 * what a suspended run unwinds.
 */
export const emit = (ctx: RunContext, build: Build): Event.Event => {
  // A fact: no hook, criterion or listener handed the event can change it, nested parts included
  // (R9.1, R12). A step's own events have theirs frozen where they are built (a walk of every
  // event cost about 2 us a step), so only they are frozen at their top.
  const built = build({ runId: ctx.runId, seq: ctx.events.length, at: now(ctx) })
  const event = stepEvents.has(built._tag) ? Object.freeze(built) : OwnCopy.deepFreeze(built)
  if (ctx.log.finished || ctx.suspended !== undefined) return event
  ctx.events.push(event)
  ctx.log = RunLog.step(ctx.log, event)
  deliver(ctx)
  return event
}

/** Hands the listeners the events they have not seen, in order, unless they are being handed one (see `delivered`). */
const deliver = (ctx: RunContext): void => {
  if (ctx.delivering) return
  ctx.delivering = true
  try {
    while (ctx.delivered < ctx.events.length) {
      const event = ctx.events[ctx.delivered++]
      if (event !== undefined) for (const listener of ctx.listeners) listener(event)
    }
  } finally {
    ctx.delivering = false
  }
}

/**
 * Whether the run deadline has passed (R3.11): checked after every wait, before its
 * result is used, since the deadline's own fiber cannot fire while code blocks the event
 * loop, and the run may go on before it does.
 */
export const deadlinePassed = (ctx: RunContext): boolean => Deadline.hasPassed(ctx.deadlineAt, now(ctx))

export const state = (ctx: RunContext): RunState.State => ctx.log.counters.state

/**
 * Whether the run is in its terminal state, its `run.finished` following in the same step:
 * nothing stops it or interrupts it now (review 194: a cancel from an observer of that state
 * was recorded between the two, and its interruption could cut the ending short).
 */
export const finishing = (ctx: RunContext): boolean => ctx.log.finished || RunState.isTerminal(state(ctx))

/** Whether the run is ending already: finishing, stopping, or taken away. */
const ending = (ctx: RunContext): boolean =>
  finishing(ctx) || ctx.log.stopping !== undefined || ctx.suspended !== undefined

/**
 * Records that the run is being stopped from outside its loop (its deadline passed, or a
 * cancel), with the state it was found in, unless it is ending already; then arms the grace.
 */
export const stopping = (ctx: RunContext, by: "deadline" | "cancel"): void => {
  if (ending(ctx)) return
  emit(ctx, ({ runId, seq, at }) => ({ _tag: "run.stopping", by, state: state(ctx), runId, seq, at }))
  ctx.onStop?.()
}

/**
 * Another process owns the run now (a commit was fenced off, see `Commit`): the run writes
 * nothing more, and stops at once, whatever it waits on (a person's decision, a handler), bound
 * by its stop grace as a cancel is (reviews 134, 137); unless it is ending already.
 */
export const fence = (ctx: RunContext, detail: string): void => {
  ctx.fenced = detail
  if (ending(ctx)) return
  ctx.onStop?.(true)
}

/**
 * Takes a hosted run away from its process (a durable workflow suspending it, its shard
 * moving, its runner shutting down), unless it is ending already: from here on its log
 * is frozen, so that nothing the interruption unwinds is recorded (no call withdrawn or
 * cancelled, no terminal event), and its journal keeps what the last barrier committed,
 * exactly as after a crash; the run is resumed from there. Arms the stop grace. Whether
 * it was taken.
 */
export const suspend = (ctx: RunContext, why: Suspended["why"]): boolean => {
  if (ending(ctx)) return false
  ctx.suspended = { _tag: "Suspended", why }
  ctx.onStop?.()
  return true
}

/**
 * The process running the run stopped at a commit: its store interrupted the commit, as
 * a store whose process is going away does (`FaultyJournal`'s crash plays it). Whatever
 * the run was doing, its ending included, from here on its log is frozen and its caller
 * gets no result, as after a crash; the journal keeps what it committed, to resume from.
 * Arms the stop grace.
 */
export const died = (ctx: RunContext): void => {
  if (ctx.suspended !== undefined) return
  ctx.suspended = { _tag: "Suspended", why: "died" }
  ctx.onStop?.()
}

/**
 * Stops the run at its deadline, found passed after a wait (R3.11): the same stop as
 * when the deadline's own timer fires, by interrupting the fiber that found it.
 */
export const expire = (ctx: RunContext): Effect.Effect<never> =>
  Effect.suspend(() => {
    stopping(ctx, "deadline")
    return Effect.interrupt
  })

/** Moves the run to `to` now, recorded, or says why it may not (see {@link transition}). */
export const moveNow = (ctx: RunContext, to: RunState.State): Result.Result<void, RunState.IllegalTransition> => {
  const from = state(ctx)
  const moved = RunState.transition(from, to)
  if (Result.isFailure(moved)) return Result.fail(moved.failure)
  emit(ctx, ({ runId, seq, at }) => ({ _tag: "state.changed", from, to, runId, seq, at }))
  return Result.void
}

const move = (ctx: RunContext, to: RunState.State): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.suspend(() => {
    const moved = moveNow(ctx, to)
    return Result.isFailure(moved) ? Effect.fail(moved.failure) : Effect.void
  })

/**
 * Moves the run to another active phase along one edge of the transition table, or
 * fails with `IllegalTransition`. Staying in the current phase is not a move. Terminal
 * statuses are out of its reach by type: only `finish` writes them.
 */
export const transition = (ctx: RunContext, to: RunState.Phase): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.suspend(() => (state(ctx) === to ? Effect.void : move(ctx, to)))

/**
 * Records the stop the run decided on (`termination.decided`): the policy, the reason and
 * why, and whether the policy is the user's own (`own`).
 */
export const decided = (
  ctx: RunContext,
  policy: string,
  reason: StopReason.StopReason,
  detail: string,
  own = false
): void => {
  emit(ctx, ({ runId, seq, at }) => ({
    _tag: "termination.decided",
    policy,
    reason,
    detail,
    runId,
    seq,
    at,
    ...(own ? { own: true } : {})
  }))
}

/** The single entry point for a terminal status (R1.2): the transition, then `run.finished`. */
export const finish = (
  ctx: RunContext,
  status: RunState.Status,
  stopReason: StopReason.StopReason
): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.andThen(
    move(ctx, status),
    Effect.sync(() => {
      emit(ctx, ({ runId, seq, at }) => ({ _tag: "run.finished", status, stopReason, runId, seq, at }))
    })
  )

/** The attempt of the argument correction outstanding for a tool, if any (R3.5). */
export const correctionOf = (ctx: RunContext, tool: string): number | undefined => RunLog.correctionOf(ctx.log, tool)
