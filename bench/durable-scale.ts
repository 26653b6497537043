/**
 * Scale benchmark of durable runs (issue 14): `npm run bench:scale`, about 15 minutes.
 * docs/SCALE.md has the figures and the cost model built on them.
 *
 * Each case starts N runs that look two invoices up and then ask a payment that needs
 * approval, where they park (`scale/workload.ts`), after a warm-up of parked and released
 * runs; then it reads (`scale/measure.ts`):
 *
 * 1. the start throughput: runs started per second, from the first start to the last run
 *    parked (its approval on the table), and the CPU time that took, per run, in the
 *    processes hosting the runs and in this one (the client), and the machine's load;
 * 2. the heap per run while the runs' workflows are still resident, right after the last
 *    park, and once the engine has released them (no run workflow resident: effect's
 *    workflow entities idle out after 10 s), after a forced collection; the heap of the
 *    processes that host the runs, run with `--no-flush-bytecode` so that V8 dropping the
 *    bytecode of start-up code does not pass for runs let go;
 * 3. the storage per run: the bytes of the journal's tables (`agent_*`) and the engine's
 *    (`cluster_*`), indexes included, every run checked parked after exactly 3 iterations;
 * 4. the writes per run from start to park: journal commits, the engine's message and reply
 *    rows, and on PostgreSQL the server's write transactions (its transaction ids, less the
 *    runners' background writes measured while idle);
 * 5. the same writes, and the time, for 100 of the runs approved and awaited to the end.
 *
 * Cases: `DurableRun.layerEmbedded` on one SQLite file in this process at 1,000 and 10,000
 * runs (`scale/embedded.ts`); `layerCluster` on PostgreSQL with one and with three runner
 * processes on 127.0.0.1 and this process as a client-only member (`scale/cluster.ts`,
 * `scale/runner.ts`), on a throwaway server (fsync off) unless `PG_URL` is set.
 *
 * Options (environment): `SCALE_EMBEDDED` (run counts, default `1000,10000`), `SCALE_PG`
 * (default `2000`), `SCALE_RUNNERS` (default `1,3`), `SCALE_WARM_UP` (default 1000),
 * `SCALE_CONCURRENCY` (starts at a time, default 50), `SCALE_SNAPSHOT=1` (print what grew in
 * the heap of the embedded cases, by kind of object, from two heap snapshots). An empty
 * list skips its cases.
 *
 * Prints the figures beside issue 14's targets (PASS or MISS); asserts nothing and exits 0
 * unless a case fails (a run not parked after 3 iterations, or not completed once approved).
 */
import * as os from "node:os"
import { Effect } from "effect"
import { postgres } from "../test/support/postgres.ts"
import { kb, table, verdict } from "./report.ts"
import { cluster, serverVersion } from "./scale/cluster.ts"
import { embedded } from "./scale/embedded.ts"
import type { Figures } from "./scale/measure.ts"

const list = (name: string, fallback: string): ReadonlyArray<number> =>
  (process.env[name] ?? fallback)
    .split(",")
    .filter((s) => s.trim() !== "")
    .map(Number)

const EMBEDDED = list("SCALE_EMBEDDED", "1000,10000")
const PG = list("SCALE_PG", "2000")
const RUNNERS = list("SCALE_RUNNERS", "1,3")
const options = {
  warmUp: Number(process.env.SCALE_WARM_UP ?? 1000),
  concurrency: Number(process.env.SCALE_CONCURRENCY ?? 50),
  snapshot: process.env.SCALE_SNAPSHOT === "1"
}

/** Heap per suspended run once released: about 0, at most 1 KB. */
const TARGET_IDLE_BYTES = 1024
/** Storage per run waiting after 3 iterations: at most 10 KB. */
const TARGET_STORAGE_BYTES = 10 * 1024
/** Iterations of a run up to its park (`scale/workload.ts`). */
const PARK_ITERATIONS = 3
/** Iterations after the approval: the rest of the 3rd (the paid call), the 4th (the answer). */
const FINISH_ITERATIONS = 1

const count = (x: number | undefined, digits = 1): string => (x === undefined ? "-" : x.toFixed(digits))

