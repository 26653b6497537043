/**
 * The SQL journal's schema, one for SQLite and PostgreSQL, migrated by effect's `Migrator`.
 * Private to `journal/internal/sql/`.
 */
import { Effect } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type * as JournalError from "../../../JournalError.ts"
import { classify } from "./SqlFailures.ts"
import type { Tables } from "./SqlTables.ts"

/** Runs the schema's migrations (idempotent; several processes may start at once). */
export const migrate = (sql: SqlClient.SqlClient, names: Tables): Effect.Effect<void, JournalError.JournalError> => {
  const withoutRowid = sql.onDialectOrElse({
    sqlite: () => sql.literal(" WITHOUT ROWID"),
    orElse: () => sql.literal("")
  })
  const createJournal = Effect.gen(function* () {
    yield* sql`CREATE TABLE ${sql(names.runs)} (
      run_id TEXT PRIMARY KEY NOT NULL,
      version INTEGER NOT NULL,
      header TEXT NOT NULL,
      state TEXT NOT NULL,
      next_seq INTEGER NOT NULL,
      result TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    )`
    yield* sql`CREATE INDEX ${sql(`${names.runs}_unfinished`)} ON ${sql(names.runs)} (created_at, run_id) WHERE result IS NULL`
    yield* sql`CREATE TABLE ${sql(names.events)} (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      tag TEXT NOT NULL,
      at BIGINT NOT NULL,
      body TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    )${withoutRowid}`
    yield* sql`CREATE TABLE ${sql(names.approvals)} (
      run_id TEXT NOT NULL,
      call_id TEXT NOT NULL,
      tool TEXT NOT NULL,
      arguments TEXT NOT NULL,
      requested_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      decision TEXT,
      reason TEXT,
      decided_by TEXT,
      decided_at BIGINT,
      side_effect TEXT,
      PRIMARY KEY (run_id, call_id)
    )`
    yield* sql`CREATE INDEX ${sql(`${names.approvals}_pending`)} ON ${sql(names.approvals)} (requested_at) WHERE decision IS NULL`
  })
  // One row per commit instead of one per event: a commit is one row written in one statement.
  // A table with rowids on SQLite: a commit is often larger than the ~1 KB of a row that a
  // WITHOUT ROWID table keeps in its page, and the rest would take an overflow page of its
  // own (about 3 KB lost per run). Files made before keep their table; both read the same.
  const commitRows = Effect.gen(function* () {
    yield* sql`CREATE TABLE ${sql(names.commits)} (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      event_count INTEGER NOT NULL,
      state TEXT NOT NULL,
      at BIGINT NOT NULL,
      body TEXT NOT NULL,
      result TEXT,
      PRIMARY KEY (run_id, seq)
    )`
    // Each event of the first layout becomes a commit of one; the last one carries the result.
    yield* sql`INSERT INTO ${sql(names.commits)} (run_id, seq, event_count, state, at, body, result)
      SELECT e.run_id, e.seq, 1, r.state, CASE WHEN e.seq = r.next_seq - 1 THEN r.updated_at ELSE e.at END,
        '[' || e.body || ']', CASE WHEN e.seq = r.next_seq - 1 THEN r.result ELSE NULL END
      FROM ${sql(names.events)} e JOIN ${sql(names.runs)} r ON r.run_id = e.run_id
      WHERE e.seq < r.next_seq`
    yield* sql`DROP TABLE ${sql(names.events)}`
  })
  return Migrator.make({})({
    loader: Migrator.fromRecord({ "1_create_journal": createJournal, "2_commit_rows": commitRows }),
    table: names.migrations
  }).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.asVoid, Effect.mapError(classify("migrate")))
}
