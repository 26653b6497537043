/**
 * Human approval (R7). A tool marked `needsApproval` does not run when the model asks
 * for it: the run moves to `awaiting_approval`, puts the pending call (its run id, call
 * id, tool and arguments) and an expiry on the {@link ApprovalGate}, and waits for a
 * person's decision. Waiting is a state, not a failure:
 *
 * - approve → the run goes back to `tool_executing` and runs the exact pending call
 *   (same arguments, same call id, same idempotency key);
 * - reject → the run ends `approval_rejected`;
 * - no decision before the expiry → the run ends `approval_expired`;
 * - cancel (or the run deadline) while waiting → the request is withdrawn and the run
 *   ends as the cancel or the deadline says.
 *
 * The model never sees a guessed decision: nothing about the call reaches it until the
 * call has run.
 *
 * The gate is a `Context.Reference`: without a layer, every run shares one in-memory
 * gate, which {@link Run.Handle}'s `approve` and `reject` decide on. Provide
 * {@link layerMemory} for a gate of your own (one per test), or your own {@link Gate}
 * (a queue your UI reads) with `Layer.succeed(ApprovalGate, gate)`.
 *
 * @since 0.1.0
 */
import { Clock, Context, Deferred, Effect, Layer, type Option, Predicate, Schema } from "effect"
import * as Text from "../failure/Text.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Model from "../model/Model.ts"
import type * as Tool from "./Tool.ts"

/**
 * A call waiting for a decision.
 *
 * @category models
 * @since 0.1.0
 */
export interface Request {
  readonly runId: string
  readonly callId: string
  readonly tool: string
  /** The arguments as the model sent them, parsed and validated against the tool's input schema. */
  readonly arguments: Readonly<Record<string, unknown>>
  readonly sideEffect: Tool.SideEffect
  /** Milliseconds since the epoch, by the run's `Clock`. */
  readonly requestedAt: number
  /** When the wait ends without a decision (R4.2: the tightest of the approval, step and run layers). */
  readonly expiresAt: number
}

/**
 * A person's decision on a pending call.
 *
 * @category models
 * @since 0.1.0
 */
export type Decision =
  | { readonly _tag: "Approved"; readonly by?: string | undefined }
  | { readonly _tag: "Rejected"; readonly reason: string; readonly by?: string | undefined }

/**
 * @category constructors
 * @since 0.1.0
 */
export const approved = (by?: string): Decision => ({ _tag: "Approved", by })

/**
 * @category constructors
 * @since 0.1.0
 */
export const rejected = (reason: string, by?: string): Decision => ({ _tag: "Rejected", reason, by })

/**
 * Raised by {@link Gate.decide} when no call with that run id and call id is waiting:
 * it was never requested, was decided already, or was withdrawn (expiry, cancel).
 *
 * @category errors
 * @since 0.1.0
 */
export class NotPending extends Schema.TaggedError<NotPending>()("NotPending", {
  runId: Schema.String,
  callId: Schema.String
}) {
  override get message(): string {
    return `No call ${this.callId} of run ${this.runId} is waiting for approval (never requested, already decided, or withdrawn)`
  }
}

/**
 * A decision whose text cannot be kept: `by` or `reason` is not a string, holds a NUL
 * character, which the stores refuse (PostgreSQL) or cut short (SQLite), or is longer than
 * a decision keeps (`by` 256 characters, `reason` 4096); a `by` that is blank (it names
 * nobody: leave it out instead); or the decision is none at all (`decision`: not an
 * `Approved` or a `Rejected`). Raised before the gate decides.
 *
 * @category errors
 * @since 0.3.0
 */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>()("InvalidDecision", {
  runId: Schema.String,
  callId: Schema.String,
  field: Schema.Literals(["by", "reason", "decision"]),
  detail: Schema.String
}) {
  override get message(): string {
    return `the decision on call ${this.callId} of run ${this.runId} cannot be kept: ${this.field} ${this.detail}`
  }
}

/**
 * The gate could not record a decision now (its store out of reach): nothing was decided,
 * the call is still waiting, and the same decision may be tried again.
 *
 * @category errors
 * @since 0.3.0
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("ApprovalUnavailable", {
  runId: Schema.String,
  callId: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `the decision on call ${this.callId} of run ${this.runId} could not be recorded now (try again): ${this.detail}`
  }
}

/**
 * The gate could not list the calls waiting now (its store out of reach, or refusing the
 * read): nothing changed, and the list may be asked for again.
 *
 * @category errors
 * @since 0.3.0
 */
export class PendingUnavailable extends Schema.TaggedError<PendingUnavailable>()("ApprovalPendingUnavailable", {
  detail: Schema.String
}) {
  override get message(): string {
    return `the calls waiting for approval could not be listed now: ${this.detail}`
  }
}

