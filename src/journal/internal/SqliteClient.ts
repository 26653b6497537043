/**
 * A `SqlClient` of `effect/sql` over Node's built-in `node:sqlite`, until effect's own SQLite
 * driver is published for effect 4.1 (`@effect/sql-sqlite-node` stops at a beta that imports
 * modules effect 4.1 no longer has).
 *
 * - `node:sqlite` is imported when the client is built, so that users of other layers never
 *   see its `ExperimentalWarning`.
 * - WAL, `synchronous=NORMAL` by default (a commit survives `kill -9`; `FULL` also survives
 *   power loss), a busy timeout, and `BEGIN IMMEDIATE`: a transaction takes the write lock
 *   when it starts, so several processes can share the file (a deferred `BEGIN` that later
 *   needs to write fails with "database is locked" instead of waiting).
 * - One connection, shared through effect's `makeSqliteAcquirers` (a semaphore).
 * - Prepared statements are cached (least recently used out first).
 * - `node:sqlite` errors carry their SQLite code in `errcode`; it is given to
 *   `classifySqliteError`, with primary-key violations (1555) counted as unique violations.
 */

import type { DatabaseSync, StatementSync } from "node:sqlite"
import { Effect, type Scope, Semaphore, Stream } from "effect"
import type * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient, type SqlConnection, SqlError, Statement } from "effect/sql"
import * as UserCode from "../../failure/UserCode.ts"

/** How the SQLite file is opened. */
export interface Options {
  readonly filename: string
  /** `NORMAL` (default): durable against a process crash; `FULL`: also against power loss. */
  readonly synchronous?: "NORMAL" | "FULL" | undefined
  /** How long a statement waits for another process's lock before failing busy, at most 2^31 - 1. Default 5000. */
  readonly busyTimeoutMillis?: number | undefined
  /** How many prepared statements are kept. Default 64. */
  readonly statementCacheSize?: number | undefined
  /** Pages the write-ahead log holds before they are copied into the file (`wal_autocheckpoint`). Default 10000. */
  readonly checkpointPages?: number | undefined
}

/**
 * SQLite's default (1000 pages, about 4 MB) checkpoints every few hundred commits, and each
 * checkpoint syncs the file: on the machines measured that was most of a commit's mean
 * cost. With 10000 (about 40 MB of log) a page that many commits rewrite is copied once, and
 * a commit costs about half as much on average, at a pause of tens of milliseconds per
 * checkpoint (bench/RESULTS.md, "Durable runs").
 */
const defaultCheckpointPages = 10_000

const SQLITE_CONSTRAINT_PRIMARYKEY = 1555
const SQLITE_CONSTRAINT_UNIQUE = 2067

/** The SQLite error code of a `node:sqlite` error, where `classifySqliteError` looks for it. */
const sqliteCause = (error: unknown): unknown => {
  if (typeof error !== "object" || error === null || !("errcode" in error) || typeof error.errcode !== "number") {
    return error
  }
  const errno = error.errcode === SQLITE_CONSTRAINT_PRIMARYKEY ? SQLITE_CONSTRAINT_UNIQUE : error.errcode
  const message = error instanceof Error ? error.message : String(error)
  return Object.assign(Object.create(error), { errno, message, cause: error })
}

/** A `node:sqlite` error as an `SqlError`, classified by its SQLite code. */
export const toSqlError = (operation: string) => (error: unknown) =>
  new SqlError.SqlError({
    reason: SqlError.classifySqliteError(sqliteCause(error), {
      message: error instanceof Error ? error.message : String(error),
      operation
    })
  })

type Bindable = null | number | bigint | string | Uint8Array

const bind = (params: ReadonlyArray<unknown>): Array<Bindable> =>
  params.map((value) => {
    if (value === undefined || value === null) return null
    if (typeof value === "boolean") return value ? 1 : 0
    if (value instanceof Date) return value.toISOString()
    if (typeof value === "number" || typeof value === "bigint" || typeof value === "string") return value
    if (value instanceof Uint8Array) return value
    return JSON.stringify(value)
  })

/** A small LRU of prepared statements, one per SQL text (and one more per text for rows as arrays). */
const makeCache = (db: DatabaseSync, size: number, arrays: boolean) => {
  const entries = new Map<string, StatementSync>()
  return (sql: string): StatementSync => {
    const cached = entries.get(sql)
    if (cached !== undefined) {
      entries.delete(sql)
      entries.set(sql, cached)
      return cached
    }
    const statement = db.prepare(sql)
    if (arrays) statement.setReturnArrays(true)
    entries.set(sql, statement)
    if (entries.size > size) {
      const oldest = entries.keys().next().value
      if (oldest !== undefined) entries.delete(oldest)
    }
    return statement
  }
}

/** SQLITE_BUSY or SQLITE_LOCKED, extended codes (`SQLITE_BUSY_RECOVERY`, …) included. */
export const isBusy = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  "errcode" in error &&
  typeof error.errcode === "number" &&
  ((error.errcode & 0xff) === 5 || (error.errcode & 0xff) === 6)

/**
 * The file and its durability as asked for: a file name (an empty one is a temporary
 * database SQLite deletes on close, which a journal must not be: an unset setting, most
 * likely), and `NORMAL` or `FULL`, exactly (a `full` would have been taken as `NORMAL`).
 */
const checkFile = (options: Options): void => {
  if (typeof options.filename !== "string" || options.filename.trim() === "") {
    throw new RangeError(`filename must name the database file, got ${JSON.stringify(options.filename)}`)
  }
  const synchronous: unknown = options.synchronous
  if (synchronous !== undefined && synchronous !== "NORMAL" && synchronous !== "FULL") {
    throw new RangeError(`synchronous must be "NORMAL" or "FULL", got ${JSON.stringify(synchronous)}`)
  }
}

