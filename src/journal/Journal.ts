/**
 * The journal store for durable runs (R9, R7): each run's committed events, fenced on the
 * committed sequence number, and the approvals any process on the same store can list and
 * decide.
 *
 * Three layers share one contract: {@link layerMemory} for tests, {@link layerSql} over any
 * `SqlClient` of `effect/sql` (SQLite or PostgreSQL, one schema, migrated by effect's
 * `Migrator`), and {@link layerSqlite}, the zero set-up default on Node's built-in
 * `node:sqlite`. PostgreSQL is `JournalPg.layer` in `effect-agent-runtime/journal/pg`.
 *
 * Events are stored as the `Event` schema's JSON, one row per commit (an array of its
 * events, written in one statement and fenced by where the run's last commit ends); `read`
 * decodes and checks them, so a damaged or newer journal is a typed `JournalError`
 * (`Corrupt`, `Incompatible`), never a defect. A file or database written by 0.3's first
 * layout (one row per event) is moved to this one by a migration when it is opened.
 *
 * @since 0.3.0
 */
import { type Duration, Layer } from "effect"
import type { SqlClient } from "effect/sql"
import * as Layers from "./internal/Layers.ts"
import * as Live from "./internal/LiveRuns.ts"
import * as Make from "./internal/Make.ts"
import * as MemoryStore from "./internal/MemoryStore.ts"
import { Journal, type LiveRuns } from "./internal/Models.ts"
import * as SqliteHost from "./internal/SqliteHost.ts"
import type { JournalError } from "./JournalError.ts"

export {
  type Append,
  type ApprovalDecision,
  type ApprovalRequest,
  FORMAT_VERSION,
  Journal,
  type LiveRuns,
  type NewRun,
  type PendingFilter,
  type ReadOptions,
  type Service,
  type Stored
} from "./internal/Models.ts"

/**
 * An empty {@link LiveRuns}, for a journal service of your own (a wrapper that stands for
 * another process, as `FaultyJournal` does): every journal the layers here build has one.
 *
 * @category constructors
 * @since 0.3.0
 */
export const makeLiveRuns: () => LiveRuns = Live.make

/**
 * A journal in memory, for tests: the same rows (encoded JSON) and the same checks as SQL.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerMemory: Layer.Layer<Journal> = Layer.sync(Journal, () => Make.make(MemoryStore.make().store))

/**
 * Options of the SQL journals.
 *
 * @category models
 * @since 0.3.0
 */
export interface SqlOptions extends Layers.SqlOptions {}

/**
 * A journal over the `SqlClient` in context (SQLite or PostgreSQL). Building it runs the
 * migrations (effect's `Migrator`, table `<prefix>migrations`). Bodies, headers and results are
 * JSON text (`TEXT`) on both databases, so one schema serves both.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerSql: (options?: SqlOptions) => Layer.Layer<Journal, JournalError, SqlClient.SqlClient> =
  Layers.layerSql

/**
 * Options of {@link layerSqlite}.
 *
 * @category models
 * @since 0.3.0
 */
export interface SqliteOptions extends SqlOptions {
  /** The database file, created on first use (an empty name is refused: SQLite would give a temporary one). */
  readonly filename: string
  /** `NORMAL` (default): a commit survives `kill -9`; `FULL`: it also survives power loss, at an fsync per commit. */
  readonly synchronous?: "NORMAL" | "FULL" | undefined
  /** How long a commit waits for another process's write lock before failing `Unavailable`. Default 5000 ms. */
  readonly busyTimeoutMillis?: number | undefined
  /**
   * How many pages (4 KB each) the write-ahead log holds before SQLite copies them into the
   * file. Default 10000 (about 40 MB): fewer checkpoints, each copying a page once however
   * many commits rewrote it, so commits cost less on average; each checkpoint pauses the
   * committing run for tens of milliseconds. SQLite's own default is 1000.
   */
  readonly checkpointPages?: number | undefined
}

/**
 * The zero set-up journal: one SQLite file through Node's built-in `node:sqlite` (imported
 * only when this layer is built), in WAL mode with `BEGIN IMMEDIATE` transactions, so that
 * several processes can share the file. The file is closed with the layer's scope.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<Journal, JournalError> => Layers.layerSqlite(options)

/**
 * The one live host of a SQLite file (R9.4): a lock on `<filename>.owner` (SQLite's own file
 * locking, which the system lets go when the process ends, however it ends), held for the
 * layer's life. While another live process holds it, the layer waits up to `wait`, then
 * fails `Unavailable`, its detail ending with `advice`. `DurableRun.layerEmbedded` takes it,
 * so that one process drives a file's runs; a host of your own over one file may too.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerSqliteHost = (options: {
  readonly filename: string
  readonly wait: Duration.Input
  readonly advice?: string | undefined
}): Layer.Layer<never, JournalError> =>
  Layer.effectDiscard(SqliteHost.hold(options.filename, options.wait, options.advice))

/**
 * {@link layerSqlite}, and the `SqlClient` of its connection: for what keeps its own tables in
 * the same file, such as effect's cluster storage under `DurableRun.layerEmbedded`. The
 * journal and the client share the one connection and its permit, so their transactions
 * never interleave.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerSqliteWithClient = (
  options: SqliteOptions
): Layer.Layer<Journal | SqlClient.SqlClient, JournalError> => Layers.layerSqliteWithClient(options)
