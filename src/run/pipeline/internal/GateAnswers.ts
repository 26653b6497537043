/**
 * What an approval gate answers, checked where it enters (R7, R12): its decisions, its
 * answer to `expire`, and a call closed on it when the run lets go of its wait; and the
 * `approval.decided` record of each. Private to the pipeline.
 */
import { Effect, Fiber, Option, Result, Schedule, Schema } from "effect"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as Model from "../../../model/Model.ts"
import * as Deadline from "../../../time/Deadline.ts"
import * as Approval from "../../../tools/Approval.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import * as Commit from "../../internal/Commit.ts"
import * as RunContext from "../../internal/RunContext.ts"

const checkShape = UserCode.check(
  Schema.Union([
    Schema.TaggedStruct("Approved", { by: Schema.optional(Schema.String) }),
    Schema.TaggedStruct("Rejected", { reason: Schema.String, by: Schema.optional(Schema.String) })
  ]),
  "the approval gate's decision"
)

/**
 * A gate's answer on `call`, checked as every decision is (R7, R12): its shape, then the
 * limits a handle's `approve` and `reject` keep (`Approval.checkDecision`: no NUL, no half
 * of a surrogate pair, a `by` of 256 characters at most, a reason of 4096), since a gate's
 * store may hold what no handle wrote. Its words are masked by the call's secrets: a
 * reviewer may quote them. Else why it is none.
 */
export const checkDecision = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  secrets: Redaction.Secrets,
  value: unknown
): Result.Result<Approval.Decision, string> => {
  const shaped = checkShape(value)
  if (Result.isFailure(shaped)) return shaped
  const invalid = Approval.checkDecision(ctx.runId, call.id, shaped.success)
  if (invalid !== undefined) return Result.fail(`the approval gate's decision: ${invalid.message}`)
  const decision = shaped.success
  const by = decision.by === undefined ? undefined : Redaction.maskText(decision.by, secrets)
  return Result.succeed(
    decision._tag === "Approved"
      ? Approval.approved(by)
      : Approval.rejected(Redaction.maskText(decision.reason, secrets), by)
  )
}

/**
 * A gate's answer to `expire`, checked once where it enters (R12), as its decisions are: an
 * `Option` (a value that is none, or one whose reading throws, is the gate's defect, named),
 * made the run's own; what it holds is then checked as every decision is.
 */
const checkClosed = UserCode.check(Schema.Option(Schema.Unknown), "the approval gate's expire answer")

/** The gate's close of a call: its answer checked, else a defect naming the gate. */
export const closed = (answer: unknown): Effect.Effect<Option.Option<unknown>> =>
  UserCode.checkedOrDie(checkClosed(answer))

/**
 * How long one try of the gate's close at expiry may take, and how long after a failed
 * one the next comes: a store out of reach (or hung) is asked again, within the run's
 * deadline, never taken for an expiry.
 */
const closeTryMillis = 2_000
const closeAgainMillis = 250
/** How long a resumed run's let-go of a call it refuses asks the gate, at most (see {@link letGoRestored}). */
export const letGoMillis = 5_000
/**
 * How long a run being stopped asks the gate what it holds for the calls it lets go, in all:
 * 2 s, and half its stop grace at most, less what the stop has spent asking already, so that a
 * gate out of reach makes the calls withdrawn, not left behind (review 148: a stop grace of
 * 300 ms, or ten parked calls, ran past it; review 152: a stop that asked twice used it all).
 */
export const stoppingAskMillis = (ctx: RunContext.RunContext): number => {
  const stoppedAt = ctx.log.stopping?.at
  // Counted in this process: a run resumed to be stopped (its log's stop another process's) has all of it.
  const spent = stoppedAt === undefined ? 0 : Math.max(0, RunContext.now(ctx) - Math.max(stoppedAt, ctx.startedAt))
  return Math.max(0, Math.min(2_000, ctx.stopGraceMillis / 2) - spent)
}

export type Decided = "approved" | "rejected" | "expired" | "withdrawn"

export interface DecidedWith {
  readonly by?: string | undefined
  readonly reason?: string | undefined
  readonly layer?: Deadline.Layer
}

/** The call's `approval.decided`. */
export const decidedEvent =
  (call: { readonly id: string; readonly name: string }, decision: Decided, extra: DecidedWith): RunContext.Build =>
  ({ runId, seq, at }) => ({
    _tag: "approval.decided",
    callId: call.id,
    name: call.name,
    decision,
    ...(extra.by !== undefined ? { by: extra.by } : {}),
    ...(extra.reason !== undefined ? { reason: extra.reason } : {}),
    ...(extra.layer !== undefined ? { layer: extra.layer } : {}),
    runId,
    seq,
    at
  })

/** The `approval.decided` of a request the run lets go without waiting for it: what the gate held, else withdrawn. */
export const letGo = (call: { readonly id: string; readonly name: string }, held: Option.Option<Approval.Decision>) =>
  Option.match(held, {
    onNone: () => decidedEvent(call, "withdrawn", {}),
    onSome: (decision) =>
      decision._tag === "Approved"
        ? decidedEvent(call, "approved", { by: decision.by })
        : decidedEvent(call, "rejected", { by: decision.by, reason: decision.reason })
  })

