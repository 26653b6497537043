/**
 * The lifecycle of one run around the loop: options resolved once, the run's single
 * deadline timer, validation, and the one terminal entry point. Private to the
 * runtime; `Run` is the public face.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option } from "effect"
import * as Counters from "../Counters.ts"
import type * as Event from "../Event.ts"
import * as Failure from "../Failure.ts"
import * as Loop from "../Loop.ts"
import * as Recovery from "../Recovery.ts"
import type * as Run from "../Run.ts"
import type * as RunResult from "../RunResult.ts"
import type * as RunState from "../RunState.ts"
import type * as StopReason from "../StopReason.ts"
import * as Termination from "../Termination.ts"
import * as Tool from "../Tool.ts"
import * as ToolExecutor from "../ToolExecutor.ts"
import * as Validation from "../Validation.ts"
import * as RunContext from "./RunContext.ts"

/** Stops after which validation still runs, to tell `partial` from `failed` (R6.3). */
const assessed: ReadonlySet<StopReason.StopReason> = new Set<StopReason.StopReason>([
  "run_timeout",
  "max_tool_calls",
  "max_iterations",
  "repeated_tool_call",
  "repeated_tool_failure",
  "recovery_exhausted",
  "max_tool_errors",
  "empty_output",
  "loop_detected",
  "budget_exhausted",
  "tool_error",
  "model_error",
  "inconsistent_result"
])

export interface Resolved<RV> {
  readonly registry: ToolExecutor.Registry
  readonly loop: Loop.Config
  readonly timeoutMillis: number
  readonly validation: Validation.Spec<RV>
}

export const resolve = <RV>(options: Run.Options<Tool.Any, RV>): Resolved<RV> | string => {
  const names = new Set<string>()
  for (const tool of options.tools) {
    if (names.has(tool.name)) return `two tools are named "${tool.name}"; tool names must be unique`
    names.add(tool.name)
  }
  const limits = options.limits ?? {}
  const concurrency = options.concurrency ?? 1
  if (!Number.isInteger(concurrency) || concurrency < 1)
    return `concurrency must be an integer >= 1, got ${concurrency}`
  const correctionBudget = limits.correctionBudget ?? 3
  if (!Number.isInteger(correctionBudget) || correctionBudget < 0) {
    return `correctionBudget must be an integer >= 0, got ${correctionBudget}`
  }
  const timeout = Option.getOrUndefined(Duration.fromInput(limits.runTimeout ?? "10 minutes"))
  if (timeout === undefined || !(Duration.toMillis(timeout) > 0)) {
    return `runTimeout must be a positive duration, got ${String(limits.runTimeout)}`
  }
  let policies: ReadonlyArray<Termination.Policy>
  try {
    const defaults = Termination.defaults(limits)
    policies =
      options.policies === undefined
        ? defaults
        : typeof options.policies === "function"
          ? options.policies(defaults)
          : options.policies
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
  const maxRecoveries = limits.maxRecoveries ?? Recovery.defaults.maxRecoveries
  if (!Number.isInteger(maxRecoveries) || maxRecoveries < 0) {
    return `maxRecoveries must be an integer >= 0, got ${maxRecoveries}`
  }
  const recovery: Recovery.Settings = { schedule: options.recovery ?? Recovery.defaults.schedule, maxRecoveries }
  const registry = ToolExecutor.registry(
    options.tools,
    {
      maxArgumentChars: limits.maxArgumentChars ?? ToolExecutor.defaultLimits.maxArgumentChars,
      maxObservationChars: limits.maxObservationChars ?? ToolExecutor.defaultLimits.maxObservationChars
    },
    recovery
  )
  return {
    registry,
    timeoutMillis: Duration.toMillis(timeout),
    validation: options.validation ?? Validation.empty,
    loop: {
      registry,
      toolDefinitions: options.tools.map(Tool.definition),
      policies,
      concurrency,
      correctionBudget,
      recovery
    }
  }
}

const sideEffectsOf = (timeline: ReadonlyArray<Event.Event>): RunResult.RunResult["sideEffects"] =>
  timeline.flatMap((e) =>
    e._tag === "tool.succeeded" && (e.sideEffect === "write" || e.sideEffect === "external")
      ? [{ callId: e.callId, name: e.name, sideEffect: e.sideEffect, seq: e.seq }]
      : []
  )

/** Actions that may or may not have taken effect: they must be reconciled or reclaimed (R3.8, R5.2). */
const pendingOf = (timeline: ReadonlyArray<Event.Event>): RunResult.RunResult["pendingActions"] =>
  timeline.flatMap((e) => {
    if (e._tag === "tool.interrupted" && e.settlement === "outcome_unknown") {
      return [
        { callId: e.callId, name: e.name, idempotencyKey: `${e.runId}:${e.callId}`, detail: e.detail, seq: e.seq }
      ]
    }
    if (e._tag === "tool.failed" && e.error.failure?.classification === "unknown") {
      const detail = e.error.failure.hint
      return [{ callId: e.callId, name: e.name, idempotencyKey: `${e.runId}:${e.callId}`, detail, seq: e.seq }]
    }
    return []
  })

interface Ending {
  readonly status: RunState.Status
  readonly stopReason: StopReason.StopReason
  readonly policy: string
  readonly detail: string
  readonly finalAnswer?: string | undefined
  readonly report?: Validation.Report | undefined
}

const validateOutcome = Effect.fnUntraced(function* <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>,
  outcome: Loop.Outcome
) {
  yield* RunContext.transition(ctx, "validating")
  const report = yield* Validation.validate(spec, {
    timeline: ctx.events,
    finalAnswer: outcome.finalAnswer,
    counters: ctx.counters
  })
  for (const check of report.checks) RunContext.emit(ctx, { _tag: "validation.checked", check })
  if (outcome.reason === "goal_reached") {
    if (report.passed) {
      return {
        status: "completed",
        stopReason: "goal_reached",
        policy: outcome.policy,
        detail: outcome.detail,
        finalAnswer: outcome.finalAnswer,
        report
      } satisfies Ending
    }
    const failing = report.failed.map((c) => c.detail)
    return {
      status: "failed",
      stopReason: "validation_failed",
      policy: "validation",
      detail: `the final answer is not backed: ${failing.join("; ")}`,
      finalAnswer: outcome.finalAnswer,
      report
    } satisfies Ending
  }
  const status: RunState.Status = report.completed.length > 0 ? "partial" : "failed"
  return { status, stopReason: outcome.reason, policy: outcome.policy, detail: outcome.detail, report } satisfies Ending
})

