/**
 * How a run's result leaves it, whoever makes it: the run's own ending in its fiber, the
 * stop grace running out while what it interrupted will not stop, or the fiber ending
 * without its ending (R12). Each way goes through {@link Closing.close}, exactly once
 * for the result that is given. Private to the lifecycle.
 */
import { type Context, Deferred, Effect, Exit } from "effect"
import * as RealTime from "../../../time/RealTime.ts"
import type * as Tool from "../../../tools/Tool.ts"
import * as Metrics from "../../../tracing/Metrics.ts"
import * as Spans from "../../../tracing/Spans.ts"
import type * as Validation from "../../../validation/Validation.ts"
import * as Commit from "../../internal/Commit.ts"
import * as OwnCopy from "../../internal/OwnCopy.ts"
import type * as RunContext from "../../internal/RunContext.ts"
import { leftBehind, rescue, settled } from "../../internal/RunEnd.ts"
import type { Ending } from "../../internal/RunOutcome.ts"
import type { Registry } from "../../pipeline/Registry.ts"
import type * as RunResult from "../../RunResult.ts"
import { atDeadlineNow, cancelledNow, finalize } from "./Judgement.ts"

/** Where the run's result goes: its caller waits on it. */
export type Done = Deferred.Deferred<RunResult.RunResult, RunContext.Suspended>

/** What `done` gets: the run's result, or the suspension its host made of it. */
export type Given = Exit.Exit<RunResult.RunResult, RunContext.Suspended>

/** A run given a result that is no completion: its span ends failed, named by its stop reason (R13). */
export const failedRun = (given: Given | undefined): string | undefined =>
  given !== undefined && Exit.isSuccess(given) ? Spans.failedAs(given.value) : undefined

/** How a run its host took away ends: with its suspension instead of a result. */
const suspension = (ctx: RunContext.RunContext): Exit.Exit<never, RunContext.Suspended> | undefined =>
  ctx.suspended === undefined ? undefined : Exit.fail(ctx.suspended)

/**
 * The result of a run another process took over before its last commit (R9, fencing):
 * `failed`, but `unknown_outcome` while this process left a call that may not be sent twice
 * in doubt (R3.8, reviews 165 and 168: `failed` read as "nothing was paid", a cancelled run's
 * included), as its log and tools say (`status`).
 */
const overtaken = (
  result: RunResult.RunResult,
  fenced: string,
  status: RunResult.RunResult["status"]
): RunResult.RunResult => ({
  ...result,
  status,
  stopReason: "internal_error",
  policy: "runtime",
  detail: `${fenced}, so this process's ending (${result.status}, ${result.stopReason}) was not recorded`
})

/**
 * The result, saying so when its journal does not hold its ending: the last commit did not
 * get through (R9). The caller learns that a later resume of the run goes on from the last
 * commit, rather than taking the ending as recorded.
 */
const unrecorded = (ctx: RunContext.RunContext, result: RunResult.RunResult): RunResult.RunResult => {
  if (ctx.journal === undefined || ctx.committed >= ctx.events.length) return result
  const held = `it holds the run up to seq ${ctx.committed - 1}`
  const why =
    ctx.fenced !== undefined
      ? `${ctx.fenced}: the journal holds that run, not this ending`
      : ctx.refused === undefined
        ? `the journal could not be reached; ${held}`
        : `the journal refused it (${ctx.refused}); ${held}`
  return OwnCopy.deepFreeze({ ...result, unrecorded: why })
}

/**
 * The closing of one run. It keeps what every way out needs, and the two facts they
 * share: the result the run closed with, and the stop grace's timer.
 */
export class Closing {
  readonly ctx: RunContext.RunContext
  readonly done: Done
  readonly tools: ReadonlyMap<string, Tool.Any<unknown>>
  /** The run's registry, when its options were valid: a stopped run asks the gate with it. */
  readonly registry: Registry | undefined
  /** Completes once every observer has seen the run's events. */
  readonly settled: Effect.Effect<void>
  /** The run's fiber's context (its span among it), for a result closed outside that fiber. */
  readonly context: Context.Context<never>
  /** The result the run closed with: it stands whatever becomes of its last commit. */
  closed: RunResult.RunResult | undefined = undefined
  /** Whether a result made outside the run's fiber is being closed: it completes `done` itself. */
  closingOutside = false
  /** Cancels the stop grace, once the run is stopped from outside. Real time on purpose: a TestClock never advanced must not stall the result. */
  cancelGrace: (() => void) | undefined = undefined
  /** Told of the stop grace (a test-clock driver holds its clock still meanwhile). */
  readonly waits: RealTime.Waits
  /** The run's stop grace: how long its last commit may wait out a store out of reach. */
  readonly graceMillis: number

  constructor(
    ctx: RunContext.RunContext,
    done: Done,
    registry: Registry | undefined,
    settled: Effect.Effect<void>,
    context: Context.Context<never>,
    waits: RealTime.Waits,
    graceMillis: number
  ) {
    this.waits = waits
    this.graceMillis = graceMillis
    this.ctx = ctx
    this.done = done
    this.registry = registry
    this.tools = registry?.tools ?? new Map()
    this.settled = settled
    this.context = context
  }

