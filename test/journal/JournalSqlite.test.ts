import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DatabaseSync } from "node:sqlite"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Option } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { afterAll } from "vitest"
import * as SqliteClient from "../../src/journal/internal/SqliteClient.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import { contract, history } from "./contract.ts"
import { sqlRaw } from "./sqlRaw.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "journal-sqlite-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
let files = 0

contract({
  name: "SQLite (node:sqlite, a temporary file)",
  hasTables: true,
  make: (prefix) =>
    Effect.gen(function* () {
      const filename = path.join(dir, `journal-${files++}.db`)
      const context = yield* Layer.build(
        Layer.merge(
          Journal.layerSqlite({ filename, tablePrefix: prefix }),
          Layer.effect(SqlClient.SqlClient, Effect.orDie(SqliteClient.make({ filename }))).pipe(
            Layer.provide(Reactivity.layer)
          )
        )
      )
      const journal = Context.get(context, Journal.Journal)
      const sql = Context.get(context, SqlClient.SqlClient)
      return { journal, raw: sqlRaw(sql, prefix) }
    })
})

describe("Journal on SQLite: the file", () => {
  it.effect("R9 the file is created on first use, in WAL mode, and another connection reads what was committed", () =>
    Effect.gen(function* () {
      const filename = path.join(dir, `journal-${files++}.db`)
      assert.isFalse(fs.existsSync(filename))
      yield* Effect.gen(function* () {
        const journal = yield* Journal.Journal
        yield* journal.create({ runId: "r1", header: {}, state: "created" })
        yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 3), state: "initializing" })
      }).pipe(Effect.provide(Journal.layerSqlite({ filename })))
      const { DatabaseSync } = yield* Effect.promise(() => import("node:sqlite"))
      const other = new DatabaseSync(filename, { readOnly: true })
      const mode = other.prepare("PRAGMA journal_mode").get()
      const count = other.prepare("SELECT sum(event_count) AS n FROM agent_commits WHERE run_id = 'r1'").get()
      other.close()
      assert.deepStrictEqual({ ...mode }, { journal_mode: "wal" })
      assert.deepStrictEqual({ ...count }, { n: 3 })
    })
  )
})

describe("Journal on SQLite: the first layout", () => {
  it.effect(
    "R9 a file of the first layout (one row per event) is moved to one row per commit when opened: its runs read back as they were and go on",
    () =>
      Effect.gen(function* () {
        const filename = path.join(dir, `journal-${files++}.db`)
        const open = Journal.layerSqlite({ filename })
        const events = history("open", 4)
        const finished = history("done", 2)
        const read = (journal: Journal.Service) =>
          Effect.all([journal.read("open"), journal.read("done"), journal.unfinished])
        const before = yield* Effect.gen(function* () {
          const journal = yield* Journal.Journal
          yield* journal.create({ runId: "open", header: { goal: "g" }, state: "created" })
          yield* journal.append("open", { expectedSeq: 0, events: events.slice(0, 1), state: "initializing" })
          yield* journal.append("open", { expectedSeq: 1, events: events.slice(1, 3), state: "planning" })
          yield* journal.create({ runId: "done", header: {}, state: "created" })
          yield* journal.append("done", { expectedSeq: 0, events: finished, state: "completed", result: { ok: 1 } })
          return yield* read(journal)
        }).pipe(Effect.provide(open))
        // Back to the first layout, as a file written before the second migration holds it.
        const { DatabaseSync } = yield* Effect.promise(() => import("node:sqlite"))
        const db = new DatabaseSync(filename)
        db.exec(`CREATE TABLE agent_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, tag TEXT NOT NULL,
            at BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
          INSERT INTO agent_events SELECT c.run_id, c.seq + j.key, json_extract(j.value, '$._tag'), c.at, j.value
            FROM agent_commits c, json_each(c.body) j;
          UPDATE agent_runs SET
            next_seq = (SELECT count(*) FROM agent_events e WHERE e.run_id = agent_runs.run_id),
            state = (SELECT c.state FROM agent_commits c WHERE c.run_id = agent_runs.run_id ORDER BY c.seq DESC LIMIT 1),
            updated_at = (SELECT max(c.at) FROM agent_commits c WHERE c.run_id = agent_runs.run_id);
          DROP TABLE agent_commits;
          DELETE FROM agent_migrations WHERE migration_id = 2;`)
        db.close()
        const after = yield* Effect.gen(function* () {
          const journal = yield* Journal.Journal
          const found = yield* read(journal)
          // The open run goes on where it was.
          yield* journal.append("open", { expectedSeq: 3, events: events.slice(3), state: "planning" })
          const more = yield* journal.read("open")
          assert.deepStrictEqual(Option.getOrThrow(more).events, events)
          return found
        }).pipe(Effect.provide(open))
        assert.deepStrictEqual(after, before)
        const check = new DatabaseSync(filename, { readOnly: true })
        const tables = check.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
        check.close()
        assert.deepStrictEqual(
          tables.map((row) => row.name),
          ["agent_approvals", "agent_commits", "agent_migrations", "agent_runs"]
        )
      })
  )
})

