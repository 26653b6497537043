/**
 * The runs one process drives on a journal, each held by one holder at a time, with how a
 * cancel reaches the run once its fiber says. Private to the journal; `Journal.Service.live`
 * is its face.
 */
import type { Effect } from "effect"
import type { LiveRuns } from "./Models.ts"

/** An empty registry, one per journal a layer builds. */
export const make = (): LiveRuns => {
  const held = new Map<string, { cancel: Effect.Effect<void> | undefined }>()
  return {
    hold: (runId) => {
      if (held.has(runId)) return undefined
      const entry: { cancel: Effect.Effect<void> | undefined } = { cancel: undefined }
      held.set(runId, entry)
      let released = false
      return () => {
        if (released) return
        released = true
        if (held.get(runId) === entry) held.delete(runId)
      }
    },
    cancelWith: (runId, cancel) => {
      const entry = held.get(runId)
      if (entry !== undefined) entry.cancel = cancel
    },
    cancelOf: (runId) => held.get(runId)?.cancel
  }
}
