/** Heap measurement helpers shared by the benchmarks (run with node --expose-gc). */
import { Effect } from "effect"

export const gc = (): void => {
  const collect = globalThis.gc
  if (collect === undefined) return
  for (let i = 0; i < 6; i++) collect()
}

/** Heap in use after a full collection (several passes, to clear weak and finalizer chains). */
export const settledHeap = Effect.gen(function* () {
  for (let i = 0; i < 3; i++) {
    gc()
    // Let timers and microtasks that hold the last references run out.
    yield* Effect.sleep("5 millis")
  }
  gc()
  return process.memoryUsage().heapUsed
})
