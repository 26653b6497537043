/**
 * The SQLite backend: {@link SqlStore} for everything but `commit`, the hot path of a
 * durable run (two or more per step). A commit runs on the connection's own prepared
 * statements, in one synchronous `BEGIN IMMEDIATE` … `COMMIT`, holding the permit the
 * `SqlClient`'s queries take: through `SqlClient` each of its four statements is built
 * from its template, traced and run through the transaction's bookkeeping, which cost
 * several times what SQLite itself spends (bench/RESULTS.md, "Durable runs").
 *
 * The same rows, checks and errors as the SQL one: fenced on `next_seq`, all or nothing,
 * a unique violation is a `Conflict`, busy is `Unavailable`.
 */
import type { SQLInputValue, StatementSync } from "node:sqlite"
import { Effect, Result } from "effect"
import * as SqliteClient from "./SqliteClient.ts"
import * as SqlStore from "./SqlStore.ts"
import type { Commit, Store } from "./Store.ts"

/** The backend on one opened file and one set of tables (migrated already). */
export const make = (opened: SqliteClient.Opened, names: SqlStore.Tables): Store => {
  const { db, lock } = opened
  const prepare = (sql: string): StatementSync => db.prepare(sql)
  const runs = `"${names.runs}"`
  const begin = prepare("BEGIN IMMEDIATE")
  const end = prepare("COMMIT")
  const rollback = prepare("ROLLBACK")
  const set = "next_seq = next_seq + ?, state = ?, updated_at = ?"
  const fence = "WHERE run_id = ? AND next_seq = ? RETURNING next_seq"
  const advance = prepare(`UPDATE ${runs} SET ${set} ${fence}`)
  const advanceWithResult = prepare(`UPDATE ${runs} SET ${set}, result = ? ${fence}`)
  const current = prepare(`SELECT next_seq FROM ${runs} WHERE run_id = ?`)
  const insert = prepare(`INSERT INTO "${names.events}" (run_id, seq, tag, at, body) VALUES (?, ?, ?, ?, ?)`)

  /** The transaction; `undefined` once committed, or why the run row did not move (rolled back). */
  const transaction = (commit: Commit) => {
    const head: Array<SQLInputValue> = [commit.events.length, commit.state, commit.at]
    const where: Array<SQLInputValue> = [commit.runId, commit.expectedSeq]
    // With the permit held no `SqlClient` transaction is open: one still open is a failed rollback's.
    if (db.isTransaction) rollback.run()
    begin.run()
    try {
      const moved =
        commit.result === undefined
          ? advance.get(...head, ...where)
          : advanceWithResult.get(...head, commit.result, ...where)
      if (moved === undefined) {
        const found = current.get(commit.runId)
        rollback.run()
        return SqlStore.notAdvanced(commit, found === undefined ? undefined : Number(found.next_seq))
      }
      for (const event of commit.events) {
        insert.run(commit.runId, event.seq, event.tag, Math.trunc(event.at), event.body)
      }
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
            try: () => transaction(commit),
            catch: (error) => SqlStore.commitFailed(commit, SqliteClient.toSqlError("execute")(error))
          })
          if (Result.isFailure(outcome)) return Effect.fail(outcome.failure)
          return outcome.success === undefined ? Effect.void : Effect.fail(outcome.success)
        })
      )
  }
}
