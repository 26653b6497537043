/**
 * The one live host of a SQLite file (R9.4): an exclusive SQLite lock on a file of its own
 * beside the database (`<file>.owner`), held for the scope's life. SQLite's file locking,
 * which the operating system lets go when the process dies, so a process started after a
 * crash hosts at once. `Journal.layerSqliteHost` is its public face. Private to the journal.
 */
import * as NodeFs from "node:fs"
import type { DatabaseSync } from "node:sqlite"
import { Duration, Effect, Schedule, type Scope } from "effect"
import * as JournalError from "../JournalError.ts"
import { isBusy } from "./SqliteClient.ts"

const hosted = (filename: string, advice: string) =>
  JournalError.make(
    new JournalError.Unavailable({
      operation: "host",
      detail: `${filename} is hosted by another live process${advice}`
    })
  )

const failed = (operation: string, error: unknown) =>
  JournalError.make(new JournalError.StoreFailed({ operation, detail: String(error) }))

/**
 * The file's own path, links resolved: every name of one database (a symbolic link to it, a
 * relative path) locks one owner file beside it.
 */
const realPath = (filename: string): string => {
  try {
    return NodeFs.realpathSync(filename)
  } catch {
    // Not made yet: made empty here (an empty file is an empty database), through a link to
    // it that leads nowhere yet too, so that its real path is the one every name finds.
    NodeFs.closeSync(NodeFs.openSync(filename, "a"))
    return NodeFs.realpathSync(filename)
  }
}

/** Takes the lock, or fails `busy` at once while another connection holds it. */
const take = (db: DatabaseSync): Effect.Effect<void, "busy" | JournalError.JournalError> =>
  Effect.try({
    try: () => db.exec("BEGIN EXCLUSIVE"),
    catch: (error) => (isBusy(error) ? "busy" : failed("host", error))
  })

/**
 * Holds the host's lock of `filename` until the scope closes. A lock another live process
 * holds is waited for up to `wait` (a host shutting down lets its runs go on that long
 * first), then refused with `Unavailable`, its detail ending with `advice`.
 */
export const hold = (
  filename: string,
  wait: Duration.Input,
  advice = ""
): Effect.Effect<void, JournalError.JournalError, Scope.Scope> =>
  Effect.gen(function* () {
    const { DatabaseSync } = yield* Effect.tryPromise({
      try: () => import("node:sqlite"),
      catch: (error) => failed("host", error)
    })
    const owner = yield* Effect.try({ try: () => `${realPath(filename)}.owner`, catch: (e) => failed("host", e) })
    const db = yield* Effect.acquireRelease(
      Effect.try({ try: () => new DatabaseSync(owner, { timeout: 0 }), catch: (e) => failed("host", e) }),
      (db) => Effect.sync(() => db.close())
    )
    yield* take(db).pipe(
      Effect.retry({
        while: (e) => e === "busy",
        schedule: Schedule.spaced("100 millis").pipe(Schedule.upTo({ duration: Duration.fromInputUnsafe(wait) }))
      }),
      Effect.catchIf(
        (e): e is "busy" => e === "busy",
        () => Effect.fail(hosted(filename, advice))
      )
    )
  })