const conclude = (ctx: RunContext.RunContext, ending: Ending): RunResult.RunResult => {
  const report = ending.report
  const unfinished = report?.unfinished ?? []
  const counters = Counters.snapshot(ctx.counters)
  return {
    runId: ctx.runId,
    status: ending.status,
    stopReason: ending.stopReason,
    policy: ending.policy,
    detail: ending.detail,
    ...(ending.finalAnswer !== undefined ? { finalAnswer: ending.finalAnswer } : {}),
    checks: report?.checks ?? [],
    evidence: report?.evidence ?? [],
    completed: report?.completed ?? [],
    unfinished,
    sideEffects: sideEffectsOf(ctx.events),
    pendingActions: pendingOf(ctx.events),
    ...(unfinished[0] !== undefined ? { nextStep: unfinished[0].description } : {}),
    checkpoint: ctx.events.length - 1,
    counters,
    elapsedMillis: counters.elapsedMillis,
    timeline: ctx.events
  }
}

/**
 * Maps an interrupted lifecycle to its ending. The deadline timer's interruption is a
 * `run_timeout`: only the plan's criteria are checked then, since they read the
 * timeline alone, while stop hooks and artifact checks would need time the run no
 * longer has.
 */
const interrupted = Effect.fnUntraced(function* <RV>(ctx: RunContext.RunContext, spec: Validation.Spec<RV>) {
  if (ctx.stop !== "deadline") {
    const detail = "the run was cancelled"
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "cancelled", detail })
    return { status: "cancelled", stopReason: "cancelled", policy: "runtime", detail } satisfies Ending as Ending
  }
  const detail = `the run deadline passed while the run was ${ctx.counters.state}`
  RunContext.emit(ctx, { _tag: "termination.decided", policy: "run_timeout", reason: "run_timeout", detail })
  return yield* validateOutcome(
    ctx,
    { plan: spec.plan },
    { reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined }
  )
})

