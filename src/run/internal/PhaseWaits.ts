/**
 * The waits that put a run in a phase of its own (a call waiting for approval, a retry
 * sleeping): the phase the run's waits add up to, moved to and recorded with the wait's
 * own record in one synchronous step (R1.3). Private to the runtime.
 */
import { Effect, Result } from "effect"
import * as RunLog from "../../events/RunLog.ts"
import * as RunState from "../../events/RunState.ts"
import * as RunContext from "./RunContext.ts"

/**
 * Starts a wait that puts the run in a phase of its own (a call waiting for approval, a
 * retry sleeping): moves the run to the phase its waits add up to with this one, then
 * records the wait with `begin` (its `approval.requested` or `recovery.started`), which
 * the fold counts from then on.
 */
export const hold = (
  ctx: RunContext.RunContext,
  what: "awaiting_approval" | "recovering",
  base: RunState.Phase,
  begin: RunContext.Build
): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.suspend(() => {
    const held = holdNow(ctx, what, base, begin)
    return Result.isFailure(held) ? Effect.fail(held.failure) : Effect.void
  })

/**
 * {@link hold} now, in the caller's synchronous step: a decision read from the log and the
 * record of what it decided, with no other fiber of the run in between (a retry spending the
 * run's budget, R3.4).
 */
export const holdNow = (
  ctx: RunContext.RunContext,
  what: "awaiting_approval" | "recovering",
  base: RunState.Phase,
  begin: RunContext.Build
): Result.Result<void, RunState.IllegalTransition> => {
  const to =
    what === "awaiting_approval"
      ? "awaiting_approval"
      : RunLog.phaseOf({ ...ctx.log, retries: [...ctx.log.retries, ""] }, base)
  if (RunContext.state(ctx) !== to) {
    const moved = RunContext.moveNow(ctx, to)
    if (Result.isFailure(moved)) return moved
  }
  RunContext.emit(ctx, begin)
  return Result.void
}

/**
 * Ends a wait begun with {@link hold}, then moves the run to the phase what is left adds
 * up to. `end` is the record that ends the wait (its `approval.decided`); or, for a
 * retry's sleep, which the next attempt's record ends, whose sleep it was (`owner`); or
 * nothing when the record is already in the log. A run that has already ended stays
 * where it is.
 */
export const release = (
  ctx: RunContext.RunContext,
  base: RunState.Phase,
  end?: RunContext.Build | { readonly owner: string }
): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.suspend(() => {
    // The record and the move in one synchronous step, as in `hold`: no other call's event
    // comes between them, so the phase never says a wait goes on that has ended (R1.3).
    if (typeof end === "function") RunContext.emit(ctx, end)
    const log = ctx.log
    const i = end === undefined || typeof end === "function" ? -1 : log.retries.indexOf(end.owner)
    const waits = i < 0 ? log : { ...log, retries: log.retries.filter((_, j) => j !== i) }
    const to = RunLog.phaseOf(waits, base)
    if (RunState.isTerminal(RunContext.state(ctx)) || RunContext.state(ctx) === to) return Effect.void
    const moved = RunContext.moveNow(ctx, to)
    return Result.isFailure(moved) ? Effect.fail(moved.failure) : Effect.void
  })
