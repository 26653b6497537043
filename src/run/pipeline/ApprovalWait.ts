/**
 * The approval step of the tool pipeline (R7), between the input schema and the
 * handler: the run waits in `awaiting_approval` for a person's decision on the
 * {@link Approval.ApprovalGate}, bounded by min(the approval timeout, what is left of
 * the step, what is left of the run) (R4.2). Private to the runtime.
 */
import { Effect, Exit, Fiber, Option } from "effect"
import * as UserCode from "../../failure/UserCode.ts"
import type * as Model from "../../model/Model.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as Approval from "../../tools/Approval.ts"
import type * as Redaction from "../../tools/Redaction.ts"
import type * as Tool from "../../tools/Tool.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as Commit from "../internal/Commit.ts"
import * as PhaseWaits from "../internal/PhaseWaits.ts"
import * as RunContext from "../internal/RunContext.ts"
import { isStop, Stop } from "./ApprovalStop.ts"
import {
  checkDecision,
  closeOnGate,
  type Decided,
  type DecidedWith,
  decidedEvent,
  decisionOnGate,
  heldDecision,
  letGo,
  letGoMillis,
  stoppingAskMillis
} from "./internal/GateAnswers.ts"
import { recordNeverRan } from "./internal/ToolInterruption.ts"

/** The run's live context, which {@link awaitDecision} takes (internal to `run/`). */
export type { RunContext } from "../internal/RunContext.ts"
export { isStop, Stop }

/**
 * Lets go of the request of a resumed run's call that its log left waiting, when the call
 * ends before its wait is taken up again (the policy in force now refuses it, its tool or
 * its arguments no longer pass, R3.6): the gate closes it, asked again while out of reach
 * for 5 s at most ({@link closeOnGate}), and the log records what the gate held, a decision given
 * meanwhile, or withdrawn. The run leaves `awaiting_approval` for it (R1.3). A rejection
 * given meanwhile is the run's stop, as it is when the run waits (R7: `approval_rejected`);
 * after an approval, or none, the call's own refusal is what the model is told.
 */
export const letGoRestored = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  secrets: Redaction.Secrets
): Effect.Effect<void, Stop> =>
  Effect.gen(function* () {
    const expire = (yield* Approval.ApprovalGate).expire
    // A short while at most: the call is refused whatever the gate says, and only a rejection it
    // holds would change the run's stop; a gate out of reach does not hold the run for it.
    const checked =
      expire === undefined ? Option.none() : yield* decisionOnGate(ctx, expire, call, secrets, letGoMillis)
    yield* Effect.ignore(PhaseWaits.release(ctx, "tool_executing", letGo(call, checked)))
    if (Option.isSome(checked) && checked.value._tag === "Rejected") {
      return yield* Effect.fail(rejected(ctx, call, checked.value))
    }
  })

/**
 * The same, for a resumed run's call stopped before its wait was taken up again (a cancel,
 * the run deadline, another call's stop): the gate closes it, asked a short while within the
 * stop grace, and the log records the decision it held, else that the call was withdrawn
 * (review 148: a parked run approved meanwhile, cancelled during its permission check, said
 * withdrawn while the table said approved).
 */
export const withdrawRestored = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  secrets: Redaction.Secrets
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const expire = (yield* Approval.ApprovalGate).expire
    const held =
      expire === undefined || ctx.suspended !== undefined
        ? Option.none()
        : yield* heldDecision(ctx, expire, call, secrets, stoppingAskMillis(ctx))
    yield* Effect.ignore(PhaseWaits.release(ctx, "tool_executing", letGo(call, held)))
  })

/** Whether the run lets go of its waits handing their calls on: it was parked, suspended or taken over. */
export const handedOn = (ctx: RunContext.RunContext): boolean => ctx.suspended !== undefined || ctx.fenced !== undefined

/** The gate's decision, or the bound that expired first: its layer and how long it gave. */
type Answer = Approval.Decision | { readonly _tag: "Expired"; readonly layer: Deadline.Layer; readonly millis: number }

/**
 * Puts `call` on the gate and waits for its decision. Succeeds when it is approved;
 * fails with a {@link Stop} when it is rejected or expires. An interruption (cancel,
 * run deadline) withdraws the request and records the call as cancelled: it never ran.
 * A request of a resumed run (`asked`, already in its log) is put back on the gate as it
 * was, with its original expiry (R7).
 */
