/**
 * Journal benchmark: `npm run bench:journal` (node bench/journal.ts), about 20 s.
 *
 * Commit latency of `Journal.append` per store: memory (the floor: encoding and checks
 * only), SQLite in WAL mode at `synchronous=NORMAL` (the default: survives `kill -9`) and
 * `FULL` (fsync per commit: survives power loss), and PostgreSQL on loopback (a throwaway
 * server with fsync off, as in the tests, or `PG_URL`'s). For each: commits of 1 event and of
 * 10 events (a `tool.succeeded` of about 450 B of JSON, like a real call's), median and p99 per
 * commit; then the time to `read` back (decode and check) a run of 200 events.
 *
 * Prints figures only; it asserts nothing and exits 0. Issue 13's targets for a whole run
 * step (SQLite at most 100 µs at NORMAL, PostgreSQL at most 2 ms) are printed beside them.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import type * as Event from "../src/events/Event.ts"
import * as Journal from "../src/journal/Journal.ts"
import type * as JournalError from "../src/journal/JournalError.ts"
import { JournalPg } from "../src/journal/pg/index.ts"
import { postgres } from "../test/support/postgres.ts"
import { median, quantile } from "./stats.ts"

const singles = Number(process.env.BENCH_SINGLES ?? 2000)
const batches = Number(process.env.BENCH_BATCHES ?? 300)

const event = (runId: string, seq: number): Event.Event => ({
  _tag: "tool.succeeded",
  runId,
  seq,
  at: Date.now(),
  callId: `c${seq}`,
  name: "search",
  sideEffect: "read",
  observationDigest: "3f2a9c",
  observation: "x".repeat(200),
  input: { query: "effect journal", limit: 10 },
  output: { hits: [{ title: "one", url: "https://example.invalid/1" }], total: 1 }
})

const micros = (ms: number) => `${(ms * 1000).toFixed(0).padStart(6)} µs`

/** Appends `commits` commits of `size` events to a fresh run; the time of each commit, in ms. */
const commits = (journal: Journal.Service, runId: string, commits: number, size: number) =>
  Effect.gen(function* () {
    yield* journal.create({ runId, header: {}, state: "created" })
    const times: Array<number> = []
    let seq = 0
    for (let n = 0; n < commits; n++) {
      const events = Array.from({ length: size }, (_, i) => event(runId, seq + i))
      const start = performance.now()
      yield* journal.append(runId, { expectedSeq: seq, events, state: "tool_executing" })
      times.push(performance.now() - start)
      seq += size
    }
    return times
  })

const measure = (name: string, layer: Layer.Layer<Journal.Journal, JournalError.JournalError>) =>
  Effect.gen(function* () {
    const journal = yield* Journal.Journal
    yield* commits(journal, "warm-up", 200, 1)
    const one = yield* commits(journal, "singles", singles, 1)
    const ten = yield* commits(journal, "batches", batches, 10)
    yield* commits(journal, "to-read", 20, 10)
    const reads: Array<number> = []
    for (let n = 0; n < 20; n++) {
      const start = performance.now()
      yield* journal.read("to-read")
      reads.push(performance.now() - start)
    }
    const bytes = JSON.stringify(event("r", 0)).length
    console.log(
      `${name.padEnd(26)} 1 event: median ${micros(median(one))}, p99 ${micros(quantile(one, 0.99))}` +
        ` | 10 events: median ${micros(median(ten))}, p99 ${micros(quantile(ten, 0.99))}` +
        ` | read 200 events: ${micros(median(reads))} | ~${bytes} B/event`
    )
  }).pipe(Effect.provide(Layer.fresh(layer)))

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "journal-bench-"))
const main = Effect.gen(function* () {
  console.log(`journal commit latency on Node ${process.version}, ${os.cpus().length} cores`)
  console.log(
    `(${singles} commits of 1 event, ${batches} of 10; targets per step: SQLite <= 100 µs, PostgreSQL <= 2 ms)`
  )
  yield* measure("memory", Journal.layerMemory)
  yield* measure("SQLite WAL, NORMAL", Journal.layerSqlite({ filename: path.join(dir, "normal.db") }))
  yield* measure("SQLite WAL, FULL", Journal.layerSqlite({ filename: path.join(dir, "full.db"), synchronous: "FULL" }))
  const found = yield* Effect.promise(postgres)
  if (found._tag === "Missing") {
    console.log(`PostgreSQL: skipped (${found.why})`)
    return
  }
  yield* measure("PostgreSQL, loopback", JournalPg.layer({ url: found.server.url })).pipe(
    Effect.ensuring(Effect.sync(found.server.stop))
  )
})

Effect.runPromise(main)
  .catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
  .finally(() => fs.rmSync(dir, { recursive: true, force: true }))
