/**
 * Runs as durable workflows on effect's own `workflow` and `cluster` (R9): one owner per
 * run, failover to another process when one dies, approvals that wait for days at no cost.
 *
 * A run is an effect `Workflow` keyed by its run id, whose body drives the run from its
 * journal (see `RunHost`). Model and tool calls stay steps of the journal, not Activities:
 * the journal's intent records and reconciliation give each side effect exactly once or an
 * honest `unknown_outcome`, where an Activity would run again after a crash. The engine
 * gives what the journal cannot: the run's owner (a shard lock), a restart or a move of
 * every unfinished run to a live process, and durable wake-ups.
 *
 * - {@link layer} registers the runs' code (tools, policies, validation, the model through
 *   the context) on a runner and provides {@link DurableRuns}: start, poll, result, events,
 *   approve, reject, cancel, pending, from any process on the same storage.
 * - {@link layerEmbedded}: the engine on one runner over one SQLite file, the journal's
 *   (zero set-up; a restarted process resumes every unfinished run by itself).
 * - {@link layerCluster}: runner processes over sockets on PostgreSQL (or any `SqlClient`
 *   effect's cluster supports); `clientOnly` for a process (an API server) that starts,
 *   approves and cancels runs without owning any.
 *
 * A run waiting for approval parks: its workflow suspends on a `DurableDeferred` per call,
 * raced with a `DurableClock` at the earliest expiry, and holds no fiber and no memory once
 * the engine lets it go (10 s after its last message). Approving it from any process wakes
 * it on its owner. A workflow that is suspended, moves to another runner or stops with its
 * runner never ends the run: only {@link Service.cancel} does. A run whose journal this
 * runner cannot go on with (a newer format, a tool gone or changed) suspends instead of
 * failing, for a newer runner to resume (`Workflow.SuspendOnFailure`).
 *
 * ```ts
 * const runtime = DurableRun.layer({ tools: [pay] }).pipe(
 *   Layer.provideMerge(DurableRun.layerEmbedded({ filename: "runs.db" })),
 *   Layer.provide(model)
 * )
 * const runs = yield* DurableRun.DurableRuns
 * const runId = yield* runs.start({ goal: "pay the invoice" })
 * yield* runs.approve(runId, (yield* runs.pending(runId))[0].callId)
 * const result = yield* runs.result(runId)
 * ```
 *
 * @since 0.5.0
 */

