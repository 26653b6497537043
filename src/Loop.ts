/**
 * The agent loop: ask the model, check the termination policies, run the tool batch,
 * check again, until a policy or a hard stop ends it.
 *
 * The loop never decides whether the run *succeeded*: it returns an {@link Outcome}
 * (why it stopped, and the final answer if there was one), and `Run` takes it through
 * validation. A final answer is only a candidate (R6.1).
 *
 * @since 0.1.0
 */
import { Cause, Effect, Exit, Result } from "effect"
import * as Failure from "./Failure.ts"
import * as FailureBoundary from "./FailureBoundary.ts"
import * as ApprovalWait from "./internal/ApprovalWait.ts"
import * as RunContext from "./internal/RunContext.ts"
import * as Model from "./Model.ts"
import * as Permission from "./Permission.ts"
import * as Recovery from "./Recovery.ts"
import type * as RunState from "./RunState.ts"
import * as Signature from "./Signature.ts"
import type * as StopReason from "./StopReason.ts"
import * as Termination from "./Termination.ts"
import * as ToolExecutor from "./ToolExecutor.ts"
import type * as ToolResult from "./ToolResult.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Config {
  readonly registry: ToolExecutor.Registry
  readonly toolDefinitions: ReadonlyArray<Model.ToolDefinition>
  readonly policies: ReadonlyArray<Termination.Policy>
  /** How many calls of one batch run at once. Default 1 (sequential); results keep call order. */
  readonly concurrency: number
  /** How many argument corrections the model gets in one run (R3.5). */
  readonly correctionBudget: number
  readonly recovery: Recovery.Settings
  /** Whether any tool needs approval (R7): only then can a batch end in an approval's stop. */
  readonly approvals: boolean
}

/**
 * Why the loop stopped.
 *
 * @category models
 * @since 0.1.0
 */
export interface Outcome {
  readonly reason: StopReason.StopReason
  /** The policy that decided, or `runtime` for a hard stop the loop itself took. */
  readonly policy: string
  readonly detail: string
  readonly finalAnswer: string | undefined
}

const decide = (
  ctx: RunContext.RunContext,
  policy: string,
  reason: StopReason.StopReason,
  detail: string,
  finalAnswer?: string
): Outcome => {
  RunContext.emit(ctx, { _tag: "termination.decided", policy, reason, detail })
  return { reason, policy, detail, finalAnswer }
}

const remind = (ctx: RunContext.RunContext, kind: string, text: string): void => {
  RunContext.emit(ctx, { _tag: "reminder.injected", kind, text })
  ctx.messages.push({ _tag: "user", content: `[runtime reminder: ${kind}] ${text}` })
}

const checkpoint = (
  ctx: RunContext.RunContext,
  config: Config,
  phase: Termination.Checkpoint["phase"],
  finalAnswer?: string
): Outcome | undefined => {
  const verdict = Termination.evaluate(config.policies, {
    phase,
    counters: ctx.counters,
    now: RunContext.now(ctx),
    deadlineAt: ctx.deadlineAt
  })
  for (const warning of verdict.warnings) remind(ctx, warning.kind, warning.text)
  if (verdict.stop === undefined) return undefined
  const { policy, reason, detail } = verdict.stop
  return decide(ctx, policy, reason, detail, reason === "goal_reached" ? finalAnswer : undefined)
}

/** Maps a model call recovery gave up on to the run's stop (R3.3). */
const giveUp = (ctx: RunContext.RunContext, exhausted: Recovery.Exhausted): Outcome => {
  const { failure, why, detail } = exhausted
  const what = `the model call failed with ${failure.code} (${failure.hint})`
  switch (why) {
    case "deadline":
      return decide(ctx, "run_timeout", "run_timeout", `${what}; ${detail}`)
    case "step_deadline":
      return decide(ctx, "step_timeout", "step_timeout", `${what}; ${detail}`)
    case "not_retryable":
    case "not_allowed":
      return decide(ctx, "runtime", "model_error", `${what}; ${detail}`)
    case "owner_retried":
    case "schedule_exhausted":
    case "run_budget":
      return decide(ctx, "recovery_exhausted", "recovery_exhausted", `${what}; ${detail}`)
  }
}

