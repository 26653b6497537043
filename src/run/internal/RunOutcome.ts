/**
 * The result of one run, assembled from its ending and its timeline. Private to the
 * runtime.
 */
import * as Counters from "../../events/Counters.ts"
import type * as Event from "../../events/Event.ts"
import type * as RunState from "../../events/RunState.ts"
import type * as StopReason from "../../events/StopReason.ts"
import type * as Validation from "../../validation/Validation.ts"
import type * as RunResult from "../RunResult.ts"
import type * as RunContext from "./RunContext.ts"

/**
 * Calls that changed the world, and actions that may or may not have taken effect (R3.8,
 * R5.2), in one pass. A call is pending when something left its outcome unknown (an
 * attempt cut off while it may have acted, a failure of unknown outcome) and nothing
 * later settled it: a success, or a status query that found it applied or not applied.
 * A later failure does not settle it: an attempt that fails says nothing of an earlier
 * one that may have acted.
 */
const effectsOf = (
  timeline: ReadonlyArray<Event.Event>
): {
  readonly sideEffects: RunResult.RunResult["sideEffects"]
  readonly pendingActions: RunResult.RunResult["pendingActions"]
} => {
  const sideEffects: Array<RunResult.RunResult["sideEffects"][number]> = []
  // One entry per call; the latest word that leaves it unknown stands.
  const pending = new Map<string, RunResult.RunResult["pendingActions"][number]>()
  const unknown = (e: Event.Event & { readonly callId: string; readonly name: string }, detail: string) =>
    pending.set(e.callId, {
      callId: e.callId,
      name: e.name,
      idempotencyKey: `${e.runId}:${e.callId}`,
      detail,
      seq: e.seq
    })
  for (const e of timeline) {
    switch (e._tag) {
      case "tool.succeeded":
        pending.delete(e.callId)
        if (e.sideEffect === "write" || e.sideEffect === "external") {
          sideEffects.push({ callId: e.callId, name: e.name, sideEffect: e.sideEffect, seq: e.seq })
        }
        break
      case "tool.reconciled":
        if (e.verdict !== "undecidable") pending.delete(e.callId)
        break
      case "tool.interrupted":
        if (e.settlement === "outcome_unknown") unknown(e, e.detail)
        break
      case "tool.failed":
        if (e.error.failure?.classification === "unknown") unknown(e, e.error.failure.hint)
        break
    }
  }
  return { sideEffects, pendingActions: Array.from(pending.values()) }
}

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
  const { sideEffects, pendingActions } = effectsOf(ctx.events)
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
    ...(unfinished[0] !== undefined ? { nextStep: unfinished[0].description } : {}),
    checkpoint: ctx.events.length - 1,
    counters,
    elapsedMillis: counters.elapsedMillis,
    timeline: ctx.events
  }
}
