/**
 * The lifecycle of one run around the loop: options resolved once, the run's single
 * deadline timer, validation, and the one terminal entry point. Private to the
 * runtime; `Run` is the public face.
 */
import { Cause, Clock, Context, Deferred, Duration, Effect, Exit, type Fiber, Result } from "effect"
import * as Counters from "../../events/Counters.ts"
import type * as RunState from "../../events/RunState.ts"
import * as StopReason from "../../events/StopReason.ts"
import * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import * as Breakers from "../../recovery/Breakers.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as Validation from "../../validation/Validation.ts"
import * as Loop from "../loop/Loop.ts"
import type * as RunOptions from "../RunOptions.ts"
import type * as RunResult from "../RunResult.ts"
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

const judge = (outcome: Loop.Outcome, report: Validation.Report): Ending => {
  if (outcome.reason === "goal_reached") {
    if (report.passed) {
      return {
        status: "completed",
        stopReason: "goal_reached",
        policy: outcome.policy,
        detail: outcome.detail,
        finalAnswer: outcome.finalAnswer,
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

const validateOutcome = <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>,
  outcome: Loop.Outcome
): Effect.Effect<Ending, RunState.IllegalTransition, unknown> => {
  const illegal = RunContext.advance(ctx, "validating")
  if (illegal !== undefined) return Effect.fail(illegal)
  return Effect.map(
    Validation.validate(spec, {
      timeline: ctx.events,
      finalAnswer: outcome.finalAnswer,
      // Stop hooks are user code: they get the counters as a plain object.
      counters: (spec.stopHooks?.length ?? 0) > 0 ? Counters.plain(ctx.counters) : ctx.counters
    }),
    (report) => {
      for (const check of report.checks) RunContext.emit(ctx, { _tag: "validation.checked", check })
      // Validation may have run past the deadline (a stop hook that blocked): no answer is
      // accepted once it has passed (R3.11), so the run ends run_timeout on this report.
      if (outcome.reason === "goal_reached" && RunContext.deadlinePassed(ctx)) {
        const detail = "the run deadline passed while the run was validating"
        RunContext.emit(ctx, { _tag: "termination.decided", policy: "run_timeout", reason: "run_timeout", detail })
        return judge({ reason: "run_timeout", policy: "run_timeout", detail, finalAnswer: undefined }, report)
      }
      return judge(outcome, report)
    }
  )
}

/**
 * Maps an interrupted lifecycle to its ending. The deadline timer's interruption is a
 * `run_timeout`: only the plan's criteria are checked then, since they read the
 * timeline alone, while stop hooks and artifact checks would need time the run no
 * longer has.
 */
const interrupted = <RV>(
  ctx: RunContext.RunContext,
  spec: Validation.Spec<RV>
): Effect.Effect<Ending, unknown, unknown> => {
  if (ctx.stop !== "deadline") {
    const detail = "the run was cancelled"
    RunContext.emit(ctx, { _tag: "termination.decided", policy: "runtime", reason: "cancelled", detail })
    return Exit.succeed({ status: "cancelled", stopReason: "cancelled", policy: "runtime", detail })
  }
  const detail = `the run deadline passed while the run was ${ctx.stoppedIn ?? ctx.tally.state}`
  RunContext.emit(ctx, { _tag: "termination.decided", policy: "run_timeout", reason: "run_timeout", detail })
  return validateOutcome(
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
const finalize = <RV>(
  ctx: RunContext.RunContext,
  exit: Exit.Exit<Ending, unknown>,
  spec: Validation.Spec<RV>,
  tools: ReadonlyMap<string, Tool.Any>
): Effect.Effect<RunResult.RunResult, never, unknown> => {
  // A model call the deadline cut off is recorded as failed (no timer of its own fired).
  const waited = ctx.waitingOnModel
  if (waited !== undefined) {
    ctx.waitingOnModel = undefined
    if (ctx.stop === "deadline") {
      const afterMillis = Math.max(0, ctx.deadlineAt - ctx.startedAt)
      const failure = FailureBoundary.timeout({ source: "provider", layer: "run", afterMillis })
      RunContext.emit(ctx, { _tag: "model.failed", iteration: waited, failure: Failure.summarize(failure) })
    }
  }
  if (Exit.isSuccess(exit)) return Exit.succeed(end(ctx, exit.value))
  if (Cause.hasInterruptsOnly(exit.cause)) {
    return Effect.map(Effect.exit(interrupted(ctx, spec)), (assessed) =>
      end(ctx, Exit.isSuccess(assessed) ? assessed.value : timedOut)
    )
  }
  return Exit.succeed(broken(ctx, exit.cause, tools))
}

const lifecycle = <RV>(
  ctx: RunContext.RunContext,
  checked: Result.Result<Resolved<RV>, RunOptions.InvalidRunOptions>
): Effect.Effect<Ending, unknown, unknown> => {
  const initializing = RunContext.advance(ctx, "initializing")
  if (initializing !== undefined) return Effect.fail(initializing)
  if (Result.isFailure(checked)) {
    const invalid = checked.failure
    RunContext.emit(ctx, {
      _tag: "termination.decided",
      policy: "runtime",
      reason: "internal_error",
      detail: `${invalid.field}: ${invalid.reason}`
    })
    return Exit.succeed({ status: "failed", stopReason: "internal_error", policy: "runtime", detail: invalid.message })
  }
  const resolved = checked.success
  if (resolved.system !== undefined) ctx.messages.push({ _tag: "system", content: resolved.system })
  ctx.messages.push({ _tag: "user", content: resolved.goal })
  const planning = RunContext.advance(ctx, "planning")
  if (planning !== undefined) return Effect.fail(planning)
  const plan = resolved.validation.plan ?? []
  if (plan.length > 0) {
    RunContext.emit(ctx, {
      _tag: "plan.set",
      steps: plan.map((s) => ({ id: s.id, description: s.description, required: s.required }))
    })
  }
  return Effect.flatMap(Loop.run(ctx, resolved.loop), (outcome): Effect.Effect<Ending, unknown, unknown> => {
    // Past the deadline only the plan's criteria are checked: they read the timeline alone,
    // while stop hooks and artifact checks would need time the run no longer has.
    if (outcome.reason === "run_timeout") return validateOutcome(ctx, { plan: resolved.validation.plan }, outcome)
    if (outcome.reason === "goal_reached" || assessed.has(outcome.reason)) {
      return validateOutcome(ctx, resolved.validation, outcome)
    }
    const status: RunState.Status = outcome.reason === "unknown_outcome" ? "unknown_outcome" : "failed"
    return Exit.succeed({ status, stopReason: outcome.reason, policy: outcome.policy, detail: outcome.detail })
  })
}

/** The run's context, with its options resolved once; the clock is the caller's. */
export const prepare = <RV>(
  options: RunOptions.Options<Tool.Any, RV>,
  clock: Clock.Clock,
  breakers: Breakers.Service | undefined
): {
  readonly ctx: RunContext.RunContext
  readonly resolved: Result.Result<Resolved<RV>, RunOptions.InvalidRunOptions>
} => {
  const resolved = resolve(options)
  const valid = Result.getOrUndefined(resolved)
  const timeoutMillis = valid === undefined ? 0 : valid.timeoutMillis
  const ctx = RunContext.make({
    runId: valid?.runId ?? randomRunId(),
    clock,
    deadlineAt: clock.currentTimeMillisUnsafe() + timeoutMillis,
    breakers
  })
  return { ctx, resolved }
}

/** Interrupts the run at its deadline (the timer has fired), saying who stopped it. */
const expire = (ctx: RunContext.RunContext, run: Fiber.Fiber<unknown, unknown>): void => {
  RunContext.stoppedBy(ctx, "deadline")
  run.interruptUnsafe()
}

/**
 * The run's one deadline timer on any `Clock` (a `TestClock` in tests): a fiber that
 * sleeps on the clock until the deadline, then interrupts the run's fiber.
 */
const deadlineFiber = (ctx: RunContext.RunContext, run: Fiber.Fiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.map(ctx.clock.sleep(Duration.millis(RunContext.remainingMillis(ctx))), () => expire(ctx, run))

const noTools: ReadonlyMap<string, Tool.Any> = new Map()

/** Effect's own clock, the one a run uses unless a test or a layer provides another. */
const systemClock = Context.get(Context.empty(), Clock.Clock)

/** `setTimeout`'s limit, which Effect's clock also splits longer sleeps at. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * The same timer on Effect's own clock, which sleeps with `setTimeout`: a plain
 * `setTimeout`, without the fiber (and its async context) a sleep needs. Returns how
 * to stop it.
 */
const deadlineTimeout = (ctx: RunContext.RunContext, run: Fiber.Fiber<unknown, unknown>): (() => void) => {
  let handle: ReturnType<typeof setTimeout> | undefined
  const arm = (millis: number): void => {
    // Like the clock's sleep: an infinite deadline never fires; a long one is waited in parts.
    if (!Number.isFinite(millis)) return
    handle =
      millis > maxTimerMillis
        ? setTimeout(() => arm(millis - maxTimerMillis), maxTimerMillis)
        : setTimeout(() => expire(ctx, run), Math.max(0, millis))
  }
  arm(RunContext.remainingMillis(ctx))
  return () => clearTimeout(handle)
}

/**
 * The whole run, to be run in its own fiber: the lifecycle, interruptible by the run's
 * one deadline timer (a fiber of its own that interrupts this one, so no wait inside
 * the run needs a timer of its own) and by `cancel`; then, uninterruptibly, the
 * ending, which completes `done` (the fiber's own exit is an interruption when it was
 * interrupted). The timer stops as soon as the lifecycle has ended.
 *
 * The fiber is also watched from outside: however it ends, even skipping its own
 * ending (see {@link rescue}), `done` gets a result and the timer stops (R12).
 */
export const execute = <RV, R>(
  ctx: RunContext.RunContext,
  resolved: Result.Result<Resolved<RV>, RunOptions.InvalidRunOptions>,
  done: Deferred.Deferred<RunResult.RunResult>
): Effect.Effect<void, never, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiber((self) => {
      let stopTimer = (): void => {}
      const valid = Result.getOrUndefined(resolved)
      const tools = valid === undefined ? noTools : valid.registry.tools
      // Stopped from outside, the run gives its result within the stop grace, even if what it
      // interrupted cannot be interrupted (real time: a TestClock never advanced must not stall it).
      let grace: ReturnType<typeof setTimeout> | undefined
      if (valid !== undefined) {
        const graceMillis = valid.stopGraceMillis
        ctx.onStop = () => {
          grace = setTimeout(() => {
            if (!Deferred.isDoneUnsafe(done))
              Deferred.doneUnsafe(done, Exit.succeed(leftBehind(ctx, tools, graceMillis)))
          }, graceMillis)
          grace.unref?.()
        }
      }
      self.addObserver((exit) => {
        clearTimeout(grace)
        stopTimer()
        if (!Deferred.isDoneUnsafe(done)) Deferred.doneUnsafe(done, Exit.succeed(rescue(ctx, exit, tools)))
      })
      const allowAll = self.getRef(Permission.Permission) === Permission.allowAll
      const unguarded = Array.from(tools.values()).flatMap((tool) =>
        allowAll &&
        !tool.metadata.needsApproval &&
        (tool.metadata.sideEffect === "write" || tool.metadata.sideEffect === "external")
          ? [tool.name]
          : []
      )
      RunContext.record(ctx, {
        _tag: "run.started",
        // Invalid options are not repeated into the log: the run ends at once, saying why.
        goal: valid?.goal ?? "",
        model: valid?.modelName ?? "model",
        tools: valid === undefined ? [] : Array.from(valid.registry.tools.keys()),
        deadlineAt: ctx.deadlineAt,
        ...(valid?.system === undefined ? {} : { system: valid.system }),
        ...(valid === undefined ? {} : { policies: valid.loop.policies.map((policy) => policy.name) }),
        permission: allowAll ? "allow_all" : "policy",
        ...(unguarded.length > 0 ? { unguardedTools: unguarded } : {}),
        runId: ctx.runId,
        seq: 0,
        at: 0
      })
      const run = Effect.suspend(() => lifecycle(ctx, resolved))
      // With circuit breakers, the changes this run's calls cause reach its timeline (R3.9).
      const observed =
        ctx.breakers === undefined
          ? run
          : Effect.provideService(run, Breakers.Observer, (transition) => {
              RunContext.emit(ctx, { _tag: "circuit.changed", ...transition })
            })
      const body = Effect.flatMap(Effect.exit(restore(observed)), (exit) => {
        clearTimeout(grace)
        stopTimer()
        const spec = valid === undefined ? Validation.empty : valid.validation
        // Still inside the mask: a cancel that interrupted this fiber cannot lose the result.
        return Effect.flatMap(finalize(ctx, exit, spec, tools), (result) => Deferred.succeed(done, result))
      })
      // Invalid options end the run at once: no deadline to watch.
      if (valid === undefined) return body
      if (ctx.clock === systemClock) {
        stopTimer = deadlineTimeout(ctx, self)
        return body
      }
      return Effect.flatMap(Effect.forkDetach(deadlineFiber(ctx, self), { startImmediately: true }), (timer) => {
        stopTimer = () => timer.interruptUnsafe()
        return body
      })
    })
  ) as Effect.Effect<void, never, R>
