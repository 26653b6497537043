/**
 * The lifecycle of one run around the loop: options resolved once, the run's single
 * deadline, validation, and the one terminal entry point. Private to the
 * runtime; `Run` is the public face.
 */
import { Cause, type Clock, Deferred, Duration, Effect, Exit, Fiber, Result } from "effect"
import type * as Event from "../../events/Event.ts"
import type * as RunState from "../../events/RunState.ts"
import * as StopReason from "../../events/StopReason.ts"
import type * as Journal from "../../journal/Journal.ts"
import type * as Model from "../../model/Model.ts"
import * as Breakers from "../../recovery/Breakers.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as Validation from "../../validation/Validation.ts"
import * as Loop from "../loop/Loop.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import type * as RunOptions from "../RunOptions.ts"
import type * as RunResult from "../RunResult.ts"
import * as Commit from "./Commit.ts"
import * as Durable from "./Durable.ts"
import * as FinalOutput from "./FinalOutput.ts"
import { type Resolved, resolve } from "./Resolve.ts"
import * as RunContext from "./RunContext.ts"
import { broken, end, leftBehind, rescue } from "./RunEnd.ts"
import { randomRunId } from "./RunId.ts"
import type { Ending } from "./RunOutcome.ts"

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

const judge = (
  outcome: Loop.Outcome,
  report: Validation.Report,
  output?: Result.Result<unknown, FinalOutput.Problem>
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
      status: report.completed.length > 0 ? "partial" : "failed",
      stopReason: "validation_failed",
      policy: "validation",
      detail: `the final answer is not backed: ${failing.join("; ")}`,
      finalAnswer: outcome.finalAnswer,
      report
    }
  }
  const status: RunState.Status = report.completed.length > 0 ? "partial" : "failed"
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
    ? { name: "output", kind: "output", passed: true, detail: "the final answer decodes with the output schema" }
    : { name: "output", kind: "output", passed: false, detail: decoded.failure.message }
  return {
    ...report,
    passed: report.passed && check.passed,
    checks: [...report.checks, check],
    failed: check.passed ? report.failed : [...report.failed, check]
  }
}

const validateOutcome = Effect.fnUntraced(function* <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>,
  outcome: Loop.Outcome,
  schema?: FinalOutput.OutputSchema
) {
  yield* RunContext.transition(ctx, "validating")
  const validated = yield* Validation.validate(spec, {
    timeline: ctx.events,
    finalAnswer: outcome.finalAnswer,
    counters: ctx.log.counters
  })
  const output =
    schema !== undefined && outcome.reason === "goal_reached"
      ? FinalOutput.decode(schema, outcome.finalAnswer ?? "")
      : undefined
  const report = output === undefined ? validated : withOutput(validated, output)
  for (const check of report.checks) RunContext.emit(ctx, { _tag: "validation.checked", check })
  // Validation may have run past the deadline (a stop hook that blocked): no answer is
  // accepted once it has passed (R3.11), so the run ends run_timeout on this report.
  if (outcome.reason === "goal_reached" && RunContext.deadlinePassed(ctx)) {
    const detail = "the run deadline passed while the run was validating"
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "run_timeout", reason: "run_timeout", detail })
    return judge({ reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined }, report)
  }
  return judge(outcome, report, output)
})

/**
 * Maps an interrupted lifecycle to its ending, from what the log says stopped it
 * (`run.stopping`). The deadline's stop is a `run_timeout`: only the plan's criteria are
 * checked then, since they read the timeline alone, while stop hooks and artifact checks
 * would need time the run no longer has.
 */
const interrupted = <RV>(ctx: RunContext.RunContext, spec: Validation.Spec<RV>) => {
  const stopping = ctx.log.stopping
  if (stopping?.by !== "deadline") {
    const detail = "the run was cancelled"
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "cancelled", detail })
    return Effect.succeed<Ending>({ status: "cancelled", stopReason: "cancelled", policy: "runtime", detail })
  }
  const detail = `the run deadline passed while the run was ${stopping.state}`
  RunContext.emit(ctx, { _tag: "termination.decided", policy: "run_timeout", reason: "run_timeout", detail })
  return validateOutcome<never>(
    ctx,
    { plan: spec.plan },
    { reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined }
  )
}

