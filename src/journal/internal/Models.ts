/** The journal's public models and its service shape; `Journal` re-exports them. */
import { Context, type Effect, type Option, type Schema } from "effect"
import type * as Event from "../../events/Event.ts"
import type * as RunState from "../../events/RunState.ts"
import type { JournalError } from "../JournalError.ts"

/**
 * The journal format this code writes, and the only one it reads. Format 2: a call's
 * attempts are its `tool.started` events (format 1, written only by development builds
 * before 0.3.0, had a `tool.started` per call and a `tool.attempted` per attempt).
 */
export const FORMAT_VERSION = 2

/** A new run: its id, what the run layer keeps about its options (opaque JSON), its first state. */
export interface NewRun {
  readonly runId: string
  readonly header: Schema.Json
  readonly state: RunState.State
}

/**
 * One commit: the next events (their `seq` continue from `expectedSeq`), the state after
 * them, and the result once the run has finished (with the events that end it). An append
 * without events writes nothing; it only checks the fence.
 */
export interface Append {
  readonly expectedSeq: number
  readonly events: ReadonlyArray<Event.Event>
  readonly state: RunState.State
  readonly result?: Schema.Json | undefined
}

/** A run as committed, decoded. */
export interface Stored {
  readonly runId: string
  readonly version: number
  readonly header: Schema.Json
  readonly state: RunState.State
  /** The number of committed events: the fencing token for the next `append`. */
  readonly nextSeq: number
  /** The committed events, in order: all of them, or those from the read's `fromSeq` on. */
  readonly events: ReadonlyArray<Event.Event>
  readonly result: Option.Option<Schema.Json>
  readonly createdAt: number
  readonly updatedAt: number
}

/** Options of {@link Service.read}. */
export interface ReadOptions {
  /** The first sequence number to read events from; default `0`, the whole log. A non-negative integer. */
  readonly fromSeq?: number | undefined
}

/** A call waiting for a person's decision (R7). Times are epoch milliseconds. */
export interface ApprovalRequest {
  readonly runId: string
  readonly callId: string
  readonly tool: string
  readonly arguments: Schema.Json
  readonly requestedAt: number
  readonly expiresAt: number
  /** The tool's side-effect class (`none`, `read`, `write`, `external`), for whoever decides. */
  readonly sideEffect?: string | undefined
}

/** A person's decision on a pending call. */
export interface ApprovalDecision {
  readonly runId: string
  readonly callId: string
  readonly decision: "approve" | "reject"
  readonly reason?: string | undefined
  readonly by?: string | undefined
  readonly at: number
}

/** Which pending approvals to list: all of them, or one run's. */
export interface PendingFilter {
  readonly runId?: string | undefined
}

/**
 * The runs this process drives on a journal (R9). A run is driven by one fiber of one
 * process at a time: a resume of a run still going would find the call it runs in doubt,
 * and a status query answering "not applied yet" would have it sent a second time. Other
 * processes are kept off by the journal's fencing and by one host per store
 * (`Journal.layerSqliteHost`, the cluster's shard locks). Each journal a layer builds has
 * its own: build the layer once for the process, not per request.
 */
export interface LiveRuns {
  /** Holds the run for its caller: the function that lets it go, or `undefined` when it is held already. */
  readonly hold: (runId: string) => (() => void) | undefined
  /**
   * While the run is held: how a cancel reaches the run this process drives (its fiber's
   * own cancel, which waits for its ending), so that a host's cancel stops that run rather
   * than start a second driver of it.
   */
  readonly cancelWith: (runId: string, cancel: Effect.Effect<void>) => void
  /** The cancel the run held here gave (see `cancelWith`), while it is held. */
  readonly cancelOf: (runId: string) => Effect.Effect<void> | undefined
}

/** The journal store (R9): runs, their committed events, and approvals any process on the same store can see. */
export interface Service {
  /** The runs this process drives on this journal: the runtime holds each run while its fiber lives. */
  readonly live: LiveRuns
  /** Records a new run with `nextSeq = 0`. An existing run id is a `Conflict`. */
  readonly create: (run: NewRun) => Effect.Effect<void, JournalError>
  /**
   * Commits events in one transaction, fenced on `expectedSeq`: when the run's committed
   * count is not `expectedSeq` (another writer moved it, or ended the run) the result is a
   * `Conflict` and nothing is written. Events whose `seq` do not run `expectedSeq,
   * expectedSeq + 1, …`, or belong to another run, or more events after the run's own end,
   * are an `InvalidAppend`. The commit that carries the result also withdraws the run's calls
   * still pending (R7): nobody decides for a run that has ended.
   */
  readonly append: (runId: string, append: Append) => Effect.Effect<void, JournalError>
  /**
   * The run as committed, decoded; `Corrupt` or `Incompatible` when it cannot be read back.
   * With `fromSeq`, `events` holds the events from that sequence number on (none when the
   * log ends before it), and only the commits that hold them (and the last, for the run's
   * state and result) are read: a watcher reads what is new, not the whole log again.
   */
  readonly read: (runId: string, options?: ReadOptions) => Effect.Effect<Option.Option<Stored>, JournalError>
  /** The ids of the runs without a result, oldest first (for `Run.recover`). */
  readonly unfinished: Effect.Effect<ReadonlyArray<string>, JournalError>
  /**
   * Puts a call on the store's pending list. The same call twice is a `Conflict`, unless it
   * was withdrawn, or is pending with another expiry (a resume whose deadline came closer): it
   * is then pending, with the new times, in one step (a decision is never refused in between).
   */
  readonly requestApproval: (request: ApprovalRequest) => Effect.Effect<void, JournalError>
  /** The undecided calls of runs that have not ended, oldest first. */
  readonly pendingApprovals: (filter?: PendingFilter) => Effect.Effect<ReadonlyArray<ApprovalRequest>, JournalError>
  /**
   * Decides a pending call; a call not pending (never requested, decided already, expired,
   * withdrawn, or of a run that has ended) is `NotPending`.
   */
  readonly decide: (decision: ApprovalDecision) => Effect.Effect<void, JournalError>
  /**
   * Takes a call off the pending list without a decision: the run stopped waiting (its
   * request expired, the run was cancelled or ended). A call not pending is left as it is.
   */
  readonly withdraw: (runId: string, callId: string, at: number) => Effect.Effect<void, JournalError>
  /** The decision on a call, once there is one (a withdrawn call has none). */
  readonly decision: (runId: string, callId: string) => Effect.Effect<Option.Option<ApprovalDecision>, JournalError>
}

/** The service's tag; `Journal.Journal` re-exports it. */
export class Journal extends Context.Service<Journal, Service>()("effect-agent-runtime/Journal") {}
