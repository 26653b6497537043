/**
 * A run: the lifecycle around the agent loop, as one Effect that always ends with a
 * {@link RunResult.RunResult} (principle 1).
 *
 * created → initializing → planning → the loop (model_thinking ⇄ tool_executing, with
 * recovering between) → validating → a terminal status. Every way a run can end maps
 * to a result: a final answer that validation backs is `completed`; a final answer
 * that validation refutes is `failed` with `validation_failed`; a budget or hard stop
 * is `partial` when some plan steps were done and `failed` otherwise; cancellation is
 * `cancelled`; a defect anywhere is `failed` with `internal_error`. Nothing escapes as
 * an unhandled rejection and nothing hangs past the run deadline.
 *
 * `run` runs inline; `start` runs in the background and returns a {@link Handle} with
 * the live timeline as a `Stream`, the result, and `cancel`.
 *
 * @since 0.1.0
 */
import {
  Cause,
  Clock,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  type FileSystem,
  Option,
  type Path,
  PubSub,
  type Scope,
  Stream
} from "effect"
import * as Counters from "./Counters.ts"
import type * as Event from "./Event.ts"
import * as Failure from "./Failure.ts"
import * as RunContext from "./internal/RunContext.ts"
import * as Loop from "./Loop.ts"
import type * as Model from "./Model.ts"
import * as Recovery from "./Recovery.ts"
import type * as RunResult from "./RunResult.ts"
import type * as RunState from "./RunState.ts"
import type * as StopReason from "./StopReason.ts"
import * as Termination from "./Termination.ts"
import * as Tool from "./Tool.ts"
import * as ToolExecutor from "./ToolExecutor.ts"
import * as Validation from "./Validation.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Options<T extends Tool.Any = Tool.Any, RV = never> {
  /** The task, sent to the model as the first user message. */
  readonly goal: string
  readonly system?: string | undefined
  readonly tools: ReadonlyArray<T>
  readonly limits?: Limits | undefined
  /**
   * The termination policies, in evaluation order. Default: `Termination.defaults(limits)`.
   * Pass a function to edit the defaults: `(defaults) => Termination.remove(defaults, "loop_detected")`.
   */
  readonly policies?:
    | ReadonlyArray<Termination.Policy>
    | ((defaults: ReadonlyArray<Termination.Policy>) => ReadonlyArray<Termination.Policy>)
    | undefined
  /** How many calls of one batch run at once. Default 1; results always keep call order. */
  readonly concurrency?: number | undefined
  readonly validation?: Validation.Spec<RV> | undefined
  /** Default: a random UUID. */
  readonly runId?: string | undefined
  /**
   * The delays of one recovery episode (R3.3). Default `Recovery.backoff()`: 50 ms then
   * 100 ms, jittered. Every retry also draws on `limits.maxRecoveries`.
   */
  readonly recovery?: Recovery.Backoff | undefined
}

/**
 * @category models
 * @since 0.1.0
 */
export interface Limits extends Termination.Limits {
  /** The run deadline, from the run's start by Effect's `Clock`. Default 10 minutes. */
  readonly runTimeout?: Duration.Input | undefined
  /** How many argument corrections the model gets in one run (R3.5). Default 3. */
  readonly correctionBudget?: number | undefined
  /** How many retries the run may make in all, provider and tools together (R3.4). Default 8. */
  readonly maxRecoveries?: number | undefined
  readonly maxArgumentChars?: number | undefined
  readonly maxObservationChars?: number | undefined
}

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

interface Resolved<RV> {
  readonly registry: ToolExecutor.Registry
  readonly loop: Loop.Config
  readonly timeoutMillis: number
  readonly validation: Validation.Spec<RV>
}

const resolve = <RV>(options: Options<Tool.Any, RV>): Resolved<RV> | string => {
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
    ...(unfinished[0] !== undefined ? { nextStep: unfinished[0].description } : {}),
    checkpoint: ctx.events.length - 1,
    counters,
    elapsedMillis: counters.elapsedMillis,
    timeline: ctx.events
  }
}

/** Ends the run on whatever the lifecycle produced, through the one terminal entry point. */
const finalize = (ctx: RunContext.RunContext, exit: Exit.Exit<Ending, unknown>): Effect.Effect<RunResult.RunResult> => {
  let ending: Ending
  if (Exit.isSuccess(exit)) {
    ending = exit.value
  } else if (Cause.hasInterruptsOnly(exit.cause)) {
    RunContext.emit(ctx, {
      _tag: "termination.decided",
      policy: "runtime",
      reason: "cancelled",
      detail: "the run was cancelled"
    })
    ending = { status: "cancelled", stopReason: "cancelled", policy: "runtime", detail: "the run was cancelled" }
  } else {
    const failure = Failure.fromCause("runtime", exit.cause)
    const detail = `${failure.hint}`
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "internal_error", detail })
    ending = { status: "failed", stopReason: "internal_error", policy: "runtime", detail }
  }
  return RunContext.finish(ctx, ending.status, ending.stopReason).pipe(
    Effect.catch((illegal) =>
      // Only a run that already ended can refuse a terminal status; keep its own ending.
      Effect.sync(() => {
        ending = { ...ending, detail: `${ending.detail} (${illegal.message})` }
      })
    ),
    Effect.map(() => conclude(ctx, ending))
  )
}

