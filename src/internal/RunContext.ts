/**
 * The mutable heart of one run, private to the runtime: the event log, the folded
 * counters and state, and the conversation. Only the run's own fiber writes to it;
 * every write goes through `emit`, so the log stays the single source of truth.
 */
import { type Clock, Effect, Result } from "effect"
import * as Counters from "../Counters.ts"
import type * as Event from "../Event.ts"
import type * as Model from "../Model.ts"
import * as RunState from "../RunState.ts"
import type * as StopReason from "../StopReason.ts"

export interface RunContext {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly startedAt: number
  readonly deadlineAt: number
  readonly events: Array<Event.Event>
  readonly messages: Array<Model.Message>
  counters: Counters.Counters
  readonly listeners: Array<(event: Event.Event) => void>
  /** Who stopped the run from outside the loop (the deadline timer or a cancel), if anyone. */
  stop: "deadline" | "cancel" | undefined
}

export const make = (options: {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly deadlineAt: number
}): RunContext => ({
  runId: options.runId,
  clock: options.clock,
  startedAt: options.clock.currentTimeMillisUnsafe(),
  deadlineAt: options.deadlineAt,
  events: [],
  messages: [],
  counters: Counters.empty,
  listeners: [],
  stop: undefined
})

export const now = (ctx: RunContext): number => ctx.clock.currentTimeMillisUnsafe()

export const remainingMillis = (ctx: RunContext): number => Math.max(0, ctx.deadlineAt - now(ctx))

/** Stamps a draft with the run id, the next sequence number and the time, then appends and folds it. */
export const emit = (ctx: RunContext, draft: Event.Draft): Event.Event => {
  // The one erased boundary: a draft plus its stamp is exactly one member of the union.
  // Drafts are built fresh for each emit and never shared, so stamping one in place is
  // safe, and it saves a copy of every event.
  const event = draft as { -readonly [K in keyof Event.Event]: Event.Event[K] } & Event.Draft
  event.runId = ctx.runId
  event.seq = ctx.events.length
  event.at = now(ctx)
  const stamped = event as Event.Event
  ctx.events.push(stamped)
  ctx.counters = Counters.step(ctx.counters, stamped)
  for (const listener of ctx.listeners) listener(stamped)
  return stamped
}

export const state = (ctx: RunContext): RunState.State => ctx.counters.state

const move = (ctx: RunContext, to: RunState.State): Effect.Effect<void, RunState.IllegalTransition> => {
  const from = ctx.counters.state
  const result = RunState.transition(from, to)
  if (Result.isFailure(result)) return Effect.fail(result.failure)
  emit(ctx, { _tag: "state.changed", from, to })
  return Effect.void
}

/**
 * Moves the run to another active phase along one edge of the transition table, or
 * fails with `IllegalTransition`. Staying in the current phase is not a move.
 * Terminal statuses are out of its reach by type: only `finish` writes them.
 */
export const transition = (ctx: RunContext, to: RunState.Phase): Effect.Effect<void, RunState.IllegalTransition> =>
  ctx.counters.state === to ? Effect.void : move(ctx, to)

/**
 * `transition` without an Effect, for the loop's hot path: returns the error instead of
 * failing with it (`if (illegal) return yield* illegal`).
 */
export const advance = (ctx: RunContext, to: RunState.Phase): RunState.IllegalTransition | undefined => {
  const from = ctx.counters.state
  if (from === to) return undefined
  if (!RunState.canTransition(from, to)) return new RunState.IllegalTransition({ from, to })
  emit(ctx, { _tag: "state.changed", from, to })
  return undefined
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
