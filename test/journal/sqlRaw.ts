/** Raw SQL on a journal's tables, for the contract's damaged-row cases. */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import * as SqlStore from "../../src/journal/internal/sql/SqlStore.ts"
import type { Raw } from "./contract.ts"

export const sqlRaw = (sql: SqlClient.SqlClient, prefix: string): Raw => {
  const commits = sql(`${prefix}commits`)
  const runs = sql(`${prefix}runs`)
  const approvals = sql(`${prefix}approvals`)
  return {
    setBody: (runId, seq, body) =>
      Effect.orDie(sql`UPDATE ${commits} SET body = ${body} WHERE run_id = ${runId} AND seq = ${seq}`),
    setCount: (runId, seq, count) =>
      Effect.orDie(sql`UPDATE ${commits} SET event_count = ${count} WHERE run_id = ${runId} AND seq = ${seq}`),
    deleteCommit: (runId, seq) => Effect.orDie(sql`DELETE FROM ${commits} WHERE run_id = ${runId} AND seq = ${seq}`),
    setVersion: (runId, version) => Effect.orDie(sql`UPDATE ${runs} SET version = ${version} WHERE run_id = ${runId}`),
    setApprovalArguments: (runId, callId, text) =>
      Effect.orDie(sql`UPDATE ${approvals} SET arguments = ${text} WHERE run_id = ${runId} AND call_id = ${callId}`),
    insertCommit: (runId, seq, event) =>
      Effect.orDie(
        sql`INSERT INTO ${commits} ${sql.insert({
          run_id: runId,
          seq,
          event_count: 1,
          state: "planning",
          at: 0,
          body: JSON.stringify([event]),
          result: null
        })}`
      ),
    toFirstLayout: Effect.orDie(
      Effect.gen(function* () {
        const events = sql(`${prefix}events`)
        yield* sql`CREATE TABLE ${events} (run_id TEXT NOT NULL, seq INTEGER NOT NULL, tag TEXT NOT NULL,
          at BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))`
        yield* sql.onDialectOrElse({
          sqlite: () => sql`INSERT INTO ${events}
            SELECT c.run_id, c.seq + j.key, json_extract(j.value, '$._tag'), json_extract(j.value, '$.at'), j.value
            FROM ${commits} c, json_each(c.body) j`,
          orElse: () => sql`INSERT INTO ${events}
            SELECT c.run_id, c.seq + j.n - 1, j.value ->> '_tag', (j.value ->> 'at')::bigint, j.value::text
            FROM ${commits} c, json_array_elements(c.body::json) WITH ORDINALITY j(value, n)`
        })
        yield* sql`UPDATE ${runs} SET
          next_seq = (SELECT count(*) FROM ${events} e WHERE e.run_id = ${runs}.run_id),
          state = COALESCE((SELECT c.state FROM ${commits} c WHERE c.run_id = ${runs}.run_id ORDER BY c.seq DESC LIMIT 1), state),
          updated_at = COALESCE((SELECT max(c.at) FROM ${commits} c WHERE c.run_id = ${runs}.run_id), updated_at)`
        yield* sql`DROP TABLE ${commits}`
        yield* sql`DELETE FROM ${sql(`${prefix}migrations`)} WHERE migration_id = 2`
      })
    ),
    migrate: Effect.orDie(Effect.flatMap(SqlStore.tables(prefix), (names) => SqlStore.migrate(sql, names))),
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