describe("Journal on SQLite: store failures", () => {
  it.effect("R3.1 a write lock held past the busy timeout is Unavailable (retryable), and nothing is written", () =>
    Effect.gen(function* () {
      const filename = path.join(dir, `journal-${files++}.db`)
      const { DatabaseSync } = yield* Effect.promise(() => import("node:sqlite"))
      const exit = yield* Effect.gen(function* () {
        const journal = yield* Journal.Journal
        yield* journal.create({ runId: "r1", header: {}, state: "created" })
        const other = new DatabaseSync(filename)
        other.exec("BEGIN IMMEDIATE")
        const exit = yield* Effect.exit(
          journal.append("r1", { expectedSeq: 0, events: history("r1", 1), state: "initializing" })
        )
        other.exec("ROLLBACK")
        other.close()
        const stored = yield* journal.read("r1")
        assert.strictEqual(Option.getOrThrow(stored).nextSeq, 0)
        return exit
      }).pipe(Effect.provide(Journal.layerSqlite({ filename, busyTimeoutMillis: 50 })))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(error, JournalError.JournalError)
      if (error instanceof JournalError.JournalError) {
        assert.strictEqual(error.reason._tag, "Unavailable")
        assert.isTrue(error.isRetryable)
      }
    })
  )

  it.effect("R3.1 a file that cannot be opened fails the layer with a typed JournalError, not a defect", () =>
    Effect.gen(function* () {
      const filename = path.join(dir, "no-such-folder", "journal.db")
      const error = yield* Effect.flip(Effect.provide(Journal.Journal, Journal.layerSqlite({ filename })))
      assert.instanceOf(error, JournalError.JournalError)
      assert.include(["Unavailable", "StoreFailed"], error.reason._tag)
    })
  )

  it.effect("R3.1 a checkpoint size that is not a whole number of pages is refused, and no file is created", () =>
    Effect.gen(function* () {
      for (const checkpointPages of [0, -5, 2.5, Number.NaN]) {
        const filename = path.join(dir, `journal-${files++}.db`)
        const error = yield* Effect.flip(
          Effect.provide(Journal.Journal, Journal.layerSqlite({ filename, checkpointPages }))
        )
        assert.strictEqual(error.reason._tag, "StoreFailed")
        assert.include(error.message, "checkpointPages")
        assert.isFalse(fs.existsSync(filename))
      }
    })
  )

  it.effect(
    "R3.1 a busy timeout or statement cache size that is not a whole number is refused naming it (review 157's sibling)",
    () =>
      Effect.gen(function* () {
        const cases = [
          ...[-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31].map((busyTimeoutMillis) => ({
            busyTimeoutMillis
          })),
          ...[-1, 1.5, Number.NaN].map((statementCacheSize) => ({ statementCacheSize }))
        ]
        for (const option of cases) {
          const filename = path.join(dir, `journal-${files++}.db`)
          const error = yield* Effect.flip(
            Effect.provide(Journal.Journal, Journal.layerSqlite({ filename, ...option }))
          )
          assert.strictEqual(error.reason._tag, "StoreFailed")
          assert.include(error.message, Object.keys(option)[0] ?? "")
          assert.isFalse(fs.existsSync(filename))
        }
      })
  )

  it.effect("R3.1 a table prefix that is not a plain SQL name is refused when the layer is built", () =>
    Effect.gen(function* () {
      const filename = path.join(dir, `journal-${files++}.db`)
      const error = yield* Effect.flip(
        Effect.provide(Journal.Journal, Journal.layerSqlite({ filename, tablePrefix: "x; DROP TABLE y" }))
      )
      assert.strictEqual(error.reason._tag, "StoreFailed")
      assert.include(error.message, "table prefix")
    })
  )

  it.effect(
    "R9 R12 a journal file one of whose tables was dropped behind the migrations' back is a typed StoreFailed",
    () =>
      Effect.gen(function* () {
        const filename = path.join(dir, `journal-${files++}.db`)
        yield* Effect.scoped(Layer.build(Journal.layerSqlite({ filename })))
        const db = new DatabaseSync(filename)
        db.exec("DROP TABLE agent_commits")
        db.close()
        const error = yield* Effect.flip(Effect.provide(Journal.Journal, Journal.layerSqlite({ filename })))
        assert.strictEqual(error.reason._tag, "StoreFailed")
        assert.include(error.message, "the journal's tables cannot be used")
      })
  )
})
