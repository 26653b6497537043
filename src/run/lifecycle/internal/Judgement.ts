/**
 * What a run's ending comes to: the loop's outcome judged through validation (R6), an
 * interrupted run's stop read from its log, and the result of whatever the lifecycle
 * produced. Private to the lifecycle.
 */
import { Cause, Effect, Exit, Result } from "effect"
import type * as Event from "../../../events/Event.ts"
import * as StopReason from "../../../events/StopReason.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as ToolArguments from "../../../tools/ToolArguments.ts"
import * as Spans from "../../../tracing/Spans.ts"
import * as Validation from "../../../validation/Validation.ts"
import * as FinalOutput from "../../internal/FinalOutput.ts"
import * as OwnCopy from "../../internal/OwnCopy.ts"
import * as PhaseWaits from "../../internal/PhaseWaits.ts"
import * as RunContext from "../../internal/RunContext.ts"
import { broken, end, inDoubt, settled, unsafeIn, withDoubt } from "../../internal/RunEnd.ts"
import type { Ending } from "../../internal/RunOutcome.ts"
import type { Resolved } from "../../internal/resolve/Resolve.ts"
import * as Loop from "../../loop/Loop.ts"
import * as ToolExecutor from "../../pipeline/ToolExecutor.ts"

/**
 * Stops that end the run without weighing its progress: the final answer goes through
 * validation on its own terms, and cancellation, an unknown outcome and defects end the
 * run as they are. Every other stop (a rejected or expired approval included) still runs
 * validation, to tell `partial` from `failed` (R6.3).
 */
const unassessed: ReadonlySet<StopReason.StopReason> = new Set<StopReason.StopReason>([
  "goal_reached",
  "validation_failed",
  "unknown_outcome",
  "cancelled",
  "internal_error"
])

const assessed: ReadonlySet<StopReason.StopReason> = new Set(StopReason.all.filter((reason) => !unassessed.has(reason)))

/**
 * The ending of the loop's outcome on its report. `doubt`: an action that may not be sent
 * twice is in doubt; a stop other than an accepted answer then ends `unknown_outcome`, its
 * reason kept, since its action may have taken effect: never a guessed failure (R3.8).
 */
const judge = (
  outcome: Loop.Outcome,
  report: Validation.Report,
  output?: Result.Result<unknown, FinalOutput.Problem>,
  doubt = false
): Ending => {
  if (outcome.reason === "goal_reached") {
    if (report.passed) {
      return {
        status: "completed",
        stopReason: "goal_reached",
        policy: outcome.policy,
        detail: outcome.detail,
        finalAnswer: outcome.finalAnswer,
        ...(output !== undefined && Result.isSuccess(output) ? { output: output.success } : {}),
        report
      }
    }
    const failing = report.failed.map((c) => c.detail)
    // Refuted, yet some plan steps are done with evidence: partial, listing what is done (R6.2, R6.3).
    return {
      status: withDoubt(report.completed.length > 0 ? "partial" : "failed", doubt),
      stopReason: "validation_failed",
      policy: "validation",
      // Each check's detail is bounded; their join is cut as they are (R12, review 118).
      detail: UserCode.cutWords(`the final answer is not backed: ${failing.join("; ")}`),
      finalAnswer: outcome.finalAnswer,
      report
    }
  }
  const status = withDoubt(report.completed.length > 0 ? "partial" : "failed", doubt)
  return { status, stopReason: outcome.reason, policy: outcome.policy, detail: outcome.detail, report }
}

/**
 * The typed output's check (R6.1): the final answer decodes with the run's output
 * schema, as a tool's output is checked; it is one more check of the report.
 */
const withOutput = (
  report: Validation.Report,
  decoded: Result.Result<unknown, FinalOutput.Problem>
): Validation.Report => {
  const check: Event.Check = Result.isSuccess(decoded)
    ? {
        name: "output",
        kind: "output",
        passed: true,
        detail: "output: the final answer decodes with the output schema"
      }
    : { name: "output", kind: "output", passed: false, detail: `output: ${decoded.failure.message}` }
  return {
    ...report,
    passed: report.passed && check.passed,
    checks: [...report.checks, check],
    failed: check.passed ? report.failed : [...report.failed, check]
  }
}

