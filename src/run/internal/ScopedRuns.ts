/**
 * The runs `Run.start` set going in one scope (R5.1): closing the scope cancels every run
 * of it still going at once, and then waits for each to end; a run that ends leaves its
 * scope then, so a scope that lives long (a server's) holds only the runs still going.
 * Review 194: each run's cancel stayed in its scope after the run ended (10,000 ended runs
 * held 300 MB until the scope closed), and the scope cancelled its runs one at a time, each
 * after the one before had ended (the twentieth was told 3.8 s late). Private to the runtime.
 */
import { Effect, Exit, type Fiber, Scope } from "effect"
import * as Launch from "./Launch.ts"
import type * as RunContext from "./RunContext.ts"

interface Started {
  readonly ctx: RunContext.RunContext
  readonly fiber: Fiber.Fiber<void>
  readonly done: Launch.Done
}

/** The runs still going, by the scope they were started in. */
const going = new WeakMap<Scope.Scope, Set<Started>>()

/**
 * Puts a run in `scope`, in a scope of its own forked from it: the run's cancel is where its
 * start put it among the scope's finalizers, and it leaves with that scope when the run ends.
 */
export const add = (scope: Scope.Scope, started: Started): Effect.Effect<void> =>
  Effect.flatMap(Scope.fork(scope), (own) => {
    const runs = going.get(scope) ?? new Set<Started>()
    going.set(scope, runs)
    runs.add(started)
    started.fiber.addObserver(() => {
      runs.delete(started)
      if (runs.size === 0) going.delete(scope)
      // Closed to leave `scope`, its finalizer not run: the run it would cancel has ended.
      Scope.closeUnsafe(own, Exit.void)
    })
    return Scope.addFinalizerExit(own, () =>
      Effect.suspend(() => {
        if (!runs.has(started)) return Effect.void
        // The first of the scope's runs to be cancelled tells every other one still going,
        // so that their stop graces run side by side; each then waits for its own.
        for (const run of runs) Launch.signalCancel(run.ctx, run.fiber)
        return Effect.ignore(Launch.cancel(started.ctx, started.fiber, started.done))
      })
    )
  })
