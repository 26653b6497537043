/**
 * The commit barriers of a durable run (R9): the points where the run's log reaches its
 * journal. Between barriers, events are only buffered (`RunContext.emit` stays
 * synchronous); a run without a journal commits nothing and pays nothing. Private to the
 * runtime.
 *
 * - {@link intent}: before the handler of a call that changes the world (idempotent or
 *   not), its attempt's `tool.started` (the intent record) must be in the journal, or the
 *   handler does not run.
 * - {@link barrier}: at the start, before the model is first asked; after the result of
 *   such a call that is not idempotent, after each model response, at approvals requested
 *   and decided, at the end of each iteration.
 * - {@link final}: at the end, with the result, before the caller gets it.
 *
 * A store that cannot be reached is retried briefly (the intent record for up to 30 s, the
 * final commit of a run that ended by itself for up to its stop grace);
 * still out, the events stay buffered for the next barrier (only the intent record stops
 * anything: its call). A commit fenced
 * off by another writer (`Conflict`) means another process owns the run: this one writes
 * nothing more, and stops at once (`RunContext.fence`).
 */
import { Duration, Effect, Schedule } from "effect"
import * as Failure from "../../failure/Failure.ts"
import * as RunContext from "./RunContext.ts"

/**
 * A busy or lost store is tried again four times, 20, 40, 80 and 160 ms later (about a
 * third of a second in all): the first retry waits 20 ms, then this schedule runs.
 */
const again = Schedule.max([Schedule.exponential("40 millis"), Schedule.recurs(3)])

/** A store out of reach waited out for `total`: tries 40 ms apart at first, then at most `spacing` apart. */
const waitingOut = (spacing: Duration.Input, total: Duration.Input) =>
  Schedule.max([Schedule.min([Schedule.exponential("40 millis"), Schedule.spaced(spacing)]), Schedule.during(total)])

/**
 * The intent record waits longer: until it is in the journal the call cannot start, and
 * nothing has happened, so a store out of reach is waited for, up to 30 seconds (the run's
 * step and run deadlines still stop the wait), rather than failing the call.
 */
const outage = waitingOut("2 seconds", "30 seconds")

const unavailable = (e: RunContext.CommitError) => e._tag === "Unavailable"

const commit = (
  ctx: RunContext.RunContext,
  result: unknown,
  retries: Schedule.Schedule<unknown, RunContext.CommitError> = again,
  /** With nothing new to commit, the fence is checked all the same (an append of no events). */
  check = false
): Effect.Effect<void, RunContext.CommitError> => {
  const sink = ctx.journal
  if (sink === undefined) return Effect.void
  return sink.commits.withPermit(
    Effect.suspend(() => {
      if (ctx.fenced !== undefined) {
        return Effect.fail<RunContext.CommitError>({ _tag: "Conflict", detail: ctx.fenced })
      }
      // A suspended run's log is frozen: nothing it does from here on may be taken as recorded.
      if (ctx.suspended !== undefined) {
        return Effect.fail<RunContext.CommitError>({ _tag: "Failed", detail: "the run was suspended" })
      }
      const fromSeq = ctx.committed
      // A run with no row in its journal yet has no fence to check.
      if (fromSeq === ctx.events.length && result === undefined && !(check && fromSeq > 0)) return Effect.void
      const events = ctx.events.slice(fromSeq)
      const batch = {
        fromSeq,
        events,
        state: RunContext.state(ctx),
        ...(result === undefined ? {} : { result })
      }
      // One try is not interrupted halfway: what the store committed, the run knows it committed.
      // Inside the mask only the store itself can end it interrupted: its process is going away
      // (R9). A cancel or the deadline that came meanwhile takes effect once the mask is left,
      // outside `onInterrupt`: the run is stopped, as it would have been, not dead.
      const once = Effect.uninterruptible(
        Effect.tap(
          // While the store holds the commit, a run stopped from outside waits on the store, not on user code.
          Effect.suspend(() => {
            ctx.committing = true
            return sink.commit(batch)
          }),
          Effect.sync(() => {
            ctx.committed = fromSeq + events.length
            ctx.onCommitted?.()
          })
        ).pipe(
          Effect.onInterrupt(() => Effect.sync(() => RunContext.died(ctx))),
          Effect.ensuring(
            Effect.sync(() => {
              ctx.committing = false
            })
          )
        )
      )
      return once.pipe(
        // Only a failed try builds the schedule (a commit is on every step's path).
        Effect.catchIf(unavailable, () =>
          Effect.retry(Effect.delay(once, "20 millis"), { schedule: retries, while: unavailable })
        ),
        Effect.tapError((e) =>
          Effect.sync(() => {
            // A run another process owns stops at once, whatever it waits on (reviews 133, 134).
            if (e._tag === "Conflict") RunContext.fence(ctx, e.detail)
            if (e._tag === "Failed") ctx.refused = e.detail
          })
        ),
        Effect.tap(() =>
          Effect.sync(() => {
            ctx.refused = undefined
          })
        )
      )
    })
  )
}

