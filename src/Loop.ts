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
import { Cause, Effect, Exit } from "effect"
import * as Failure from "./Failure.ts"
import * as FailureBoundary from "./FailureBoundary.ts"
import * as RunContext from "./internal/RunContext.ts"
import * as Model from "./Model.ts"
import * as Recovery from "./Recovery.ts"
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
    if (config.registry.tools.get(result.name)?.metadata.recoverErrors !== true) {
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

/**
 * Runs the loop until it stops.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = Effect.fnUntraced(function* (ctx: RunContext.RunContext, config: Config) {
  const model = yield* Model.Model
  // Tools with an argument correction outstanding, and the attempt number it was.
  const corrections = new Map<string, number>()

  while (true) {
    const thinking = RunContext.advance(ctx, "model_thinking")
    if (thinking !== undefined) return yield* thinking
    const iteration = ctx.counters.iterations + 1
    const remaining = RunContext.remainingMillis(ctx)
    if (remaining <= 0)
      return decide(ctx, "run_timeout", "run_timeout", "the run deadline passed before the model call")
    const call = Effect.suspend(() => {
      RunContext.emit(ctx, { _tag: "model.requested", iteration })
      return model
        .generate({
          runId: ctx.runId,
          iteration,
          messages: ctx.messages,
          tools: config.toolDefinitions,
          deadlineAt: ctx.deadlineAt
        })
        .pipe(
          // No timer per call: the run's one deadline timer interrupts whatever is waiting,
          // and the timeline says which call it cut off.
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              if (ctx.stop !== "deadline") return
              const left = Math.max(0, ctx.deadlineAt - ctx.startedAt)
              const failure = FailureBoundary.timeout({ source: "provider", layer: "run", afterMillis: left })
              RunContext.emit(ctx, { _tag: "model.failed", iteration, failure: Failure.summarize(failure) })
            })
          ),
          Effect.catchDefect((defect) => Effect.fail(Failure.fromDefect("provider", defect))),
          Effect.tapError((failure) =>
            Effect.sync(() => {
              RunContext.emit(ctx, { _tag: "model.failed", iteration, failure: Failure.summarize(failure) })
            })
          )
        )
    })
    const exit = yield* Effect.exit(
      Recovery.retry(
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
        () => call
      )
    )
    if (Exit.isFailure(exit)) {
      if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
      const squashed = Cause.squash(exit.cause)
      if (!Recovery.isExhausted(squashed)) {
        const failure = Failure.fromCause("provider", exit.cause)
        return decide(ctx, "runtime", "model_error", `the model call failed: ${failure.hint}`)
      }
      return giveUp(ctx, squashed)
    }
    const response = exit.value
    const calls = response.toolCalls
    // Each call's arguments are parsed once, for its signature and for the executor.
    const parsed = calls.map((call) => ToolExecutor.parseArguments(call.arguments, config.registry.limits))
    const signatures = calls.map((call, i) => {
      const args = parsed[i]
      return args?._tag === "Ok"
        ? Signature.toolCallParsed(call.name, args.value)
        : Signature.toolCall(call.name, call.arguments)
    })
    RunContext.emit(ctx, {
      _tag: "model.responded",
      iteration,
      text: response.text,
      toolCalls: calls,
      signatures,
      usage: response.usage
    })
    ctx.messages.push({ _tag: "assistant", content: response.text, toolCalls: calls })

    const afterModel = checkpoint(ctx, config, "after_model", response.text)
    if (afterModel !== undefined) return afterModel
    if (calls.length === 0) {
      remind(ctx, "empty_output", "Your last response was empty. Call a tool, or give your final answer as text.")
      continue
    }

    const executing = RunContext.advance(ctx, "tool_executing")
    if (executing !== undefined) return yield* executing
    const results =
      calls.length === 1 && calls[0] !== undefined
        ? [yield* ToolExecutor.execute(ctx, config.registry, calls[0], signatures[0] ?? "", parsed[0])]
        : yield* Effect.forEach(
            calls,
            (call, i) => ToolExecutor.execute(ctx, config.registry, call, signatures[i] ?? "", parsed[i]),
            { concurrency: config.concurrency }
          )
    for (const result of results) {
      ctx.messages.push({ _tag: "tool", toolCallId: result.callId, name: result.name, content: result.observation })
    }

    const needCorrection: Array<ToolResult.ToolResult> = []
    for (const result of results) {
      const pending = corrections.get(result.name)
      if (result.status === "succeeded" && pending !== undefined) {
        corrections.delete(result.name)
        RunContext.emit(ctx, { _tag: "recovery.completed", kind: "tool_argument_correction", attempt: pending })
      }
      if (result.status === "failed" && result.error?.correctable === true) needCorrection.push(result)
    }

    const forced = hardStop(ctx, config, results)
    if (forced !== undefined) return forced

    let exhausted = false
    for (const result of needCorrection) {
      if (ctx.counters.toolCorrectionAttempts >= config.correctionBudget) {
        if (!exhausted) {
          RunContext.emit(ctx, {
            _tag: "recovery.failed",
            kind: "tool_argument_correction",
            attempts: ctx.counters.toolCorrectionAttempts,
            scope: "run",
            cause: result.error?.code ?? "input_validation_failed"
          })
        }
        exhausted = true
        continue
      }
      yield* RunContext.transition(ctx, "recovering")
      const attempt = ctx.counters.toolCorrectionAttempts + 1
      corrections.set(result.name, attempt)
      RunContext.emit(ctx, {
        _tag: "recovery.started",
        kind: "tool_argument_correction",
        attempt,
        delayMillis: 0,
        cause: result.error?.code ?? "input_validation_failed"
      })
    }

    const afterTools = checkpoint(ctx, config, "after_tools")
    if (afterTools !== undefined) return afterTools
  }
})
