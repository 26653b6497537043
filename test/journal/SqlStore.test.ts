import { describe, expect, it } from "@effect/vitest"
import { Migrator, SqlError } from "effect/sql"
import * as SqlStore from "../../src/journal/internal/sql/SqlStore.ts"

/** A PostgreSQL error as `@effect/sql-pg` hands it on: a SQLSTATE effect's classification does not know is `UnknownError`. */
const pgError = (code: string, message: string) =>
  new SqlError.SqlError({
    reason: new SqlError.UnknownError({
      cause: { code, message },
      message: "Failed to execute statement",
      operation: "x"
    })
  })

describe("SqlStore.classify", () => {
  // The restart window of a server, and a full pool, pass with time: a run waits them out (review 135).
  it.each([
    ["57P01", "terminating connection due to administrator command"],
    ["57P02", "terminating connection because of crash of another server process"],
    ["57P03", "the database system is starting up"],
    ["57P03", "the database system is shutting down"],
    ["57P05", "terminating connection due to idle-session timeout"],
    ["53000", "insufficient resources"],
    ["53200", "out of memory"],
    ["53300", "sorry, too many clients already"]
  ])("R3.1 PostgreSQL's %s (%s) is Unavailable, retryable", (code, message) => {
    const error = SqlStore.classify("append")(pgError(code, message))
    expect(error.reason._tag).toBe("Unavailable")
    expect(error.isRetryable).toBe(true)
    expect(error.message).toContain(`code ${code}`)
  })

  it("R3.1 a migration failing on a server that is starting up is Unavailable too", () => {
    const error = SqlStore.classify("migrate")(
      new Migrator.MigrationError({
        kind: "Failed",
        message: "the database system is starting up",
        cause: pgError("57P03", "the database system is starting up")
      })
    )
    expect(error.reason._tag).toBe("Unavailable")
  })

  // A full disk waits for an operator, a dropped database and a syntax error never pass.
  it.each([
    ["53100", "could not extend file: No space left on device"],
    ["57P04", "database dropped"],
    ["XX000", "internal error"]
  ])("R3.1 PostgreSQL's %s (%s) is StoreFailed, not retried", (code, message) => {
    const error = SqlStore.classify("append")(pgError(code, message))
    expect(error.reason._tag).toBe("StoreFailed")
    expect(error.isRetryable).toBe(false)
  })
})