const lifecycle = Effect.fnUntraced(function* <RV>(
  ctx: RunContext.RunContext,
  options: Options<Tool.Any, RV>,
  resolved: Resolved<RV> | string,
  cancelled: Deferred.Deferred<void>
) {
  yield* RunContext.transition(ctx, "initializing")
  if (typeof resolved === "string") {
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "internal_error", detail: resolved })
    return {
      status: "failed",
      stopReason: "internal_error",
      policy: "runtime",
      detail: `invalid run options: ${resolved}`
    } satisfies Ending
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
  const outcome = yield* Effect.raceFirst(
    Loop.run(ctx, resolved.loop),
    Deferred.await(cancelled).pipe(Effect.andThen(Effect.interrupt))
  )
  if (outcome.reason === "goal_reached" || assessed.has(outcome.reason)) {
    return yield* validateOutcome(ctx, resolved.validation, outcome)
  }
  const status: RunState.Status = outcome.reason === "unknown_outcome" ? "unknown_outcome" : "failed"
  return { status, stopReason: outcome.reason, policy: outcome.policy, detail: outcome.detail } satisfies Ending
})

const prepare = Effect.fnUntraced(function* <RV>(options: Options<Tool.Any, RV>) {
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

const execute = <RV, R>(
  ctx: RunContext.RunContext,
  options: Options<Tool.Any, RV>,
  resolved: Resolved<RV> | string,
  cancelled: Deferred.Deferred<void>
): Effect.Effect<RunResult.RunResult, never, R> => {
  RunContext.emit(ctx, {
    _tag: "run.started",
    goal: options.goal,
    tools: options.tools.map((t) => t.name),
    deadlineAt: ctx.deadlineAt
  })
  const body = lifecycle(ctx, options, resolved, cancelled) as Effect.Effect<Ending, unknown, R>
  return Effect.exit(body).pipe(Effect.flatMap((exit) => finalize(ctx, exit)))
}

/**
 * The services a run needs: the model, what its tools and validation hooks need, and
 * the file system validation reads artifacts with (`NodeServices.layer` on Node).
 *
 * @category models
 * @since 0.1.0
 */
export type Requirements<T extends Tool.Any, RV> =
  | Model.Model
  | Tool.Requirements<T>
  | RV
  | FileSystem.FileSystem
  | Path.Path

/**
 * Runs an agent to its end, inline. Interrupting the fiber cancels the run, but the
 * caller then gets no result: to cancel and still read the result, use {@link start}.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = <T extends Tool.Any, RV = never>(
  options: Options<T, RV>
): Effect.Effect<RunResult.RunResult, never, Requirements<T, RV>> =>
  Effect.gen(function* () {
    const { ctx, resolved } = yield* prepare(options)
    const cancelled = yield* Deferred.make<void>()
    return yield* execute<RV, Requirements<T, RV>>(ctx, options, resolved, cancelled)
  })

/**
 * A run started in the background.
 *
 * @category models
 * @since 0.1.0
 */
export interface Handle {
  readonly runId: string
  /** Every event from the first, then live ones, ending with `run.finished`. */
  readonly events: Stream.Stream<Event.Event>
  /** The run's current state, for a UI that shows the phase (R1.3). */
  readonly state: Effect.Effect<RunState.State>
  /** Waits for the result. */
  readonly result: Effect.Effect<RunResult.RunResult>
  /** Cancels the run (R5.1) and waits for its result, which is then `cancelled` unless it had already ended. */
  readonly cancel: Effect.Effect<RunResult.RunResult>
}

/**
 * Starts a run in the background, in the current scope: closing the scope cancels it.
 *
 * @category combinators
 * @since 0.1.0
 */
export const start = <T extends Tool.Any, RV = never>(
  options: Options<T, RV>
): Effect.Effect<Handle, never, Requirements<T, RV> | Scope.Scope> =>
  Effect.gen(function* () {
    const { ctx, resolved } = yield* prepare(options)
    const pubsub = yield* PubSub.unbounded<Event.Event>()
    ctx.listeners.push((event) => {
      PubSub.publishUnsafe(pubsub, event)
    })
    const cancelled = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkScoped(execute<RV, Requirements<T, RV>>(ctx, options, resolved, cancelled))
    const events = Stream.unwrap(
      Effect.gen(function* () {
        const subscription = yield* PubSub.subscribe(pubsub)
        const past = ctx.events.slice()
        const live = Stream.fromSubscription(subscription).pipe(Stream.filter((e) => e.seq >= past.length))
        return Stream.concat(Stream.fromIterable(past), live).pipe(Stream.takeUntil((e) => e._tag === "run.finished"))
      })
    )
    const result = Fiber.join(fiber)
    return {
      runId: ctx.runId,
      events,
      state: Effect.sync(() => ctx.counters.state),
      result,
      cancel: Deferred.succeed(cancelled, undefined).pipe(Effect.andThen(result))
    } satisfies Handle
  })
