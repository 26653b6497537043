/**
 * Where the engine of durable runs lives: one runner over one SQLite file
 * ({@link layerEmbedded}), or runner processes over sockets on PostgreSQL
 * ({@link layerCluster}). `DurableRun` re-exports them. Private to `durable/`.
 */
import { Duration, Effect, Layer, Option } from "effect"
import type { ConfigError } from "effect/Config"
import {
  ClusterWorkflowEngine,
  type MessageStorage,
  RunnerAddress,
  type Runners,
  type Sharding,
  ShardingConfig,
  SingleRunner
} from "effect/cluster"
import { Digest } from "effect/crypto"
import type { SqlClient } from "effect/sql"
import type { WorkflowEngine } from "effect/workflow"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as Journal from "../../journal/Journal.ts"
import * as JournalError from "../../journal/JournalError.ts"

/** The services every layer of runs needs: the engine with its storage, and the journal. */
export type Requires =
  | WorkflowEngine.WorkflowEngine
  | Journal.Journal
  | Sharding.Sharding
  | MessageStorage.MessageStorage

/**
 * Options of {@link layerEmbedded}.
 *
 * @category models
 * @since 0.3.0
 */
export interface EmbeddedOptions extends Omit<Journal.SqliteOptions, "tablePrefix"> {
  /**
   * The engine's settings. Default here: messages read from the file every second (durable
   * timers fire on that read, so an expiry is at most that late).
   */
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Service"]> | undefined
  /**
   * A process that starts, approves, cancels and reads runs on the file beside the process
   * hosting them (an approver, a command line tool): it hosts none. Its requests reach the
   * host through the file, on the host's next read of it (every second by default).
   */
  readonly clientOnly?: boolean | undefined
}

/**
 * The engine on one runner over one SQLite file, with the journal in the same file: zero
 * set-up durable runs for one process. A process started again on the file takes its runs
 * back and resumes every unfinished one by itself.
 *
 * One live process hosts the file's runs (R9.4): it holds a lock on `<filename>.owner`,
 * which the system lets go when the process ends, however it ends. A second process
 * opening the file to host waits for it as long as the first may take to shut down
 * (`entityTerminationTimeout` and 5 s), then fails `Unavailable`; open it with
 * `clientOnly: true` to start, approve, cancel or read runs beside the host. A filename
 * that names no file (empty, or `:memory:`) is refused with `StoreFailed`.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerEmbedded = (
  options: EmbeddedOptions
): Layer.Layer<Requires | Runners.Runners, JournalError.JournalError | ConfigError> => {
  const { shardingConfig, clientOnly, ...file } = options
  const client = clientOnly === true
  // Checked here, against its own options: the journal's layer would name only its own (review 174).
  const unknown = misnamed(options, knownEmbedded)
  if (unknown !== undefined) return refused(unknown)
  if (typeof file.filename !== "string" || file.filename.trim() === "" || file.filename === ":memory:") {
    return refused(`an embedded engine needs a database file, got ${JSON.stringify(file.filename)}`)
  }
  const termination = Duration.fromInput(shardingConfig?.entityTerminationTimeout ?? "15 seconds")
  if (Option.isNone(termination)) {
    return refused(
      `shardingConfig.entityTerminationTimeout must be a duration, got ${JSON.stringify(shardingConfig?.entityTerminationTimeout)}`
    )
  }
  // Without an address, the runner hosts no shard: it only sends, through the file's message tables.
  // The host waits as long as the one before may take to let its runs go, and five seconds more.
  const wait = Duration.sum(termination.value, Duration.seconds(5))
  const host = client
    ? Layer.empty
    : Journal.layerSqliteHost({
        filename: file.filename,
        wait,
        advice: "; open it with clientOnly: true to start, approve, cancel and read runs from this one"
      })
  return ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(
      SingleRunner.layer({
        shardingConfig: {
          entityMessagePollInterval: Duration.seconds(1),
          ...shardingConfig,
          ...(client ? { runnerAddress: Option.none() } : {})
        },
        runnerStorage: "sql"
      })
    ),
    Layer.provide(Digest.layerWebCrypto),
    Layer.provideMerge(Journal.layerSqliteWithClient(file)),
    Layer.provide(host)
  )
}

const nodeClusterSocket: string = "@effect/platform-node/NodeClusterSocket"

/**
 * Options of {@link layerCluster}.
 *
 * @category models
 * @since 0.3.0
 */