/**
 * What validation reads. Criteria and stop hooks are user code: they get a deep copy of the
 * log, so that nothing they do reaches the run's (R9.1, R12), frozen, since they share it:
 * one criterion's change (a `reverse()`, a renamed call) would be what the next one reads,
 * the library's own among them. With no user code, the checks read the frozen log itself.
 */
const handedOut = <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>,
  finalAnswer: string | undefined
): Validation.Context => {
  const userCode = (spec.plan?.length ?? 0) + (spec.stopHooks?.length ?? 0) > 0
  // Frozen itself too: a hook that replaces a field fails, and the next one reads the run's own (R12).
  return Object.freeze({
    timeline: userCode ? OwnCopy.deepFreeze(structuredClone(ctx.events)) : Object.freeze(ctx.events.slice()),
    finalAnswer,
    counters: Object.freeze({ ...ctx.log.counters })
  })
}

const validateOutcome = Effect.fnUntraced(function* <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>,
  outcome: Loop.Outcome,
  schema: FinalOutput.OutputSchema | undefined,
  limits: ToolArguments.Limits | undefined,
  /** Whether a call of the named tool may not be sent twice: one in doubt stops a final answer. */
  unsafeToResend: (name: string) => boolean
) {
  yield* RunContext.transition(ctx, "validating")
  // The typed output's check is one of the report's, on the validation span with the others:
  // the loop's decoded value, or (a run resumed after its loop decided) the answer decoded now.
  const output =
    schema === undefined || outcome.reason !== "goal_reached"
      ? undefined
      : outcome.output !== undefined
        ? Result.succeed(outcome.output.value)
        : FinalOutput.decode(schema, outcome.finalAnswer ?? "", limits)
  const report = yield* Spans.validation(
    Effect.map(Validation.validate(spec, handedOut(ctx, spec, outcome.finalAnswer)), (validated) =>
      output === undefined ? validated : withOutput(validated, output)
    )
  )
  for (const check of report.checks)
    RunContext.emit(ctx, ({ runId, seq, at }) => ({ _tag: "validation.checked", check, runId, seq, at }))
  // An action that may or may not have taken effect and may not be sent twice (R3.8). An
  // idempotent one (or a read) is safe to send again, as the loop's batch stop has it: it stays
  // listed in `pendingActions`, and changes nothing.
  const pending = inDoubt(ctx, unsafeToResend)
  // A schema that breaks is user code failing, not the answer (R12): the run ends as the loop ends it.
  if (output !== undefined && Result.isFailure(output) && output.failure._tag === "Broken") {
    const detail = output.failure.message
    RunContext.decided(ctx, "runtime", "internal_error", detail)
    const status = withDoubt("failed", pending !== undefined)
    return { status, stopReason: "internal_error", policy: "runtime", detail, report } satisfies Ending
  }
  // Validation may have run past the deadline (a stop hook that blocked): no answer is
  // accepted once it has passed (R3.11), so the run ends run_timeout on this report.
  if (outcome.reason === "goal_reached" && RunContext.deadlinePassed(ctx)) {
    const detail = "the run deadline passed while the run was validating"
    RunContext.decided(ctx, "run_timeout", "run_timeout", detail)
    const timedOut = { reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined } as const
    return judge(timedOut, report, undefined, pending !== undefined)
  }
  // No answer is a success while such an action is in doubt (R3.8, R6.2): the run ends
  // `unknown_outcome`, the action in `pendingActions`.
  if (pending !== undefined && outcome.reason === "goal_reached" && report.passed) {
    const detail = `${pending.name} (${pending.callId}) may or may not have taken effect (${pending.detail}): the final answer is not taken as a success while it is in doubt`
    RunContext.decided(ctx, "runtime", "unknown_outcome", detail)
    return {
      status: "unknown_outcome",
      stopReason: "unknown_outcome",
      policy: "runtime",
      detail,
      report
    } satisfies Ending
  }
  return judge(outcome, report, output, pending !== undefined)
})