/**
 * Commits what the log holds beyond the journal's copy. A failure leaves the events
 * buffered for the next barrier; a conflict fences the run off.
 */
export const barrier = (ctx: RunContext.RunContext): Effect.Effect<void> =>
  ctx.journal === undefined ? Effect.void : Effect.ignore(commit(ctx, undefined))

/**
 * Whether the run is still this process's, asked before it closes a call on a gate other
 * processes share (review 144): what the log holds beyond the journal's copy is committed
 * or, with nothing new, the journal's fence is checked. A run another process took over is
 * fenced off here (`RunContext.fence`) and lets the call be, since its new owner waits on it: a
 * process that did not know yet withdrew the call the owner was parked on. A store out of
 * reach does not say no: the gate, on the same store most often, answers for itself.
 */
export const claim = (ctx: RunContext.RunContext): Effect.Effect<boolean> =>
  ctx.journal === undefined
    ? Effect.succeed(true)
    : Effect.map(
        Effect.ignore(commit(ctx, undefined, again, true)),
        () => ctx.fenced === undefined && ctx.suspended === undefined
      )

/**
 * The intent record (R9.2): the attempt's `tool.started` committed before its handler
 * runs. A store out of reach is waited for, up to 30 seconds. When it cannot be committed,
 * the handler does not run: the attempt fails retryable, since nothing happened
 * (`journal_unavailable`), or permanently when fenced off
 * (`journal_conflict`: another process owns the run) or refused (`journal_failed`).
 */
export const intent = (ctx: RunContext.RunContext, what: string): Effect.Effect<void, Failure.Failure> =>
  ctx.journal === undefined
    ? Effect.void
    : Effect.mapError(commit(ctx, undefined, outage), (e) =>
        e._tag === "Unavailable"
          ? new Failure.Retryable({
              source: "store",
              category: "unavailable",
              code: "journal_unavailable",
              attempts: 1,
              hint: `the journal could not record the intent to run ${what}, so it did not run: ${e.detail}`
            })
          : e._tag === "Conflict"
            ? new Failure.Permanent({
                source: "store",
                category: "conflict",
                code: "journal_conflict",
                attempts: 1,
                hint: `${what} did not run: ${e.detail}`
              })
            : new Failure.Permanent({
                source: "store",
                category: "other",
                code: "journal_failed",
                attempts: 1,
                hint: `the journal refused the intent to run ${what}, so it did not run: ${e.detail}`
              })
      )

/**
 * The last commit: the rest of the log with the run's result (`run.finished` is in it). For
 * a run that ended by itself, a store out of reach is waited for, up to the stop grace,
 * before the caller gets the result: a result the journal never held would differ from the
 * one a later resume of the run made (R9). Not longer: a cancel or an interruption of the
 * caller that comes meanwhile is due its result within the grace (R12), unless the store
 * itself holds a commit: one try is never cut halfway, so the result waits for the store's
 * answer (a limit the README states). A run stopped from outside tries briefly, as every
 * other barrier does.
 */
export const final = (ctx: RunContext.RunContext, result: unknown, graceMillis: number): Effect.Effect<void> =>
  ctx.journal === undefined
    ? Effect.void
    : Effect.ignore(
        commit(
          ctx,
          result,
          ctx.log.stopping === undefined ? waitingOut("1 second", Duration.millis(graceMillis)) : again
        )
      )
