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
import { Effect, Exit } from "effect"
import type * as RunState from "../../events/RunState.ts"
import * as Model from "../../model/Model.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as RunContext from "../internal/RunContext.ts"
import * as ApprovalWait from "../pipeline/ApprovalWait.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import type { Config, Outcome } from "./internal/LoopConfig.ts"
import {
  approvalStop,
  askToFinish,
  checkpoint,
  cutOffArguments,
  decide,
  hardStop,
  modelStop,
  remind,
  Stopped
} from "./internal/LoopStops.ts"
import * as ModelCall from "./internal/ModelCall.ts"

export type { Config, Models, Outcome } from "./internal/LoopConfig.ts"

/** What the loop fails with: only what reaches it through an interruption or a broken invariant. */
type LoopError = ToolExecutor.ExecutionError

/** A response with no tool calls that was not an answer: ask again. */
const again: unique symbol = Symbol.for("effect-agent-runtime/Loop/again")

/** What one phase of an iteration hands to the next. */
type Signal = Model.Response | ModelCall.GaveUp | ReadonlyArray<ToolResult.ToolResult> | Stopped | typeof again

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
  readonly models: ModelCall.ModelCall
  readonly permission: Permission.PermissionService
  /** Tools with an argument correction outstanding, and the attempt number it was. */
  corrections: Map<string, number> | undefined = undefined
  /** The attempt of the correction asked for an answer the output token limit cut off, until one is whole. */
  truncation: number | undefined = undefined
  /** The iteration being run. */
  iteration = 0
  /** The model's id of each call of the batch running, by the run's identity of it. */
  readonly toolCallIds = new Map<string, string>()
  constructor(
    ctx: RunContext.RunContext,
    config: Config,
    model: Model.Model["Service"],
    permission: Permission.PermissionService
  ) {
    this.ctx = ctx
    this.config = config
    this.models = new ModelCall.ModelCall(ctx, config, [
      { name: config.models.name, model },
      ...config.models.fallbacks
    ])
    this.permission = permission
  }

  /** Runs from `phase` with `signal` until the loop stops (an `Exit`) or waits (an effect that resumes it). */
  drive(phase: Phase, signal: Signal | undefined): Effect.Effect<Outcome, LoopError, unknown> {
    while (true) {
      if (signal instanceof Stopped) return Exit.succeed(signal.outcome)
      if (signal instanceof ModelCall.GaveUp) return Exit.succeed(modelStop(this.ctx, signal).outcome)
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
  ask(): Effect.Effect<Model.Response | ModelCall.GaveUp | Stopped, LoopError> {
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
    return this.models.call(this.iteration)
  }

  /** The model answered: record it, check the policies, then run its tool batch. */
  answered(
    response: Model.Response
  ): Effect.Effect<ReadonlyArray<ToolResult.ToolResult> | Stopped | typeof again, LoopError, unknown> {
    const { ctx, config } = this
    ctx.waitingOnModel = undefined
    const truncated = response.finishReason === "length"
    // Each call is made ready once: its identity, its arguments parsed, its signature.
    const prepared = response.toolCalls.map((call) => {
      const ready = ToolExecutor.prepare(config.registry, ctx.callIds, call)
      return truncated ? cutOffArguments(ready) : ready
    })
    // The log and the conversation hold what the model sent, in a form they can keep (R12).
    const calls = response.toolCalls.map((call, i) => {
      const args = prepared[i]?.recorded
      return args === call.arguments ? call : { ...call, arguments: args }
    })
    RunContext.record(ctx, {
      _tag: "model.responded",
      iteration: this.iteration,
      text: response.text,
      toolCalls: calls,
      callIds: prepared.map((p) => p.call.id),
      signatures: prepared.map((p) => p.signature),
      usage: response.usage,
      ...(response.finishReason === undefined ? {} : { finishReason: response.finishReason }),
      ...(response.reasoning === undefined ? {} : { reasoning: response.reasoning }),
      runId: ctx.runId,
      seq: 0,
      at: 0
    })
    ctx.messages.push({
      _tag: "assistant",
      content: response.text,
      toolCalls: calls,
      ...(response.reasoning === undefined ? {} : { reasoning: response.reasoning })
    })
    // An answer that arrived after the deadline is not accepted (R3.11), whatever the policies say.
    if (RunContext.deadlinePassed(ctx)) return RunContext.expire(ctx)
    if (this.truncation !== undefined && !truncated) {
      RunContext.emit(ctx, { _tag: "recovery.completed", kind: "output_truncation", attempt: this.truncation })
      this.truncation = undefined
    }

    const afterModel = checkpoint(ctx, config, "after_model", response.text)
    if (afterModel !== undefined) return Exit.succeed(new Stopped(afterModel))
    if (calls.length === 0) {
      if (truncated) {
        // Cut off by the output token limit: never a final answer (R11).
        const asked = askToFinish(ctx, config)
        if (typeof asked !== "number") return asked instanceof Stopped ? Exit.succeed(asked) : Exit.fail(asked)
        this.truncation = asked
        return Exit.succeed(again)
      }
      remind(ctx, "empty_output", "Your last response was empty. Call a tool, or give your final answer as text.")
      return Exit.succeed(again)
    }

    const executing = RunContext.advance(ctx, "tool_executing")
    if (executing !== undefined) return Exit.fail(executing)
    for (const p of prepared) this.toolCallIds.set(p.call.id, p.toolCallId)
    if (!config.approvals) return this.execute(prepared)
    // A rejected or expired approval fails the batch (the rest of it is interrupted) and stops the run.
    const from = ctx.events.length
    return Effect.catchIf(this.execute(prepared), ApprovalWait.isStop, (stop) =>
      Exit.succeed(new Stopped(approvalStop(ctx, stop, from)))
    )
  }

  /** The batch: one call at once, several `concurrency` at a time. */
  execute(
    prepared: ReadonlyArray<ToolExecutor.Prepared>
  ): Effect.Effect<ReadonlyArray<ToolResult.ToolResult>, LoopError, unknown> {
    const first = prepared[0]
    if (prepared.length === 1 && first !== undefined) {
      const one = ToolExecutor.executeNow(this.ctx, this.config.registry, first, this.permission)
      const done = finished(one)
      if (done === undefined) return Effect.map(one, batchOfOne)
      return Exit.isSuccess(done) ? Exit.succeed([done.value]) : Exit.failCause(done.cause)
    }
    return this.batch(prepared)
  }

  /** Several calls: `concurrency` at a time, results in call order. */
  batch(
    prepared: ReadonlyArray<ToolExecutor.Prepared>
  ): Effect.Effect<ReadonlyArray<ToolResult.ToolResult>, LoopError, unknown> {
    const { ctx, config, permission } = this
    return Effect.forEach(
      prepared,
      (p) => Effect.suspend(() => ToolExecutor.executeNow(ctx, config.registry, p, permission)),
      { concurrency: config.concurrency }
    )
  }

  /** The batch ran: feed the results back, corrections, hard stops, then the policies again. */
  executed(results: ReadonlyArray<ToolResult.ToolResult>): Stopped | RunState.IllegalTransition | undefined {
    const { ctx, config } = this
    // The conversation carries the model's own ids; everything else the run's (R3.8).
    for (const result of results) {
      const toolCallId = this.toolCallIds.get(result.callId) ?? result.callId
      this.toolCallIds.delete(result.callId)
      ctx.messages.push({ _tag: "tool", toolCallId, name: result.name, content: result.observation })
    }

    const needCorrection: Array<ToolResult.ToolResult> = []
    for (const result of results) {
      const pending = this.corrections?.get(result.name)
      if (result.status === "succeeded" && pending !== undefined) {
        this.corrections?.delete(result.name)
        RunContext.emit(ctx, {
          _tag: "recovery.completed",
          kind: "tool_argument_correction",
          attempt: pending,
          callId: result.callId
        })
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
            callId: result.callId,
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
        callId: result.callId,
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