export const awaitDecision = Effect.fnUntraced(function* (
  ctx: RunContext.RunContext,
  approvalMillis: number | undefined,
  call: Model.ToolCall,
  tool: Tool.Any<unknown>,
  args: Record<string, unknown>,
  secrets: Redaction.Secrets,
  restored?: {
    readonly requestedAt: number
    readonly expiresAt: number
    readonly layer?: Deadline.Layer | undefined
  }
) {
  const gate = yield* Approval.ApprovalGate
  const before = RunContext.now(ctx)
  // A request put back keeps its expiry, and the layer that set it (R9, R4.2), within the run's.
  const own: { readonly layer: Deadline.Layer; readonly millis: number | undefined } =
    restored === undefined
      ? { layer: "approval", millis: approvalMillis }
      : { layer: restored.layer ?? "approval", millis: Math.max(0, restored.expiresAt - before) }
  const limit = yield* Deadline.left(own)
  // The time the bound was read at: a handover between the two reads (the clock moved on)
  // would otherwise record an expiry short of what the layers give (R4.2).
  const now = limit.now
  const request: Approval.Request = {
    runId: ctx.runId,
    callId: call.id,
    tool: tool.name,
    arguments: args,
    sideEffect: tool.metadata.sideEffect,
    requestedAt: restored?.requestedAt ?? now,
    // Put back, it expires by the run's deadline if a resume brought that closer (review 165: the
    // table took decisions past it, and a parked run woke at the old expiry, not its deadline).
    // In whole milliseconds, as every store keeps it: the table's expiry is the log's (review 184).
    expiresAt: Math.floor(Math.min(restored?.expiresAt ?? Number.POSITIVE_INFINITY, now + limit.millis))
  }
  // How long the call had waited already: a request put back has waited since it was made, in
  // the process that stopped and in between (review 88: it said only this process's wait).
  const waitedBefore = Math.max(0, now - request.requestedAt)
  const decisionEvent = (decision: Decided, extra: DecidedWith) => decidedEvent(call, decision, extra)
  const decided = (
    decision: "approved" | "rejected" | "expired",
    extra: { readonly by?: string | undefined; readonly reason?: string | undefined; readonly layer?: Deadline.Layer }
  ) => PhaseWaits.release(ctx, "tool_executing", decisionEvent(decision, extra))
  // A gate is user code (R12): a throw, a non-Effect or an answer that is not a decision
  // ends the run internal_error; a decision is never guessed.
  // A run taken from its process hands the call on to whoever drives it next: the gate keeps it.
  const asked = Effect.flatMap(
    UserCode.orDie(
      "the approval gate",
      UserCode.effectOrDie("the approval gate", () => gate.request(request))
    ),
    (decision) => UserCode.checkedOrDie(checkDecision(ctx, call, secrets, decision))
  ).pipe(Effect.provideService(Approval.HandedOn, () => handedOn(ctx)))
  // The run stops waiting (cancel, deadline, another call's stop, a broken gate), the call never
  // ran: the log says so, with the decision the gate had taken meanwhile, if any (the journal's
  // gate keeps it, and so does the log), else that the request was withdrawn. A decision this
  // process's wait had not brought yet (another process's, found at the next poll) is asked of
  // the gate, as a parked run's is (review 144: the log said withdrawn, the table approved).
  const stopped = (onGate: Fiber.Fiber<Approval.Decision>, detail: string, ask: boolean) =>
    Effect.gen(function* () {
      const answered = onGate.pollUnsafe()
      let decision = answered !== undefined && Exit.isSuccess(answered) ? Option.some(answered.value) : Option.none()
      const expire = gate.expire
      if (ask && Option.isNone(decision) && expire !== undefined && ctx.suspended === undefined) {
        decision = yield* heldDecision(ctx, expire, call, secrets, stoppingAskMillis(ctx))
      }
      RunContext.emit(ctx, letGo(call, decision))
      recordNeverRan(ctx, call, Option.isNone(decision) ? detail : "decided as the run stopped waiting; it never ran")
      // Back to the batch's phase.
      yield* Effect.ignore(PhaseWaits.release(ctx, "tool_executing"))
    })
  let announced = false
  const waiting = (onGate: Fiber.Fiber<Approval.Decision>) =>
    Effect.gen(function* () {
      if (restored === undefined) {
        yield* PhaseWaits.hold(ctx, "awaiting_approval", "tool_executing", ({ runId, seq, at }) => ({
          _tag: "approval.requested",
          callId: call.id,
          name: call.name,
          arguments: args,
          expiresAt: request.expiresAt,
          layer: limit.layer,
          runId,
          seq,
          at
        }))
      } else {
        yield* RunContext.transition(ctx, "awaiting_approval")
      }
      announced = true
      // A waiting run is persisted (R7): its log holds the request before it records a decision,
      // which a journal's gate keeps for a resumed run meanwhile.
      yield* Commit.barrier(ctx)
      // The approval's own limit counts from the request, however long the commit took; the
      // step and run deadlines are the run's own (their layer is named when they are the tighter).
      const since = RunContext.now(ctx) - now
      const left = { layer: own.layer, millis: own.millis === undefined ? undefined : Math.max(0, own.millis - since) }
      const answered: Answer = yield* Fiber.join(onGate).pipe(
        Deadline.withinOrElse({
          ...left,
          orElse: ({ layer, afterMillis }) =>
            Effect.succeed({ _tag: "Expired", layer, millis: waitedBefore + since + afterMillis } as const)
        })
      )
      // The wait ran out: the gate closes the call, unless a decision was recorded first that it had
      // not brought yet (its next read of the table, a decider that died before waking the run, one
      // still being recorded): that decision is the answer (R7). A gate out of reach is asked again.
      const expire = gate.expire
      if (answered._tag !== "Expired" || expire === undefined) return answered
      const closed = yield* closeOnGate(ctx, expire, call.id)
      const recorded = { found: closed.found, layer: closed.ranOut ?? answered.layer }
      const waited = waitedBefore + RunContext.now(ctx) - now
      if (Option.isNone(recorded.found)) return { _tag: "Expired", layer: recorded.layer, millis: waited } as const
      return yield* UserCode.checkedOrDie(checkDecision(ctx, call, secrets, recorded.found.value))
    }).pipe(
      Effect.onInterrupt(() =>
        announced ? stopped(onGate, "withdrawn while waiting for approval; it never ran", true) : Effect.void
      ),
      Effect.tapDefect(() =>
        announced ? stopped(onGate, "the approval gate failed; the call never ran", false) : Effect.void
      )
    )
  // The gate holds the call before anyone hears of it: a decision given on `approval.requested`
  // (or on `pendingApprovals`) finds it there, whatever the journal's commit takes meanwhile.
  // Expired, stopped, or the run failed to commit: the gate lets the call go. Its fiber is
  // detached, told to stop and not awaited: a gate that cannot be interrupted holds neither
  // the wait nor the fiber of the call's batch past its bound (its answer is no longer taken).
  const answer: Answer = yield* Effect.acquireUseRelease(
    Effect.forkDetach(asked, { startImmediately: true }),
    waiting,
    (onGate) => Effect.sync(() => onGate.interruptUnsafe())
  )
  switch (answer._tag) {
    case "Approved":
      yield* decided("approved", { by: answer.by })
      return yield* Commit.barrier(ctx)
    case "Rejected": {
      yield* decided("rejected", { by: answer.by, reason: answer.reason })
      return yield* Effect.fail(rejected(ctx, call, answer))
    }
    case "Expired": {
      yield* decided("expired", { layer: answer.layer })
      const what = `${call.name} (${call.id}) waited ${answer.millis} ms for approval`
      return yield* Effect.fail(
        answer.layer === "step"
          ? blocked(ctx, call, "step_timeout", "approval_expired", `${what}: the step deadline passed`)
          : blocked(ctx, call, "approval_expired", "approval_expired", `${what}: no decision before it expired`)
      )
    }
  }
})

/** A rejected call's ending and the run's stop (`approval_rejected`), saying who rejected it and why. */
const rejected = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  decision: Extract<Approval.Decision, { readonly _tag: "Rejected" }>
): Stop => {
  const who = decision.by !== undefined ? ` by ${decision.by}` : ""
  const detail = `${call.name} (${call.id}) was rejected${who}: ${decision.reason}`
  return blocked(ctx, call, "approval_rejected", "approval_rejected", detail)
}

/** Ends the call's events (`tool.blocked`) and makes the run's stop. */
const blocked = (
  ctx: RunContext.RunContext,
  call: Model.ToolCall,
  reason: Stop["reason"],
  code: "approval_rejected" | "approval_expired",
  detail: string
): Stop => {
  const error: ToolResult.ToolError = { code, message: detail, correctable: false }
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "tool.blocked",
    callId: call.id,
    name: call.name,
    error,
    runId,
    seq,
    at
  }))
  return new Stop(reason, detail)
}
