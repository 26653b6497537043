/** Raw SQL on a journal's tables, for the contract's damaged-row cases. */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { Raw } from "./contract.ts"

export const sqlRaw = (sql: SqlClient.SqlClient, prefix: string): Raw => {
  const events = sql(`${prefix}events`)
  const runs = sql(`${prefix}runs`)
  return {
    setBody: (runId, seq, body) =>
      Effect.orDie(sql`UPDATE ${events} SET body = ${body} WHERE run_id = ${runId} AND seq = ${seq}`),
    deleteEvent: (runId, seq) => Effect.orDie(sql`DELETE FROM ${events} WHERE run_id = ${runId} AND seq = ${seq}`),
    setVersion: (runId, version) => Effect.orDie(sql`UPDATE ${runs} SET version = ${version} WHERE run_id = ${runId}`),
    insertEvent: (runId, seq, body) =>
      Effect.orDie(sql`INSERT INTO ${events} ${sql.insert({ run_id: runId, seq, tag: "state.changed", at: 0, body })}`),
    tableNames: Effect.orDie(
      sql
        .onDialectOrElse({
          sqlite: () => sql`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ${`${prefix}%`}`,
          orElse: () =>
            sql`SELECT table_name AS name FROM information_schema.tables WHERE table_name LIKE ${`${prefix}%`}`
        })
        .pipe(Effect.map((rows) => rows.map((row) => String(row.name))))
    )
  }
}
