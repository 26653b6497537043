/**
 * The measurement shared by the embedded and the cluster cases: start runs that park on
 * approval, time them to their first suspension, read the heap while their workflows are
 * resident and again once the engine has released them, and the storage they took.
 */
import { Effect, Metric, Schedule } from "effect"
import type { DurableRun } from "../../src/durable/index.ts"
import { snapshot } from "./census.ts"
import { goal } from "./workload.ts"

/** Where the runs live: their operations, and how to read what they cost there. */
export interface Target {
  readonly runs: DurableRun.Service
  /** How many calls wait for approval (one per parked run). */
  readonly pending: Effect.Effect<number, unknown>
  /** The settled heap of the processes that host the runs, and their resident run workflows. */
  readonly heap: Effect.Effect<Heap, unknown>
  /** The bytes the store holds, the journal's tables and the engine's apart. */
  readonly storage: Effect.Effect<Storage, unknown>
}

export interface Heap {
  readonly bytes: number
  readonly resident: number
}

export interface Storage {
  readonly journal: number
  readonly cluster: number
}

export interface Figures {
  readonly runs: number
  /** From the first start to the last run parked. */
  readonly startMillis: number
  readonly residentBytesPerRun: number
  /** How many run workflows were resident when the heap was read right after the last park. */
  readonly residentAtPark: number
  /** From the last park until no run workflow is resident. */
  readonly idleOutMillis: number
  readonly idleBytesPerRun: number
  readonly journalBytesPerRun: number
  readonly clusterBytesPerRun: number
}

/** The run workflows resident in this process (effect's `effect_cluster_entities` gauge). */
export const residentHere = Effect.map(Metric.snapshot, (snapshots) =>
  snapshots
    .filter((s) => s.id === "effect_cluster_entities" && s.attributes?.type === "Workflow/effect-agent-runtime/Run")
    .reduce((sum, s) => sum + Number((s.state as { readonly value: bigint }).value), 0)
)

const deadline = (what: string, millis: number) =>
  Effect.timeoutOrElse({
    duration: millis,
    orElse: () => Effect.die(new Error(`timed out after ${millis} ms waiting for ${what}`))
  })

/** Polls `read` every 200 ms until `done` holds of it (within `millis`). */
export const waitUntil = <A, E>(what: string, read: Effect.Effect<A, E>, done: (a: A) => boolean, millis: number) =>
  Effect.repeat(read, { until: done, schedule: Schedule.spaced("200 millis") }).pipe(deadline(what, millis))

/** Starts `n` runs (`concurrency` starts at a time) under ids `<prefix><i>`; waits until all parked. */
export const startParked = (target: Target, prefix: string, n: number, concurrency: number) =>
  Effect.gen(function* () {
    const before = yield* target.pending
    yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => `${prefix}${i}`),
      (runId) => target.runs.start({ goal, runId }),
      { concurrency, discard: true }
    )
    yield* waitUntil(`${n} runs to park`, target.pending, (count) => count >= before + n, 30 * 60_000)
  })

/** Waits until no run workflow is resident, then a little longer for what their release lets go. */
const idleOut = (target: Target) =>
  Effect.andThen(
    waitUntil("the engine to release the runs", target.heap, (heap) => heap.resident === 0, 10 * 60_000),
    Effect.sleep("2 seconds")
  )

export interface Options {
  readonly warmUp: number
  readonly concurrency: number
  /** Print what grew in this process's heap from before the runs to after their release (`census.ts`). */
  readonly snapshot?: boolean | undefined
}

/**
 * `warmUp` runs first (parked and released, so that code compiled and caches filled on
 * their account do not count), then `n` runs measured.
 */
export const measure = (target: Target, n: number, options: Options) =>
  Effect.gen(function* () {
    yield* startParked(target, "warm-", options.warmUp, options.concurrency)
    yield* idleOut(target)
    const base = yield* target.heap
    const stored = yield* target.storage
    const grown = options.snapshot === true ? yield* snapshot : undefined
    const started = performance.now()
    yield* startParked(target, "run-", n, options.concurrency)
    const parked = performance.now()
    const resident = yield* target.heap
    yield* idleOut(target)
    const idled = performance.now()
    const idle = yield* target.heap
    const storage = yield* target.storage
    if (grown !== undefined) yield* grown(25)
    return {
      runs: n,
      startMillis: parked - started,
      residentBytesPerRun: (resident.bytes - base.bytes) / n,
      residentAtPark: resident.resident,
      idleOutMillis: idled - parked,
      idleBytesPerRun: (idle.bytes - base.bytes) / n,
      journalBytesPerRun: (storage.journal - stored.journal) / n,
      clusterBytesPerRun: (storage.cluster - stored.cluster) / n
    } satisfies Figures
  })
