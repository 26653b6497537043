/**
 * The SQLite backend: {@link SqlStore} for everything but `commit`, the hot path of a
 * durable run (two or more per step). A commit runs on the connection's own prepared
 * statements, holding the permit the `SqlClient`'s queries take: one `INSERT` of the commit
 * row (a statement of its own is a write transaction of its own), and for the run's last
 * commit that row and the run row in one `BEGIN IMMEDIATE` … `COMMIT`. Through `SqlClient`
 * each statement is built from its template, traced and run through the transaction's
 * bookkeeping, which cost several times what SQLite itself spends (bench/RESULTS.md,
 * "Durable runs").
 *
 * The same rows, checks and errors as the SQL one: the row is written only where the run's
 * last commit ends, a unique violation is a `Conflict`, busy is `Unavailable`.
 */
import type { SQLInputValue, StatementSync } from "node:sqlite"
import { Effect, Result } from "effect"
import * as SqliteClient from "./SqliteClient.ts"
import { type Commit, notWritten, type Store } from "./Store.ts"
import * as SqlStore from "./sql/SqlStore.ts"

/** The backend on one opened file and one set of tables (migrated already). */
export const make = (opened: SqliteClient.Opened, names: SqlStore.Tables): Store => {
  const { db, lock } = opened
  const prepare = (sql: string): StatementSync => db.prepare(sql)
  const runs = `"${names.runs}"`
  const commits = `"${names.commits}"`
  const begin = prepare("BEGIN IMMEDIATE")
  const end = prepare("COMMIT")
  const rollback = prepare("ROLLBACK")
  const nextSeq = `COALESCE((SELECT c.seq + c.event_count FROM ${commits} c WHERE c.run_id = ?1 ORDER BY c.seq DESC LIMIT 1), 0)`
  const insert = prepare(
    `INSERT INTO ${commits} (run_id, seq, event_count, state, at, body, result)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
     WHERE EXISTS (SELECT 1 FROM ${runs} WHERE run_id = ?1 AND result IS NULL) AND ?2 = ${nextSeq}`
  )
  const ended = prepare(`UPDATE ${runs} SET next_seq = ?, state = ?, updated_at = ?, result = ? WHERE run_id = ?`)
  const found = prepare(
    `SELECT (SELECT result IS NOT NULL FROM ${runs} WHERE run_id = ?1) AS ended, ${nextSeq} AS next_seq`
  )

  /** Why nothing was written; `undefined` for an append without events where the run ends as expected. */
  const refused = (commit: Commit) => {
    const row = found.get(commit.runId)
    const exists = row !== undefined && row.ended !== null
    return notWritten(commit, { nextSeq: exists ? Number(row.next_seq) : undefined, ended: exists && row.ended === 1 })
  }

  /** The write; `undefined` once committed, or why nothing was written. */
  const write = (commit: Commit) => {
    const { runId, row } = commit
    if (row.count === 0) return refused(commit)
    const values: Array<SQLInputValue> = [
      runId,
      row.seq,
      row.count,
      row.state,
      Math.trunc(row.at),
      row.body,
      row.result
    ]
    // With the permit held no `SqlClient` transaction is open: one still open is a failed rollback's.
    if (db.isTransaction) rollback.run()
    if (row.result === null) return insert.run(...values).changes === 0 ? refused(commit) : undefined
    begin.run()
    try {
      if (insert.run(...values).changes === 0) {
        const why = refused(commit)
        rollback.run()
        return why
      }
      ended.run(row.seq + row.count, row.state, Math.trunc(row.at), row.result, runId)
      end.run()
      return undefined
    } catch (error) {
      if (db.isTransaction) rollback.run()
      throw error
    }
  }

  return {
    ...SqlStore.make(opened.client, names),
    commit: (commit) =>
      lock.withPermit(
        Effect.suspend(() => {
          const outcome = Result.try({
            try: () => write(commit),
            catch: (error) => SqlStore.commitFailed(commit, SqliteClient.toSqlError("execute")(error))
          })
          if (Result.isFailure(outcome)) return Effect.fail(outcome.failure)
          return outcome.success === undefined ? Effect.void : Effect.fail(outcome.success)
        })
      )
  }
}
