/**
 * The SQL backend over any `SqlClient` (SQLite, PostgreSQL): one schema for both, migrated
 * by effect's `Migrator` into tables named with a configurable prefix (`internal/SqlTables`,
 * `internal/SqlMigrations`). Every `SqlError` is classified where it comes out
 * (`internal/SqlFailures`, R3.1). Private to the journal.
 */
import { Effect, Option } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import * as JournalError from "../../JournalError.ts"
import { type ApprovalRow, type CommitRow, notWritten, type RunRow, type Store } from "../Store.ts"
import { classify, commitFailed, isUnique } from "./internal/SqlFailures.ts"
import type { Tables } from "./internal/SqlTables.ts"

export { classify, commitFailed } from "./internal/SqlFailures.ts"
export { migrate } from "./internal/SqlMigrations.ts"
export { type Tables, tables } from "./internal/SqlTables.ts"

const num = (value: unknown): number => (typeof value === "number" ? value : Number(value))
const text = (value: unknown): string | null => (value === null || value === undefined ? null : String(value))

const toRunRow = (row: Record<string, unknown>): RunRow => ({
  runId: String(row.run_id),
  version: num(row.version),
  header: String(row.header),
  state: String(row.state),
  nextSeq: num(row.next_seq),
  result: text(row.result),
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at)
})

const toCommitRow = (row: Record<string, unknown>): CommitRow => ({
  seq: num(row.seq),
  count: num(row.event_count),
  state: String(row.state),
  at: num(row.at),
  body: String(row.body),
  result: text(row.result)
})

const toApprovalRow = (row: Record<string, unknown>): ApprovalRow => ({
  runId: String(row.run_id),
  callId: String(row.call_id),
  tool: String(row.tool),
  arguments: String(row.arguments),
  requestedAt: num(row.requested_at),
  expiresAt: num(row.expires_at),
  sideEffect: text(row.side_effect),
  decision: text(row.decision),
  reason: text(row.reason),
  decidedBy: text(row.decided_by),
  decidedAt: row.decided_at === null || row.decided_at === undefined ? null : num(row.decided_at)
})