export interface ClusterOptions<E> {
  /**
   * The shared database of the runners (PostgreSQL: `PgClient.layer` of `@effect/sql-pg`,
   * with `maxMessageSize: JournalPg.maxMessageSize`, so that it reads back what it stores).
   */
  readonly sql: Layer.Layer<SqlClient.SqlClient, E>
  /** Where this runner listens and other runners reach it. Omitted with `clientOnly`. */
  readonly runnerAddress?: { readonly host: string; readonly port: number } | undefined
  /** A process that starts, approves and cancels runs without hosting any (an API server). */
  readonly clientOnly?: boolean | undefined
  /** The engine's settings (`shardLockExpiration` bounds how soon a dead runner's runs move). */
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Service"]> | undefined
  /** The journal's tables. */
  readonly journal?: Journal.SqlOptions | undefined
  /**
   * The socket transport: `NodeClusterSocket` of `@effect/platform-node`. Default: that
   * module, imported when this layer is built; a bundled application passes it
   * (`import { NodeClusterSocket } from "@effect/platform-node"`), so that its bundler sees it.
   */
  readonly socket?: ClusterSocket | undefined
}

/** Options an engine cannot be made with, `detail` saying why: a `StoreFailed` of `configure`. */
const refused = <A>(detail: string): Layer.Layer<A, JournalError.JournalError> =>
  Layer.effectContext<A, JournalError.JournalError, never>(
    Effect.fail(JournalError.make(new JournalError.StoreFailed({ operation: "configure", detail })))
  )

/** Every option of effect's sharding, as its defaults name them (the defaults have every key: the cast says so). */
const knownSharding = Object.fromEntries(
  Object.keys(ShardingConfig.defaults).map((key) => [key, true])
) as OptionKeys.Known<ShardingConfig.ShardingConfig["Service"]>

/** An option none of `known` is, or one of `shardingConfig` effect's sharding does not have (review 176). */
const misnamed = <Options>(
  options: Options & { readonly shardingConfig?: unknown },
  known: OptionKeys.Known<Options>
): string | undefined => {
  const unknown = OptionKeys.unknownOption(options, known)
  if (unknown !== undefined) return unknown
  const sharding = OptionKeys.unknownOption(options.shardingConfig, knownSharding)
  return sharding === undefined ? undefined : `shardingConfig: ${sharding}`
}

const knownEmbedded: OptionKeys.Known<EmbeddedOptions> = {
  filename: true,
  synchronous: true,
  busyTimeoutMillis: true,
  checkpointPages: true,
  shardingConfig: true,
  clientOnly: true
}

const knownCluster: OptionKeys.Known<ClusterOptions<unknown>> = {
  sql: true,
  runnerAddress: true,
  clientOnly: true,
  shardingConfig: true,
  journal: true,
  socket: true
}

/**
 * What {@link layerCluster} uses of `NodeClusterSocket`: its layer of runners over sockets.
 *
 * @category models
 * @since 0.3.0
 */
export interface ClusterSocket {
  readonly layer: (options: {
    readonly storage: "sql"
    readonly clientOnly: boolean
    readonly shardingConfig: Partial<ShardingConfig.ShardingConfig["Service"]>
  }) => Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage, Error, SqlClient.SqlClient>
}

/**
 * Runner processes over sockets (`NodeClusterSocket` of `@effect/platform-node`, loaded
 * when this layer is built), their messages, shard locks and the journal on one database.
 * Each runner has its own address; a dead runner's runs move to the others once its
 * shard locks expire.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerCluster = <E>(
  options: ClusterOptions<E>
): Layer.Layer<Requires | Runners.Runners, E | JournalError.JournalError | ConfigError | Error> => {
  // A misspelt `clientOnly` would make a client a host that takes runs (review 174).
  const unknown = misnamed(options, knownCluster)
  if (unknown !== undefined) return refused(unknown)
  const address = options.runnerAddress
  const shardingConfig: Partial<ShardingConfig.ShardingConfig["Service"]> = {
    ...(address === undefined ? {} : { runnerAddress: Option.some(RunnerAddress.make(address.host, address.port)) }),
    ...options.shardingConfig
  }
  const socket: Effect.Effect<ClusterSocket, Error> =
    options.socket !== undefined
      ? Effect.succeed(options.socket)
      : Effect.tryPromise({
          // Not a literal, so that bundlers leave the optional peer dependency to this layer's users.
          try: (): Promise<ClusterSocket> => import(nodeClusterSocket),
          catch: (cause) =>
            new Error(
              `DurableRun.layerCluster needs @effect/platform-node (npm install @effect/platform-node): ${cause}`
            )
        })
  const sharding = Layer.unwrap(
    Effect.map(socket, (transport) =>
      transport.layer({ storage: "sql", clientOnly: options.clientOnly === true, shardingConfig })
    )
  )
  return ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(sharding),
    Layer.provideMerge(Journal.layerSql(options.journal)),
    Layer.provide(options.sql)
  )
}