import { Context, Duration, Effect, Exit, Layer, Option, Schedule, Schema, Stream } from "effect"
import type { ConfigError } from "effect/Config"
import {
  ClusterWorkflowEngine,
  EntityAddress,
  EntityId,
  EntityType,
  MessageStorage,
  RunnerAddress,
  type Runners,
  Sharding,
  type ShardingConfig,
  SingleRunner
} from "effect/cluster"
import { Digest } from "effect/crypto"
import type { SqlClient } from "effect/sql"
import { DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import type * as Event from "../events/Event.ts"
import * as Journal from "../journal/Journal.ts"
import * as JournalApprovals from "../journal/JournalApprovals.ts"
import type * as JournalError from "../journal/JournalError.ts"
import * as Run from "../run/Run.ts"
import type * as RunOptions from "../run/RunOptions.ts"
import * as RunResult from "../run/RunResult.ts"
import * as Approval from "../tools/Approval.ts"
import type * as Tool from "../tools/Tool.ts"
import * as Body from "./internal/Body.ts"
import * as Names from "./internal/Names.ts"

/**
 * The workflow of a run: keyed by the run id, so that starting a run twice under one id
 * starts it once. Its payload is the data of the run's options; its success, the status the
 * run ended in (the result itself is in the journal).
 *
 * @category workflows
 * @since 0.5.0
 */
export const RunWorkflow = Workflow.make("effect-agent-runtime/Run", {
  payload: {
    runId: Schema.String,
    goal: Schema.String,
    system: Schema.optional(Schema.String),
    limits: Schema.optional(Schema.Record(Schema.String, Schema.Number)),
    time: Schema.optional(Schema.Record(Schema.String, Schema.Union([Schema.Number, Schema.String])))
  },
  success: Schema.String,
  error: Run.ResumeError,
  idempotencyKey: ({ runId }) => runId
}).annotate(Workflow.SuspendOnFailure, true)

/**
 * What a durable run is started with: the data of its options (its code is what the runner
 * registered with {@link layer}). Limits and time limits given here win over the
 * registered ones.
 *
 * @category models
 * @since 0.5.0
 */
export interface StartOptions {
  readonly goal: string
  readonly system?: string | undefined
  /** Default: a random UUID. Starting again under a run id already started starts nothing. */
  readonly runId?: string | undefined
  readonly limits?: Readonly<Record<string, number>> | undefined
  /** As `Run.Options.time`: milliseconds, or a duration such as `"2 days"`. */
  readonly time?: Readonly<Record<string, number | string>> | undefined
}

/**
 * Why an operation on a durable run could not be done: no run of that id (`not_found`),
 * the store out of reach (`unavailable`), or a stored result that does not read back
 * (`corrupt`).
 *
 * @category errors
 * @since 0.5.0
 */
export class DurableRunError extends Schema.TaggedError<DurableRunError>()("DurableRunError", {
  runId: Schema.String,
  reason: Schema.Literals(["not_found", "unavailable", "corrupt"]),
  detail: Schema.String
}) {
  override get message(): string {
    return `durable run ${this.runId}: ${this.reason}: ${this.detail}`
  }
}

/**
 * The operations on durable runs, from any process on the same storage.
 *
 * @category models
 * @since 0.5.0
 */
export interface Service {
  /** Starts a run (its options checked first: a bad one is `InvalidRunOptions`) and gives its id. */
  readonly start: (options: StartOptions) => Effect.Effect<string, RunOptions.InvalidRunOptions | DurableRunError>
  /** The run's result once it has finished. */
  readonly poll: (runId: string) => Effect.Effect<Option.Option<RunResult.RunResult>, DurableRunError>
  /** Waits for the run's result, reading the journal every `pollInterval` (default 200 ms to 5 s). */
  readonly result: (runId: string) => Effect.Effect<RunResult.RunResult, DurableRunError>
  /** The run's events its journal holds so far (its committed log). */
  readonly events: (runId: string) => Effect.Effect<ReadonlyArray<Event.Event>, DurableRunError>
  /**
   * The run's committed events from `fromSeq` on (default 0), then each one as it is
   * committed, ending with `run.finished`: a feed for a UI or a server-sent event stream
   * (resume one from its last event's `seq + 1`). The journal is read every `pollInterval`
   * (default 500 ms) while nothing new has come.
   */
  readonly watch: (
    runId: string,
    options?: { readonly fromSeq?: number | undefined; readonly pollInterval?: Duration.Input | undefined }
  ) => Stream.Stream<Event.Event, DurableRunError>
  /** Approves the call `callId` the run waits on, and wakes the run on its owner. */
  readonly approve: (
    runId: string,
    callId: string,
    options?: { readonly by?: string | undefined }
  ) => Effect.Effect<void, Approval.NotPending | DurableRunError>
  /** Rejects the call `callId` the run waits on: the run ends `approval_rejected`. */
  readonly reject: (
    runId: string,
    callId: string,
    reason: string,
    options?: { readonly by?: string | undefined }
  ) => Effect.Effect<void, Approval.NotPending | DurableRunError>
  /** Cancels the run wherever it is (running, parked, between owners); it ends `cancelled` unless it had ended. */
  readonly cancel: (runId: string) => Effect.Effect<void, DurableRunError>
  /** The calls waiting for approval: of one run, or of every run. */
  readonly pending: (runId?: string) => Effect.Effect<ReadonlyArray<Approval.Request>, DurableRunError>
}

/**
 * @category services
 * @since 0.5.0
 */
export class DurableRuns extends Context.Service<DurableRuns, Service>()("effect-agent-runtime/DurableRuns") {}

/**
 * The code of the runs a runner hosts: `Run.Options` less what each start gives.
 *
 * @category models
 * @since 0.5.0
 */
export type Definitions<T extends Tool.Any = Tool.Any, RV = never, O = never> = Omit<
  RunOptions.Options<T, RV, O>,
  "goal" | "system" | "runId"
>

/**
 * @category models
 * @since 0.5.0
 */
export interface Settings {
  /** How often a run waiting for approval in its process reads the table for a decision. Default 1 second. */
  readonly pollInterval?: Duration.Input | undefined
  /** An approval that expires sooner than this is waited for in the process instead of parking. Default 1 second. */
  readonly parkAfter?: Duration.Input | undefined
}

/** The workflow's payload of a start. */
const payloadOf = (options: StartOptions, runId: string): Body.Payload => ({
  runId,
  goal: options.goal,
  ...(options.system === undefined ? {} : { system: options.system }),
  ...(options.limits === undefined ? {} : { limits: options.limits }),
  ...(options.time === undefined ? {} : { time: options.time })
})

/** Checks a start as `Run.run` checks its options: the start's data over `definitions`. */
const checkedAgainst =
  <T extends Tool.Any, RV, O>(definitions: Definitions<T, RV, O>) =>
  (options: StartOptions): Effect.Effect<void, RunOptions.InvalidRunOptions> =>
    Run.validateOptions<T, RV, O>({
      ...Body.optionsOf(definitions, payloadOf(options, options.runId ?? "")),
      ...(options.runId === undefined ? {} : { runId: options.runId })
    })

/** The run's execution id: its workflow's, which depends only on the run id. */
const executionOf = (runId: string) => RunWorkflow.executionId({ runId, goal: "" })

const storeError = (runId: string) => (e: JournalError.JournalError) =>
  new DurableRunError({ runId, reason: e.isRetryable ? "unavailable" : "corrupt", detail: e.message })

const decodeResult = Schema.decodeUnknownExit(Schema.toCodecJson(RunResult.RunResult))

/** What the operations run on: the journal, the engine, and the engine's storage. */
interface Services {
  readonly journal: Journal.Service
  readonly engine: WorkflowEngine.WorkflowEngine["Service"]
  readonly sharding: Sharding.Sharding["Service"]
  readonly storage: MessageStorage.MessageStorage["Service"]
}

/** The services of {@link Services}, from the context. */
const services = Effect.all({
  journal: Effect.service(Journal.Journal),
  engine: Effect.service(WorkflowEngine.WorkflowEngine),
  sharding: Effect.service(Sharding.Sharding),
  storage: Effect.service(MessageStorage.MessageStorage)
})

/** The services every layer of runs needs: the engine with its storage, and the journal. */
export type Requires =
  | WorkflowEngine.WorkflowEngine
  | Journal.Journal
  | Sharding.Sharding
  | MessageStorage.MessageStorage

const makeService = (
  { journal, engine, sharding, storage }: Services,
  validate: (options: StartOptions) => Effect.Effect<void, RunOptions.InvalidRunOptions>
): Service => {
  const provide = <A, E>(effect: Effect.Effect<A, E, WorkflowEngine.WorkflowEngine>) =>
    Effect.provideService(effect, WorkflowEngine.WorkflowEngine, engine)
  const gate = JournalApprovals.make(journal)

  /**
   * Whether the run was started: its workflow's `run` request is in the engine's storage
   * (it is there from `start` on, before any runner took it up).
   */
  const started = (runId: string) =>
    Effect.flatMap(executionOf(runId), (executionId) => {
      const entityId = EntityId.make(executionId)
      const address = EntityAddress.make({
        entityType: EntityType.make(`Workflow/${RunWorkflow._tag}`),
        entityId,
        shardId: sharding.getShardId(entityId, "default")
      })
      return Effect.mapBothEager(storage.requestIdForPrimaryKey({ address, tag: "run", id: "" }), {
        onSuccess: Option.isSome,
        onFailure: (e) => new DurableRunError({ runId, reason: "unavailable", detail: e.message })
      })
    })

  /** The run as its journal holds it; `undefined` for a run started that has committed nothing yet. */
  const stored = (runId: string) =>
    Effect.flatMap(Effect.mapError(journal.read(runId), storeError(runId)), (found) =>
      Option.isSome(found)
        ? Effect.succeed(found.value)
        : Effect.flatMap(started(runId), (exists) =>
            exists
              ? Effect.succeed(undefined)
              : Effect.fail(new DurableRunError({ runId, reason: "not_found", detail: "no run of this id" }))
          )
    )

  const poll = (runId: string) =>
    Effect.flatMap(stored(runId), (run) => {
      if (run === undefined || Option.isNone(run.result)) return Effect.succeed(Option.none<RunResult.RunResult>())
      const decoded = decodeResult(run.result.value)
      if (Exit.isFailure(decoded)) {
        return Effect.fail(
          new DurableRunError({ runId, reason: "corrupt", detail: "the stored result does not decode" })
        )
      }
      const result = decoded.value
      return Effect.succeed(Option.some(result.timeline.length === 0 ? { ...result, timeline: run.events } : result))
    })

  /** Wakes the run on the call `callId`, whose decision is on the table. */
  const wake = (runId: string, callId: string) =>
    provide(
      Effect.flatMap(executionOf(runId), (executionId) => {
        const deferred = Names.approval(callId)
        return DurableDeferred.done(deferred, {
          token: DurableDeferred.tokenFromExecutionId(deferred, { workflow: RunWorkflow, executionId }),
          exit: Exit.void
        })
      })
    )

  const decide = (runId: string, callId: string, decision: Approval.Decision) =>
    Effect.gen(function* () {
      // Decided on the table first (the first decision wins), then the run is woken: a wake
      // that finds no decision would only park the run again.
      const decided = yield* Effect.result(gate.decide(runId, callId, decision))
      if (decided._tag === "Success") return yield* wake(runId, callId)
      // Not pending: decided already (a retry whose wake may have been lost is woken again), or never asked.
      const earlier = yield* Effect.mapError(journal.decision(runId, callId), storeError(runId))
      if (Option.isSome(earlier)) yield* wake(runId, callId)
      return yield* Effect.fail(decided.failure)
    })

  return {
    start: (options) =>
      Effect.gen(function* () {
        yield* validate(options)
        const runId = options.runId ?? crypto.randomUUID()
        yield* provide(RunWorkflow.execute(payloadOf(options, runId), { discard: true }))
        return runId
      }),
    poll,
    result: (runId) =>
      Effect.flatMap(
        Effect.repeat(poll(runId), {
          until: Option.isSome,
          schedule: Schedule.min([Schedule.exponential("200 millis", 1.5), Schedule.spaced("5 seconds")])
        }),
        (found) =>
          Option.isSome(found)
            ? Effect.succeed(found.value)
            : Effect.fail(new DurableRunError({ runId, reason: "unavailable", detail: "no result" }))
      ),
    events: (runId) => Effect.map(stored(runId), (run) => run?.events ?? []),
    watch: (runId, options) => {
      const pollMillis = Duration.toMillis(Duration.fromInputUnsafe(options?.pollInterval ?? "500 millis"))
      const start = { from: Math.max(0, Math.trunc(options?.fromSeq ?? 0)), wait: false }
      return Stream.paginate(start, ({ from, wait }) =>
        Effect.gen(function* () {
          if (wait) yield* Effect.sleep(pollMillis)
          const events = (yield* stored(runId))?.events ?? []
          const fresh = events.slice(from)
          const finished = events.at(-1)?._tag === "run.finished"
          // A read that brought nothing new waits before the next; one that did reads again at once.
          const next = { from: from + fresh.length, wait: fresh.length === 0 }
          return [fresh, finished ? Option.none() : Option.some(next)] as const
        })
      )
    },
    approve: (runId, callId, options) => decide(runId, callId, Approval.approved(options?.by)),
    reject: (runId, callId, reason, options) => decide(runId, callId, Approval.rejected(reason, options?.by)),
    cancel: (runId) =>
      Effect.flatMap(stored(runId), (run) =>
        run !== undefined && Option.isSome(run.result)
          ? Effect.void
          : provide(
              Effect.flatMap(executionOf(runId), (executionId) =>
                DurableDeferred.done(Names.cancel, {
                  token: DurableDeferred.tokenFromExecutionId(Names.cancel, { workflow: RunWorkflow, executionId }),
                  exit: Exit.void
                })
              )
            )
      ),
    pending: (runId) =>
      Effect.mapError(
        Effect.map(journal.pendingApprovals(runId === undefined ? undefined : { runId }), (rows) =>
          rows.map((row) => ({
            runId: row.runId,
            callId: row.callId,
            tool: row.tool,
            arguments: (typeof row.arguments === "object" && row.arguments !== null && !Array.isArray(row.arguments)
              ? row.arguments
              : {}) as Readonly<Record<string, unknown>>,
            sideEffect: (row.sideEffect ?? "external") as Tool.SideEffect,
            requestedAt: row.requestedAt,
            expiresAt: row.expiresAt
          }))
        ),
        storeError(runId ?? "*")
      )
  }
}

/**
 * {@link DurableRuns} for a process that hosts no runs (an API server on a client-only
 * cluster layer): it starts, approves, cancels and reads runs that runners host. It checks
 * the data of what it starts (a bad limit is `InvalidRunOptions` here too); the runner
 * checks the rest against its code when the run begins.
 *
 * @category layers
 * @since 0.5.0
 */
export const layerClient: Layer.Layer<DurableRuns, never, Requires> = Layer.effect(
  DurableRuns,
  // The data of a start is checked here as a runner would; its tools are the runner's.
  Effect.map(services, (all) => makeService(all, checkedAgainst({ tools: [] })))
)

/**
 * At a runner's start, the unfinished runs whose workflow suspended on a failure (a runner
 * that could not go on with their journal: a newer format, a tool it does not have) are
 * woken, so that a newer runner takes them up; a runner that still cannot suspends them
 * again. A store out of reach leaves them for the next start.
 */
const wakeSuspended = Effect.gen(function* () {
  const journal = yield* Journal.Journal
  const ids = yield* journal.unfinished
  yield* Effect.forEach(
    ids,
    (runId) =>
      Effect.gen(function* () {
        const executionId = yield* executionOf(runId)
        const polled = yield* RunWorkflow.poll(executionId)
        if (Option.isSome(polled) && polled.value._tag === "Suspended" && polled.value.failed === true) {
          yield* RunWorkflow.resume(executionId)
        }
      }),
    { concurrency: 4, discard: true }
  )
}).pipe(Effect.ignore)

/**
 * Registers the runs' code on this runner (its runs are driven here while it owns them)
 * and provides {@link DurableRuns}. A start is checked against `definitions` as `Run.run`
 * checks its options. When the runner starts, it wakes the runs that a runner could not go
 * on with (a journal in a newer format, a tool changed): they wait for a runner with the
 * code they need instead of failing.
 *
 * @category layers
 * @since 0.5.0
 */
export const layer = <T extends Tool.Any, RV = never, O = never>(
  definitions: Definitions<T, RV, O>,
  settings: Settings = {}
): Layer.Layer<DurableRuns, never, Requires | RunOptions.Requirements<T, RV>> =>
  Layer.effect(
    DurableRuns,
    Effect.map(services, (all) => makeService(all, checkedAgainst(definitions)))
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        RunWorkflow.toLayer((payload) => Body.body(definitions, settings, payload)),
        Layer.effectDiscard(Effect.forkScoped(wakeSuspended))
      )
    )
  )