const timedOut: Ending = {
  status: "failed",
  stopReason: "run_timeout",
  policy: "run_timeout",
  detail: "the run deadline passed"
}

/** Ends the run on whatever the lifecycle produced. */
const finalize = Effect.fnUntraced(function* <RV, E>(
  ctx: RunContext.RunContext,
  exit: Exit.Exit<Ending, E>,
  spec: Validation.Spec<RV>,
  tools: ReadonlyMap<string, Tool.Any<unknown>>
) {
  if (Exit.isSuccess(exit)) return end(ctx, exit.value)
  if (!Cause.hasInterruptsOnly(exit.cause)) return broken(ctx, exit.cause, tools)
  const assessed = yield* Effect.exit(interrupted(ctx, spec))
  return end(ctx, Exit.isSuccess(assessed) ? assessed.value : timedOut)
})

/** Invalid options end the run at once, saying which field and why. */
const invalid = (ctx: RunContext.RunContext, issue: RunOptions.InvalidRunOptions): Ending => {
  RunContext.emit(ctx, {
    _tag: "termination.decided",
    policy: "runtime",
    reason: "internal_error",
    detail: `${issue.field}: ${issue.reason}`
  })
  return { status: "failed", stopReason: "internal_error", policy: "runtime", detail: issue.message }
}

/** The run from its first phase to its ending: the plan, the loop, then validation of the loop's outcome. */
const lifecycle = Effect.fnUntraced(function* <RV, R>(ctx: RunContext.RunContext, checked: Checked<RV, R>) {
  yield* RunContext.transition(ctx, "initializing")
  if (Result.isFailure(checked)) return invalid(ctx, checked.failure)
  const resolved = checked.success
  yield* RunContext.transition(ctx, "planning")
  const plan = resolved.validation.plan ?? []
  if (plan.length > 0) {
    RunContext.emit(ctx, {
      _tag: "plan.set",
      steps: plan.map((s) => ({ id: s.id, description: s.description, required: s.required }))
    })
  }
  return yield* judged(ctx, resolved, yield* Loop.run(ctx, resolved.loop))
})

/** What the loop's outcome comes to: validation, as the stop calls for. */
const judged = Effect.fnUntraced(function* <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Resolved<RV, R>,
  outcome: Loop.Outcome
) {
  // Past the deadline only the plan's criteria are checked: they read the timeline alone,
  // while stop hooks and artifact checks would need time the run no longer has.
  if (outcome.reason === "run_timeout")
    return yield* validateOutcome<never>(ctx, { plan: resolved.validation.plan }, outcome)
  if (outcome.reason === "goal_reached" || assessed.has(outcome.reason)) {
    return yield* validateOutcome(ctx, resolved.validation, outcome, resolved.loop.output)
  }
  const status: RunState.Status = outcome.reason === "unknown_outcome" ? "unknown_outcome" : "failed"
  return { status, stopReason: outcome.reason, policy: outcome.policy, detail: outcome.detail } satisfies Ending
})

/**
 * The stop the loop of a restored log had decided (its `termination.decided`) before
 * the log stopped, with the final answer it decided on: the run goes on to validation.
 */
const decidedIn = (ctx: RunContext.RunContext): Loop.Outcome | undefined => {
  const decided = ctx.events.findLast((e) => e._tag === "termination.decided")
  if (decided?._tag !== "termination.decided") return undefined
  const answer = ctx.events.findLast((e) => e._tag === "model.responded")
  return {
    reason: decided.reason,
    policy: decided.policy,
    detail: decided.detail,
    finalAnswer: decided.reason === "goal_reached" && answer?._tag === "model.responded" ? answer.text : undefined
  }
}

/**
 * A resumed run from where its committed log stopped (R9): the phases it had not reached
 * yet, then its loop from the fold (or, if the loop had decided, that stop), then
 * validation. A run whose log says it was being stopped ends as that stop.
 */
const resumedLifecycle = Effect.fnUntraced(function* <RV, R>(ctx: RunContext.RunContext, checked: Checked<RV, R>) {
  if (Result.isFailure(checked)) return invalid(ctx, checked.failure)
  const resolved = checked.success
  if (ctx.log.stopping !== undefined) return yield* interrupted(ctx, resolved.validation)
  if (RunContext.state(ctx) === "created") yield* RunContext.transition(ctx, "initializing")
  if (RunContext.state(ctx) === "initializing") yield* RunContext.transition(ctx, "planning")
  const decided = decidedIn(ctx)
  return yield* judged(ctx, resolved, decided ?? (yield* Loop.run(ctx, resolved.loop, true)))
})