const report = (cases: ReadonlyArray<readonly [string, Figures]>) => {
  console.log("")
  table([
    [
      "case",
      "runs",
      "start",
      "runs/s",
      "CPU/run",
      "client",
      "busy",
      "base heap",
      "resident heap",
      "idle-out",
      "idle heap",
      "journal",
      "engine",
      "storage"
    ],
    ...cases.map(([name, f]) => [
      name,
      String(f.runs),
      `${(f.startMillis / 1000).toFixed(1)} s`,
      (f.runs / (f.startMillis / 1000)).toFixed(0),
      `${f.cpuMillisPerRun.toFixed(2)} ms`,
      `${f.clientCpuMillisPerRun.toFixed(2)} ms`,
      `${(f.machineBusy * 100).toFixed(0)} %`,
      `${(f.baseHeapBytes / 2 ** 20).toFixed(1)} MB`,
      `${kb(f.residentBytesPerRun)} (${f.residentAtPark} res.)`,
      `${(f.idleOutMillis / 1000).toFixed(1)} s`,
      `${f.idleBytesPerRun.toFixed(0)} B`,
      kb(f.journalBytesPerRun),
      kb(f.clusterBytesPerRun),
      kb(f.journalBytesPerRun + f.clusterBytesPerRun)
    ])
  ])
  console.log("")
  console.log(
    "per run: heap and storage deltas over the runs measured; 'res.' = run workflows resident at the last park; " +
      "CPU/run = CPU time of the processes hosting the runs from start to park (SQLite: this process, the client too), " +
      "client = this process's; base heap = the hosts' settled heap (summed) after the warm-up; busy = the machine's cores over that time (PostgreSQL and other processes too)"
  )
  console.log("")
  table([
    [
      "case",
      "events",
      "park: commits",
      "engine rows",
      "PG xacts",
      "xacts/iteration",
      "finish: runs",
      "time",
      "commits",
      "engine rows",
      "PG xacts",
      "background"
    ],
    ...cases.map(([name, f]) => [
      name,
      count(f.eventsPerRun),
      count(f.parkWrites.journalCommits),
      count(f.parkWrites.engineRows),
      count(f.parkWrites.transactions),
      count(f.parkWrites.transactions === undefined ? undefined : f.parkWrites.transactions / PARK_ITERATIONS),
      String(f.finished),
      `${(f.finishMillis / 1000).toFixed(1)} s`,
      count(f.finishWrites.journalCommits),
      count(f.finishWrites.engineRows),
      count(f.finishWrites.transactions),
      f.backgroundTransactionsPerSecond === undefined ? "-" : `${f.backgroundTransactionsPerSecond.toFixed(1)}/s`
    ])
  ])
  console.log("")
  console.log(
    `writes per run: 'park' from start to park (${PARK_ITERATIONS} iterations, every run checked parked after ` +
      `exactly ${PARK_ITERATIONS}), 'finish' from approval to the end (${FINISH_ITERATIONS} more); commits = ` +
      "journal commit rows; engine rows = rows of cluster_messages and cluster_replies written (SQLite: inserted); " +
      "PG xacts = write transactions on the server, the background (runner heartbeats, measured idle) taken out"
  )
  console.log("")
  for (const [name, f] of cases) {
    const storage = f.journalBytesPerRun + f.clusterBytesPerRun
    console.log(
      `${name}, ${f.runs} runs: idle heap ${f.idleBytesPerRun.toFixed(0)} B/run (target <= ${TARGET_IDLE_BYTES} B: ` +
        `${verdict(f.idleBytesPerRun <= TARGET_IDLE_BYTES)}); storage ${kb(storage)}/run after ${PARK_ITERATIONS} ` +
        `iterations (target <= ${kb(TARGET_STORAGE_BYTES)}: ${verdict(storage <= TARGET_STORAGE_BYTES)}); start ` +
        `${(f.runs / (f.startMillis / 1000)).toFixed(0)} runs/s (no target)`
    )
  }
}

const main = Effect.gen(function* () {
  console.log(
    `durable runs at scale on Node ${process.version}, ${os.cpus().length} cores, ` +
      `${(os.totalmem() / 2 ** 30).toFixed(0)} GB, load ${os.loadavg()[0]?.toFixed(1)}, ${new Date().toISOString()}; ` +
      `warm-up ${options.warmUp} runs, ${options.concurrency} starts at a time`
  )
  const cases: Array<readonly [string, Figures]> = []
  for (const n of EMBEDDED) {
    console.log(`embedded SQLite, ${n} runs ...`)
    cases.push([`SQLite, 1 process`, yield* embedded(n, options)])
  }
  if (PG.length > 0 && RUNNERS.length > 0) {
    const found = yield* Effect.promise(postgres)
    if (found._tag === "Missing") console.log(`PostgreSQL: skipped (${found.why})`)
    else {
      yield* Effect.addFinalizer(() => Effect.sync(found.server.stop))
      console.log(`PostgreSQL ${yield* serverVersion(found.server.url)}`)
      for (const n of PG) {
        for (const runners of RUNNERS) {
          console.log(`PostgreSQL, ${runners} runner(s), ${n} runs ...`)
          cases.push([
            `PostgreSQL, ${runners} runner(s)`,
            yield* cluster(found.server.url, runners, n, { ...options, snapshot: false })
          ])
        }
      }
    }
  }
  report(cases)
  const pg = cases.filter(([name]) => name.startsWith("PostgreSQL"))
  const rate = (f: Figures) => f.runs / (f.startMillis / 1000)
  for (const n of PG) {
    const one = pg.find(([name, f]) => name.includes(" 1 runner") && f.runs === n)?.[1]
    const three = pg.find(([name, f]) => name.includes(" 3 runner") && f.runs === n)?.[1]
    if (one !== undefined && three !== undefined) {
      console.log(
        `start throughput at ${n} runs, 3 runners over 1: ${(rate(three) / rate(one)).toFixed(2)}x (no target)`
      )
    }
  }
})

Effect.runPromise(Effect.scoped(main)).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