  /**
   * The one way a result leaves the run: in the journal before the caller gets it (R9), on
   * its span and metrics (the ending, counters, usage and cost), with every observer (a
   * recorder has written `run.finished`), then to `done`. A process that died at its last
   * commit gives no result: the run's suspension.
   */
  close(result: RunResult.RunResult): Effect.Effect<Given> {
    // Every caller of the run is handed this one result: none can change it for the others (R12).
    this.closed = OwnCopy.deepFreeze(result)
    const closing = this
    return Effect.gen(function* () {
      yield* Commit.final(closing.ctx, result, closing.graceMillis)
      const died = suspension(closing.ctx)
      if (died !== undefined) return died
      // Fenced off at its last commit: another process resumed the run meanwhile, and the
      // journal will hold that process's ending. This one's caller is told so, not given
      // an ending the run does not have (its timeline is this process's own view).
      // (The calls it left on the journal's approvals table closed with its last commit, R7.)
      const fenced = closing.ctx.fenced
      const given = unrecorded(
        closing.ctx,
        fenced === undefined || result.stopReason === "internal_error"
          ? result
          : OwnCopy.deepFreeze(overtaken(result, fenced, settled(closing.ctx, closing.tools, "failed")))
      )
      closing.closed = given
      yield* Spans.ended(given)
      // The run's metrics are recorded with each ending a caller is given (R13), so none is lost:
      // a run taken over is counted by its new owner, and one whose ending its journal did not
      // take (a store out of reach, or refusing) is counted here, and again if it is resumed.
      if (fenced === undefined) yield* Metrics.record(given)
      yield* closing.settled
      return Exit.succeed(given)
    })
  }

  /** What the run gives once its closing ended, however it ended: the result stands whatever became of its last commit. */
  private given(closed: Exit.Exit<Given>, result: RunResult.RunResult): Given {
    return Exit.isSuccess(closed) ? closed.value : (suspension(this.ctx) ?? Exit.succeed(result))
  }

  /**
   * The ending in the run's fiber, still inside its mask: a cancel that interrupted the
   * fiber cannot lose the result. The result stands whatever became of its last commit
   * (a store that died there).
   */
  end(exit: Exit.Exit<Ending, unknown>, validation: Validation.Spec<unknown>): Effect.Effect<Given | undefined> {
    this.cancelGrace?.()
    // Ended already, left behind after the stop grace: what it did since changes nothing.
    if (this.closed !== undefined) return Effect.undefined
    // Taken away by its host: no ending; the journal keeps what the last barrier committed.
    const suspended = suspension(this.ctx)
    if (suspended !== undefined) return Effect.as(this.settled, suspended)
    return Effect.flatMap(finalize(this.ctx, exit, validation, this.registry), (result) =>
      Effect.map(Effect.exit(this.close(result)), (closed) => this.given(closed, result))
    )
  }

  /**
   * Stopped from outside: the run has its stop grace to end; past it, it ends as left
   * behind, its stop judged by its `plan` at once (R6.3).
   */
  stopped(graceMillis: number, plan: ReadonlyArray<Validation.PlanStep> | undefined): void {
    // Closed already (a cancel that came as it ended): nothing left to wait for. Armed already
    // (a cancel after another process took the run over): the grace runs from the first stop.
    if (this.closed !== undefined || Deferred.isDoneUnsafe(this.done) || this.cancelGrace !== undefined) return
    // Kept referenced: while what the run interrupted will not stop, this timer may be the
    // only thing left to give the result, and a program must not exit without it. It is
    // cleared as soon as the run ends by itself.
    this.cancelGrace = RealTime.timer(this.waits, graceMillis, () =>
      this.outside(
        () =>
          leftBehind(this.ctx, this.tools, graceMillis, (stop, detail) =>
            stop === "cancelled"
              ? cancelledNow(this.ctx, plan, detail)
              : atDeadlineNow(this.ctx, plan, detail, this.tools)
          ),
        "keep"
      )
    )
  }

  /** The run's fiber ended: if it gave no result (it skipped its ending), one is made for it. */
  fiberEnded(exit: Exit.Exit<unknown, unknown>): void {
    this.cancelGrace?.()
    this.outside(() => rescue(this.ctx, exit, this.tools), "end")
  }

  /** A result made outside the run's fiber, closed in a fiber of its own with the run's context. */
  private outside(make: () => RunResult.RunResult, openSpans: "end" | "keep"): void {
    // Closed already outside (the grace ran out, then the fiber ended): that closing gives
    // the result once it is committed, not before.
    if (Deferred.isDoneUnsafe(this.done) || this.closingOutside) return
    // Its ending was under way when the fiber ended (the store died in its last commit): its result stands.
    if (this.closed !== undefined) {
      Deferred.doneUnsafe(this.done, suspension(this.ctx) ?? Exit.succeed(this.closed))
      return
    }
    const suspended = suspension(this.ctx)
    if (suspended !== undefined) Deferred.doneUnsafe(this.done, suspended)
    else {
      const made = make()
      this.closingOutside = true
      // The run's span ends with its result, as when the run ends in its fiber; its fiber,
      // left behind, may never end.
      Effect.runForkWith(this.context)(
        Effect.flatMap(Effect.exit(this.close(made)), (closed) =>
          Effect.andThen(
            Spans.runGiven(this.closed ?? made, openSpans),
            Deferred.done(this.done, this.given(closed, made))
          )
        )
      )
    }
  }
}
