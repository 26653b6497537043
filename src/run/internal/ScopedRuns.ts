/**
 * The runs `Run.start` set going in scopes (R5.1): closing a scope cancels every run still
 * going in it or in a scope forked from it, all at once, and then waits for each; a run that
 * ends leaves its scopes then, so a scope that lives long (a server's) holds only the runs
 * still going. Review 194: each run's cancel stayed in its scope after the run ended (10,000
 * ended runs held 300 MB until the scope closed), and the scope cancelled its runs one at a
 * time, each after the one before had ended (the twentieth was told 3.8 s late); review 195:
 * the runs of nested scopes were told one scope at a time, their stop graces added up.
 * Private to the runtime.
 */
import { Effect, Exit, type Fiber, Scope } from "effect"
import * as Launch from "./Launch.ts"
import type * as RunContext from "./RunContext.ts"

interface Started {
  readonly ctx: RunContext.RunContext
  readonly fiber: Fiber.Fiber<void>
  readonly done: Launch.Done
}

/** The runs still going, by each scope they were started in or below. */
const going = new WeakMap<Scope.Scope, Set<Started>>()

/** A scope and the scopes it was forked from, innermost first. */
const lineOf = (scope: Scope.Scope): ReadonlyArray<Scope.Scope> => {
  const line: Array<Scope.Scope> = []
  for (let at: Scope.Scope | undefined = scope; at !== undefined; at = at.parent) line.push(at)
  return line
}

/**
 * Every run going in the outermost scope of `line` that is closing (or in its scopes): the
 * runs its close is to cancel.
 */
const closingWith = (line: ReadonlyArray<Scope.Scope>): ReadonlySet<Started> => {
  let runs: ReadonlySet<Started> = new Set()
  for (const scope of line) if (scope.state._tag === "Closed") runs = going.get(scope) ?? runs
  return runs
}

/**
 * Puts a run in `scope`, in a scope of its own forked from it: the run's cancel is where its
 * start put it among the scope's finalizers, and it leaves with that scope when the run ends.
 */
export const add = (scope: Scope.Scope, started: Started): Effect.Effect<void> =>
  Effect.flatMap(Scope.fork(scope), (own) => {
    const line = lineOf(scope)
    for (const at of line) {
      const runs = going.get(at) ?? new Set<Started>()
      going.set(at, runs)
      runs.add(started)
    }
    started.fiber.addObserver(() => {
      for (const at of line) {
        const runs = going.get(at)
        runs?.delete(started)
        if (runs?.size === 0) going.delete(at)
      }
      // Closed to leave `scope`, its finalizer not run: the run it would cancel has ended.
      Scope.closeUnsafe(own, Exit.void)
    })
    return Scope.addFinalizerExit(own, () =>
      Effect.suspend(() => {
        if (!going.get(scope)?.has(started)) return Effect.void
        // The first run a close cancels tells every other one that close is to cancel, in
        // every scope below the one closing, so that their stop graces run side by side;
        // each then waits for its own.
        for (const run of closingWith(line)) Launch.signalCancel(run.ctx, run.fiber)
        return Effect.ignore(Launch.cancel(started.ctx, started.fiber, started.done))
      })
    )
  })
