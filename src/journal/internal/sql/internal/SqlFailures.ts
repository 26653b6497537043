/**
 * Every `SqlError` of the SQL journal, classified where it comes out of the driver (R3.1): a
 * unique violation where a writer raced is a `Conflict`, busy or lost connections and a server
 * restarting or out of sessions are `Unavailable` (retryable), every other failure `StoreFailed`.
 * Private to `journal/internal/sql/`.
 */
import { Predicate } from "effect"
import type { Migrator, SqlError } from "effect/sql"
import * as JournalError from "../../../JournalError.ts"
import type { Commit } from "../../Store.ts"

/** The driver's message, with its error code when it has one (`database is locked (code 517)`). */
const describe = (error: { readonly message: string; readonly cause?: unknown }): string => {
  const cause = error.cause
  const field = (name: string): unknown =>
    typeof cause === "object" && cause !== null && name in cause ? Reflect.get(cause, name) : undefined
  const causeMessage = field("message")
  const inner = typeof causeMessage === "string" ? causeMessage : ""
  const message = inner !== "" && inner !== error.message ? `${error.message}: ${inner}` : error.message
  const code = field("errno") ?? field("code")
  return typeof code === "number" || (typeof code === "string" && code !== "") ? `${message} (code ${code})` : message
}

/**
 * PostgreSQL's refusals that pass with time, which effect's classification leaves unknown
 * (review 135): the server shutting down, starting up or recovering, a session ended idle
 * (57P01, 57P02, 57P03, 57P05), out of sessions or memory (53000, 53200, 53300). A restart or a full pool is an outage (R3.1);
 * so is a database that takes no sessions for now ({@link refusedSession}).
 * A full disk (53100) waits for an operator: refused.
 */
const passing = new Set(["57P01", "57P02", "57P03", "57P05", "53000", "53200", "53300"])

/** The SQLSTATE of the driver's error under a `SqlError` (a migration's, too), when it has one. */
const sqlState = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  if (Predicate.isTagged(error, "SqlError") || Predicate.isTagged(error, "MigrationError")) {
    const cause = Predicate.isTagged(error, "SqlError")
      ? Reflect.get(error, "reason")?.cause
      : Reflect.get(error, "cause")
    return sqlState(cause)
  }
  const code = Reflect.get(error, "code")
  return typeof code === "string" ? code : undefined
}

/**
 * A session refused because its database does not take connections now (55000 at connect: an
 * operator's `ALLOW_CONNECTIONS false`, a database being dropped or restored), which passes as
 * an outage does. Only at connect: 55000 from a statement is a request the server will refuse again.
 */
const refusedSession = (error: SqlError.SqlError | Migrator.MigrationError): boolean =>
  error._tag === "SqlError" && error.reason.operation === "connect" && sqlState(error) === "55000"

/** A store failure as the journal's own error: retryable ones `Unavailable`, the rest `StoreFailed`. */
export const classify =
  (operation: string) =>
  (error: SqlError.SqlError | Migrator.MigrationError): JournalError.JournalError => {
    const detail = describe(error._tag === "SqlError" ? error.reason : error)
    // A row larger than the client reads back is so on every try: asked again, it never ends.
    if (/exceeds maxMessageSize/.test(detail)) {
      return JournalError.make(
        new JournalError.StoreFailed({
          operation,
          detail: `${detail}; give the PostgreSQL client a maxMessageSize as large as the largest run (JournalPg.maxMessageSize)`
        })
      )
    }
    const retryable =
      (error._tag === "SqlError" ? error.isRetryable : error.kind === "Locked") ||
      passing.has(sqlState(error) ?? "") ||
      refusedSession(error)
    return JournalError.make(
      retryable
        ? new JournalError.Unavailable({ operation, detail })
        : new JournalError.StoreFailed({ operation, detail })
    )
  }

/** Whether another writer raced this one to the same row. */
export const isUnique = (error: SqlError.SqlError) => error.reason._tag === "UniqueViolation"

/** A commit's store failure: a unique violation on the events is another writer that raced this one. */
export const commitFailed = (commit: Commit, error: SqlError.SqlError): JournalError.JournalError =>
  isUnique(error)
    ? JournalError.make(
        new JournalError.Conflict({
          runId: commit.runId,
          expectedSeq: commit.row.seq,
          detail: "another writer committed the same sequence numbers"
        })
      )
    : classify("append")(error)
