/**
 * The result of one run, assembled from its ending and its timeline. Private to the
 * runtime.
 */
import * as Counters from "../../events/Counters.ts"
import type * as Event from "../../events/Event.ts"
import type * as RunState from "../../events/RunState.ts"
import type * as StopReason from "../../events/StopReason.ts"
import * as Explain from "../../explain/Explain.ts"
import * as Tool from "../../tools/Tool.ts"
import type * as Validation from "../../validation/Validation.ts"
import type * as RunResult from "../RunResult.ts"
import type * as RunContext from "./RunContext.ts"

/**
 * Calls that changed the world: those of `write` and `external` tools whose handler
 * returned, whether the call then succeeded, failed on what came after (its output, its
 * rendering, its postcondition) or was cut off in it.
 */
const sideEffectsOf = (timeline: ReadonlyArray<Event.Event>): RunResult.RunResult["sideEffects"] =>
  timeline.flatMap((e) =>
    (e._tag === "tool.succeeded" || e._tag === "tool.failed" || e._tag === "tool.interrupted") &&
    Tool.mayChangeWorld(e.sideEffect)
      ? [{ callId: e.callId, name: e.name, sideEffect: e.sideEffect, seq: e.seq }]
      : []
  )

/** The model the run ended with, and its switches to fallbacks (R3.9). */
const modelsOf = (
  timeline: ReadonlyArray<Event.Event>
): { readonly model: string; readonly fallbacks: RunResult.RunResult["fallbacks"] } => {
  const first = timeline[0]
  let model = first?._tag === "run.started" ? first.model : "model"
  const fallbacks: Array<RunResult.RunResult["fallbacks"][number]> = []
  for (const e of timeline) {
    if (e._tag === "model.fallback") {
      fallbacks.push({ iteration: e.iteration, from: e.from, to: e.to, failure: e.failure, seq: e.seq })
      model = e.to
    }
  }
  return { model, fallbacks }
}

export interface Ending {
  readonly status: RunState.Status
  readonly stopReason: StopReason.StopReason
  readonly policy: string
  readonly detail: string
  readonly finalAnswer?: string | undefined
  /** The final answer decoded with the run's output schema, when it has one and it decoded. */
  readonly output?: unknown
  readonly report?: Validation.Report | undefined
}

export const conclude = (ctx: RunContext.RunContext, ending: Ending): RunResult.RunResult => {
  const report = ending.report
  const unfinished = report?.unfinished ?? []
  const counters = Counters.snapshot(ctx.log.counters)
  const sideEffects = sideEffectsOf(ctx.events)
  // The actions of unknown outcome (R3.8, R5.2), as the run's explanation finds them.
  const pendingActions = Explain.pendingActions(ctx.events)
  const { model, fallbacks } = modelsOf(ctx.events)
  return {
    runId: ctx.runId,
    status: ending.status,
    stopReason: ending.stopReason,
    policy: ending.policy,
    detail: ending.detail,
    ...(ending.finalAnswer !== undefined ? { finalAnswer: ending.finalAnswer } : {}),
    ...("output" in ending ? { output: ending.output } : {}),
    checks: report?.checks ?? [],
    evidence: report?.evidence ?? [],
    completed: report?.completed ?? [],
    unfinished,
    sideEffects,
    pendingActions,
    model,
    fallbacks,
    // The next safe step (R6.3): no plan work is while an action's outcome is unknown or a
    // result was contradicted; the world is checked first (the explanation's `next` says how).
    ...(report?.nextStep !== undefined && pendingActions.length === 0 && Explain.contradicted(ctx.events) === undefined
      ? { nextStep: report.nextStep }
      : {}),
    checkpoint: ctx.events.length - 1,
    counters,
    elapsedMillis: counters.elapsedMillis,
    timeline: ctx.events
  }
}