/** Ends the run on whatever the lifecycle produced, through the one terminal entry point. */
const finalize = Effect.fnUntraced(function* <RV>(
  ctx: RunContext.RunContext,
  exit: Exit.Exit<Ending, unknown>,
  spec: Validation.Spec<RV>
) {
  let ending: Ending
  if (Exit.isSuccess(exit)) {
    ending = exit.value
  } else if (Cause.hasInterruptsOnly(exit.cause)) {
    const assessedExit = yield* Effect.exit(interrupted(ctx, spec))
    ending = Exit.isSuccess(assessedExit)
      ? assessedExit.value
      : { status: "failed", stopReason: "run_timeout", policy: "run_timeout", detail: "the run deadline passed" }
  } else {
    const detail = Failure.fromCause("runtime", exit.cause).hint
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "internal_error", detail })
    ending = { status: "failed", stopReason: "internal_error", policy: "runtime", detail }
  }
  const finished = yield* Effect.exit(RunContext.finish(ctx, ending.status, ending.stopReason))
  if (Exit.isFailure(finished)) {
    // Only a run that already ended can refuse a terminal status; keep its own ending.
    ending = { ...ending, detail: `${ending.detail} (${Cause.pretty(finished.cause)})` }
  }
  return conclude(ctx, ending)
})

const lifecycle = Effect.fnUntraced(function* <RV>(
  ctx: RunContext.RunContext,
  options: Run.Options<Tool.Any, RV>,
  resolved: Resolved<RV> | string
) {
  yield* RunContext.transition(ctx, "initializing")
  if (typeof resolved === "string") {
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "internal_error", detail: resolved })
    return {
      status: "failed",
      stopReason: "internal_error",
      policy: "runtime",
      detail: `invalid run options: ${resolved}`
    } satisfies Ending as Ending
  }
  if (options.system !== undefined) ctx.messages.push({ _tag: "system", content: options.system })
  ctx.messages.push({ _tag: "user", content: options.goal })
  yield* RunContext.transition(ctx, "planning")
  const plan = resolved.validation.plan ?? []
  if (plan.length > 0) {
    RunContext.emit(ctx, {
      _tag: "plan.set",
      steps: plan.map((s) => ({ id: s.id, description: s.description, required: s.required }))
    })
  }
  const outcome = yield* Loop.run(ctx, resolved.loop)
  if (outcome.reason === "goal_reached" || assessed.has(outcome.reason)) {
    return yield* validateOutcome(ctx, resolved.validation, outcome)
  }
  const status: RunState.Status = outcome.reason === "unknown_outcome" ? "unknown_outcome" : "failed"
  return {
    status,
    stopReason: outcome.reason,
    policy: outcome.policy,
    detail: outcome.detail
  } satisfies Ending as Ending
})

export const prepare = Effect.fnUntraced(function* <RV>(options: Run.Options<Tool.Any, RV>) {
  const clock = yield* Clock.Clock
  const resolved = resolve(options)
  const timeoutMillis = typeof resolved === "string" ? 0 : resolved.timeoutMillis
  const ctx = RunContext.make({
    runId: options.runId ?? crypto.randomUUID(),
    clock,
    deadlineAt: clock.currentTimeMillisUnsafe() + timeoutMillis
  })
  return { ctx, resolved }
})

/**
 * The whole run, to be run in its own fiber: the lifecycle, interruptible by the run's
 * one deadline timer (a child fiber that interrupts this one, so no wait inside the run
 * needs a timer of its own) and by `cancel`; then, uninterruptibly, the ending, which
 * completes `done` (the fiber's own exit is an interruption when it was interrupted).
 */
export const execute = <RV, R>(
  ctx: RunContext.RunContext,
  options: Run.Options<Tool.Any, RV>,
  resolved: Resolved<RV> | string,
  done: Deferred.Deferred<RunResult.RunResult>
): Effect.Effect<void, never, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      RunContext.emit(ctx, {
        _tag: "run.started",
        goal: options.goal,
        tools: options.tools.map((t) => t.name),
        deadlineAt: ctx.deadlineAt
      })
      const self = yield* Effect.fiber
      const timer = Effect.sleep(RunContext.remainingMillis(ctx)).pipe(
        Effect.andThen(
          Effect.sync(() => {
            if (ctx.stop === undefined) ctx.stop = "deadline"
            self.interruptUnsafe()
          })
        )
      )
      const body = Effect.andThen(Effect.forkChild(timer), lifecycle(ctx, options, resolved))
      const exit = yield* Effect.exit(restore(body as Effect.Effect<Ending, unknown, R>))
      const spec = typeof resolved === "string" ? Validation.empty : resolved.validation
      const result = yield* finalize(ctx, exit, spec) as Effect.Effect<RunResult.RunResult, never, R>
      // Still inside the mask: a cancel that interrupted this fiber cannot lose the result.
      yield* Deferred.succeed(done, result)
    })
  )
