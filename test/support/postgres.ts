/**
 * A throwaway PostgreSQL server for the journal's tests and benchmark: `initdb` into a
 * temporary folder, `pg_ctl start` on 127.0.0.1 and a free port (trust auth, fsync off), and
 * `stop` removes it all. As root, the server runs as the `postgres` user (root cannot run it).
 *
 * `PG_URL` in the environment wins: a server someone started is used as it is. Without one and
 * without PostgreSQL's binaries, `postgres()` says why, and the tests fail, unless `SKIP_PG=1`
 * opts out.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"

export interface Server {
  readonly url: string
  readonly stop: () => void
}

export type Found =
  | { readonly _tag: "Server"; readonly server: Server }
  | { readonly _tag: "Missing"; readonly why: string }

/**
 * Whether the PostgreSQL tests must run: always, unless `SKIP_PG=1` opts out on a machine
 * without PostgreSQL (they then register nothing and say why).
 */
export const required = process.env.SKIP_PG !== "1"

const binDir = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!fs.existsSync(root)) return undefined
  const versions = fs
    .readdirSync(root)
    .filter((version) => fs.existsSync(path.join(root, version, "bin", "pg_ctl")))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : path.join(root, versions[0], "bin")
}

/** A port on 127.0.0.1 that nothing listens on (now). */
export const unusedPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()))
    })
  })

const asRoot = typeof process.getuid === "function" && process.getuid() === 0

/** Runs a PostgreSQL binary (as `postgres` when we are root), bounded; throws with its output when it fails. */
const pg = (bin: string, args: ReadonlyArray<string>): void => {
  const [command, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, [...args]]
  const result = spawnSync(command, argv, { encoding: "utf8", timeout: 60_000 })
  if (result.status !== 0) {
    throw new Error(
      `${path.basename(bin)} failed (${result.status ?? result.signal}): ${result.stderr}${result.stdout}`
    )
  }
}

/** A server to test on: `PG_URL`'s, or a throwaway one, or why there is none. */
export const postgres = async (): Promise<Found> => {
  const given = process.env.PG_URL
  if (given !== undefined && given !== "") return { _tag: "Server", server: { url: given, stop: () => {} } }
  const bin = binDir()
  if (bin === undefined) {
    return { _tag: "Missing", why: "no PG_URL and no PostgreSQL binaries in /usr/lib/postgresql/*/bin" }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "journal-pg-"))
  const data = path.join(dir, "data")
  if (asRoot) spawnSync("chown", ["postgres", dir])
  const port = await unusedPort()
  const ctl = path.join(bin, "pg_ctl")
  try {
    pg(path.join(bin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
    const settings = `-k ${dir} -p ${port} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`
    pg(ctl, ["-D", data, "-l", path.join(dir, "log"), "-w", "-t", "30", "-o", settings, "start"])
  } catch (error) {
    fs.rmSync(dir, { recursive: true, force: true })
    return { _tag: "Missing", why: error instanceof Error ? error.message : String(error) }
  }
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    try {
      pg(ctl, ["-D", data, "-m", "immediate", "-w", "stop"])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  process.once("exit", stop)
  // A worker whose tests were all filtered out (`-t`) runs no `afterAll`, and is ended by a
  // signal, which skips "exit": the server is stopped then too, and the signal let through.
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.once(signal, () => {
      stop()
      process.kill(process.pid, signal)
    })
  }
  return { _tag: "Server", server: { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop } }
}

/** Runs one statement on the server's default database. */
const execute = (url: string, statement: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
  )

/**
 * Databases of their own on a server (the cluster's tables have fixed names): `fresh` makes
 * one and gives its URL, `dropAll` drops those made (a server given by `PG_URL` keeps none).
 */
export const Databases = {
  on: (url: string) => {
    const made: Array<string> = []
    return {
      fresh: async (): Promise<string> => {
        const name = `test_${process.pid}_${Date.now()}_${made.length}`
        await execute(url, `CREATE DATABASE ${name}`)
        made.push(name)
        const database = new URL(url)
        database.pathname = `/${name}`
        return database.toString()
      },
      dropAll: async (): Promise<void> => {
        for (const name of made.splice(0)) await execute(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      }
    }
  }
}