/**
 * The field of `decision` that cannot be kept, if any (see {@link InvalidDecision}).
 *
 * @category validation
 * @since 0.3.0
 */
export const invalidField = (decision: Decision): "by" | "reason" | undefined => invalid(decision)?.field

/**
 * The longest `by` and `reason` a decision keeps, in UTF-16 code units: a name, and a
 * sentence or a paragraph.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxChars = { by: 256, reason: 4096 } as const

const textIssue = (value: unknown, max: number): string | undefined =>
  typeof value !== "string"
    ? `is ${typeof value}, not a string`
    : value.includes("\u0000")
      ? "holds a NUL character"
      : !Text.wellFormed(value)
        ? "holds half of a surrogate pair (a store would keep another text)"
        : value.length > max
          ? `is ${value.length} characters long, over the limit of ${max}`
          : undefined

/** A `by` names somebody: one that shows nothing (empty, spaces, zero-width) would be shown as `rejected by : no`. */
const byIssueOf = (by: unknown): string | undefined =>
  textIssue(by, maxChars.by) ?? (typeof by === "string" && Model.isBlank(by) ? "is blank: it names nobody" : undefined)

const invalid = (decision: Decision): { readonly field: "by" | "reason"; readonly detail: string } | undefined => {
  // A decision may come from code without types (a UI, a script): its fields are checked as values.
  const byIssue = decision.by === undefined ? undefined : byIssueOf(decision.by)
  if (byIssue !== undefined) return { field: "by", detail: byIssue }
  const reasonIssue = decision._tag === "Rejected" ? textIssue(decision.reason, maxChars.reason) : undefined
  return reasonIssue === undefined ? undefined : { field: "reason", detail: reasonIssue }
}

/**
 * Why `decision` on the call `callId` of run `runId` cannot be taken, before anything is
 * decided: a `by` or `reason` that is not a string, holds a NUL character or half of a
 * surrogate pair, or is too long (`by` over 256 characters, `reason` over 4096), a `by`
 * that is blank (it names nobody), or a decision that is none. A run or call
 * id that no row can have (not a string, empty, longer than 256 characters, a control
 * character or half of a surrogate pair in it) names no waiting call (`NotPending`).
 *
 * @category validation
 * @since 0.3.0
 */
export const checkDecision = (
  runId: string,
  callId: string,
  decision: Decision
): InvalidDecision | NotPending | undefined => {
  // Ids and decisions may come from code without types, a URL or a form: an id no row can
  // have names no waiting call (review 88: an empty id, or a NUL for PostgreSQL, was a defect).
  if (!Text.isId(runId) || !Text.isId(callId)) {
    return new NotPending({ runId: shown(runId), callId: shown(callId) })
  }
  if (!isDecision(decision)) {
    return new InvalidDecision({ runId, callId, field: "decision", detail: `is ${UserCode.kindOf(decision)}` })
  }
  let found: { readonly field: "by" | "reason" | "decision"; readonly detail: string } | undefined
  try {
    found = invalid(decision)
  } catch (defect) {
    // A field whose getter throws: nothing can be kept of it.
    found = { field: "decision", detail: `cannot be read (${UserCode.kindOf(defect)} thrown)` }
  }
  return found === undefined ? undefined : new InvalidDecision({ runId, callId, ...found })
}

/**
 * The `by` of a decision's options (`approve(callId, { by })`), read when the effect runs,
 * once: options from code without types may hold a getter that throws, which is an
 * `InvalidDecision` of `by`, never a throw out of the call.
 *
 * @category validation
 * @since 0.3.0
 */
export const byOf = (
  runId: string,
  callId: string,
  options: { readonly by?: string | undefined } | undefined
): Effect.Effect<string | undefined, InvalidDecision> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(options?.by)
    } catch (defect) {
      const detail = `cannot be read (${UserCode.kindOf(defect)} thrown)`
      return Effect.fail(new InvalidDecision({ runId: shown(runId), callId: shown(callId), field: "by", detail }))
    }
  })

/** An id as an error shows it: itself when it is a string (its first 256 characters), else what it is. */
const shown = (id: unknown): string => (typeof id === "string" ? Text.clip(id, 256) : `(${UserCode.kindOf(id)})`)

const isDecision = (value: unknown): value is Decision => {
  try {
    return Predicate.isTagged(value, "Approved") || Predicate.isTagged(value, "Rejected")
  } catch {
    return false
  }
}

/**
 * Where pending calls wait for decisions.
 *
 * @category models
 * @since 0.1.0
 */