/** Hard stops a tool result forces, whatever the policies say (R3.7, R3.8, R6.4). */
const hardStop = (ctx: RunContext.RunContext, config: Config, results: ReadonlyArray<ToolResult.ToolResult>) => {
  // An unknown outcome anywhere in the batch outranks any other stop: it must be reconciled.
  for (const result of results) {
    const failure = result.error?.failure
    if (failure?.classification === "unknown") {
      return decide(ctx, "runtime", "unknown_outcome", `${result.name} (${result.callId}): ${failure.hint}`)
    }
  }
  for (const result of results) {
    if (result.status === "inconsistent") {
      return decide(
        ctx,
        "runtime",
        "inconsistent_result",
        `${result.name} (${result.callId}): ${result.error?.message}`
      )
    }
    const failure = result.error?.failure
    if (failure === undefined) continue
    if (failure.classification === "unknown") {
      return decide(ctx, "runtime", "unknown_outcome", `${result.name} (${result.callId}): ${failure.hint}`)
    }
    // A call the run deadline cut off is the deadline's stop, not the tool's error.
    if (RunContext.remainingMillis(ctx) <= 0) {
      return decide(ctx, "run_timeout", "run_timeout", "the run deadline passed during the tool batch")
    }
    const recovers = config.registry.tools.get(result.name)?.metadata.recoverErrors === true
    // A call the step deadline cut off ends the step: the step's stop, unless the tool
    // hands its errors to the model (which then gets a fresh step).
    if (failure.code === "step_timeout" && !recovers) {
      return decide(ctx, "step_timeout", "step_timeout", `${result.name} (${result.callId}): ${failure.hint}`)
    }
    if (!recovers) {
      return decide(
        ctx,
        "runtime",
        "tool_error",
        `${result.name} (${result.callId}) failed with ${failure.code}: ${failure.hint}; the tool does not opt in to recovering its errors`
      )
    }
  }
  return undefined
}

/** A model call that ended the run instead of answering. */
class Stopped {
  readonly outcome: Outcome
  constructor(outcome: Outcome) {
    this.outcome = outcome
  }
}

/** What the loop fails with: only what reaches it through an interruption or a broken invariant. */
type LoopError = ToolExecutor.ExecutionError

const modelError = (ctx: RunContext.RunContext, cause: Cause.Cause<LoopError>): Effect.Effect<Stopped, LoopError> => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
  const squashed = Cause.squash(cause)
  if (!Recovery.isExhausted(squashed)) {
    const failure = Failure.fromCause("provider", cause)
    return Exit.succeed(new Stopped(decide(ctx, "runtime", "model_error", `the model call failed: ${failure.hint}`)))
  }
  return Exit.succeed(new Stopped(giveUp(ctx, squashed)))
}

const recordModelFailure = (ctx: RunContext.RunContext, iteration: number, failure: Failure.Failure): void => {
  RunContext.emit(ctx, { _tag: "model.failed", iteration, failure: Failure.summarize(failure) })
}

/**
 * What the wrapper of a model call makes of its failure: a defect is the provider's
 * failure, and every failure is recorded on the timeline.
 */
const modelFailure = (
  ctx: RunContext.RunContext,
  iteration: number,
  cause: Cause.Cause<Failure.Failure>
): Cause.Cause<Failure.Failure> => {
  const defect = Cause.findDefect(cause)
  const settled = Result.isSuccess(defect) ? Cause.fail(Failure.fromDefect("provider", defect.success)) : cause
  const error = Cause.findError(settled)
  if (Result.isSuccess(error)) recordModelFailure(ctx, iteration, error.success)
  return settled
}

/**
 * Calls the model now, recording the request; a call that throws is a defect of the
 * provider. The call gets min(the attempt timeout, what is left of the step, what is
 * left of the run) (R4.2): its request says so (`deadlineAt`), and a call still
 * running then is cut off here with a timeout naming the layer. When the run's own
 * deadline is the tightest, its timer does the cutting and no second timer is needed.
 */