/** The options resolved, or the field that cannot work. */
type Checked<RV, R> = Result.Result<Resolved<RV, R>, RunOptions.InvalidRunOptions>

/**
 * The run's context, with its options resolved once; the clock is the caller's. With a
 * journal, the run commits to it (R9); a run resumed from its journal's log (`restored`)
 * goes on from the log's fold, under its own id and its original deadline.
 */
export const prepare = <T extends Tool.Any, RV, O>(
  options: RunOptions.Options<T, RV, O>,
  clock: Clock.Clock,
  breakers: Breakers.Service | undefined,
  journal?: Journal.Service | undefined,
  restored?: Extract<Durable.Loaded, { readonly _tag: "Open" }>
): {
  readonly ctx: RunContext.RunContext
  readonly resolved: Checked<RV, Tool.Requirements<T>>
} => {
  const started = restored?.started
  const resolved = resolve(
    restored === undefined
      ? options
      : {
          ...options,
          runId: restored.runId,
          goal: started?.goal ?? restored.goal,
          ...((started?.system ?? restored.system) === undefined ? {} : { system: started?.system ?? restored.system })
        }
  )
  const valid = Result.getOrUndefined(resolved)
  const runId = valid?.runId ?? randomRunId()
  const ctx = RunContext.make({
    runId,
    clock,
    deadlineAt: started?.deadlineAt ?? clock.currentTimeMillisUnsafe() + (valid?.timeoutMillis ?? 0),
    breakers,
    journal:
      journal === undefined
        ? undefined
        : Durable.sink(journal, runId, valid?.registry.tools.values() ?? [], restored !== undefined),
    restored: restored?.events
  })
  return { ctx, resolved }
}

/**
 * The run's one deadline, on the run's `Clock` (the live clock and `TestClock` take this
 * same path): a fiber that sleeps until the deadline, records that it found the run
 * there, then interrupts the run's fiber. No wait inside the run needs a timer for the
 * run layer.
 */
const deadline = (ctx: RunContext.RunContext, run: Fiber.Fiber<unknown, unknown>) =>
  Effect.andThen(
    Effect.sleep(Duration.millis(Math.max(0, ctx.deadlineAt - RunContext.now(ctx)))),
    Effect.sync(() => {
      RunContext.stopping(ctx, "deadline")
      run.interruptUnsafe()
    })
  )

const noTools: ReadonlyMap<string, Tool.Any<unknown>> = new Map()

/** The `run.started` record: what the run starts with, and what guards its tools. */
const started = <RV, R>(ctx: RunContext.RunContext, valid: Resolved<RV, R> | undefined, allowAll: boolean) => {
  const tools = valid === undefined ? [] : Array.from(valid.registry.tools.values())
  const unguarded = tools.flatMap((tool) =>
    allowAll &&
    !tool.metadata.needsApproval &&
    (tool.metadata.sideEffect === "write" || tool.metadata.sideEffect === "external")
      ? [tool.name]
      : []
  )
  RunContext.emit(ctx, {
    _tag: "run.started",
    // Invalid options are not repeated into the log: the run ends at once, saying why.
    goal: valid?.goal ?? "",
    model: valid?.modelName ?? "model",
    tools: tools.map((tool) => tool.name),
    deadlineAt: ctx.deadlineAt,
    ...(valid?.system === undefined ? {} : { system: valid.system }),
    ...(valid === undefined ? {} : { policies: valid.loop.policies.map((policy) => policy.name) }),
    permission: allowAll ? "allow_all" : "policy",
    ...(unguarded.length > 0 ? { unguardedTools: unguarded } : {}),
    ...(valid === undefined ? {} : { limits: limitsOf(valid) })
  })
}

