/**
 * The measurement shared by the embedded and the cluster cases: start runs that park on
 * approval, time them to their first suspension, check that each parked after exactly 3
 * iterations, read the heap while their workflows are resident and again once the engine
 * has released them, the storage they took and the writes they made; then approve some of
 * them and count the writes of their last iteration.
 */
import * as os from "node:os"
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
  /** The writes made so far (counters that only grow; differences are what a phase wrote). */
  readonly writes: Effect.Effect<Writes, unknown>
}

/** Counters of writes to the store. */
export interface Writes {
  /** The journal's commits: the rows of `agent_commits` (one per commit). */
  readonly journalCommits: number
  /**
   * The rows the engine wrote to its messages and replies (PostgreSQL: inserted, updated
   * and deleted, from `pg_stat_user_tables`; SQLite: inserted, the rows of the tables).
   */
  readonly engineRows: number
  /**
   * The write transactions committed on the whole server (PostgreSQL: the transaction id
   * counter, which only a transaction that writes advances); undefined on SQLite.
   */
  readonly transactions?: number | undefined
}

/** Writes of a phase per run, the server's background writes (heartbeats) taken out. */
export interface WritesPerRun {
  readonly journalCommits: number
  readonly engineRows: number
  readonly transactions?: number | undefined
}

export interface Heap {
  readonly bytes: number
  readonly resident: number
  /** CPU time the processes have used so far (`process.cpuUsage`, user and system), in microseconds. */
  readonly cpuMicros: number
}

/** This process's CPU time so far, in microseconds. */
export const cpuHere = Effect.sync(() => {
  const { user, system } = process.cpuUsage()
  return user + system
})

/** The machine's CPU time so far, busy and all, in milliseconds (`os.cpus`). */
const machineCpu = () =>
  os.cpus().reduce(
    (sum, cpu) => {
      const { idle, ...rest } = cpu.times
      const busy = Object.values(rest).reduce((a, b) => a + b, 0)
      return { busy: sum.busy + busy, all: sum.all + busy + idle }
    },
    { busy: 0, all: 0 }
  )

export interface Storage {
  readonly journal: number
  readonly cluster: number
}

export interface Figures {
  readonly runs: number
  /** From the first start to the last run parked. */
  readonly startMillis: number
  /** CPU time of the processes that host the runs per run started, from start to park. */
  readonly cpuMillisPerRun: number
  /** CPU time of this process (the client: the starts, the polls) per run, from start to park. */
  readonly clientCpuMillisPerRun: number
  /** How busy the machine's cores were from start to park (0 to 1: every process, PostgreSQL too). */
  readonly machineBusy: number
  /** The settled heap of the hosting processes (summed) before the measured runs, after the warm-up. */
  readonly baseHeapBytes: number
  readonly residentBytesPerRun: number
  /** How many run workflows were resident when the heap was read right after the last park. */
  readonly residentAtPark: number
  /** From the last park until no run workflow is resident. */
  readonly idleOutMillis: number
  readonly idleBytesPerRun: number
  readonly journalBytesPerRun: number
  readonly clusterBytesPerRun: number
  /** Journal events per parked run (every measured run checked: 3 iterations, parked). */
  readonly eventsPerRun: number
  /** From start to park (3 iterations, the last one up to its approval request). */
  readonly parkWrites: WritesPerRun
  /** How many runs were approved and awaited to the end. */
  readonly finished: number
  /** From approval to the end (the paid call and a 4th iteration with the answer). */
  readonly finishWrites: WritesPerRun
  /** From the first approval to the last result read. */
  readonly finishMillis: number
  /** The server's write transactions per second while nothing runs (runner heartbeats). */
  readonly backgroundTransactionsPerSecond?: number | undefined
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

/** What `after` wrote over `before`, per run of `runs`, less `background` writes a second over `seconds`. */
const perRun = (before: Writes, after: Writes, runs: number, background: number, seconds: number): WritesPerRun => ({
  journalCommits: (after.journalCommits - before.journalCommits) / runs,
  engineRows: (after.engineRows - before.engineRows) / runs,
  transactions:
    after.transactions === undefined || before.transactions === undefined
      ? undefined
      : (after.transactions - before.transactions - background * seconds) / runs
})

/** Every run `<prefix><i>` parked after exactly 3 iterations, its payment waiting; gives the events per run. */
const checkParked = (target: Target, prefix: string, n: number, concurrency: number) =>
  Effect.gen(function* () {
    const counts = yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => `${prefix}${i}`),
      (runId) =>
        Effect.flatMap(target.runs.events(runId), (events) => {
          const responses = events.filter((e) => e._tag === "model.responded").length
          const asked = events.some((e) => e._tag === "approval.requested")
          const ended = events.some((e) => e._tag === "run.finished")
          return responses === 3 && asked && !ended
            ? Effect.succeed(events.length)
            : Effect.die(
                new Error(
                  `${runId} is not parked after 3 iterations: ${responses} responses, asked ${asked}, ended ${ended}`
                )
              )
        }),
      { concurrency }
    )
    return counts.reduce((a, b) => a + b, 0) / n
  })