const generate = (
  ctx: RunContext.RunContext,
  config: Config,
  model: Model.Model["Service"],
  iteration: number
): Effect.Effect<Model.Response, Failure.Failure> => {
  RunContext.record(ctx, { _tag: "model.requested", iteration, runId: ctx.runId, seq: 0, at: 0 })
  const attemptMillis = config.registry.time.attemptMillis
  const bounded = attemptMillis !== undefined || ctx.stepDeadlineAt !== Number.POSITIVE_INFINITY
  const limit = bounded ? RunContext.bound(ctx, attemptMillis, "attempt") : undefined
  let call: Effect.Effect<Model.Response, Failure.Failure>
  try {
    call = model.generate({
      runId: ctx.runId,
      iteration,
      messages: ctx.messages,
      tools: config.toolDefinitions,
      deadlineAt: limit === undefined ? ctx.deadlineAt : RunContext.now(ctx) + limit.millis
    })
  } catch (defect) {
    return Exit.die(defect)
  }
  if (limit === undefined || limit.layer === "run" || Exit.isExit(call)) return call
  const { millis, layer } = limit
  return Effect.timeoutOrElse(call, {
    duration: millis,
    orElse: () => Effect.fail(FailureBoundary.timeout({ source: "provider", layer, afterMillis: millis }))
  })
}

/**
 * One model call with its wrapper, for retries: waits are marked for the deadline
 * (see `RunContext.waitingOnModel`), failures recorded.
 */
const attempt = (
  ctx: RunContext.RunContext,
  config: Config,
  model: Model.Model["Service"],
  iteration: number
): Effect.Effect<Model.Response, Failure.Failure> =>
  Effect.suspend(() => {
    const call = generate(ctx, config, model, iteration)
    ctx.waitingOnModel = iteration
    return Effect.matchCauseEffect(call, {
      onSuccess: (response) => {
        ctx.waitingOnModel = undefined
        return Exit.succeed(response)
      },
      onFailure: (cause) => {
        ctx.waitingOnModel = undefined
        return Exit.failCause(modelFailure(ctx, iteration, cause))
      }
    })
  })

/** Recovery of a failed first call (R3.3), and the stop it ends in when recovery gives up. */
const recoverModel = (
  ctx: RunContext.RunContext,
  config: Config,
  model: Model.Model["Service"],
  iteration: number,
  cause: Cause.Cause<Failure.Failure>
): Effect.Effect<Model.Response | Stopped, LoopError> =>
  Effect.catchCause(
    Recovery.recoverFrom(
      ctx,
      {
        kind: "provider_retry",
        source: "provider",
        resume: "model_thinking",
        schedule: config.recovery.schedule,
        maxRecoveries: config.recovery.maxRecoveries,
        maxRetries: Number.POSITIVE_INFINITY,
        allowed: true
      },
      () => attempt(ctx, config, model, iteration),
      modelFailure(ctx, iteration, cause)
    ),
    (cause) => modelError(ctx, cause)
  )

/**
 * The model call of one iteration: the response, or the stop a failure recovery gave
 * up on ended in. No timer per call: the run's one deadline timer interrupts whatever
 * is waiting, and the timeline says which call it cut off (`waitingOnModel`). A call
 * that has already finished (an `Exit`) is used as it is.
 */
const callModel = (
  ctx: RunContext.RunContext,
  config: Config,
  model: Model.Model["Service"],
  iteration: number
): Effect.Effect<Model.Response | Stopped, LoopError> => {
  const call = generate(ctx, config, model, iteration)
  if (Exit.isExit(call)) {
    const done = call as Exit.Exit<Model.Response, Failure.Failure>
    return Exit.isSuccess(done) ? done : recoverModel(ctx, config, model, iteration, done.cause)
  }
  ctx.waitingOnModel = iteration
  return Effect.catchCause(call, (cause) => {
    ctx.waitingOnModel = undefined
    return recoverModel(ctx, config, model, iteration, cause)
  })
}

/** A response with no tool calls that was not an answer: ask again. */
const again: unique symbol = Symbol.for("effect-agent-runtime/Loop/again")

/** What one phase of an iteration hands to the next. */
type Signal = Model.Response | ReadonlyArray<ToolResult.ToolResult> | Stopped | typeof again

const batchOfOne = (result: ToolResult.ToolResult): ReadonlyArray<ToolResult.ToolResult> => [result]

/** Where an iteration stands: about to ask the model, holding its answer, or holding the tool results. */
type Phase = "ask" | "answered" | "executed"

/** The result of an effect that has already finished, or `undefined` when it is still to run. */
const finished = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? (effect as Exit.Exit<A, E>) : undefined

/**
 * One run of the loop. The iterations run synchronously for as long as every call
 * has already finished (an `Exit`); a call that has to be waited on suspends the loop
 * in one continuation, which resumes it in the phase after the wait.
 */
