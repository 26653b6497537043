/**
 * Runs one tool call through the pipeline (R3.5, R3.6, R3.7):
 *
 * lookup → argument parsing → permission policy → input schema validation → handler →
 * output schema → postcondition → {@link ToolResult.ToolResult} keyed by `tool_call_id`.
 *
 * Nothing a model sends can crash the run: an unknown tool, arguments that are not a
 * JSON object, `__proto__` keys, oversized arguments and schema mismatches become
 * `failed` results the model can correct; a permission denial becomes a `blocked`
 * result; a handler's failure or defect becomes a `failed` result carrying the failure
 * algebra's safe summary. Interruption is never converted: cancelling the run cancels
 * the call.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type * as Event from "../../events/Event.ts"
import type * as RunState from "../../events/RunState.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as Spans from "../../tracing/Spans.ts"
import * as OwnCopy from "../internal/OwnCopy.ts"
import * as PhaseWaits from "../internal/PhaseWaits.ts"
import * as RunContext from "../internal/RunContext.ts"
import * as ApprovalWait from "./ApprovalWait.ts"
import * as GateAnswers from "./internal/GateAnswers.ts"
import { firstAttempt, type Settled, settleFailed, settleLate, settleResumed } from "./internal/ToolAttempt.ts"
import { type Call, ownTimeout } from "./internal/ToolCall.ts"
import { decode, denied, lookup, type Refused, refuse, unanswered } from "./internal/ToolChecks.ts"
import { lateDetail, recordIfOpen, recordNeverRan, recordUntaken } from "./internal/ToolInterruption.ts"
import { checkOutput, postcondition, succeeded } from "./internal/ToolOutput.ts"
import { checkPermission } from "./internal/ToolPermission.ts"
import { type Prepared, prepareAs } from "./internal/ToolPrepare.ts"
import { fresh, type Standing } from "./internal/ToolStanding.ts"
import type { Registry } from "./Registry.ts"

export {
  defaultLimits,
  describeIssue,
  type InvalidReason,
  type Limits,
  type ParsedArguments,
  parseArguments
} from "../../tools/ToolArguments.ts"
/** The internal types the executor's functions take: the run's live context and its call ids. */
export type { Identities } from "../internal/CallId.ts"
export type { RunContext } from "../internal/RunContext.ts"
export { mayActTwice, mayHaveEffects } from "./internal/ToolCall.ts"
/** How the run records a call it leaves behind when it ends. */
export { recordAbandoned, recordStopped, recordUntaken } from "./internal/ToolInterruption.ts"
export { type Prepared, prepare, prepareAs } from "./internal/ToolPrepare.ts"
export { type Standing, standingOf } from "./internal/ToolStanding.ts"
export {
  type ExecutionError,
  noTimeLimits,
  type Registry,
  randomSecretKey,
  registry,
  type TimeLimits
} from "./Registry.ts"

/**
 * Records the calls a run ends without having taken up again ({@link recordUntaken}), first
 * asking the gate what it holds for those that waited for a person (R7: a decision it took
 * while the run was parked is recorded as that decision, not as withdrawn), and takes the
 * run out of their phase when a wait was ended so (R1.3). A restored run ends them before its
 * ending is judged, as a live run's waits end before it is (R1.2, R6.3). Nothing when none is open.
 */
export const settleUntaken = <R>(
  ctx: RunContext.RunContext,
  registry: Registry<R>
): Effect.Effect<void, RunState.IllegalTransition> =>
  Effect.flatMap(recordedUntaken(ctx, registry), (waited) =>
    waited ? PhaseWaits.release(ctx, "tool_executing") : Effect.void
  )

const recordedUntaken = <R>(ctx: RunContext.RunContext, registry: Registry<R>): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    const waiting = ctx.log.approvals
    const responded = ctx.events.findLast((e): e is Event.Of<"model.responded"> => e._tag === "model.responded")
    const calls = (responded?.toolCalls ?? []).flatMap((call, i) => {
      const id = responded?.callIds[i] ?? call.id
      if (!waiting.includes(id)) return []
      const prepared = prepareAs(registry, id, call)
      return [{ call: prepared.call, secrets: prepared.secrets }]
    })
    if (calls.length === 0) return Effect.sync(() => recordUntaken(ctx, registry.tools))
    return Effect.map(GateAnswers.heldOnGate(ctx, calls), (held) => recordUntaken(ctx, registry.tools, held))
  })

