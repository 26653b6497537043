import { Effect } from "effect"
import * as Make from "../../src/journal/internal/Make.ts"
import * as MemoryStore from "../../src/journal/internal/MemoryStore.ts"
import { contract } from "./contract.ts"

contract({
  name: "memory",
  hasTables: false,
  make: () =>
    Effect.sync(() => {
      const { store, tables } = MemoryStore.make()
      const rowsOf = (runId: string) => tables.commits.get(runId) ?? []
      return {
        journal: Make.make(store),
        raw: {
          setBody: (runId, seq, body) =>
            Effect.sync(() => {
              tables.commits.set(
                runId,
                rowsOf(runId).map((row) => (row.seq === seq ? { ...row, body } : row))
              )
            }),
          setCount: (runId, seq, count) =>
            Effect.sync(() => {
              tables.commits.set(
                runId,
                rowsOf(runId).map((row) => (row.seq === seq ? { ...row, count } : row))
              )
            }),
          deleteCommit: (runId, seq) =>
            Effect.sync(() => {
              tables.commits.set(
                runId,
                rowsOf(runId).filter((row) => row.seq !== seq)
              )
            }),
          setVersion: (runId, version) =>
            Effect.sync(() => {
              const run = tables.runs.get(runId)
              if (run !== undefined) tables.runs.set(runId, { ...run, version })
            }),
          setApprovalArguments: (runId, callId, text) =>
            Effect.sync(() => {
              const key = JSON.stringify([runId, callId])
              const row = tables.approvals.get(key)
              if (row !== undefined) tables.approvals.set(key, { ...row, arguments: text })
            }),
          insertCommit: () => Effect.die(new Error("the memory backend has no raw rows to race")),
          toFirstLayout: Effect.die(new Error("the memory backend has one layout")),
          migrate: Effect.void,
          tableNames: Effect.succeed([])
        }
      }
    })
})
