/**
 * What a journal backend stores: rows of encoded JSON text, the same for memory and SQL, so
 * that both decode alike. `Make` holds the semantics (encoding, checks, decoding) once.
 */
import type { Effect, Option } from "effect"
import type { JournalError } from "../JournalError.ts"

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

export interface EventRow {
  readonly seq: number
  readonly tag: string
  readonly at: number
  readonly body: string
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

export interface Commit {
  readonly runId: string
  readonly expectedSeq: number
  readonly events: ReadonlyArray<EventRow>
  readonly state: string
  readonly result: string | undefined
  readonly at: number
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
  /** All or nothing; `Conflict` when `next_seq` is not `expectedSeq`, `InvalidAppend` for an unknown run. */
  readonly commit: (commit: Commit) => Effect.Effect<void, JournalError>
  /** The run row and its event rows in `seq` order. */
  readonly readRun: (
    runId: string
  ) => Effect.Effect<Option.Option<{ readonly run: RunRow; readonly events: ReadonlyArray<EventRow> }>, JournalError>
  readonly unfinished: Effect.Effect<ReadonlyArray<string>, JournalError>
  /** `Conflict` when the call is on the list already. */
  readonly insertApproval: (row: ApprovalRow) => Effect.Effect<void, JournalError>
  readonly pendingApprovals: (runId: string | undefined) => Effect.Effect<ReadonlyArray<ApprovalRow>, JournalError>
  /** `NotPending` when no undecided row matches. */
  readonly decide: (decide: Decide) => Effect.Effect<void, JournalError>
  /** Puts a withdrawn call back on the pending list with new times; whether there was one to reopen. */
  readonly reopenApproval: (row: ApprovalRow) => Effect.Effect<boolean, JournalError>
  readonly approval: (runId: string, callId: string) => Effect.Effect<Option.Option<ApprovalRow>, JournalError>
}
