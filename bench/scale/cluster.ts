/**
 * The cluster case: `runners` runner processes (`runner.ts`, forked, on 127.0.0.1) over a
 * fresh PostgreSQL database, and this process as a client-only member that starts the
 * runs. The runners report their heaps over IPC; pending approvals, table sizes
 * (`pg_total_relation_size`, indexes and TOAST included) and writes (the server's
 * transaction ids, the journal's commit rows, the engine's rows written from
 * `pg_stat_user_tables`) are read beside the engine.
 */
import { type ChildProcess, fork } from "node:child_process"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { DurableRun } from "../../src/durable/index.ts"
import { unusedPort } from "../../test/support/postgres.ts"
import { type Figures, measure, type Options, type Target, waitUntil } from "./measure.ts"
import type { Reply, Request } from "./runner.ts"

const script = path.join(import.meta.dirname, "runner.ts")
const SHARDS = 300 // effect's default shardsPerGroup, one group

const living = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of living) child.kill("SIGKILL")
})

/** The next message of `child`; with `request`, sent first. */
const ask = (child: ChildProcess, request?: Request) =>
  Effect.callback<Reply, Error>((resume) => {
    const onMessage = (reply: Reply) => {
      child.off("exit", onExit)
      resume(Effect.succeed(reply))
    }
    const onExit = (code: number | null) => {
      child.off("message", onMessage)
      resume(Effect.fail(new Error(`runner ${child.pid} exited (${code})`)))
    }
    child.once("message", onMessage)
    child.once("exit", onExit)
    if (request !== undefined) child.send(request)
    return Effect.sync(() => {
      child.off("message", onMessage)
      child.off("exit", onExit)
    })
  })

/** A runner process on `url`, ready; stopped (and killed by its pid if it lingers) with the scope. */
const runner = (url: string) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const port = yield* Effect.promise(unusedPort)
      const child = fork(script, [url, String(port)], {
        execArgv: ["--expose-gc", "--no-flush-bytecode", "--disable-warning=ExperimentalWarning"],
        stdio: ["ignore", "inherit", "inherit", "ipc"]
      })
      living.add(child)
      const first = yield* ask(child)
      if (first._tag !== "ready") return yield* Effect.die(new Error(`runner ${child.pid} said ${first._tag}`))
      return child
    }),
    (child) =>
      Effect.gen(function* () {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = Effect.callback<void>((resume) => {
            child.once("exit", () => resume(Effect.void))
          })
          child.send({ _tag: "stop" } satisfies Request)
          yield* Effect.timeoutOrElse(exited, {
            duration: "10 seconds",
            orElse: () => Effect.sync(() => child.pid !== undefined && process.kill(child.pid, "SIGKILL"))
          })
        }
        living.delete(child)
      })
  )

const sqlOn = (url: string) => PgClient.layer({ url: Redacted.make(url) })

/** The server's version (`server_version`). */
export const serverVersion = (url: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ readonly server_version: string }>`SHOW server_version`
    return row?.server_version ?? "?"
  }).pipe(Effect.provide(sqlOn(url)))

/** A fresh database on the server at `serverUrl`; gives its URL. */
const freshDatabase = (serverUrl: string, name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`DROP DATABASE IF EXISTS ${name}`)
    yield* sql.unsafe(`CREATE DATABASE ${name}`)
    const url = new URL(serverUrl)
    url.pathname = `/${name}`
    return url.toString()
  }).pipe(Effect.provide(sqlOn(serverUrl)))

/** Measures `n` runs started from this process on `runners` runner processes. */
export const cluster = (serverUrl: string, runners: number, n: number, options: Options) =>
  Effect.gen(function* () {
    const url = yield* freshDatabase(serverUrl, `durable_scale_${runners}_${n}`)
    const children: Array<ChildProcess> = []
    // One at a time: the first migrates the tables, the others find them made.
    for (let i = 0; i < runners; i++) children.push(yield* runner(url))
    const client = yield* Layer.build(
      Layer.merge(
        DurableRun.layerClient.pipe(Layer.provideMerge(DurableRun.layerCluster({ sql: sqlOn(url), clientOnly: true }))),
        sqlOn(url)
      )
    )
    const sql = Context.get(client, SqlClient.SqlClient)
    // Every shard locked, spread over every runner (each holds its locks on one session).
    yield* waitUntil(
      `${SHARDS} shards on ${runners} runners`,
      sql<{ readonly shards: number; readonly sessions: number }>`SELECT count(*)::int AS shards,
        count(DISTINCT pid)::int AS sessions FROM pg_locks WHERE locktype = 'advisory' AND granted
        AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      ([row]) => row?.shards === SHARDS && row.sessions === runners,
      120_000
    )
    const bytesOf = (prefix: string) =>
      Effect.map(
        sql<{ readonly bytes: string }>`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text AS bytes
          FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE ${`${prefix}%`}`,
        ([row]) => Number(row?.bytes ?? 0)
      )
    const target: Target = {
      runs: Context.get(client, DurableRun.DurableRuns),
      pending: Effect.map(
        sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM agent_approvals WHERE decision IS NULL`,
        ([row]) => row?.n ?? 0
      ),
      heap: Effect.map(
        Effect.forEach(children, (child) => ask(child, { _tag: "heap" })),
        (replies) =>
          replies.reduce(
            (sum, reply) =>
              reply._tag === "heap"
                ? {
                    bytes: sum.bytes + reply.bytes,
                    resident: sum.resident + reply.resident,
                    cpuMicros: sum.cpuMicros + reply.cpuMicros
                  }
                : sum,
            { bytes: 0, resident: 0, cpuMicros: 0 }
          )
      ),
      storage: Effect.all({ journal: bytesOf("agent_"), cluster: bytesOf("cluster_") }),
      writes: Effect.map(
        sql<{ readonly xid: string; readonly commits: string; readonly engine: string }>`SELECT
          pg_snapshot_xmax(pg_current_snapshot())::text AS xid,
          (SELECT count(*) FROM agent_commits)::text AS commits,
          (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables
            WHERE relname IN ('cluster_messages', 'cluster_replies'))::text AS engine`,
        ([row]) => ({
          journalCommits: Number(row?.commits ?? 0),
          engineRows: Number(row?.engine ?? 0),
          transactions: Number(row?.xid ?? 0)
        })
      )
    }
    return (yield* measure(target, n, options)) satisfies Figures
  }).pipe(Effect.scoped)
