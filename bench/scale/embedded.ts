/**
 * The embedded case: `DurableRun.layerEmbedded` on a fresh SQLite file in this process. The
 * figures are read beside the engine through a second connection to the file (`node:sqlite`):
 * pending approvals, the pages of each table (`dbstat`) after a checkpoint, and the rows of
 * the journal's commits and of the engine's messages and replies.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Context, Effect, Layer } from "effect"
import { DurableRun } from "../../src/durable/index.ts"
import { settledHeap } from "../heap.ts"
import { cpuHere, type Figures, measure, type Options, residentHere, type Target } from "./measure.ts"
import { definitions, model } from "./workload.ts"

/** The bytes of the tables (and their indexes) whose names start with `prefix`. */
const tableBytes = (db: DatabaseSync, prefix: string): number => {
  const row = db
    .prepare(
      "SELECT coalesce(sum(d.pgsize), 0) AS bytes FROM dbstat AS d JOIN sqlite_schema AS s USING (name) WHERE s.tbl_name LIKE ?"
    )
    .get(`${prefix}%`)
  return Number(row?.bytes ?? 0)
}

/** The rows of `table`. */
const rows = (db: DatabaseSync, table: string): number =>
  Number(db.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0)

/** Measures `n` runs on a fresh file, removed afterwards. */
export const embedded = (n: number, options: Options) =>
  Effect.gen(function* () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "durable-scale-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    const filename = path.join(dir, "runs.db")
    const context = yield* Layer.build(
      DurableRun.layer(definitions).pipe(
        Layer.provideMerge(DurableRun.layerEmbedded({ filename })),
        Layer.provide(model)
      )
    )
    const db = new DatabaseSync(filename, { timeout: 5000 })
    yield* Effect.addFinalizer(() => Effect.sync(() => db.close()))
    const target: Target = {
      runs: Context.get(context, DurableRun.DurableRuns),
      pending: Effect.sync(() =>
        Number(db.prepare("SELECT count(*) AS n FROM agent_approvals WHERE decision IS NULL").get()?.n ?? 0)
      ),
      heap: Effect.all({ bytes: settledHeap, resident: residentHere, cpuMicros: cpuHere }),
      storage: Effect.sync(() => {
        db.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        return { journal: tableBytes(db, "agent_"), cluster: tableBytes(db, "cluster_") }
      }),
      writes: Effect.sync(() => ({
        journalCommits: rows(db, "agent_commits"),
        engineRows: rows(db, "cluster_messages") + rows(db, "cluster_replies")
      }))
    }
    return (yield* measure(target, n, options)) satisfies Figures
  }).pipe(Effect.scoped)
