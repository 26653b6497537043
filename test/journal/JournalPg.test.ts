import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, assert, it } from "vitest"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import { JournalPg } from "../../src/journal/pg/index.ts"
import { postgres, required, unusedPort } from "../support/postgres.ts"
import { contract, started, succeeded } from "./contract.ts"
import { sqlRaw } from "./sqlRaw.ts"

const found = await postgres()

if (found._tag === "Server") {
  const { url, stop } = found.server
  afterAll(stop)
  contract({
    name: "PostgreSQL (@effect/sql-pg, a throwaway server)",
    hasTables: true,
    make: (prefix) =>
      Effect.gen(function* () {
        const context = yield* Layer.build(
          Layer.merge(
            JournalPg.layer({ url, tablePrefix: prefix, maxConnections: 4 }),
            Layer.orDie(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
          )
        )
        return {
          journal: Context.get(context, Journal.Journal),
          raw: sqlRaw(Context.get(context, SqlClient.SqlClient), prefix)
        }
      })
  })

  it("R9 a commit over the client's default 16 MiB message reads back: what PostgreSQL takes, the journal gives back", async () => {
    const events = [started("big"), { ...succeeded("big", 1), output: "x".repeat(17_000_000) }]
    const stored = await Effect.runPromise(
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        yield* journal.create({ runId: "big", header: {}, state: "created" })
        yield* journal.append("big", { expectedSeq: 0, events, state: "planning" })
        return yield* journal.read("big")
      }).pipe(Effect.provide(JournalPg.layer({ url, tablePrefix: `big_${process.pid}_` })))
    )
    assert.isTrue(Option.isSome(stored))
    if (Option.isSome(stored)) assert.deepStrictEqual(stored.value.events, events)
  }, 120_000)

  it("R9 R3.1 a row larger than a client of your own reads back is StoreFailed naming maxMessageSize, not retried forever", async () => {
    const prefix = `small_${process.pid}_`
    const events = [{ ...started("wide"), goal: "g".repeat(40_000) }]
    const error = await Effect.runPromise(
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        yield* journal.create({ runId: "wide", header: {}, state: "created" })
        yield* journal.append("wide", { expectedSeq: 0, events, state: "planning" })
        return yield* Effect.flip(journal.read("wide"))
      }).pipe(
        Effect.provide(
          Journal.layerSql({ tablePrefix: prefix }).pipe(
            Layer.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url), maxMessageSize: 16_384 })))
          )
        )
      )
    )
    assert.strictEqual(error.reason._tag, "StoreFailed")
    assert.isFalse(error.isRetryable)
    assert.include(error.message, "JournalPg.maxMessageSize")
  }, 120_000)

  it("R3.1 a server out of sessions (53300, a role's connection limit) is Unavailable (retryable), not StoreFailed (review 135)", async () => {
    const role = `limited_${process.pid}`
    const admin = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
    const asAdmin = (statement: string) =>
      Effect.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(Effect.provide(admin)))
    await asAdmin(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`)
    const limited = new URL(url)
    limited.username = role
    try {
      const error = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            // Another process holds the one session the role may have.
            const other = yield* Layer.build(
              Layer.orDie(PgClient.layer({ url: Redacted.make(limited.toString()), maxConnections: 1 }))
            )
            yield* Context.get(other, SqlClient.SqlClient).unsafe("SELECT 1")
            return yield* Effect.flip(Effect.provide(Journal.Journal, JournalPg.layer({ url: limited.toString() })))
          })
        )
      )
      assert.strictEqual(error.reason._tag, "Unavailable")
      assert.isTrue(error.isRetryable)
      assert.include(error.message, "53300")
    } finally {
      await asAdmin(`DROP ROLE IF EXISTS ${role}`)
    }
  }, 60_000)

  it("R3.1 a PostgreSQL server that is not there fails the layer with Unavailable (retryable), not a defect", async () => {
    const closed = new URL(url)
    closed.port = String(await unusedPort())
    const error = await Effect.runPromise(
      Effect.flip(Effect.provide(Journal.Journal, JournalPg.layer({ url: closed.toString() })))
    )
    assert.instanceOf(error, JournalError.JournalError)
    assert.strictEqual(error.reason._tag, "Unavailable")
    assert.isTrue(error.isRetryable)
  })
  it("R3.1 a database that refuses sessions for a while (55000 at connect, ALLOW_CONNECTIONS false) is Unavailable, then works (review 157)", async () => {
    const database = `closed_${process.pid}`
    const admin = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
    const asAdmin = (statement: string) =>
      Effect.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(Effect.provide(admin)))
    await asAdmin(`CREATE DATABASE ${database}`)
    const closed = new URL(url)
    closed.pathname = `/${database}`
    try {
      await asAdmin(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`)
      const error = await Effect.runPromise(
        Effect.flip(Effect.provide(Journal.Journal, JournalPg.layer({ url: closed.toString() })))
      )
      // Before: StoreFailed, so a client's result() gave up at once instead of waiting the outage out.
      assert.strictEqual(error.reason._tag, "Unavailable")
      assert.isTrue(error.isRetryable)
      await asAdmin(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`)
      const read = await Effect.runPromise(
        Effect.flatMap(Journal.Journal, (journal) => journal.read("none")).pipe(
          Effect.provide(JournalPg.layer({ url: closed.toString() }))
        )
      )
      assert.isTrue(Option.isNone(read))
    } finally {
      await asAdmin(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`)
      await asAdmin(`DROP DATABASE IF EXISTS ${database}`)
    }
  }, 60_000)
} else if (required) {
  it("R9 PostgreSQL is there for the journal's tests", () => {
    throw new Error(`no PostgreSQL: ${found.why} (set PG_URL, install postgresql, or opt out with SKIP_PG=1)`)
  })
} else {
  console.warn(`SKIP_PG=1: the PostgreSQL journal tests are not run (${found.why})`)
}

it("R12 a pool size that is not a whole number of at least 1 is a typed StoreFailed naming the option, never a hang (review 157)", async () => {
  for (const maxConnections of [0, -1, Number.NaN, 1.5, Number.POSITIVE_INFINITY]) {
    const error = await Effect.runPromise(
      Effect.flip(
        Effect.provide(Journal.Journal, JournalPg.layer({ url: "postgres://nobody@127.0.0.1:1/none", maxConnections }))
      ).pipe(Effect.timeout("5 seconds"))
    )
    assert.strictEqual(error.reason._tag, "StoreFailed", String(maxConnections))
    assert.include(error.message, "maxConnections")
  }
})
