/**
 * A journal that fails on purpose (R9, R10), around a real one: the process "dies" at a
 * chosen commit (only what was committed before survives; the run stops there, as a
 * `kill -9` would stop it: nothing is written after, and its caller is interrupted, with
 * no result), a commit fenced off as if another process owned the run, commits that
 * fail as an unreachable store, or commits written whose reply is lost. Resume from the journal underneath (`Run.resume`,
 * `Run.recover`) in the same test, on `TestClock`, to see what a restart makes of it.
 *
 * ```ts
 * const store = yield* Journal.Journal
 * const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when: "after" } })
 * const died = yield* Effect.exit(
 *   Run.run({ ...options, runId: "r1" }).pipe(Effect.provideService(Journal.Journal, faulty.journal))
 * ) // interrupted: the process died
 * const result = yield* Run.resume("r1", options)
 * ```
 *
 * @since 0.3.0
 */
import { type Clock, Effect } from "effect"
import * as UserCode from "../failure/UserCode.ts"
import * as Journal from "../journal/Journal.ts"
import * as JournalError from "../journal/JournalError.ts"

/**
 * Which commits fail, counted from 1 over every commit the faulty journal is asked to
 * make (a commit is one `append`; a run's first also creates its row). A new run's first
 * commit is its start, before its model is first asked; the second holds the first
 * response. A resumed run's first commit holds its `run.resumed`.
 *
 * @category models
 * @since 0.3.0
 */
export interface Faults {
  /**
   * The process dies at this commit (an integer from 1): `before` it is written (the
   * default: it is lost with everything after), or right `after` it is written. The run
   * stops there with no result (its caller is interrupted); every later call of the
   * journal fails. A commit the run never reaches never crashes it: check `crashed()`.
   */
  readonly crashAt?: { readonly commit: number; readonly when?: "before" | "after" | undefined } | undefined
  /** These commits are fenced off: another writer moved the run on (`Conflict`); nothing is written. */
  readonly conflictOn?: ((commit: number) => boolean) | undefined
  /** These commits fail as a store that cannot be reached (`Unavailable`, retryable); nothing is written. */
  readonly unavailableOn?: ((commit: number) => boolean) | undefined
  /**
   * These commits are written, then their reply is lost (a connection cut after the commit):
   * the store answers `Unavailable`, and the run's retry finds its own commit there.
   */
  readonly lostReplyOn?: ((commit: number) => boolean) | undefined
}

/**
 * @category models
 * @since 0.3.0
 */