/** The limits a run resolved to, by name, as `run.started` records them. */
const limitsOf = <RV, R>(valid: Resolved<RV, R>): Record<string, number> => {
  const { registry, loop } = valid
  const all: Record<string, number | undefined> = {
    runTimeoutMillis: valid.timeoutMillis,
    stepTimeoutMillis: registry.time.stepMillis,
    attemptTimeoutMillis: registry.time.attemptMillis,
    approvalTimeoutMillis: registry.time.approvalMillis,
    stopGraceMillis: valid.stopGraceMillis,
    concurrency: loop.concurrency,
    correctionBudget: loop.correctionBudget,
    maxRecoveries: loop.recovery.maxRecoveries,
    maxArgumentChars: registry.limits.maxArgumentChars,
    maxArgumentDepth: registry.limits.maxArgumentDepth,
    maxObservationChars: registry.limits.maxObservationChars
  }
  const limits: Record<string, number> = {}
  for (const [name, value] of Object.entries(all))
    if (value !== undefined && Number.isFinite(value)) limits[name] = value
  return limits
}

/**
 * The whole run, to be run in its own fiber: the lifecycle, interruptible by the run's
 * one deadline (a fiber of its own that interrupts this one) and by `cancel`; then,
 * uninterruptibly, the ending, which completes `done` (the fiber's own exit is an
 * interruption when it was interrupted).
 *
 * The fiber is also watched from outside: however it ends, even skipping its own ending
 * (see {@link rescue}), `done` gets a result (R12). Stopped from outside, the run gives
 * its result within the stop grace, even if what it interrupted cannot be interrupted.
 */
export const execute = <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Checked<RV, R>,
  done: Deferred.Deferred<RunResult.RunResult>,
  resume?: { readonly reason: "restart" | "manual" }
): Effect.Effect<void, never, R | RV | Model.Model> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      const self = yield* Effect.fiber
      const valid = Result.getOrUndefined(resolved)
      const tools: ReadonlyMap<string, Tool.Any<unknown>> = valid?.registry.tools ?? noTools
      // The grace is real time on purpose: a TestClock never advanced must not stall the result.
      let grace: ReturnType<typeof setTimeout> | undefined
      if (valid !== undefined) {
        const graceMillis = valid.stopGraceMillis
        ctx.onStop = () => {
          grace = setTimeout(() => {
            if (!Deferred.isDoneUnsafe(done)) {
              Deferred.doneUnsafe(done, Exit.succeed(leftBehind(ctx, tools, graceMillis)))
            }
          }, graceMillis)
          grace.unref?.()
        }
      }
      self.addObserver((exit) => {
        clearTimeout(grace)
        if (!Deferred.isDoneUnsafe(done)) Deferred.doneUnsafe(done, Exit.succeed(rescue(ctx, exit, tools)))
      })
      if (resume === undefined) started(ctx, valid, (yield* Permission.Permission) === Permission.allowAll)
      else {
        // The calls in doubt are recorded as the process's stop left them: pending until settled (R3.8).
        const doubts = valid === undefined ? [] : Loop.inDoubt(ctx, valid.loop)
        RunContext.emit(ctx, {
          _tag: "run.resumed",
          fromSeq: ctx.events.length,
          reason: resume.reason,
          inDoubt: doubts.map((d) => d.call.id)
        })
        for (const d of doubts) ToolExecutor.recordStopped(ctx, d.call, d.attempt, d.mayHaveActed)
      }
      // Invalid options end the run at once: no deadline to watch.
      const timer =
        valid === undefined ? undefined : yield* Effect.forkDetach(deadline(ctx, self), { startImmediately: true })
      // With circuit breakers, the changes this run's calls cause reach its timeline (R3.9).
      const phases = resume === undefined ? lifecycle(ctx, resolved) : resumedLifecycle(ctx, resolved)
      const body =
        ctx.breakers === undefined
          ? phases
          : Effect.provideService(phases, Breakers.Observer, (transition) => {
              RunContext.emit(ctx, { _tag: "circuit.changed", ...transition })
            })
      const exit = yield* Effect.exit(restore(body))
      clearTimeout(grace)
      if (timer !== undefined) yield* Fiber.interrupt(timer)
      // Still inside the mask: a cancel that interrupted this fiber cannot lose the result.
      const result = yield* finalize(ctx, exit, valid?.validation ?? Validation.empty, tools)
      // The result is in the journal before the caller gets it (R9).
      yield* Commit.final(ctx, result)
      yield* Deferred.succeed(done, result)
    }).pipe(Deadline.run(ctx.deadlineAt))
  )