class Turns {
  readonly ctx: RunContext.RunContext
  readonly config: Config
  readonly model: Model.Model["Service"]
  readonly permission: Permission.PermissionService
  /** Tools with an argument correction outstanding, and the attempt number it was. */
  corrections: Map<string, number> | undefined = undefined
  /** The iteration being run. */
  iteration = 0
  constructor(
    ctx: RunContext.RunContext,
    config: Config,
    model: Model.Model["Service"],
    permission: Permission.PermissionService
  ) {
    this.ctx = ctx
    this.config = config
    this.model = model
    this.permission = permission
  }

  /** Runs from `phase` with `signal` until the loop stops (an `Exit`) or waits (an effect that resumes it). */
  drive(phase: Phase, signal: Signal | undefined): Effect.Effect<Outcome, LoopError, unknown> {
    while (true) {
      if (signal instanceof Stopped) return Exit.succeed(signal.outcome)
      if (signal === again) phase = "ask"
      let next: Effect.Effect<Signal, LoopError, unknown>
      switch (phase) {
        case "ask":
          next = this.ask()
          phase = "answered"
          break
        case "answered":
          next = this.answered(signal as Model.Response)
          phase = "executed"
          break
        case "executed": {
          const stop = this.executed(signal as ReadonlyArray<ToolResult.ToolResult>)
          if (stop instanceof Stopped) return Exit.succeed(stop.outcome)
          if (stop !== undefined) return Exit.fail(stop)
          phase = "ask"
          signal = undefined
          continue
        }
      }
      const done = finished(next)
      if (done === undefined) {
        const resume = phase
        return Effect.flatMap(next, (signal) => this.drive(resume, signal))
      }
      if (Exit.isFailure(done)) return Exit.failCause(done.cause)
      signal = done.value
    }
  }

  /** The top of an iteration: the phase, the deadline, then the model call. */
  ask(): Effect.Effect<Model.Response | Stopped, LoopError> {
    const ctx = this.ctx
    const thinking = RunContext.advance(ctx, "model_thinking")
    if (thinking !== undefined) return Exit.fail(thinking)
    this.iteration = ctx.tally.iterations + 1
    if (RunContext.remainingMillis(ctx) <= 0) {
      return Exit.succeed(
        new Stopped(decide(ctx, "run_timeout", "run_timeout", "the run deadline passed before the model call"))
      )
    }
    const stepMillis = this.config.registry.time.stepMillis
    if (stepMillis !== undefined) ctx.stepDeadlineAt = RunContext.now(ctx) + stepMillis
    return callModel(ctx, this.config, this.model, this.iteration)
  }