/**
 * Maps an interrupted lifecycle to its ending, from what the log says stopped it
 * (`run.stopping`). The deadline's stop is a `run_timeout`: only the plan's criteria are
 * checked then, since they read the timeline alone, while stop hooks and artifact checks
 * would need time the run no longer has. With no stop in the log, another process took the
 * run over (its commits fenced off), or nobody stopped the run: code it ran interrupted
 * itself where no boundary took it as that code's failure; each an `internal_error`, never
 * a cancel (R5.1).
 */
export const interrupted = <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>,
  tools: ToolExecutor.Registry["tools"]
) => {
  const stopping = ctx.log.stopping
  if (stopping === undefined) {
    const detail =
      ctx.fenced !== undefined
        ? ctx.fenced
        : `the run was interrupted from inside while it was ${RunContext.state(ctx)}, with no cancel and no deadline: code it ran interrupted itself`
    RunContext.decided(ctx, "runtime", "internal_error", detail)
    const status = settled(ctx, tools, "failed")
    return Effect.succeed<Ending>({ status, stopReason: "internal_error", policy: "runtime", detail })
  }
  if (stopping.by !== "deadline") {
    const detail = "the run was cancelled"
    RunContext.decided(ctx, "runtime", "cancelled", detail)
    return Effect.succeed(cancelledNow(ctx, spec.plan, detail))
  }
  const detail = `the run deadline passed while the run was ${stopping.state}`
  RunContext.decided(ctx, "run_timeout", "run_timeout", detail)
  return validateOutcome<never>(
    ctx,
    { plan: spec.plan },
    { reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined },
    undefined,
    undefined,
    unsafeIn(tools)
  )
}

/**
 * The plan's report of a run stopped from outside, made at once: the plan's criteria read
 * the timeline alone, synchronously, through `validating` (R6.3), each check on the log.
 * `undefined` when the run's phase does not lead there.
 */
const planNow = (
  ctx: RunContext.RunContext,
  plan: ReadonlyArray<Validation.PlanStep> | undefined
): Validation.Report | undefined => {
  if (RunContext.state(ctx) !== "validating" && Result.isFailure(RunContext.moveNow(ctx, "validating")))
    return undefined
  const report = Validation.validatePlan(plan ?? [], handedOut(ctx, { plan }, undefined))
  for (const check of report.checks)
    RunContext.emit(ctx, ({ runId, seq, at }) => ({ _tag: "validation.checked", check, runId, seq, at }))
  return report
}

/**
 * The ending of a run left behind past its deadline (its interrupted work did not stop
 * within the stop grace), judged at once, outside its fiber, as {@link interrupted} judges
 * the deadline's stop: the plan's criteria alone (R6.3); its waits were recorded ended
 * already (withdrawn, abandoned), and their phase left. `undefined` when its phase does
 * not lead there: the run fails as it stands.
 */
export const atDeadlineNow = (
  ctx: RunContext.RunContext,
  plan: ReadonlyArray<Validation.PlanStep> | undefined,
  detail: string,
  tools: ToolExecutor.Registry["tools"]
): Ending | undefined => {
  const report = planNow(ctx, plan)
  const timedOut = { reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined } as const
  return report === undefined
    ? undefined
    : judge(timedOut, report, undefined, inDoubt(ctx, unsafeIn(tools)) !== undefined)
}

/**
 * A cancelled run's ending: `cancelled`, whatever it did, and with a plan, the steps it
 * completed with evidence and those it did not, as a partial run lists them (R5.1, R6.3).
 * A run with no plan ends as it stands.
 */
export const cancelledNow = (
  ctx: RunContext.RunContext,
  plan: ReadonlyArray<Validation.PlanStep> | undefined,
  detail: string
): Ending => {
  const report = plan === undefined || plan.length === 0 ? undefined : planNow(ctx, plan)
  return {
    status: "cancelled",
    stopReason: "cancelled",
    policy: "runtime",
    detail,
    ...(report === undefined ? {} : { report })
  }
}

