/**
 * The one error of the journal store: a {@link JournalError} whose `reason` says what went
 * wrong. Store failures are classified here, at the boundary (R3.1): a caller never sees a
 * raw `SqlError` nor a defect. `Unavailable` is the only retryable reason (busy, locked,
 * connection lost); the others repeat if the same request is sent again.
 *
 * Match one reason with `Effect.catchReason("JournalError", "Conflict", ...)`.
 *
 * @since 0.3.0
 */
import { Schema } from "effect"

/**
 * The store cannot be reached or is busy now: locked, timed out, connection lost. Retryable.
 *
 * @category errors
 * @since 0.3.0
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  operation: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `journal unavailable during ${this.operation}: ${this.detail}`
  }
}

/**
 * The store refused the request for a reason that a retry does not change (a permission,
 * a broken schema, a failed migration, a store fault the driver does not name).
 *
 * @category errors
 * @since 0.3.0
 */
export class StoreFailed extends Schema.TaggedError<StoreFailed>()("StoreFailed", {
  operation: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `journal store failed during ${this.operation}: ${this.detail}`
  }
}

/**
 * Another writer got there first: the run id exists already (`create`), or the run's
 * committed sequence number is not `expectedSeq` (`append`, the fencing token). Nothing was
 * written. `actualSeq` is the committed count when the store could tell it.
 *
 * @category errors
 * @since 0.3.0
 */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  runId: Schema.String,
  expectedSeq: Schema.optional(Schema.Int),
  actualSeq: Schema.optional(Schema.Int),
  detail: Schema.String
}) {
  override get message(): string {
    return `journal conflict on run ${this.runId}: ${this.detail}`
  }
}

/**
 * A stored row does not decode: its body is not JSON or not an event, its tag is unknown,
 * its sequence numbers have a gap, or its header, state or result is malformed. `seq` names
 * the event row when the fault is in one.
 *
 * @category errors
 * @since 0.3.0
 */
export class Corrupt extends Schema.TaggedError<Corrupt>()("Corrupt", {
  runId: Schema.String,
  seq: Schema.optional(Schema.Int),
  detail: Schema.String
}) {
  override get message(): string {
    return `journal of run ${this.runId} is corrupt${this.seq === undefined ? "" : ` at seq ${this.seq}`}: ${this.detail}`
  }
}

/**
 * The run was written in a journal format this code does not read: a newer one, or
 * format 1, whose events older development builds wrote; or its log holds a kind of event
 * this code does not know (`eventTag`), which a newer version wrote.
 *
 * @category errors
 * @since 0.3.0
 */
export class Incompatible extends Schema.TaggedError<Incompatible>()("Incompatible", {
  runId: Schema.String,
  version: Schema.Int,
  supported: Schema.Int,
  eventTag: Schema.optional(Schema.String)
}) {
  override get message(): string {
    if (this.eventTag !== undefined) {
      return `journal of run ${this.runId} holds an event of a kind this code does not know (${JSON.stringify(this.eventTag)}): a newer version wrote it; go on with that version`
    }
    return this.version > this.supported
      ? `journal of run ${this.runId} has format version ${this.version}; this code reads up to ${this.supported}`
      : `journal of run ${this.runId} has format version ${this.version}, whose events this code no longer reads (it reads format ${this.supported}); finish the run with the version that started it`
  }
}

/**
 * No approval of that call is waiting: it was never requested, was decided already, or has expired.
 *
 * @category errors
 * @since 0.3.0
 */
export class NotPending extends Schema.TaggedError<NotPending>()("NotPending", {
  runId: Schema.String,
  callId: Schema.String
}) {
  override get message(): string {
    return `no approval of call ${this.callId} of run ${this.runId} is pending (never requested, decided already, or expired)`
  }
}

/**
 * The request itself is wrong, whatever the store holds: events whose `seq` do not follow
 * `expectedSeq`, an event of another run, a value that does not encode, an unknown run.
 * Nothing was written.
 *
 * @category errors
 * @since 0.3.0
 */
export class InvalidAppend extends Schema.TaggedError<InvalidAppend>()("InvalidAppend", {
  runId: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `invalid journal request for run ${this.runId}: ${this.detail}`
  }
}

/**
 * @category models
 * @since 0.3.0
 */
export const Reason = Schema.Union([
  Unavailable,
  StoreFailed,
  Conflict,
  Corrupt,
  Incompatible,
  NotPending,
  InvalidAppend
])

/**
 * @category models
 * @since 0.3.0
 */
export type Reason = typeof Reason.Type

/**
 * @category errors
 * @since 0.3.0
 */
export class JournalError extends Schema.TaggedError<JournalError>()("JournalError", { reason: Reason }) {
  /** Only `Unavailable` may succeed when the same request is sent again. */
  get isRetryable(): boolean {
    return this.reason._tag === "Unavailable"
  }
  override get message(): string {
    return this.reason.message
  }
}

/**
 * Wraps a reason.
 *
 * @category constructors
 * @since 0.3.0
 */
export const make = (reason: Reason): JournalError => new JournalError({ reason })