export interface Gate {
  /**
   * Used by the runtime: registers `request` and waits for its decision. Interrupting
   * the wait (expiry, cancel, deadline) withdraws the request.
   */
  readonly request: (request: Request) => Effect.Effect<Decision>
  /**
   * Decides the pending call `callId` of run `runId`; `Unavailable` when the decision
   * cannot be recorded now (a gate over a store out of reach); `InvalidDecision` when its
   * `by` or `reason` cannot be kept as given (see {@link checkDecision}).
   */
  readonly decide: (
    runId: string,
    callId: string,
    decision: Decision
  ) => Effect.Effect<void, NotPending | Unavailable | InvalidDecision>
  /** The calls waiting now, oldest first; `PendingUnavailable` when they cannot be read now. */
  readonly pending: Effect.Effect<ReadonlyArray<Request>, PendingUnavailable>
  /**
   * Closes the call when the run stops waiting for it, unless a decision was recorded for it
   * first: that decision, or `None` once the call is closed, so that a decision recorded in
   * time is never taken for an expiry or a withdrawal, and none is taken after it (R7). For a
   * gate that keeps decisions where `request` may see them late (a table read every poll,
   * another process that recorded one and died before waking the run, one still being
   * recorded). The run asks it when its wait for the call ends by a deadline, and again while
   * it fails `Unavailable` (the gate cannot answer now), within the run's deadline; and, for a
   * short while within the stop grace, when it lets the call go as it stops (a cancel, the run
   * deadline, another call's stop), so that it records the decision the gate holds, not a
   * withdrawal. It is not asked by a run another process took over: the call is that one's.
   */
  readonly expire?: ((runId: string, callId: string) => Effect.Effect<Option.Option<Decision>, Unavailable>) | undefined
}

const keyOf = (runId: string, callId: string): string => `${runId}\u0000${callId}`

/**
 * A call put up for approval while the same call of a run with the same id waits already:
 * two live runs share one run id (run ids must be unique). The gate refuses it rather than
 * let a decision meant for one run act in the other; the run that asked ends
 * `internal_error` with the call never run.
 *
 * @category errors
 * @since 0.3.0
 */
export class DuplicateRequest extends Schema.TaggedError<DuplicateRequest>()("ApprovalDuplicateRequest", {
  runId: Schema.String,
  callId: Schema.String
}) {
  override get message(): string {
    return `call ${this.callId} of run ${this.runId} is already waiting for approval: two live runs share the run id ${this.runId} (run ids must be unique)`
  }

  /** Shown on the run's timeline: the ids are the caller's own. */
  get safeMessage(): string {
    return this.message
  }
}

/**
 * A gate that keeps pending calls in memory. A second live run under the id of a run
 * whose call waits cannot put up that call ({@link DuplicateRequest}).
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeMemory = (): Gate => {
  const waiting = new Map<string, { readonly request: Request; readonly decision: Deferred.Deferred<Decision> }>()
  return {
    request: (request) =>
      Effect.suspend(() => {
        const key = keyOf(request.runId, request.callId)
        // Two live runs under one id: a decision meant for one would act in the other.
        if (waiting.has(key)) return Effect.die(new DuplicateRequest({ runId: request.runId, callId: request.callId }))
        const decision = Deferred.makeUnsafe<Decision>()
        waiting.set(key, { request, decision })
        return Effect.ensuring(
          Deferred.await(decision),
          Effect.sync(() => {
            if (waiting.get(key)?.decision === decision) waiting.delete(key)
          })
        )
      }),
    decide: (runId, callId, decision) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const invalid = checkDecision(runId, callId, decision)
        if (invalid !== undefined) return Effect.fail<InvalidDecision | NotPending>(invalid)
        const key = keyOf(runId, callId)
        const entry = waiting.get(key)
        // At or after its expiry a call takes no decision, even before its run has seen it expire.
        if (entry === undefined || now >= entry.request.expiresAt) return Effect.fail(new NotPending({ runId, callId }))
        waiting.delete(key)
        return Deferred.succeed(entry.decision, decision)
      }),
    pending: Effect.sync(() => Array.from(waiting.values(), (entry) => entry.request))
  }
}

/**
 * The gate runs put their calls on. Defaults to one in-memory gate for the process.
 *
 * @category services
 * @since 0.1.0
 */
export class ApprovalGate extends Context.Reference<Gate>("effect-agent-runtime/ApprovalGate", {
  defaultValue: makeMemory
}) {}

/**
 * Whether the run that lets go of a call's wait hands the call on rather than withdraws it:
 * the run was taken from its process (parked, suspended, or another process owns it now),
 * and whoever drives it next waits for the same call. A gate that keeps calls where other
 * processes see them (`JournalApprovals`) reads it when its `request` is interrupted, and
 * leaves the call on its table then; the runtime provides it to every `request`.
 *
 * @category services
 * @since 0.3.0
 */
export class HandedOn extends Context.Reference<() => boolean>("effect-agent-runtime/Approval/HandedOn", {
  defaultValue: () => () => false
}) {}

/**
 * A fresh in-memory gate, in place of the process-wide default.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerMemory: Layer.Layer<never> = Layer.sync(ApprovalGate, makeMemory)
