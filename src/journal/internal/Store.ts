/**
 * What a journal backend stores: rows of encoded JSON text, the same for memory and SQL, so
 * that both decode alike. `Make` holds the semantics (encoding, checks, decoding) once.
 *
 * A run is one run row, written when it is created and when it ends, and one commit row
 * per `append` (all its events in one JSON array): a commit is then one row written in one
 * statement, fenced by its key and by where the run's last commit ended. The run's state,
 * its committed count and its last update are those of its last commit.
 */
import type { Effect, Option } from "effect"
import * as Errors from "../JournalError.ts"

type JournalError = Errors.JournalError

/** The run as created; `state`, `nextSeq` and `updatedAt` are as of its creation and, once it ended, its end. */
export interface RunRow {
  readonly runId: string
  readonly version: number
  readonly header: string
  readonly state: string
  readonly nextSeq: number
  readonly result: string | null
  readonly createdAt: number
  readonly updatedAt: number
}

/** One commit: `count` events from `seq` on, as one JSON array of encoded events. */
export interface CommitRow {
  readonly seq: number
  readonly count: number
  /** The run's state after this commit. */
  readonly state: string
  readonly at: number
  readonly body: string
  /** The run's result (JSON text) on its last commit, `null` on the others. */
  readonly result: string | null
}

export interface ApprovalRow {
  readonly runId: string
  readonly callId: string
  readonly tool: string
  readonly arguments: string
  readonly requestedAt: number
  readonly expiresAt: number
  /** The tool's side-effect class, as the run gave it (absent in rows that did not say). */
  readonly sideEffect: string | null
  /** `approve`, `reject`, `withdrawn` (the run stopped waiting), or `null` while pending. */
  readonly decision: string | null
  readonly reason: string | null
  readonly decidedBy: string | null
  readonly decidedAt: number | null
}

/** A commit to write: its row, for the run whose last commit ended at `row.seq`. */
export interface Commit {
  readonly runId: string
  readonly row: CommitRow
}

export interface Decide {
  readonly runId: string
  readonly callId: string
  readonly decision: string
  readonly reason: string | null
  readonly decidedBy: string | null
  readonly decidedAt: number
}

/** A backend. Each method fails only with a classified `JournalError`. */
export interface Store {
  /** `Conflict` when the run id exists. */
  readonly insertRun: (row: RunRow) => Effect.Effect<void, JournalError>
  /**
   * All or nothing (the commit row, and the run row and the run's pending approvals, which
   * it withdraws, when it carries the result);
   * `Conflict` when the run's last commit does not end at `row.seq`, `InvalidAppend` for
   * an unknown run.
   */
  readonly commit: (commit: Commit) => Effect.Effect<void, JournalError>
  /**
   * The run row and its commit rows in `seq` order: those from the one that holds `fromSeq`
   * on, or the last alone when the log ends before `fromSeq` (all of them from `0`).
   */
  readonly readRun: (
    runId: string,
    fromSeq: number
  ) => Effect.Effect<Option.Option<{ readonly run: RunRow; readonly commits: ReadonlyArray<CommitRow> }>, JournalError>
  readonly unfinished: Effect.Effect<ReadonlyArray<string>, JournalError>
  /** `Conflict` when the call is on the list already. */
  readonly insertApproval: (row: ApprovalRow) => Effect.Effect<void, JournalError>
  readonly pendingApprovals: (runId: string | undefined) => Effect.Effect<ReadonlyArray<ApprovalRow>, JournalError>
  /**
   * `NotPending` when no undecided row matches; for a person's decision, also when the row
   * has expired or its run has ended.
   */
  readonly decide: (decide: Decide) => Effect.Effect<void, JournalError>
  /**
   * Puts a withdrawn call back on the pending list with new times, or gives a pending call
   * another expiry, in one step (review 168: a withdrawal, then a request, refused a decision made between);
   * whether there was one to reopen.
   */
  readonly reopenApproval: (row: ApprovalRow) => Effect.Effect<boolean, JournalError>
  readonly approval: (runId: string, callId: string) => Effect.Effect<Option.Option<ApprovalRow>, JournalError>
}

/** Where the run stands when a commit wrote nothing, as the store read it after the write. */
export interface Standing {
  /** `undefined`: no such run. */
  readonly nextSeq: number | undefined
  /** Whether the run row holds a result (the run has ended: its log is closed). */
  readonly ended: boolean
}

/**
 * Why a commit of events wrote nothing: no such run, a run that has ended, or the run's
 * last commit does not end where this one starts (another writer moved it; when the store
 * reads it ending there now, that writer committed meanwhile). With no events to write,
 * a run that ends where expected is no failure (`undefined`).
 */
export const notWritten = (commit: Commit, standing: Standing): JournalError | undefined => {
  const { runId, row } = commit
  const actualSeq = standing.nextSeq
  if (actualSeq === undefined) return Errors.make(new Errors.InvalidAppend({ runId, detail: "no such run" }))
  if (!Number.isSafeInteger(actualSeq) || actualSeq < 0) {
    return Errors.make(new Errors.Corrupt({ runId, detail: `the run's last commit row ends at ${actualSeq}` }))
  }
  if (row.count === 0 && actualSeq === row.seq) return undefined
  // Ended where this writer expected to go on: another writer ended it (a conflict, which
  // fences this one off); ended where this writer expected it, this writer's own log.
  if (standing.ended && actualSeq === row.seq) {
    return Errors.make(new Errors.InvalidAppend({ runId, detail: "the run has ended: its log takes no more events" }))
  }
  return Errors.make(
    new Errors.Conflict({
      runId,
      expectedSeq: row.seq,
      actualSeq,
      detail:
        actualSeq === row.seq
          ? `another writer committed at seq ${row.seq} at the same time`
          : `expected the run's next seq to be ${row.seq}, found ${actualSeq}${standing.ended ? " (another writer ended the run)" : ""}`
    })
  )
}
