import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Effect, Layer } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { afterAll } from "vitest"
import * as SqliteClient from "../../src/journal/internal/SqliteClient.ts"
import * as Journal from "../../src/journal/Journal.ts"
import { contract } from "./contract.ts"
import { sqlRaw } from "./sqlRaw.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "journal-sqlite-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
let files = 0

contract({
  name: "SQLite (node:sqlite, a temporary file)",
  hasTables: true,
  make: (prefix) =>
    Effect.gen(function* () {
      const filename = path.join(dir, `journal-${files++}.db`)
      const context = yield* Layer.build(
        Layer.merge(
          Journal.layerSqlite({ filename, tablePrefix: prefix }),
          Layer.effect(SqlClient.SqlClient, Effect.orDie(SqliteClient.make({ filename }))).pipe(
            Layer.provide(Reactivity.layer)
          )
        )
      )
      const journal = Context.get(context, Journal.Journal)
      const sql = Context.get(context, SqlClient.SqlClient)
      return { journal, raw: sqlRaw(sql, prefix) }
    })
})
