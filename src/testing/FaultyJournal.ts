/**
 * A journal that fails on purpose (R9, R10), around a real one: the process "dies" at a
 * chosen commit (only what was committed before survives; the run's fiber is
 * interrupted there, as a `kill -9` would stop it, and nothing is written after), a
 * commit fenced off as if another process owned the run, or commits that fail as an
 * unreachable store. Resume from the journal underneath (`Run.resume`, `Run.recover`)
 * in the same test, on `TestClock`, to see what a restart makes of it.
 *
 * ```ts
 * const store = yield* Journal.Journal
 * const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when: "after" } })
 * yield* Run.run({ ...options, runId: "r1" }).pipe(Effect.provideService(Journal.Journal, faulty.journal))
 * const result = yield* Run.resume("r1", options)
 * ```
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import type * as Journal from "../journal/Journal.ts"
import * as JournalError from "../journal/JournalError.ts"

/**
 * Which commits fail, counted from 1 over every commit the faulty journal is asked to
 * make (a commit is one `append`; a run's first also creates its row). A new run's first
 * commit is its start, before its model is first asked; the second holds the first
 * response. A resumed run's first commit holds its `run.resumed`.
 *
 * @category models
 * @since 0.4.0
 */
export interface Faults {
  /**
   * The process dies at this commit: `before` it is written (the default: it is lost with
   * everything after), or right `after` it is written. The fiber that commits is
   * interrupted; every later call of the journal fails.
   */
  readonly crashAt?: { readonly commit: number; readonly when?: "before" | "after" | undefined } | undefined
  /** These commits are fenced off: another writer moved the run on (`Conflict`); nothing is written. */
  readonly conflictOn?: ((commit: number) => boolean) | undefined
  /** These commits fail as a store that cannot be reached (`Unavailable`, retryable); nothing is written. */
  readonly unavailableOn?: ((commit: number) => boolean) | undefined
}

/**
 * @category models
 * @since 0.4.0
 */
export interface FaultyJournal {
  /** The journal to give the run. */
  readonly journal: Journal.Service
  /** How many commits were asked for so far. */
  readonly commits: () => number
  /** Whether the "process" has died. */
  readonly crashed: () => boolean
  /**
   * When the "process" died at a commit (`crashAt`), by the run's `Clock`: a restarted
   * process starts then (on `TestClock`, set the clock back to it once the dead run's
   * driver has moved it on).
   */
  readonly crashedAt: () => number | undefined
  /**
   * The "process" dies now, wherever the run is (waiting for a person, say): every later
   * call of the journal fails. Interrupt the run's fiber after it, as the death would.
   */
  readonly crash: () => void
}

const dead = (operation: string) =>
  Effect.fail(
    JournalError.make(new JournalError.StoreFailed({ operation, detail: "the process writing this journal has died" }))
  )

/**
 * Wraps `journal` with the given faults.
 *
 * @category constructors
 * @since 0.4.0
 */
export const make = (journal: Journal.Service, faults: Faults): FaultyJournal => {
  let commits = 0
  let crashed = false
  let crashedAt: number | undefined
  const guard = <A>(operation: string, self: Effect.Effect<A, JournalError.JournalError>) =>
    Effect.suspend(() => (crashed ? dead(operation) : self))
  const append: Journal.Service["append"] = (runId, batch) =>
    Effect.clockWith((clock) => {
      if (crashed) return dead("append")
      commits++
      const n = commits
      const crash = faults.crashAt
      if (crash !== undefined && crash.commit === n) {
        crashed = true
        crashedAt = clock.currentTimeMillisUnsafe()
        if ((crash.when ?? "before") === "before") return Effect.interrupt
        return Effect.andThen(journal.append(runId, batch), Effect.interrupt)
      }
      if (faults.conflictOn?.(n) === true) {
        return Effect.fail(
          JournalError.make(
            new JournalError.Conflict({ runId, expectedSeq: batch.expectedSeq, detail: "fenced off by the test" })
          )
        )
      }
      if (faults.unavailableOn?.(n) === true) {
        return Effect.fail(
          JournalError.make(new JournalError.Unavailable({ operation: "append", detail: "unreachable (by the test)" }))
        )
      }
      return journal.append(runId, batch)
    })
  return {
    journal: {
      create: (run) => guard("create", journal.create(run)),
      append,
      read: (runId) => guard("read", journal.read(runId)),
      unfinished: guard("unfinished", journal.unfinished),
      requestApproval: (request) => guard("requestApproval", journal.requestApproval(request)),
      pendingApprovals: (filter) => guard("pendingApprovals", journal.pendingApprovals(filter)),
      decide: (decision) => guard("decide", journal.decide(decision)),
      withdraw: (runId, callId, at) => guard("withdraw", journal.withdraw(runId, callId, at)),
      decision: (runId, callId) => guard("decision", journal.decision(runId, callId))
    },
    commits: () => commits,
    crashed: () => crashed,
    crashedAt: () => crashedAt,
    crash: () => {
      crashed = true
    }
  }
}
