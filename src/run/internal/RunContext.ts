/**
 * The mutable heart of one run, private to the runtime: the event log, the folded
 * counters and state, and the conversation. Only the run's own fiber writes to it;
 * every write goes through `emit` (or `record`), so the log stays the single source
 * of truth.
 */
import { type Clock, Effect, Result } from "effect"
import * as Counters from "../../events/Counters.ts"
import type * as Event from "../../events/Event.ts"
import * as RunState from "../../events/RunState.ts"
import type * as StopReason from "../../events/StopReason.ts"
import type * as Failure from "../../failure/Failure.ts"
import type * as Model from "../../model/Model.ts"
import type * as Breakers from "../../recovery/Breakers.ts"
import * as CallId from "./CallId.ts"

export interface RunContext {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly startedAt: number
  readonly deadlineAt: number
  /**
   * When the current step (one model call and its tool batch, with their retries) must
   * end: set at the top of each iteration; infinite without a step timeout.
   */
  stepDeadlineAt: number
  readonly events: Array<Event.Event>
  readonly messages: Array<Model.Message>
  /** The identities given to tool calls so far (see `CallId`): each is unique in the run. */
  readonly callIds: CallId.Identities
  /**
   * The counters as of the last event: an immutable value (policies may keep the one
   * they were given), made from `tally` when read after a change.
   */
  readonly counters: Counters.Counters
  /** The live fold of `events`, updated in place by `emit`. Read it, never write it. */
  readonly tally: Counters.Live
  readonly listeners: Array<(event: Event.Event) => void>
  /** The application's circuit breakers (R3.9), when it has breakers. */
  readonly breakers: Breakers.Service | undefined
  /** Who stopped the run from outside the loop (the deadline timer or a cancel), if anyone. */
  stop: "deadline" | "cancel" | undefined
  /** Called once, when the run is first stopped from outside (see {@link stoppedBy}). */
  onStop: (() => void) | undefined
  /** Whether `run.finished` is in the log: the log is then closed, and nothing more is appended. */
  finished: boolean
  /** The state the run was in when it was stopped from outside, before any cleanup moved it. */
  stoppedIn: RunState.State | undefined
  /**
   * The iteration whose model call the run is waiting on, if any: when the deadline
   * interrupts that wait, the ending records the call as failed (see `Lifecycle`).
   */
  waitingOnModel: number | undefined
  /** Calls waiting for a person now (see {@link hold}). */
  approvalsWaiting: number
  /** Retries sleeping now (see {@link hold}). */
  retriesSleeping: number
}

class Context implements RunContext {
  readonly events: Array<Event.Event> = []
  readonly messages: Array<Model.Message> = []
  readonly callIds = CallId.make()
  readonly listeners: Array<(event: Event.Event) => void> = []
  stop: "deadline" | "cancel" | undefined = undefined
  onStop: (() => void) | undefined = undefined
  finished = false
  stoppedIn: RunState.State | undefined = undefined
  waitingOnModel: number | undefined = undefined
  stepDeadlineAt = Number.POSITIVE_INFINITY
  approvalsWaiting = 0
  retriesSleeping = 0
  readonly tally = new Counters.Live(this.events)
  readonly runId: string
  readonly clock: Clock.Clock
  readonly startedAt: number
  readonly deadlineAt: number
  readonly breakers: Breakers.Service | undefined
  constructor(
    runId: string,
    clock: Clock.Clock,
    startedAt: number,
    deadlineAt: number,
    breakers: Breakers.Service | undefined
  ) {
    this.runId = runId
    this.clock = clock
    this.startedAt = startedAt
    this.deadlineAt = deadlineAt
    this.breakers = breakers
  }
  get counters(): Counters.Counters {
    return this.tally.counters()
  }
}

export const make = (options: {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly deadlineAt: number
  readonly breakers?: Breakers.Service | undefined
}): RunContext =>
  new Context(
    options.runId,
    options.clock,
    options.clock.currentTimeMillisUnsafe(),
    options.deadlineAt,
    options.breakers
  )

export const now = (ctx: RunContext): number => ctx.clock.currentTimeMillisUnsafe()

export const remainingMillis = (ctx: RunContext): number => Math.max(0, ctx.deadlineAt - now(ctx))

/**
 * Whether the run deadline has passed (R3.11): checked after every wait, before its
 * result is used, since the deadline's timer cannot fire while code blocks the event
 * loop (a busy model call), and the fiber may run on before it does.
 */
export const deadlinePassed = (ctx: RunContext): boolean => now(ctx) >= ctx.deadlineAt

/**
 * Stops the run at its deadline as the deadline's timer does: records who stopped it
 * and in which state, then interrupts the fiber that found the deadline passed, so the
 * run ends `run_timeout` the one way it always does.
 */
export const expire = (ctx: RunContext): Effect.Effect<never> => {
  stoppedBy(ctx, "deadline")
  return Effect.interrupt
}

/** Records who stopped the run from outside the loop, and in which state, unless someone already did. */
export const stoppedBy = (ctx: RunContext, who: "deadline" | "cancel"): void => {
  if (ctx.stop === undefined) {
    ctx.stop = who
    ctx.stoppedIn = ctx.tally.state
    ctx.onStop?.()
  }
}

/** What is left of the current step, in milliseconds (infinite without a step timeout). */
export const stepRemainingMillis = (ctx: RunContext): number => Math.max(0, ctx.stepDeadlineAt - now(ctx))

/**
 * How long one wait may last (R4.2): min(its own limit, what is left of the step, what
 * is left of the run), and the layer that sets it.
 *
 * @param own the wait's own limit in milliseconds (`undefined`: none), and its layer.
 */