/**
 * Runs one prepared call, in the pipeline's order: lookup and arguments, the permission
 * policy, the input schema, the approval, the handler's attempts (retry, reconciliation),
 * the output schema, the postcondition, the observation. Publishes a `tool.started` per
 * attempt of the handler, then exactly one of `tool.succeeded`, `tool.failed` or
 * `tool.blocked`, or a `tool.interrupted` that settles it.
 *
 * A call of a resumed run goes on from where its log left it (`standing`, R9): a call
 * with its result is not run again; one whose handler was running when the log stopped
 * is in doubt, and runs again only when that is safe, else goes through reconciliation
 * (R3.8); a pending approval is put back with its original expiry.
 *
 * @category combinators
 * @since 0.1.0
 */
export const execute = <R>(
  ctx: RunContext.RunContext,
  registry: Registry<R>,
  prepared: Prepared,
  permission: Permission.PermissionService,
  standing: Standing = fresh
) =>
  // The checks and waits before the handler hand over to its attempts (`flatMap`), so that
  // nothing of them stays on the stack while the handler runs.
  Effect.flatMap(admit(ctx, registry, prepared, permission, standing), (admitted) =>
    admitted._tag === "Result" ? Effect.succeed(admitted.result) : attempts(admitted, standing)
  )

/**
 * Settles a call in doubt of a run resumed past its deadline (R3.8, R3.11): its status
 * query is asked, and nothing of the call is sent again (see `settleLate`); applied, its
 * output goes through the output schema, the postcondition and the observation as every
 * output does. A call the registry no longer takes as it was is left as it stands.
 *
 * @category combinators
 * @since 0.3.0
 */
export const reconcileLate = <R>(
  ctx: RunContext.RunContext,
  registry: Registry<R>,
  prepared: Prepared,
  standing: Extract<Standing, { readonly _tag: "InDoubt" }>
): Effect.Effect<void, never, R> =>
  Effect.suspend(() => {
    const found = lookup(registry, prepared)
    const ready = found._tag === "Refused" ? found : decode(ctx, registry, prepared, found.tool, found.args)
    if (ready._tag === "Refused") return Effect.void
    const c = ready.call
    return Effect.asVoid(
      Effect.onInterrupt(
        Effect.flatMap(settleLate(c, standing), (settled) => afterAttempts(c, settled)),
        () => Effect.sync(() => recordIfOpen(c))
      )
    )
  })

/** A call admitted to its handler, or the result that ends it before. */
type Admitted<R> =
  | { readonly _tag: "Result"; readonly result: ToolResult.ToolResult }
  | {
      readonly _tag: "Admitted"
      readonly call: Call<R>
      /** For a call whose handler ran: the refusal of the policy in force now, which no further attempt passes. */
      readonly refused: (() => Effect.Effect<ToolResult.ToolResult>) | undefined
    }

const ended = (result: ToolResult.ToolResult): Admitted<never> => ({ _tag: "Result", result })