  /** The model answered: record it, check the policies, then run its tool batch. */
  answered(
    response: Model.Response
  ): Effect.Effect<ReadonlyArray<ToolResult.ToolResult> | Stopped | typeof again, LoopError, unknown> {
    const { ctx, config } = this
    ctx.waitingOnModel = undefined
    const calls = response.toolCalls
    // Each call's arguments are parsed once, for its signature and for the executor.
    const parsed: Array<ToolExecutor.ParsedArguments> = new Array(calls.length)
    const signatures: Array<string> = new Array(calls.length)
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i] as Model.ToolCall
      const args = ToolExecutor.parseArguments(call.arguments, config.registry.limits)
      parsed[i] = args
      signatures[i] =
        args._tag === "Ok"
          ? Signature.toolCallParsed(call.name, args.value)
          : Signature.toolCall(call.name, call.arguments)
    }
    RunContext.record(ctx, {
      _tag: "model.responded",
      iteration: this.iteration,
      text: response.text,
      toolCalls: calls,
      signatures,
      usage: response.usage,
      runId: ctx.runId,
      seq: 0,
      at: 0
    })
    ctx.messages.push({ _tag: "assistant", content: response.text, toolCalls: calls })

    const afterModel = checkpoint(ctx, config, "after_model", response.text)
    if (afterModel !== undefined) return Exit.succeed(new Stopped(afterModel))
    if (calls.length === 0) {
      remind(ctx, "empty_output", "Your last response was empty. Call a tool, or give your final answer as text.")
      return Exit.succeed(again)
    }

    const executing = RunContext.advance(ctx, "tool_executing")
    if (executing !== undefined) return Exit.fail(executing)
    if (!config.approvals) return this.execute(calls, signatures, parsed)
    // A rejected or expired approval fails the batch (the rest of it is interrupted) and stops the run.
    return Effect.catchIf(this.execute(calls, signatures, parsed), ApprovalWait.isStop, (stop) =>
      Exit.succeed(
        new Stopped(decide(ctx, stop.reason === "step_timeout" ? "step_timeout" : "approval", stop.reason, stop.detail))
      )
    )
  }

  /** The batch: one call at once, several `concurrency` at a time. */
  execute(
    calls: ReadonlyArray<Model.ToolCall>,
    signatures: ReadonlyArray<string>,
    parsed: ReadonlyArray<ToolExecutor.ParsedArguments>
  ): Effect.Effect<ReadonlyArray<ToolResult.ToolResult>, LoopError, unknown> {
    const first = calls[0]
    if (calls.length === 1 && first !== undefined) {
      const one = ToolExecutor.executeNow(
        this.ctx,
        this.config.registry,
        first,
        signatures[0] ?? "",
        parsed[0],
        this.permission
      )
      const done = finished(one)
      if (done === undefined) return Effect.map(one, batchOfOne)
      return Exit.isSuccess(done) ? Exit.succeed([done.value]) : Exit.failCause(done.cause)
    }
    return this.batch(calls, signatures, parsed)
  }

  /** Several calls: `concurrency` at a time, results in call order. */
  batch(
    calls: ReadonlyArray<Model.ToolCall>,
    signatures: ReadonlyArray<string>,
    parsed: ReadonlyArray<ToolExecutor.ParsedArguments>
  ): Effect.Effect<ReadonlyArray<ToolResult.ToolResult>, LoopError, unknown> {
    const { ctx, config, permission } = this
    return Effect.forEach(
      calls,
      (call, i) =>
        Effect.suspend(() =>
          ToolExecutor.executeNow(ctx, config.registry, call, signatures[i] ?? "", parsed[i], permission)
        ),
      { concurrency: config.concurrency }
    )
  }

  /** The batch ran: feed the results back, corrections, hard stops, then the policies again. */
  executed(results: ReadonlyArray<ToolResult.ToolResult>): Stopped | RunState.IllegalTransition | undefined {
    const { ctx, config } = this
    for (const result of results) {
      ctx.messages.push({ _tag: "tool", toolCallId: result.callId, name: result.name, content: result.observation })
    }

    const needCorrection: Array<ToolResult.ToolResult> = []
    for (const result of results) {
      const pending = this.corrections?.get(result.name)
      if (result.status === "succeeded" && pending !== undefined) {
        this.corrections?.delete(result.name)
        RunContext.emit(ctx, { _tag: "recovery.completed", kind: "tool_argument_correction", attempt: pending })
      }
      if (result.status === "failed" && result.error?.correctable === true) needCorrection.push(result)
    }

    const forced = hardStop(ctx, config, results)
    if (forced !== undefined) return new Stopped(forced)

    let exhausted = false
    for (const result of needCorrection) {
      if (ctx.tally.toolCorrectionAttempts >= config.correctionBudget) {
        if (!exhausted) {
          RunContext.emit(ctx, {
            _tag: "recovery.failed",
            kind: "tool_argument_correction",
            attempts: ctx.tally.toolCorrectionAttempts,
            scope: "run",
            cause: result.error?.code ?? "input_validation_failed"
          })
        }
        exhausted = true
        continue
      }
      const recovering = RunContext.advance(ctx, "recovering")
      if (recovering !== undefined) return recovering
      const attempt = ctx.tally.toolCorrectionAttempts + 1
      if (this.corrections === undefined) this.corrections = new Map()
      this.corrections.set(result.name, attempt)
      RunContext.emit(ctx, {
        _tag: "recovery.started",
        kind: "tool_argument_correction",
        attempt,
        delayMillis: 0,
        cause: result.error?.code ?? "input_validation_failed"
      })
    }

    const afterTools = checkpoint(ctx, config, "after_tools")
    return afterTools === undefined ? undefined : new Stopped(afterTools)
  }
}

/**
 * Runs the loop until it stops.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = (ctx: RunContext.RunContext, config: Config): Effect.Effect<Outcome, LoopError, unknown> =>
  Effect.flatMap(Effect.service(Model.Model), (model) =>
    Effect.withFiber((fiber) =>
      new Turns(ctx, config, model, fiber.getRef(Permission.Permission)).drive("ask", undefined)
    )
  )
