/** The SQL journal layers: over the `SqlClient` in context, or over a client the layer opens itself. */
import { Context, Effect, Layer, type Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient, type SqlError } from "effect/sql"
import * as Failure from "../../failure/Failure.ts"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as JournalError from "../JournalError.ts"
import * as Make from "./Make.ts"
import { Journal } from "./Models.ts"
import * as SqliteClient from "./SqliteClient.ts"
import * as SqliteStore from "./SqliteStore.ts"
import * as SqlStore from "./sql/SqlStore.ts"

export interface SqlOptions {
  /** The prefix of the journal's table names (`agent_runs`, `agent_commits`, …). Default `agent_`. */
  readonly tablePrefix?: string | undefined
}

/**
 * Options with a key none of `known` is: a `StoreFailed` of `configure`, naming it and the
 * option it likely misspells (review 173: let go, unsaid).
 */
export const configured = <Options>(
  options: unknown,
  known: OptionKeys.Known<Options>
): Effect.Effect<void, JournalError.JournalError> => {
  const unknown = OptionKeys.unknownOption(options, known)
  return unknown === undefined ? Effect.void : Effect.fail(misconfigured(unknown))
}

/** Options a journal cannot be made with, `detail` saying why. */
export const misconfigured = (detail: string): JournalError.JournalError =>
  JournalError.make(new JournalError.StoreFailed({ operation: "configure", detail }))

const knownSql: OptionKeys.Known<SqlOptions> = { tablePrefix: true }

const knownSqlite: OptionKeys.Known<SqliteClient.Options & SqlOptions> = {
  filename: true,
  synchronous: true,
  busyTimeoutMillis: true,
  statementCacheSize: true,
  checkpointPages: true,
  tablePrefix: true
}

export const layerSql = (options?: SqlOptions): Layer.Layer<Journal, JournalError.JournalError, SqlClient.SqlClient> =>
  Layer.effect(
    Journal,
    Effect.gen(function* () {
      yield* configured(options, knownSql)
      const sql = yield* SqlClient.SqlClient
      const names = yield* SqlStore.tables(options?.tablePrefix)
      yield* SqlStore.migrate(sql, names)
      return Make.make(SqlStore.make(sql, names))
    })
  )

/** A SQL journal on a client it opens (and closes with its scope); opening failures are classified too. */
export const layerOwnClient = (
  open: Effect.Effect<SqlClient.SqlClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity>,
  options?: SqlOptions
): Layer.Layer<Journal, JournalError.JournalError> =>
  layerSql(options === undefined ? undefined : { tablePrefix: options.tablePrefix }).pipe(
    Layer.provide(
      Layer.effect(SqlClient.SqlClient, Effect.mapError(open, SqlStore.classify("open"))).pipe(
        Layer.provide(Reactivity.layer)
      )
    )
  )

/** The SQLite journal on a file it opens (and closes with its scope): commits go to the connection directly. */
export const layerSqlite = (
  options: SqliteClient.Options & SqlOptions
): Layer.Layer<Journal, JournalError.JournalError> =>
  Layer.effect(
    Journal,
    Effect.gen(function* () {
      yield* configured(options, knownSqlite)
      const opened = yield* Effect.mapError(SqliteClient.open(options), SqlStore.classify("open"))
      const names = yield* SqlStore.tables(options.tablePrefix)
      yield* SqlStore.migrate(opened.client, names)
      return Make.make(yield* prepared(opened, names))
    })
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * The store's statements, prepared: a file whose tables were changed behind the
 * migrations' back (one dropped) is a typed `StoreFailed`, not a throw.
 */
const prepared = (opened: SqliteClient.Opened, names: SqlStore.Tables) =>
  Effect.try({
    try: () => SqliteStore.make(opened, names),
    catch: (error) =>
      JournalError.make(
        new JournalError.StoreFailed({
          operation: "open",
          detail: `the journal's tables cannot be used: ${Failure.safeDescription(error)}`
        })
      )
  })

/**
 * The SQLite journal and the `SqlClient` of its connection, on one file: for state kept in
 * the same file beside the journal (effect's cluster storage). Both go through the
 * connection's one permit, so their transactions never interleave.
 */
export const layerSqliteWithClient = (
  options: SqliteClient.Options & SqlOptions
): Layer.Layer<Journal | SqlClient.SqlClient, JournalError.JournalError> =>
  Layer.effectContext(
    Effect.gen(function* () {
      yield* configured(options, knownSqlite)
      const opened = yield* Effect.mapError(SqliteClient.open(options), SqlStore.classify("open"))
      const names = yield* SqlStore.tables(options.tablePrefix)
      yield* SqlStore.migrate(opened.client, names)
      return Context.make(Journal, Make.make(yield* prepared(opened, names))).pipe(
        Context.add(SqlClient.SqlClient, opened.client)
      )
    })
  ).pipe(Layer.provide(Reactivity.layer))
