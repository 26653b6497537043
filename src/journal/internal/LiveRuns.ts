/**
 * The runs one process drives on a journal, each held by one holder at a time. Private to
 * the journal; `Journal.Service.live` is its face.
 */
import type { LiveRuns } from "./Models.ts"

/** An empty registry, one per journal a layer builds. */
export const make = (): LiveRuns => {
  const held = new Set<string>()
  return {
    hold: (runId) => {
      if (held.has(runId)) return undefined
      held.add(runId)
      let released = false
      return () => {
        if (released) return
        released = true
        held.delete(runId)
      }
    }
  }
}
