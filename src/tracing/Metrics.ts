/**
 * The runtime's metrics, through effect's `Metric` (exported by whatever reads effect's
 * `MetricRegistry`: `@effect/opentelemetry`'s `NodeSdk`, effect's `OtlpMetrics`, or
 * `Metric.snapshot`). They are recorded once per run, at its end, from its result and
 * timeline: nothing is paid per step.
 *
 * @since 0.1.0
 */
import { type Context, Effect, Metric } from "effect"
import type * as Event from "../events/Event.ts"
import * as Attributes from "./Attributes.ts"

const names = Attributes.metric

/** Milliseconds, 1 ms to about 9 min. */
const millis = Metric.exponentialBoundaries({ start: 1, factor: 2, count: 20 })

/**
 * @category metrics
 * @since 0.1.0
 */
export const runs = Metric.counter(names.runs, {
  description: "Runs ended, by status and stop reason",
  incremental: true
})
/**
 * @category metrics
 * @since 0.1.0
 */
export const steps = Metric.counter(names.steps, {
  description: "Steps run: iterations that asked the model",
  incremental: true
})
/**
 * @category metrics
 * @since 0.1.0
 */
export const toolCalls = Metric.counter(names.toolCalls, {
  description: "Tool calls settled, by outcome (succeeded, failed, blocked, interrupted)",
  incremental: true
})
/**
 * @category metrics
 * @since 0.1.0
 */
export const retries = Metric.counter(names.retries, {
  description: "Retries waited for, by kind and cause (the failure's code)",
  incremental: true
})
/**
 * @category metrics
 * @since 0.1.0
 */
export const tokens = Metric.counter(names.tokens, {
  description: "Tokens used, by type (input, output): an unfinished answer's that was paid for included",
  incremental: true
})
const inputTokens = Metric.withAttributes(tokens, { [names.tokenType]: "input" })
const outputTokens = Metric.withAttributes(tokens, { [names.tokenType]: "output" })
/**
 * @category metrics
 * @since 0.1.0
 */
export const costUsd = Metric.counter(names.costUsd, { description: "Cost in USD", incremental: true })
/**
 * @category metrics
 * @since 0.1.0
 */
export const runDuration = Metric.histogram(names.runDuration, {
  description: "Run duration in milliseconds",
  boundaries: millis
})
/**
 * @category metrics
 * @since 0.1.0
 */
export const stepDuration = Metric.histogram(names.stepDuration, {
  description:
    "Step (iteration) duration in milliseconds, from its first model request to the next one or the run's end",
  boundaries: millis
})

/** What the metrics read from a run's ending. */
export interface Ended {
  readonly status: string
  readonly stopReason: string
  readonly elapsedMillis: number
  readonly counters: {
    readonly iterations: number
    readonly inputTokens: number
    readonly outputTokens: number
    readonly costUsd: number
  }
  readonly timeline: ReadonlyArray<Event.Event>
}

/** The duration of each step: from its first model request to the next step's, or to the run's last event. */
const stepDurations = (timeline: ReadonlyArray<Event.Event>): ReadonlyArray<number> => {
  const starts: Array<number> = []
  let last = -1
  for (const e of timeline) {
    if (e._tag === "model.requested" && e.iteration !== last) {
      starts.push(e.at)
      last = e.iteration
    }
  }
  const end = timeline.at(-1)?.at ?? 0
  return starts.map((at, i) => Math.max(0, (starts[i + 1] ?? end) - at))
}

const outcomes: ReadonlyMap<Event.Event["_tag"], string> = new Map([
  ["tool.succeeded", "succeeded"],
  ["tool.failed", "failed"],
  ["tool.blocked", "blocked"],
  ["tool.interrupted", "interrupted"]
])

/** How many of each key. */
const tally = (keys: Iterable<string>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1)
  return counts
}

/**
 * Each call's outcome, once: its last word. An attempt cut off by its timeout and retried
 * records a `tool.interrupted`, then the call settles (`tool.succeeded`, ...): one call.
 * Call ids are unique in a run (`model.responded`'s `callIds`).
 */
const toolOutcomes = (timeline: ReadonlyArray<Event.Event>): Iterable<string> => {
  const last = new Map<string, string>()
  for (const e of timeline) {
    const outcome = outcomes.get(e._tag)
    if (outcome !== undefined && "callId" in e && e.callId !== undefined) last.set(e.callId, outcome)
  }
  return last.values()
}

function* retryCauses(timeline: ReadonlyArray<Event.Event>) {
  for (const e of timeline)
    if (e._tag === "recovery.started") yield `${e.kind}\u0000${Attributes.nameShown(e.cause, "failure")}`
}

/**
 * Records the metrics of one ended run.
 *
 * @category recording
 * @since 0.1.0
 */
export const record = (ended: Ended): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { counters, timeline } = ended
    yield* Metric.update(
      Metric.withAttributes(runs, { [names.status]: ended.status, [names.stopReason]: ended.stopReason }),
      1
    )
    // Each step that asked the model, as its duration and its span count it (review 166: a step whose
    // model call failed for good had a duration and a span, and was not counted).
    const durations = stepDurations(timeline)
    yield* Metric.update(steps, durations.length)
    for (const [outcome, n] of tally(toolOutcomes(timeline))) {
      yield* Metric.update(Metric.withAttributes(toolCalls, { [names.outcome]: outcome }), n)
    }
    for (const [key, n] of tally(retryCauses(timeline))) {
      const [kind = "", cause = ""] = key.split("\u0000")
      yield* Metric.update(Metric.withAttributes(retries, { [names.kind]: kind, [names.cause]: cause }), n)
    }
    yield* Metric.update(inputTokens, counters.inputTokens)
    yield* Metric.update(outputTokens, counters.outputTokens)
    yield* Metric.update(costUsd, counters.costUsd)
    yield* Metric.update(runDuration, ended.elapsedMillis)
    // A step's duration each: recorded in one step with the context read once, not an effect
    // each (that cost a run of 200 steps about half a millisecond).
    yield* Effect.contextWith((context: Context.Context<never>) =>
      Effect.sync(() => {
        for (const millis of durations) stepDuration.updateUnsafe(millis, context)
      })
    )
  })