/** Lookup and arguments, the permission policy, the input schema, the approval. */
const admit = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  registry: Registry<R>,
  prepared: Prepared,
  permission: Permission.PermissionService,
  standing: Standing
) {
  if (standing._tag === "Done") return ended(standing.result)
  const call = prepared.call
  // No new action once the deadline has passed (R3.11), even if its timer could not fire yet.
  if (RunContext.deadlinePassed(ctx)) return yield* RunContext.expire(ctx)
  // A call its log left waiting for a person, which ends before that wait is taken up again,
  // is let go on the gate first: the run does not stay `awaiting_approval` for it (R7, R1.3).
  const restored = standing._tag === "Waiting" ? standing : undefined
  const letGo = restored === undefined ? Effect.void : ApprovalWait.letGoRestored(ctx, call, prepared.secrets)
  const found = lookup(registry, prepared)
  if (found._tag === "Refused") {
    yield* letGo
    return ended(yield* Spans.refused(refuse(ctx, call, found), undefined))
  }
  const { tool, args } = found
  // A call of a resumed run whose handler ran meets the policy in force now too: what it
  // refuses is never sent again by recovery (R3.6), whatever an earlier policy allowed.
  let refusal: Refused | undefined
  // The default policy allows every call at once: there is nothing to wait for, or to check.
  if (permission !== Permission.allowAll) {
    // The policy is a wait like every other: bounded by the tool and step layers (R4.2), and,
    // interrupted, the call never ran (R5.2).
    // The policy reads the arguments; it cannot change what the handler gets or what a person approves.
    const decision = yield* checkPermission(permission, {
      tool,
      arguments: OwnCopy.readOnly(args),
      runId: ctx.runId,
      callId: call.id
    }).pipe(
      Deadline.withinOrElse({
        layer: "tool",
        millis: ownTimeout(tool),
        orElse: (timeout) => Effect.succeed(timeout)
      }),
      // A call whose handler ran (a resumed run's) is not one that never ran: the run's end records it as it stands.
      Effect.onInterrupt(() =>
        Effect.andThen(
          restored === undefined ? Effect.void : ApprovalWait.withdrawRestored(ctx, call, prepared.secrets),
          Effect.sync(() => {
            if (!attempted(standing))
              recordNeverRan(ctx, call, "interrupted while the permission policy decided; it never ran")
          })
        )
      )
    )
    if (decision._tag === "Timeout" && !attempted(standing)) {
      yield* letGo
      return ended(yield* Spans.refused(refuse(ctx, call, unanswered(tool, decision)), tool.metadata))
    }
    // The policy may have taken its time: past the deadline, nothing more of the call starts.
    if (RunContext.deadlinePassed(ctx)) {
      if (restored !== undefined) yield* ApprovalWait.withdrawRestored(ctx, call, prepared.secrets)
      if (!attempted(standing)) recordNeverRan(ctx, call, lateDetail)
      return yield* RunContext.expire(ctx)
    }
    refusal =
      decision._tag === "Timeout"
        ? unanswered(tool, decision)
        : decision._tag === "Deny"
          ? denied(prepared, tool, decision, registry.limits.maxObservationChars)
          : undefined
    if (refusal !== undefined && !attempted(standing)) {
      yield* letGo
      return ended(yield* Spans.refused(refuse(ctx, call, refusal), tool.metadata))
    }
  }
  const ready = decode(ctx, registry, prepared, tool, args)
  if (ready._tag === "Refused") {
    yield* letGo
    return ended(yield* Spans.refused(refuse(ctx, call, ready), tool.metadata))
  }
  if (tool.metadata.needsApproval && !attempted(standing) && !(standing._tag === "Checked" && standing.approved)) {
    yield* Spans.approval(
      ApprovalWait.awaitDecision(
        ctx,
        registry.time.approvalMillis,
        call,
        tool,
        prepared.shown,
        prepared.secrets,
        restored
      ),
      { tool: call.name, callId: call.id, handedOn: () => ApprovalWait.handedOn(ctx) }
    )
  }
  const refused = refusal
  return {
    _tag: "Admitted",
    call: ready.call,
    refused: refused === undefined ? undefined : () => Spans.refused(refuse(ctx, call, refused), tool.metadata)
  } satisfies Admitted<R>
})

/** A handler that ran has passed the policy and the approval already. */
const attempted = (standing: Standing): standing is Extract<Standing, { readonly _tag: "InDoubt" | "Retrying" }> =>
  standing._tag === "InDoubt" || standing._tag === "Retrying"

/**
 * The handler's attempts, then the output schema, the postcondition and the observation.
 * A first attempt that succeeds goes on to them at once; a failed one goes through recovery.
 */
const attempts = <R>({ call: c, refused }: Extract<Admitted<R>, { readonly _tag: "Admitted" }>, standing: Standing) =>
  Effect.onInterrupt(
    attempted(standing)
      ? Effect.flatMap(settleResumed(c, standing, refused), (settled) => afterAttempts(c, settled))
      : Effect.matchCauseEffect(firstAttempt(c), {
          onSuccess: (output) => checked(c, output),
          onFailure: (cause) => Effect.flatMap(settleFailed(c, cause), (settled) => afterAttempts(c, settled))
        }),
    // Interrupted where none of its steps records it: the call is not left without an end (R5.2).
    () => Effect.sync(() => recordIfOpen(c))
  )

/** What the attempts came to: the call's failed result, or the output to check. */
const afterAttempts = <R>(c: Call<R>, settled: Settled) =>
  settled._tag === "Ended" ? Effect.succeed(settled.result) : checked(c, settled.output)

/** The handler's output through the output schema, the postcondition and the observation. */
const checked = <R>(c: Call<R>, value: unknown) => {
  const output = checkOutput(c, value)
  if (output._tag === "Ended") return Effect.succeed(output.result)
  if (c.tool.postcondition === undefined) return Effect.succeed(succeeded(c, value, output.encoded))
  return Effect.map(
    postcondition(c, value, output.encoded),
    (inconsistent) => inconsistent ?? succeeded(c, value, output.encoded)
  )
}