/**
 * Closes the call `callId` on the gate (its `expire`): the decision recorded before, when there is one.
 * A gate out of reach (`Unavailable`, or no answer in a short try) is asked again, within
 * what is left of the step and the run (a short try at least): one that cannot answer by
 * then leaves no decision, and says which bound ran out (`ranOut`). A gate that breaks its
 * contract is a defect naming it. A run another process took over leaves the call on the
 * gate for its new owner, and holds no decision ({@link Commit.claim}, review 144).
 */
export const closeOnGate = (
  ctx: RunContext.RunContext,
  expire: NonNullable<Approval.Gate["expire"]>,
  callId: string,
  /** At most this long in all, when shorter than what is left of the step and the run. */
  atMostMillis = Number.POSITIVE_INFINITY
): Effect.Effect<{ readonly found: Option.Option<unknown>; readonly ranOut?: Deadline.Layer }> =>
  Effect.gen(function* () {
    if (!(yield* Commit.claim(ctx))) return { found: Option.none() }
    const closing = UserCode.effectOrDie("the approval gate", () => expire(ctx.runId, callId)).pipe(
      Effect.flatMap(closed),
      Effect.timeoutOrElse({
        duration: closeTryMillis,
        orElse: () =>
          Effect.fail(
            new Approval.Unavailable({ runId: ctx.runId, callId, detail: `no answer in ${closeTryMillis} ms` })
          )
      }),
      Effect.retry({ while: (e) => e instanceof Approval.Unavailable, schedule: Schedule.spaced(closeAgainMillis) })
    )
    const bound = yield* Deadline.left({ layer: "step" })
    // Detached, and at the bound told to stop, not awaited: a gate whose close cannot be
    // interrupted holds neither the run's stop nor its batch past it (review 148).
    const asking = yield* Effect.forkDetach(UserCode.orDie("the approval gate", closing), { startImmediately: true })
    return yield* Fiber.join(asking).pipe(
      Effect.map((found) => ({ found })),
      Effect.timeoutOrElse({
        duration: Math.min(Math.max(bound.millis, closeAgainMillis), atMostMillis),
        // The step's or run's bound ran out, unless the caller's own was the shorter.
        orElse: () =>
          Effect.sync(() => {
            asking.interruptUnsafe()
            return Math.max(bound.millis, closeAgainMillis) <= atMostMillis
              ? { found: Option.none(), ranOut: bound.layer }
              : { found: Option.none() }
          })
      }),
      Effect.onInterrupt(() => Effect.sync(() => asking.interruptUnsafe()))
    )
  })

/**
 * What the gate holds for `call` as the run lets go of its wait: the call closed on the gate
 * ({@link closeOnGate}, `atMostMillis` at most), its decision checked as every decision is
 * (one that is none is not taken). A gate that breaks its contract is a defect naming it.
 */
export const decisionOnGate = (
  ctx: RunContext.RunContext,
  expire: NonNullable<Approval.Gate["expire"]>,
  call: Model.ToolCall,
  secrets: Redaction.Secrets,
  atMostMillis: number
): Effect.Effect<Option.Option<Approval.Decision>> =>
  Effect.map(closeOnGate(ctx, expire, call.id, atMostMillis), ({ found }) =>
    Option.flatMap(found, (decision) => Result.getSuccess(checkDecision(ctx, call, secrets, decision)))
  )

/**
 * {@link decisionOnGate} as a run being stopped asks it. Best effort: a gate that breaks here
 * holds nothing, and changes no stop the run has already (review 141: a cancel ended internal_error).
 */
export const heldDecision = (
  ...asked: Parameters<typeof decisionOnGate>
): Effect.Effect<Option.Option<Approval.Decision>> =>
  Effect.catchCause(decisionOnGate(...asked), () => Effect.succeed(Option.none()))

/**
 * What the gate holds for the calls a run lets go of without taking up their waits again
 * (a resumed run cancelled, or stopped, before it went on: R5.2, R7): each closed on the gate
 * ({@link heldDecision}, {@link stoppingAskMillis} in all), and the decision it held, checked as every decision is.
 * A person's decision the gate took while the run was parked is the log's too (review 138: an
 * approval answered 204 as a cancel came was recorded `withdrawn`). Calls without one are absent.
 */
export const heldOnGate = (
  ctx: RunContext.RunContext,
  calls: ReadonlyArray<{ readonly call: Model.ToolCall; readonly secrets: Redaction.Secrets }>
): Effect.Effect<ReadonlyMap<string, Approval.Decision>> =>
  Effect.gen(function* () {
    const expire = (yield* Approval.ApprovalGate).expire
    const held = new Map<string, Approval.Decision>()
    if (expire === undefined) return held
    const bound = stoppingAskMillis(ctx)
    // One bound for them all: what came in time is held, the rest is withdrawn.
    yield* Effect.forEach(
      calls,
      ({ call, secrets }) =>
        Effect.map(heldDecision(ctx, expire, call, secrets, bound), (decision) => {
          if (Option.isSome(decision)) held.set(call.id, decision.value)
        }),
      { concurrency: 4, discard: true }
    ).pipe(Effect.timeoutOrElse({ duration: bound, orElse: () => Effect.void }))
    return held
  })