/** Approves the payment of the runs `<prefix><i>`, i < n, and waits until each has completed. */
const approveAll = (target: Target, prefix: string, n: number, concurrency: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => `${prefix}${i}`),
    (runId) =>
      Effect.gen(function* () {
        const [call] = yield* target.runs.pending(runId)
        if (call === undefined) return yield* Effect.die(new Error(`${runId} waits on no call`))
        yield* target.runs.approve(runId, call.callId)
        const result = yield* target.runs.result(runId)
        if (result.status !== "completed") return yield* Effect.die(new Error(`${runId} ended ${result.status}`))
      }),
    { concurrency, discard: true }
  )

/** How many of the measured runs are approved and awaited, for the writes of a run's end. */
const FINISHED = 100

/**
 * `warmUp` runs first (parked and released, so that code compiled and caches filled on
 * their account do not count), then `n` runs measured, then `FINISHED` of them approved.
 */
export const measure = (target: Target, n: number, options: Options) =>
  Effect.gen(function* () {
    yield* startParked(target, "warm-", options.warmUp, options.concurrency)
    yield* idleOut(target)
    const base = yield* target.heap
    const stored = yield* target.storage
    // The server's own writes while nothing runs (runners' heartbeats), taken out of each phase's.
    const quiet = yield* target.writes
    yield* Effect.sleep("5 seconds")
    const quieted = yield* target.writes
    const background =
      quiet.transactions === undefined || quieted.transactions === undefined
        ? 0
        : (quieted.transactions - quiet.transactions) / 5
    const grown = options.snapshot === true ? yield* snapshot : undefined
    const wrote = yield* target.writes
    const cpuBefore = yield* target.heap
    const clientBefore = yield* cpuHere
    const machineBefore = machineCpu()
    const started = performance.now()
    yield* startParked(target, "run-", n, options.concurrency)
    const parked = performance.now()
    const machineAfter = machineCpu()
    const clientAfter = yield* cpuHere
    const resident = yield* target.heap
    yield* idleOut(target)
    const idled = performance.now()
    const idle = yield* target.heap
    // Read after the idle-out: PostgreSQL's table counters reach `pg_stat_user_tables` late.
    const parkWrote = yield* target.writes
    const parkWroteAt = performance.now()
    const storage = yield* target.storage
    if (grown !== undefined) yield* grown(25)
    const eventsPerRun = yield* checkParked(target, "run-", n, options.concurrency)
    const finished = Math.min(n, FINISHED)
    const approving = yield* target.writes
    const approved = performance.now()
    yield* approveAll(target, "run-", finished, options.concurrency)
    const ended = performance.now()
    yield* idleOut(target)
    const finishWrote = yield* target.writes
    const finishWroteAt = performance.now()
    return {
      runs: n,
      startMillis: parked - started,
      cpuMillisPerRun: (resident.cpuMicros - cpuBefore.cpuMicros) / 1000 / n,
      clientCpuMillisPerRun: (clientAfter - clientBefore) / 1000 / n,
      machineBusy: (machineAfter.busy - machineBefore.busy) / (machineAfter.all - machineBefore.all),
      baseHeapBytes: base.bytes,
      residentBytesPerRun: (resident.bytes - base.bytes) / n,
      residentAtPark: resident.resident,
      idleOutMillis: idled - parked,
      idleBytesPerRun: (idle.bytes - base.bytes) / n,
      journalBytesPerRun: (storage.journal - stored.journal) / n,
      clusterBytesPerRun: (storage.cluster - stored.cluster) / n,
      eventsPerRun,
      parkWrites: perRun(wrote, parkWrote, n, background, (parkWroteAt - started) / 1000),
      finished,
      finishWrites: perRun(approving, finishWrote, finished, background, (finishWroteAt - approved) / 1000),
      finishMillis: ended - approved,
      backgroundTransactionsPerSecond: quiet.transactions === undefined ? undefined : background
    } satisfies Figures
  })