export const bound = (
  ctx: RunContext,
  own: number | undefined,
  layer: Failure.TimeoutLayer
): { readonly millis: number; readonly layer: Failure.TimeoutLayer } => {
  const at = now(ctx)
  const run = Math.max(0, ctx.deadlineAt - at)
  const step = Math.max(0, ctx.stepDeadlineAt - at)
  let millis = own ?? Number.POSITIVE_INFINITY
  let by = layer
  if (step < millis) {
    millis = step
    by = "step"
  }
  if (run <= millis) {
    millis = run
    by = "run"
  }
  return { millis, layer: by }
}

type Writable = { -readonly [K in keyof Event.Event]: Event.Event[K] }

const append = (ctx: RunContext, event: Event.Event): Event.Event => {
  // The log ends with `run.finished`: code still running after the run's result was given
  // (user code that could not be interrupted) cannot change it.
  if (ctx.finished) return event
  if (event._tag === "run.finished") ctx.finished = true
  ctx.events.push(event)
  ctx.tally.step(event)
  const listeners = ctx.listeners
  for (let i = 0; i < listeners.length; i++) listeners[i]?.(event)
  return event
}

/** Stamps a draft with the run id, the next sequence number and the time, then appends and folds it. */
export const emit = (ctx: RunContext, draft: Event.Draft): Event.Event => {
  // The one erased boundary: a draft plus its stamp is exactly one member of the union.
  // Drafts are built fresh for each emit and never shared, so stamping one in place is
  // safe, and it saves a copy of every event.
  const event = draft as Writable & Event.Draft
  event.runId = ctx.runId
  event.seq = ctx.events.length
  event.at = now(ctx)
  return append(ctx, event as Event.Event)
}

/**
 * `emit` for an event built whole, its `seq` and `at` placeholders (`0`) to be set
 * here: for the events of every step, an object built with all its fields is smaller
 * than a draft stamped afterwards. Same rule: built fresh, never shared.
 */
export const record = (ctx: RunContext, event: Event.Event): Event.Event => {
  const stamped = event as Writable
  stamped.seq = ctx.events.length
  stamped.at = now(ctx)
  return append(ctx, event)
}

export const state = (ctx: RunContext): RunState.State => ctx.tally.state

const move = (ctx: RunContext, to: RunState.State): Effect.Effect<void, RunState.IllegalTransition> => {
  const from = ctx.tally.state
  const result = RunState.transition(from, to)
  if (Result.isFailure(result)) return Effect.fail(result.failure)
  record(ctx, { _tag: "state.changed", from, to, runId: ctx.runId, seq: 0, at: 0 })
  return Effect.void
}

/**
 * Moves the run to another active phase along one edge of the transition table, or
 * fails with `IllegalTransition`. Staying in the current phase is not a move.
 * Terminal statuses are out of its reach by type: only `finish` writes them.
 */
export const transition = (ctx: RunContext, to: RunState.Phase): Effect.Effect<void, RunState.IllegalTransition> =>
  ctx.tally.state === to ? Effect.void : move(ctx, to)

/**
 * `transition` without an Effect, for the loop's hot path: returns the error instead of
 * failing with it (`if (illegal) return yield* illegal`).
 */
export const advance = (ctx: RunContext, to: RunState.Phase): RunState.IllegalTransition | undefined => {
  const from = ctx.tally.state
  if (from === to) return undefined
  if (!RunState.canTransition(from, to)) return new RunState.IllegalTransition({ from, to })
  record(ctx, { _tag: "state.changed", from, to, runId: ctx.runId, seq: 0, at: 0 })
  return undefined
}

/**
 * The phase of a run whose current work is `base` (the model call, or a tool batch):
 * `awaiting_approval` while any call waits for a person, else `recovering` while any
 * retry sleeps, else `base`. Calls of one batch run concurrently, so these overlap.
 */
const phaseOf = (ctx: RunContext, base: RunState.Phase): RunState.Phase =>
  ctx.approvalsWaiting > 0 ? "awaiting_approval" : ctx.retriesSleeping > 0 ? "recovering" : base

/**
 * Starts a wait that puts the run in a phase of its own (a call waiting for approval,
 * a retry sleeping) and moves the run to the phase all its waits add up to. Every
 * `hold` is matched by one {@link release}, also when the wait is interrupted.
 */
export const hold = (
  ctx: RunContext,
  what: "awaiting_approval" | "recovering",
  base: RunState.Phase
): RunState.IllegalTransition | undefined => {
  if (what === "awaiting_approval") ctx.approvalsWaiting++
  else ctx.retriesSleeping++
  return advance(ctx, phaseOf(ctx, base))
}

/** Ends a wait begun with {@link hold}, and moves the run to the phase what is left adds up to. */
export const release = (
  ctx: RunContext,
  what: "awaiting_approval" | "recovering",
  base: RunState.Phase
): RunState.IllegalTransition | undefined => {
  if (what === "awaiting_approval") ctx.approvalsWaiting = Math.max(0, ctx.approvalsWaiting - 1)
  else ctx.retriesSleeping = Math.max(0, ctx.retriesSleeping - 1)
  // A run that has already ended stays where it is.
  if (RunState.isTerminal(ctx.tally.state)) return undefined
  return advance(ctx, phaseOf(ctx, base))
}

/** The single entry point for a terminal status (R1.2): the transition, then `run.finished`. */
export const finish = (
  ctx: RunContext,
  status: RunState.Status,
  stopReason: StopReason.StopReason
): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.map(move(ctx, status), () => {
    emit(ctx, { _tag: "run.finished", status, stopReason })
  })
