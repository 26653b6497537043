/**
 * How a run ends: the one terminal entry point (R1.2), and the endings of runs that went
 * wrong (a defect, a fiber ended outright, work that would not stop within the stop
 * grace), each of which still gives a result (R12). Private to the runtime.
 */
import { Cause, Exit, Result } from "effect"
import * as RunState from "../../events/RunState.ts"
import * as Explain from "../../explain/Explain.ts"
import * as Failure from "../../failure/Failure.ts"
import type * as Tool from "../../tools/Tool.ts"
import { mayActTwice, type Registry, recordAbandoned } from "../pipeline/ToolExecutor.ts"
import type * as RunResult from "../RunResult.ts"
import * as RunContext from "./RunContext.ts"
import { conclude, type Ending } from "./RunOutcome.ts"

/** Ends the run with `ending`, through the one terminal entry point. */
export const end = (ctx: RunContext.RunContext, ending: Ending): RunResult.RunResult => {
  const from = RunContext.state(ctx)
  const moved = RunState.transition(from, ending.status)
  if (Result.isFailure(moved)) {
    // Only a run that already ended can refuse a terminal status; keep its own ending.
    return conclude(ctx, { ...ending, detail: `${ending.detail} (${Cause.pretty(Cause.fail(moved.failure))})` })
  }
  RunContext.emit(ctx, ({ runId, seq, at }) => ({ _tag: "state.changed", from, to: ending.status, runId, seq, at }))
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "run.finished",
    status: ending.status,
    stopReason: ending.stopReason,
    runId,
    seq,
    at
  }))
  return conclude(ctx, ending)
}

/**
 * What a defect says of itself, safely: the runtime's own errors and user code's
 * defects carry a `safeMessage` (`the termination policy "p" threw TypeError`);
 * anything else is named by its type (R3.1, R12).
 */
const defectDetail = (cause: Cause.Cause<unknown>): string => {
  const { type, code, safeMessage } = Failure.describeDefect(Cause.squash(cause))
  return safeMessage ?? `a defect (${type}${code === undefined ? "" : ` ${code}`})`
}

/** Whether a call of the named tool may not be sent twice (R3.8): one the run does not know is taken as such. */
export const unsafeIn =
  (tools: Registry["tools"]) =>
  (name: string): boolean => {
    const tool = tools.get(name)
    return tool === undefined || mayActTwice(tool)
  }

/** The first action in doubt (`pendingActions`) that may not be sent twice, if the run left one. */
export const inDoubt = (ctx: RunContext.RunContext, unsafeToResend: (name: string) => boolean) =>
  Explain.pendingActions(ctx.events).find((p) => unsafeToResend(p.name))

/**
 * A run's status as it ends on a stop that is no accepted answer: `unknown_outcome`, not
 * `failed` or `partial`, while an action that may not be sent twice is in doubt (`doubt`), since
 * it may have taken effect: never a guessed failure (R3.8). Its stop reason stays its own.
 */
export const withDoubt = (status: RunState.Status, doubt: boolean): RunState.Status =>
  doubt && (status === "failed" || status === "partial") ? "unknown_outcome" : status

/** {@link withDoubt}, the doubt read from the run's log and its tools. */
export const settled = (
  ctx: RunContext.RunContext,
  tools: Registry["tools"],
  status: RunState.Status
): RunState.Status => withDoubt(status, inDoubt(ctx, unsafeIn(tools)) !== undefined)

/**
 * Ends the run `internal_error` on a defect. A defect may have ended a call's fiber
 * outright, skipping the records its interruption would have made: every call still open
 * is recorded now.
 */
export const broken = (
  ctx: RunContext.RunContext,
  cause: Cause.Cause<unknown>,
  tools: ReadonlyMap<string, Tool.Any<unknown>>
): RunResult.RunResult => {
  recordAbandoned(ctx, tools)
  const detail = defectDetail(cause)
  RunContext.decided(ctx, "runtime", "internal_error", detail)
  return end(ctx, { status: settled(ctx, tools, "failed"), stopReason: "internal_error", policy: "runtime", detail })
}

/**
 * The result of a run whose fiber ended without one: a defect that escaped even the
 * ending, or a value that was not an Effect, which ends a fiber at once, skipping its
 * finalizers. The run still ends through the one terminal entry point, unless it had
 * already ended; and if even that throws, with a result built from what is known.
 */
export const rescue = (
  ctx: RunContext.RunContext,
  exit: Exit.Exit<unknown, unknown>,
  tools: ReadonlyMap<string, Tool.Any<unknown>>
): RunResult.RunResult => {
  const cause = Exit.isFailure(exit) ? exit.cause : Cause.die(new Error("the run ended without a result"))
  try {
    const state = RunContext.state(ctx)
    if (RunState.isTerminal(state)) {
      const finished = ctx.events.findLast((e) => e._tag === "run.finished")
      const status = finished?._tag === "run.finished" ? finished.status : state
      const stopReason = finished?._tag === "run.finished" ? finished.stopReason : "internal_error"
      return conclude(ctx, { status, stopReason, policy: "runtime", detail: defectDetail(cause) })
    }
    return broken(ctx, cause, tools)
  } catch {
    return conclude(ctx, {
      status: "failed",
      stopReason: "internal_error",
      policy: "runtime",
      detail: "the run could not record its ending"
    })
  }
}

/**
 * The result of a run stopped from outside (the deadline, a cancel, another process taking it
 * over) whose interrupted work did not stop within the stop grace: user code that cannot be
 * interrupted. The run
 * ends now, as it would have; what was in flight is left behind, recorded as such, and
 * the log is closed, so nothing it does later changes the result.
 */
export const leftBehind = (
  ctx: RunContext.RunContext,
  tools: ReadonlyMap<string, Tool.Any<unknown>>,
  graceMillis: number,
  /** How the stop is judged, at once (R6.3): `undefined` when it cannot be. */
  judgedNow: (stop: "cancelled" | "run_timeout", detail: string) => Ending | undefined
): RunResult.RunResult => {
  const stopping = ctx.log.stopping
  // Stopped by another process taking the run over (a commit fenced off), with no cancel or deadline before.
  const fenced = stopping === undefined && ctx.fenced !== undefined
  const cancelled = !fenced && stopping?.by !== "deadline"
  const by = fenced ? "another process taking the run over" : cancelled ? "the cancel" : "the run deadline"
  const reason = fenced ? "internal_error" : cancelled ? "cancelled" : "run_timeout"
  try {
    recordAbandoned(ctx, tools, `it did not stop within the stop grace of ${graceMillis} ms after ${by}`, true)
    const held = ctx.committing
      ? "its journal's store held a commit past the stop grace"
      : "what it interrupted did not stop within the stop grace"
    const detail = fenced
      ? `${ctx.fenced}, and ${held} of ${graceMillis} ms; it was left behind`
      : `${by} stopped the run while it was ${stopping?.state ?? RunContext.state(ctx)}, and ${held} of ${graceMillis} ms; it was left behind`
    const policy = reason === "run_timeout" ? "run_timeout" : "runtime"
    RunContext.decided(ctx, policy, reason, detail)
    const judged = reason === "internal_error" ? undefined : judgedNow(reason, detail)
    const status = cancelled ? "cancelled" : settled(ctx, tools, "failed")
    return end(ctx, judged ?? { status, stopReason: reason, policy, detail })
  } catch {
    return conclude(ctx, {
      status: cancelled ? "cancelled" : "failed",
      stopReason: reason,
      policy: "runtime",
      detail: "the run could not record its ending"
    })
  }
}