/**
 * Options of {@link layerEmbedded}.
 *
 * @category models
 * @since 0.5.0
 */
export interface EmbeddedOptions extends Omit<Journal.SqliteOptions, "tablePrefix"> {
  /**
   * The engine's settings. Default here: messages read from the file every second (durable
   * timers fire on that read, so an expiry is at most that late).
   */
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Service"]> | undefined
}

/**
 * The engine on one runner over one SQLite file, with the journal in the same file: zero
 * set-up durable runs for one process. A process started again on the file takes its runs
 * back and resumes every unfinished one by itself.
 *
 * @category layers
 * @since 0.5.0
 */
export const layerEmbedded = (
  options: EmbeddedOptions
): Layer.Layer<Requires | Runners.Runners, JournalError.JournalError | ConfigError> => {
  const { shardingConfig, ...file } = options
  return ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(
      SingleRunner.layer({
        shardingConfig: { entityMessagePollInterval: Duration.seconds(1), ...shardingConfig },
        runnerStorage: "sql"
      })
    ),
    Layer.provide(Digest.layerWebCrypto),
    Layer.provideMerge(Journal.layerSqliteWithClient(file))
  )
}

const nodeClusterSocket: string = "@effect/platform-node/NodeClusterSocket"

/**
 * Options of {@link layerCluster}.
 *
 * @category models
 * @since 0.5.0
 */
export interface ClusterOptions<E> {
  /** The shared database of the runners (PostgreSQL: `PgClient.layer` of `@effect/sql-pg`). */
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

/**
 * What {@link layerCluster} uses of `NodeClusterSocket`: its layer of runners over sockets.
 *
 * @category models
 * @since 0.5.0
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
 * @since 0.5.0
 */
export const layerCluster = <E>(
  options: ClusterOptions<E>
): Layer.Layer<Requires | Runners.Runners, E | JournalError.JournalError | ConfigError | Error> => {
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