export interface FaultyJournal {
  /** The journal to give the run. */
  readonly journal: Journal.Service
  /** How many commits were asked for so far. */
  readonly commits: () => number
  /** Whether the "process" has died. */
  readonly crashed: () => boolean
  /**
   * When the "process" died, by the `Clock` of the last run that used the journal: a
   * restarted process starts then (on `TestClock`, set the clock back to it once the dead
   * run's driver has moved it on).
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

const faultNames: ReadonlyArray<string> = ["crashAt", "conflictOn", "unavailableOn", "lostReplyOn"]

/** A `RangeError` naming what in `faults` can never be injected as written. */
const check = (faults: Faults): void => {
  const fail = (what: string) => {
    throw new RangeError(`FaultyJournal.make: ${what}`)
  }
  if (typeof faults !== "object" || faults === null) fail("faults must be an object")
  // A misspelt fault would inject nothing, and a crash-safety test pass without a crash.
  const unknown = Object.keys(faults).find((key) => !faultNames.includes(key))
  if (unknown !== undefined)
    fail(`there is no fault named ${JSON.stringify(unknown)} (the faults: ${faultNames.join(", ")})`)
  const crash = faults.crashAt
  if (crash !== undefined && (typeof crash !== "object" || crash === null)) {
    fail(`crashAt must be { commit, when? }, got ${String(crash)}`)
  }
  if (crash !== undefined) {
    if (!Number.isSafeInteger(crash.commit) || crash.commit < 1) {
      fail(`crashAt.commit must be an integer from 1 (the first commit), got ${String(crash.commit)}`)
    }
    if (crash.when !== undefined && crash.when !== "before" && crash.when !== "after") {
      fail(`crashAt.when must be "before" or "after", got ${String(crash.when)}`)
    }
  }
  for (const name of ["conflictOn", "unavailableOn", "lostReplyOn"] as const) {
    if (faults[name] !== undefined && typeof faults[name] !== "function")
      fail(`${name} must be a function of the commit number`)
  }
}

/**
 * What the fault predicates say of commit `n`, or why one cannot be heeded: a predicate that
 * answers something other than a boolean (the Promise of an `async` one) would never inject
 * its fault, and the test would pass without it.
 */
const askFaults = (
  faults: Faults,
  n: number
): { readonly conflict: boolean; readonly unavailable: boolean; readonly lostReply: boolean } | string => {
  const answers: Record<string, boolean> = {}
  for (const name of ["conflictOn", "unavailableOn", "lostReplyOn"] as const) {
    const answer = UserCode.letGo(faults[name]?.(n) ?? false)
    if (typeof answer !== "boolean") {
      return `FaultyJournal: ${name}(${n}) answered ${UserCode.kindOf(answer)}, not a boolean: the fault would never be injected`
    }
    answers[name] = answer
  }
  return {
    conflict: answers.conflictOn === true,
    unavailable: answers.unavailableOn === true,
    lostReply: answers.lostReplyOn === true
  }
}

/**
 * Wraps `journal` with the given faults. Faults that can never be injected as written
 * (`crashAt.commit` 0 or 1.5, a `when` that is neither `before` nor `after`, a fault of a
 * name there is none of, such as `crashat`) are a `RangeError`.
 *
 * @category constructors
 * @since 0.3.0
 */
export const make = (journal: Journal.Service, faults: Faults): FaultyJournal => {
  check(faults)
  let commits = 0
  let crashed = false
  let crashedAt: number | undefined
  // The clock of the last run that used the journal, for a `crash()` that comes from outside it.
  let lastClock: Clock.Clock | undefined
  const die = (clock: Clock.Clock | undefined) => {
    crashed = true
    crashedAt = clock?.currentTimeMillisUnsafe()
  }
  const guard = <A>(operation: string, self: Effect.Effect<A, JournalError.JournalError>) =>
    Effect.clockWith((clock) => {
      lastClock = clock
      return crashed ? dead(operation) : self
    })
  const append: Journal.Service["append"] = (runId, batch) =>
    Effect.clockWith((clock) => {
      lastClock = clock
      if (crashed) return dead("append")
      commits++
      const n = commits
      const crash = faults.crashAt
      if (crash !== undefined && crash.commit === n) {
        die(clock)
        // The store interrupts the commit: the run takes it as its process's death.
        if ((crash.when ?? "before") === "before") return Effect.interrupt
        return Effect.andThen(journal.append(runId, batch), Effect.interrupt)
      }
      const asked = askFaults(faults, n)
      if (typeof asked === "string") return Effect.die(new UserCode.UserCodeDefect(asked))
      if (asked.conflict) {
        return Effect.fail(
          JournalError.make(
            new JournalError.Conflict({ runId, expectedSeq: batch.expectedSeq, detail: "fenced off by the test" })
          )
        )
      }
      const unreachable = Effect.fail(
        JournalError.make(new JournalError.Unavailable({ operation: "append", detail: "unreachable (by the test)" }))
      )
      if (asked.unavailable) return unreachable
      if (asked.lostReply) return Effect.andThen(journal.append(runId, batch), unreachable)
      return journal.append(runId, batch)
    })
  return {
    journal: {
      // A process of its own: the runs it drove are not the wrapped journal's (a crash leaves them to be resumed).
      live: Journal.makeLiveRuns(),
      create: (run) => guard("create", journal.create(run)),
      append,
      read: (runId, options) => guard("read", journal.read(runId, options)),
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
      if (!crashed) die(lastClock)
    }
  }
}