/** The deadline's stop when its judgement failed: as it stands, never a guessed failure (R3.8). */
const timedOut = (ctx: RunContext.RunContext, tools: ToolExecutor.Registry["tools"]): Ending => ({
  status: settled(ctx, tools, "failed"),
  stopReason: "run_timeout",
  policy: "run_timeout",
  detail: "the run deadline passed"
})

/**
 * The calls a restored log left open that the run ends without taking up again, where there
 * is no registry (options that could not start the run): `ToolExecutor.settleUntaken` without
 * asking the gate (a request still waiting is withdrawn).
 */
const settleUntakenNow = (ctx: RunContext.RunContext, tools: ToolExecutor.Registry["tools"]) =>
  Effect.suspend(() =>
    ToolExecutor.recordUntaken(ctx, tools) ? PhaseWaits.release(ctx, "tool_executing") : Effect.void
  )

/** Ends the run on whatever the lifecycle produced. */
export const finalize = Effect.fnUntraced(function* <RV, E>(
  ctx: RunContext.RunContext,
  exit: Exit.Exit<Ending, E>,
  spec: Validation.Spec<RV>,
  /** The run's registry; none for options that could not start the run. */
  registry: ToolExecutor.Registry | undefined
) {
  const tools: ToolExecutor.Registry["tools"] = registry?.tools ?? new Map()
  // A model call the deadline cut off is failed by it, the first record of the stop.
  if (!Exit.isSuccess(exit)) Loop.recordCutOff(ctx)
  // A defect raised as a recorded stop unwound the run (a handler's cleanup that died) does
  // not undo the stop: the cancel or the deadline decides it (R5.1, R3.11).
  const stopped = ctx.log.stopping !== undefined
  if (!Exit.isSuccess(exit) && !Cause.hasInterruptsOnly(exit.cause) && !(stopped && Cause.hasInterrupts(exit.cause))) {
    return broken(ctx, exit.cause, tools)
  }
  // A resumed run may end before it took up again the calls its log left waiting (R5.2): stopped
  // by a cancel or the deadline, it asks the gate what it holds for them (review 150: a call
  // approved on the table, not yet taken up again, was recorded withdrawn).
  yield* Effect.ignore(
    registry === undefined ? settleUntakenNow(ctx, tools) : ToolExecutor.settleUntaken(ctx, registry)
  )
  if (Exit.isSuccess(exit)) return end(ctx, exit.value)
  const assessed = yield* Effect.exit(interrupted(ctx, spec, tools))
  return end(ctx, Exit.isSuccess(assessed) ? assessed.value : timedOut(ctx, tools))
})

/** What the loop's outcome comes to: validation, as the stop calls for. */
export const judged = Effect.fnUntraced(function* <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Resolved<RV, R>,
  outcome: Loop.Outcome
) {
  // Past the deadline only the plan's criteria are checked: they read the timeline alone,
  // while stop hooks and artifact checks would need time the run no longer has.
  const { registry } = resolved.loop
  if (outcome.reason === "run_timeout") {
    const plan = { plan: resolved.validation.plan }
    return yield* validateOutcome<never>(ctx, plan, outcome, undefined, undefined, unsafeIn(registry.tools))
  }
  if (outcome.reason === "goal_reached" || assessed.has(outcome.reason)) {
    const { output } = resolved.loop
    return yield* validateOutcome(ctx, resolved.validation, outcome, output, registry.limits, unsafeIn(registry.tools))
  }
  if (outcome.reason === "unknown_outcome") {
    // As a cancelled run: its own status, and with a plan, the steps it completed with evidence
    // and those it did not (R6.3), its criteria read from the timeline alone.
    const plan = resolved.validation.plan
    const report = plan === undefined || plan.length === 0 ? undefined : planNow(ctx, plan)
    return {
      status: "unknown_outcome",
      stopReason: outcome.reason,
      policy: outcome.policy,
      detail: outcome.detail,
      ...(report === undefined ? {} : { report })
    } satisfies Ending
  }
  return {
    status: settled(ctx, registry.tools, "failed"),
    stopReason: outcome.reason,
    policy: outcome.policy,
    detail: outcome.detail
  } satisfies Ending
})
