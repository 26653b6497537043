import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
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
      const count = other.prepare("SELECT count(*) AS n FROM agent_events WHERE run_id = 'r1'").get()
      other.close()
      assert.deepStrictEqual({ ...mode }, { journal_mode: "wal" })
      assert.deepStrictEqual({ ...count }, { n: 3 })
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
})
