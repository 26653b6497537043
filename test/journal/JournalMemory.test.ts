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
      const rowsOf = (runId: string) => tables.events.get(runId) ?? []
      return {
        journal: Make.make(store),
        raw: {
          setBody: (runId, seq, body) =>
            Effect.sync(() => {
              tables.events.set(
                runId,
                rowsOf(runId).map((row) => (row.seq === seq ? { ...row, body } : row))
              )
            }),
          deleteEvent: (runId, seq) =>
            Effect.sync(() => {
              tables.events.set(
                runId,
                rowsOf(runId).filter((row) => row.seq !== seq)
              )
            }),
          setVersion: (runId, version) =>
            Effect.sync(() => {
              const run = tables.runs.get(runId)
              if (run !== undefined) tables.runs.set(runId, { ...run, version })
            }),
          insertEvent: () => Effect.die(new Error("the memory backend has no raw rows to race")),
          tableNames: Effect.succeed([])
        }
      }
    })
})