/**
 * A count option as given, or its default: a whole number from `least` to `most`, else a
 * `RangeError` naming it.
 */
const whole = (name: string, what: string, given: unknown, fallback: number, least: number, most: number): number => {
  const value = given ?? fallback
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < least || value > most) {
    const range = most === Number.MAX_SAFE_INTEGER ? `at least ${least}` : `from ${least} to ${most}`
    throw new RangeError(`${name} must be a whole number of ${what}, ${range}; got ${UserCode.shown(value)}`)
  }
  return value
}

/** The largest busy timeout SQLite takes (a C int of milliseconds, about 24 days). */
const maxBusyTimeout = 2 ** 31 - 1

/** The checkpoint size asked for: a whole number of pages, at least 1. */
const checkpointPages = (options: Options): number =>
  whole("checkpointPages", "pages", options.checkpointPages, defaultCheckpointPages, 1, Number.MAX_SAFE_INTEGER)

/**
 * Opens the file and puts it in WAL mode. Switching a new file to WAL needs the file to
 * itself, and SQLite answers busy at once (without its busy handler) when another process is
 * opening it too: that one step is retried until the busy timeout.
 */
const openFile = (options: Options) =>
  Effect.tryPromise({
    try: async () => {
      // Checked before the file is created.
      checkFile(options)
      const pages = checkpointPages(options)
      const busyTimeout = whole("busyTimeoutMillis", "milliseconds", options.busyTimeoutMillis, 5000, 0, maxBusyTimeout)
      whole("statementCacheSize", "statements", options.statementCacheSize, 64, 0, Number.MAX_SAFE_INTEGER)
      const { DatabaseSync } = await import("node:sqlite")
      const db = new DatabaseSync(options.filename, { timeout: busyTimeout })
      const giveUpAt = Date.now() + busyTimeout
      try {
        for (;;) {
          try {
            db.exec("PRAGMA journal_mode = WAL")
            break
          } catch (error) {
            if (!isBusy(error) || Date.now() >= giveUpAt) throw error
            // A raw timer: this waits inside the open's own promise (no fiber), for another process, in real time.
            await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20))
          }
        }
        db.exec(`PRAGMA synchronous = ${options.synchronous === "FULL" ? "FULL" : "NORMAL"}`)
        db.exec(`PRAGMA wal_autocheckpoint = ${pages}`)
      } catch (error) {
        db.close()
        throw error
      }
      return db
    },
    catch: toSqlError("open")
  })

/**
 * The client and its connection, for a store that runs its hottest statements on the
 * connection itself: it must hold `lock` (the permit the client's queries and
 * transactions take) while it does.
 */
export interface Opened {
  readonly client: SqlClient.SqlClient
  readonly db: DatabaseSync
  readonly lock: Semaphore.Semaphore
}

/** The client and its connection (see {@link Opened}); the file is closed when the scope closes. */
export const open = (options: Options): Effect.Effect<Opened, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function* () {
    const db = yield* Effect.acquireRelease(openFile(options), (db) => Effect.sync(() => db.close()))
    const prepared = makeCache(db, options.statementCacheSize ?? 64, false)
    const preparedArrays = makeCache(db, options.statementCacheSize ?? 64, true)
    const run = <A>(operation: string, body: () => A): Effect.Effect<A, SqlError.SqlError> =>
      Effect.try({ try: body, catch: toSqlError(operation) })
    const rows = (statement: StatementSync, params: ReadonlyArray<unknown>): ReadonlyArray<object> =>
      statement.all(...bind(params))
    const values = (statement: StatementSync, params: ReadonlyArray<unknown>) =>
      // SQLite returns each row as an array: the statement was set to `setReturnArrays(true)` (node types it as a record).
      statement.all(...bind(params)) as unknown as ReadonlyArray<ReadonlyArray<unknown>>
    const transform = (
      result: ReadonlyArray<object>,
      transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
    ) => (transformRows === undefined ? result : transformRows(result))

    const connection: SqlConnection.Connection = {
      execute: (sql, params, transformRows) =>
        run("execute", () => transform(rows(prepared(sql), params), transformRows)),
      executeRaw: (sql, params) => run("execute", () => rows(prepared(sql), params)),
      executeStream: (sql, params, transformRows) =>
        Stream.fromIterableEffect(run("execute", () => transform(rows(prepared(sql), params), transformRows))),
      executeValues: (sql, params) => run("execute", () => values(preparedArrays(sql), params)),
      executeValuesUnprepared: (sql, params) =>
        run("execute", () => {
          const statement = db.prepare(sql)
          statement.setReturnArrays(true)
          return values(statement, params)
        }),
      executeUnprepared: (sql, params, transformRows) =>
        run("execute", () => transform(rows(db.prepare(sql), params), transformRows))
    }

    const lock = yield* Semaphore.make(1)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore: lock,
      isTransaction: () => db.isTransaction
    })
    const client = yield* SqlClient.make({
      ...acquirers,
      compiler: Statement.makeCompilerSqlite(),
      driver: "sqlite-node",
      beginTransaction: "BEGIN IMMEDIATE",
      // SQLite prepares transaction control like any statement: BEGIN and COMMIT come from the cache.
      prepareTransactionControls: true,
      spanAttributes: [
        ["db.system.name", "sqlite"],
        ["db.namespace", options.filename]
      ]
    })
    return { client, db, lock } satisfies Opened
  })

/** The client; the file is closed when the scope closes. */
export const make = (
  options: Options
): Effect.Effect<SqlClient.SqlClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.map(open(options), (opened) => opened.client)