/** The backend on one client and one set of tables (migrated already). */
export const make = (sql: SqlClient.SqlClient, names: Tables): Store => {
  const runs = sql(names.runs)
  const commits = sql(names.commits)
  const approvals = sql(names.approvals)
  return {
    insertRun: (row) =>
      sql`INSERT INTO ${runs} ${sql.insert({
        run_id: row.runId,
        version: row.version,
        header: row.header,
        state: row.state,
        next_seq: row.nextSeq,
        result: row.result,
        created_at: row.createdAt,
        updated_at: row.updatedAt
      })}`.pipe(
        Effect.asVoid,
        Effect.mapError((error) =>
          isUnique(error)
            ? JournalError.make(new JournalError.Conflict({ runId: row.runId, detail: "a run with this id exists" }))
            : classify("create")(error)
        )
      ),
    commit: (commit) => {
      const { runId, row } = commit
      const nextSeq = sql`COALESCE((SELECT c.seq + c.event_count FROM ${commits} c
        WHERE c.run_id = ${runId} ORDER BY c.seq DESC LIMIT 1), 0)`
      // Why nothing was written: no such run, an ended one, or where its last commit ends.
      const refused =
        sql`SELECT (SELECT CASE WHEN result IS NULL THEN 0 ELSE 1 END FROM ${runs} WHERE run_id = ${runId}) AS ended,
        ${nextSeq} AS next_seq`.pipe(
          Effect.flatMap(([found]) => {
            const exists = found !== undefined && found.ended !== null && found.ended !== undefined
            const why = notWritten(commit, {
              nextSeq: exists ? num(found.next_seq) : undefined,
              ended: exists && num(found.ended) === 1
            })
            return why === undefined ? Effect.void : Effect.fail(why)
          })
        )
      const classified = <A>(effect: Effect.Effect<A, SqlError.SqlError | JournalError.JournalError>) =>
        Effect.catchTag(effect, "SqlError", (error) => Effect.fail(commitFailed(commit, error)))
      if (row.count === 0) return classified(refused)
      // Written only where the run's last commit ends (the key fences off a writer that raced).
      const insert = sql`INSERT INTO ${commits} (run_id, seq, event_count, state, at, body, result)
        SELECT CAST(${runId} AS TEXT), CAST(${row.seq} AS INTEGER), CAST(${row.count} AS INTEGER),
          CAST(${row.state} AS TEXT), CAST(${Math.trunc(row.at)} AS BIGINT), CAST(${row.body} AS TEXT),
          CAST(${row.result} AS TEXT)
        WHERE EXISTS (SELECT 1 FROM ${runs} WHERE run_id = ${runId} AND result IS NULL)
          AND CAST(${row.seq} AS INTEGER) = ${nextSeq}
        RETURNING seq`
      const ended = sql`UPDATE ${runs}
        SET next_seq = ${row.seq + row.count}, state = ${row.state}, updated_at = ${Math.trunc(row.at)}, result = ${row.result}
        WHERE run_id = ${runId}`
      // Its calls still pending close with it: nobody decides for a run that has ended.
      const closed = sql`UPDATE ${approvals} SET decision = 'withdrawn', decided_at = ${Math.trunc(row.at)}
        WHERE run_id = ${runId} AND decision IS NULL`
      const write =
        row.result === null
          ? insert
          : sql.onDialectOrElse({
              // One statement: the run row moves, and its calls close, only if the commit row was written.
              pg: () =>
                sql`WITH written AS (${insert}), closed AS (${closed} AND EXISTS (SELECT 1 FROM written))
                  ${ended} AND EXISTS (SELECT 1 FROM written) RETURNING run_id`,
              orElse: () =>
                sql.withTransaction(
                  Effect.flatMap(insert, (written) =>
                    written.length === 0 ? Effect.succeed(written) : Effect.as(Effect.andThen(ended, closed), written)
                  )
                )
            })
      return write.pipe(
        Effect.flatMap((written) => (written.length === 0 ? refused : Effect.void)),
        classified
      )
    },
    // One statement, so one snapshot: the commit that ends a run writes its row and the run
    // row's result together, and two statements could see the one without the other. The
    // header comes once, with the first row. From the commit that holds `fromSeq` (the last,
    // when the log ends before it): the primary key's range, so a watcher reads what is new.
    readRun: (runId, fromSeq) =>
      sql`SELECT r.run_id, r.version, r.state, r.next_seq, r.result, r.created_at, r.updated_at,
          CASE WHEN c.seq IS NULL
            OR c.seq = (SELECT MIN(f.seq) FROM ${commits} f WHERE f.run_id = r.run_id AND f.seq >= s.start)
            THEN r.header END AS header,
          c.seq AS c_seq, c.event_count AS c_event_count, c.state AS c_state, c.at AS c_at, c.body AS c_body,
          c.result AS c_result
        FROM ${runs} r
        CROSS JOIN (SELECT COALESCE(
          (SELECT MAX(f.seq) FROM ${commits} f WHERE f.run_id = ${runId} AND f.seq <= CAST(${fromSeq} AS INTEGER)), 0
        ) AS start) s
        LEFT JOIN ${commits} c ON c.run_id = r.run_id AND c.seq >= s.start
        WHERE r.run_id = ${runId} ORDER BY c.seq`.pipe(
        Effect.map((rows) => {
          const first = rows[0]
          if (first === undefined) return Option.none()
          const committed = first.c_seq === null || first.c_seq === undefined ? [] : rows
          return Option.some({
            run: toRunRow(first),
            commits: committed.map((row) =>
              toCommitRow({
                seq: row.c_seq,
                event_count: row.c_event_count,
                state: row.c_state,
                at: row.c_at,
                body: row.c_body,
                result: row.c_result
              })
            )
          })
        }),
        Effect.mapError(classify("read"))
      ),
    unfinished: sql`SELECT run_id FROM ${runs} WHERE result IS NULL ORDER BY created_at, run_id`.pipe(
      Effect.map((rows) => rows.map((row) => String(row.run_id))),
      Effect.mapError(classify("unfinished"))
    ),
    insertApproval: (row) =>
      sql`INSERT INTO ${approvals} ${sql.insert({
        run_id: row.runId,
        call_id: row.callId,
        tool: row.tool,
        arguments: row.arguments,
        requested_at: row.requestedAt,
        expires_at: row.expiresAt,
        side_effect: row.sideEffect
      })}`.pipe(
        Effect.asVoid,
        Effect.mapError((error) =>
          isUnique(error)
            ? JournalError.make(
                new JournalError.Conflict({
                  runId: row.runId,
                  detail: `call ${row.callId} was put up for approval already`
                })
              )
            : classify("requestApproval")(error)
        )
      ),
    pendingApprovals: (runId) =>
      // A call put up after its run ended (by a process the ending fenced off) is not listed.
      sql`SELECT a.* FROM ${approvals} a WHERE a.decision IS NULL${
        runId === undefined ? sql.literal("") : sql` AND a.run_id = ${runId}`
      } AND NOT EXISTS (SELECT 1 FROM ${runs} r WHERE r.run_id = a.run_id AND r.result IS NOT NULL)
        ORDER BY a.requested_at, a.run_id, a.call_id`.pipe(
        Effect.map((rows) => rows.map(toApprovalRow)),
        Effect.mapError(classify("pendingApprovals"))
      ),
    decide: (decide) =>
      sql`UPDATE ${approvals}
        SET decision = ${decide.decision}, reason = ${decide.reason}, decided_by = ${decide.decidedBy}, decided_at = ${decide.decidedAt}
        WHERE run_id = ${decide.runId} AND call_id = ${decide.callId} AND decision IS NULL${
          // A person's decision comes before the expiry and the run's ending; a withdrawal, whenever it comes.
          decide.decision === "withdrawn"
            ? sql.literal("")
            : sql` AND expires_at > ${decide.decidedAt}
              AND NOT EXISTS (SELECT 1 FROM ${runs} r WHERE r.run_id = ${decide.runId} AND r.result IS NOT NULL)`
        }
        RETURNING call_id`.pipe(
        Effect.mapError(classify("decide")),
        Effect.flatMap((rows) =>
          rows.length === 0
            ? Effect.fail(
                JournalError.make(new JournalError.NotPending({ runId: decide.runId, callId: decide.callId }))
              )
            : Effect.void
        )
      ),
    reopenApproval: (row) =>
      sql`UPDATE ${approvals}
        SET decision = NULL, reason = NULL, decided_by = NULL, decided_at = NULL,
          requested_at = ${row.requestedAt}, expires_at = ${row.expiresAt}, arguments = ${row.arguments}
        WHERE run_id = ${row.runId} AND call_id = ${row.callId} AND (decision = 'withdrawn'
          OR (decision IS NULL AND expires_at <> ${row.expiresAt}))
        RETURNING call_id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError(classify("requestApproval"))
      ),
    approval: (runId, callId) =>
      sql`SELECT * FROM ${approvals} WHERE run_id = ${runId} AND call_id = ${callId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toApprovalRow)),
        Effect.mapError(classify("decision"))
      )
  }
}
