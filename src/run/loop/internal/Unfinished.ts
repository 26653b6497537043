/**
 * Where a resumed run's log stopped (R9), read from the log alone: inside its last
 * iteration or not, which calls of its batch are in doubt, what is left of its step.
 * Private to the loop.
 */
import { Effect } from "effect"
import * as Event from "../../../events/Event.ts"
import type * as Model from "../../../model/Model.ts"
import * as Commit from "../../internal/Commit.ts"
import * as RunContext from "../../internal/RunContext.ts"
import * as ToolExecutor from "../../pipeline/ToolExecutor.ts"
import type { Config } from "./LoopConfig.ts"
import { cutOffArguments } from "./LoopStops.ts"

/** A batch: its calls, ready, and for a resumed run's where each stands in its log. */
export interface OpenBatch {
  readonly prepared: ReadonlyArray<ToolExecutor.Prepared>
  readonly standings?: ReadonlyArray<ToolExecutor.Standing> | undefined
}

/**
 * Where a resumed run's log stopped in its last iteration (R9), when it stopped inside
 * one: right after the model's response (`Responded`: nothing of what follows it was
 * committed, so its checks run again, as they would have), or in its tool batch
 * (`InBatch`: some calls have no result yet, or all have and what the batch's end
 * decides, its corrections, limits and policies, was not committed).
 */
export type Unfinished =
  | {
      readonly _tag: "Responded"
      readonly response: Model.Response
      readonly prepared: ReadonlyArray<ToolExecutor.Prepared>
    }
  | ({ readonly _tag: "InBatch" } & OpenBatch)

/** The events after a batch ends that say its end was decided: whatever else follows, the loop went on. */
const decidedAfterBatch: ReadonlySet<Event.Event["_tag"]> = new Set([
  "reminder.injected",
  "recovery.started",
  "recovery.completed",
  "recovery.failed",
  "termination.decided"
])

/** Where the last iteration of a restored log stopped, if inside it (see {@link Unfinished}). */
export const unfinished = <R>(ctx: RunContext.RunContext, config: Config<R>): Unfinished | undefined => {
  const at = ctx.events.findLastIndex((e) => e._tag === "model.responded")
  const responded = ctx.events[at]
  if (responded?._tag !== "model.responded") return undefined
  const after = ctx.events.slice(at + 1).filter((e) => e._tag !== "run.resumed")
  const truncated = responded.finishReason === "length"
  const prepared = responded.toolCalls.map((call, i) => {
    const ready = ToolExecutor.prepareAs(config.registry, responded.callIds[i] ?? call.id, call)
    return truncated ? cutOffArguments(ready) : ready
  })
  if (after.length === 0 && RunContext.state(ctx) === "model_thinking") {
    const response: Model.Response = {
      text: responded.text,
      toolCalls: responded.toolCalls,
      usage: responded.usage,
      ...(responded.finishReason === undefined ? {} : { finishReason: responded.finishReason }),
      ...(responded.reasoning === undefined ? {} : { reasoning: responded.reasoning }),
      ...(responded.reasoningParts === undefined ? {} : { reasoningParts: responded.reasoningParts })
    }
    return { _tag: "Responded", response, prepared }
  }
  if (prepared.length === 0) return undefined
  const standings = prepared.map((p) => ToolExecutor.standingOf(after, p.call.id))
  if (standings.some((s) => s._tag !== "Done")) return { _tag: "InBatch", prepared, standings }
  // Every result is in: the batch's end is still to decide unless something after the last result says it was.
  const last = after.findLastIndex((e) => Event.isResult(e) && responded.callIds.includes(e.callId))
  return after.slice(last + 1).some((e) => decidedAfterBatch.has(e._tag))
    ? undefined
    : { _tag: "InBatch", prepared, standings }
}

/**
 * The calls of a restored log whose handler was running when the log stopped: neither
 * their result nor a retry's wait is in it (R3.8). Each with its attempt, whether it may
 * have acted (its tool writes or acts outside, or is gone), and whether its tool has a
 * status query to ask what it did.
 *
 * @category getters
 * @since 0.3.0
 */
export const inDoubt = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>
): ReadonlyArray<{
  readonly call: Model.ToolCall
  readonly attempt: number
  readonly mayHaveActed: boolean
  readonly reconciles: boolean
  /** Whether the log records the attempt's interruption already. */
  readonly recorded: boolean
}> => {
  const open = unfinished(ctx, config)
  if (open?._tag !== "InBatch") return []
  return open.prepared.flatMap((p, i) => {
    const standing = open.standings?.[i]
    if (standing?._tag !== "InDoubt") return []
    const tool = config.registry.tools.get(p.call.name)
    return [
      {
        call: p.call,
        attempt: standing.attempt,
        recorded: standing.recorded,
        mayHaveActed: tool === undefined || ToolExecutor.mayHaveEffects(tool),
        reconciles: tool?.reconcile !== undefined
      }
    ]
  })
}

/**
 * Settles the calls in doubt of a run resumed past its deadline (R3.8, R3.11) that may have
 * acted and have a status query: each is asked, `concurrency` at a time, none is sent
 * again (see `ToolExecutor.reconcileLate`), and what each came to is committed. Nothing
 * else of the run goes on.
 */
export const reconcileLate = <R>(ctx: RunContext.RunContext, config: Config<R>): Effect.Effect<void, never, R> =>
  Effect.suspend(() => {
    const open = unfinished(ctx, config)
    if (open?._tag !== "InBatch") return Effect.void
    const asked = open.prepared.flatMap((p, i) => {
      const standing = open.standings?.[i]
      const tool = config.registry.tools.get(p.call.name)
      if (standing?._tag !== "InDoubt" || tool?.reconcile === undefined || !ToolExecutor.mayHaveEffects(tool)) return []
      // Each settled call is committed at once, as a live batch commits an acting call's result (R9).
      // Ending on a turn of its own, as a batch's call does (see `Loop`: ended inside one another, cut off).
      return [
        Effect.andThen(ToolExecutor.reconcileLate(ctx, config.registry, p, standing), Commit.barrier(ctx)).pipe(
          Effect.onInterrupt(() => Effect.yieldNow)
        )
      ]
    })
    return Effect.all(asked, { concurrency: config.concurrency, discard: true })
  })

/**
 * What is left of the step of a resumed run's iteration (its last answered one, by
 * default): the step began at the iteration's first model request, and keeps its deadline
 * across a restart (R4.2, R9).
 */
export const stepLeft = (
  ctx: RunContext.RunContext,
  stepMillis: number | undefined,
  iteration = ctx.log.counters.iterations
): number | undefined => {
  if (stepMillis === undefined) return undefined
  const began = ctx.events.find((e) => e._tag === "model.requested" && e.iteration === iteration)
  return began === undefined ? stepMillis : began.at + stepMillis - RunContext.now(ctx)
}
