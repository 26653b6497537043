/**
 * The spans of a run, one function each, for the runtime to wrap its stages with: the run
 * (`invoke_agent`), a step, a model attempt (`chat {model}`), a tool attempt or a call
 * refused before its handler (`execute_tool {tool}`), a backoff wait, an approval wait,
 * validation. Each is {@link Tracing.span}: bare when no tracer is installed.
 *
 * @since 0.1.0
 */
import { Cause, Effect, Exit } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as Text from "../failure/Text.ts"
import type * as Model from "../model/Model.ts"
import type * as Tool from "../tools/Tool.ts"
import type * as ToolResult from "../tools/ToolResult.ts"
import { errorType, genAi, nameShown, runtime, span } from "./Attributes.ts"
import * as GenAiMessages from "./internal/GenAiMessages.ts"
import * as Tracing from "./Tracing.ts"

const failed = <A, E>(exit: Exit.Exit<A, E>): Tracing.Attributes =>
  Exit.isFailure(exit) ? { [errorType]: Tracing.errorTypeOf(exit.cause) } : {}

/** What a run's ending carries onto its span. */
export interface Ended {
  readonly status: string
  readonly stopReason: string
  readonly policy: string
  readonly model: string
  readonly counters: {
    readonly iterations: number
    readonly toolCalls: number
    readonly toolErrors: number
    readonly recoveryAttempts: number
    readonly inputTokens: number
    readonly outputTokens: number
    readonly cachedInputTokens: number
    readonly reasoningTokens: number
    readonly costUsd: number
  }
}

/**
 * The run's span, `invoke_agent`; its ending is added by {@link ended}.
 *
 * @category spans
 * @since 0.1.0
 */
export const run = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  runId: string,
  /** The stop reason of a run that did not complete, from what `self` gives: the span ends failed, so named. */
  failedAs: (given: A) => string | undefined
): Effect.Effect<A, E, R> =>
  Tracing.span(
    self,
    span.run,
    () => ({ [genAi.operation]: "invoke_agent", [genAi.conversationId]: runId }),
    undefined,
    { failedAs, root: true }
  )

/**
 * What a run's span ends failed with: the stop reason of a run that did not complete
 * (its `error.type` too, see {@link ended}); `undefined` for a run that completed.
 *
 * @category spans
 * @since 0.3.0
 */
export const failedAs = (result: { readonly status: string; readonly stopReason: string }): string | undefined =>
  result.status === "completed" ? undefined : result.stopReason

/**
 * Ends the run's span, where a run is given its result outside its fiber (left behind past
 * its stop grace): its fiber, which would end it, may never end.
 *
 * @category spans
 * @since 0.3.0
 */
export const runGiven = (
  result: { readonly status: string; readonly stopReason: string },
  /** `end` when the run's fiber has ended (without its finalizers): the spans it left open end too. */
  openInside: "end" | "keep" = "keep"
): Effect.Effect<void> => Tracing.endCurrent(span.run, failedAs(result), openInside)

/**
 * The run's ending on its span: status, stop reason, deciding policy, counters, usage, cost.
 *
 * @category spans
 * @since 0.1.0
 */
export const ended = (result: Ended): Effect.Effect<void> => {
  const c = result.counters
  return Tracing.annotate({
    [runtime.status]: result.status,
    [runtime.stopReason]: result.stopReason,
    [runtime.policy]: result.policy,
    [genAi.requestModel]: result.model,
    [runtime.iterations]: c.iterations,
    [runtime.toolCalls]: c.toolCalls,
    [runtime.toolErrors]: c.toolErrors,
    [runtime.recoveries]: c.recoveryAttempts,
    [genAi.inputTokens]: c.inputTokens,
    [genAi.outputTokens]: c.outputTokens,
    [runtime.cachedInputTokens]: c.cachedInputTokens,
    [runtime.reasoningTokens]: c.reasoningTokens,
    [runtime.costUsd]: c.costUsd,
    ...(result.status === "completed" ? {} : { [errorType]: result.stopReason })
  })
}

/**
 * One step (iteration) of the loop.
 *
 * @category spans
 * @since 0.1.0
 */
export const step = <A, E, R>(self: Effect.Effect<A, E, R>, iteration: number): Effect.Effect<A, E, R> =>
  Tracing.span(self, span.step, () => ({ [runtime.iteration]: iteration }), failed)

/**
 * One model attempt, `chat {model}`: retries are its siblings; `error.type` is the
 * failure's code; usage per call.
 *
 * @category spans
 * @since 0.1.0
 */
export const chat = <E, R>(
  self: Effect.Effect<Model.Response, E, R>,
  attempt: {
    readonly model: string
    readonly iteration: number
    readonly attempt: number
    readonly messages: () => ReadonlyArray<Model.Message>
    /** What an answer the run's timers cut off cost so far, as the model reported it (R2.1). */
    readonly cutOff?: (() => Model.Usage | undefined) | undefined
  }
): Effect.Effect<Model.Response, E, R> =>
  Tracing.span(
    self,
    span.chat(attempt.model),
    (content) => ({
      [genAi.operation]: "chat",
      [genAi.requestModel]: attempt.model,
      [runtime.iteration]: attempt.iteration,
      [runtime.attempt]: attempt.attempt,
      [genAi.inputMessages]: content ? Tracing.contentJson(GenAiMessages.input(attempt.messages())) : undefined
    }),
    (exit, content) => {
      if (Exit.isFailure(exit)) {
        // An answer the provider stopped unfinished, or the run's timers cut off, still used tokens (R2.1).
        const squashed = Cause.squash(exit.cause)
        const usage = Failure.isFailure(squashed)
          ? squashed.usage
          : Cause.hasInterruptsOnly(exit.cause)
            ? attempt.cutOff?.()
            : undefined
        return usage === undefined
          ? failed(exit)
          : {
              ...failed(exit),
              [genAi.inputTokens]: usage.inputTokens,
              [genAi.outputTokens]: usage.outputTokens,
              [runtime.costUsd]: usage.costUsd
            }
      }
      const response = exit.value
      return {
        [genAi.finishReasons]: response.finishReason === undefined ? undefined : [response.finishReason],
        [genAi.inputTokens]: response.usage.inputTokens,
        [genAi.outputTokens]: response.usage.outputTokens,
        [runtime.costUsd]: response.usage.costUsd,
        [genAi.outputMessages]: content ? Tracing.contentJson(GenAiMessages.output(response)) : undefined
      }
    },
    // A call to the model's service: a client span, as the GenAI conventions have it.
    { kind: "client" }
  )

/** What names a call of no tool of the run's in a span. */
const unknownTool = "(unknown tool)"

/** A name the model sent, as a span may hold it: its first 64 characters, control and bidirectional ones replaced. */
const printable = (name: string): string => {
  const shown = name.replace(/[\p{Cc}\p{Cf}]/gu, "\ufffd")
  return Text.clip(shown, 64)
}

const toolStart = (
  tool: { readonly name: string; readonly sideEffect?: Tool.SideEffect | undefined },
  callId: string
): Tracing.Attributes => ({
  [genAi.operation]: "execute_tool",
  [genAi.toolName]: tool.name,
  [genAi.toolCallId]: callId,
  [genAi.toolType]: "function",
  [runtime.sideEffect]: tool.sideEffect
})

/**
 * One attempt of a tool's handler, `execute_tool {tool}`: its outcome, and `error.type`
 * (the failure's code) when it failed.
 *
 * @category spans
 * @since 0.1.0
 */
export const toolAttempt = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  call: {
    readonly tool: { readonly name: string; readonly sideEffect: Tool.SideEffect }
    readonly callId: string
    readonly attempt: number
    readonly arguments: unknown
  }
): Effect.Effect<A, E, R> =>
  Tracing.span(
    self,
    span.tool(call.tool.name),
    (content) => ({
      ...toolStart(call.tool, call.callId),
      [runtime.attempt]: call.attempt,
      [genAi.toolArguments]: content ? Tracing.contentJson(call.arguments) : undefined
    }),
    (exit) => {
      if (Exit.isSuccess(exit)) return { [runtime.outcome]: "succeeded" }
      const code = Tracing.errorTypeOf(exit.cause)
      return {
        [runtime.outcome]: code === "interrupted" ? "interrupted" : "failed",
        [runtime.code]: code,
        [errorType]: code
      }
    }
  )

/**
 * A call refused before its handler (unknown tool, bad arguments, denied, schema): an
 * `execute_tool {tool}` span with its outcome and code, ended at once.
 *
 * @category spans
 * @since 0.1.0
 */
export const refused = (
  result: ToolResult.ToolResult,
  tool: { readonly sideEffect: Tool.SideEffect } | undefined
): Effect.Effect<ToolResult.ToolResult> =>
  Effect.as(
    // A tool the model made up is named by what it sent (of every length and character): content, so
    // the span is named for no tool, and the name, cut and made printable, is shown with content only.
    Tracing.instant(span.tool(tool === undefined ? unknownTool : result.name), (content) => ({
      ...toolStart(
        {
          name: tool !== undefined ? result.name : content ? printable(result.name) : unknownTool,
          sideEffect: tool?.sideEffect
        },
        result.callId
      ),
      [runtime.attempt]: 0,
      [runtime.outcome]: result.status,
      [runtime.code]: result.error?.code,
      [errorType]: result.error?.code
    })),
    result
  )

/**
 * A backoff wait before a retry.
 *
 * @category spans
 * @since 0.1.0
 */
export const backoff = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  wait: { readonly kind: string; readonly attempt: number; readonly delayMillis: number; readonly cause: string }
): Effect.Effect<A, E, R> =>
  Tracing.span(self, span.backoff, () => ({
    [runtime.attempt]: wait.attempt,
    [runtime.delayMillis]: wait.delayMillis,
    [runtime.cause]: nameShown(wait.cause, "failure"),
    [runtime.backoffKind]: wait.kind
  }))

/** The decision an approval wait ended with, by what stopped it. */
const decisions: Readonly<Record<string, string>> = {
  approval_rejected: "rejected",
  approval_expired: "expired",
  step_timeout: "expired",
  interrupted: "withdrawn"
}

/**
 * An approval wait: the decision (`approved`, `rejected`, `expired`, `withdrawn`), with
 * `error.type` when the wait failed (`approval_rejected`, `approval_expired`, `step_timeout`);
 * `pending` when the run let go of its wait handing the call on (`handedOn`: a run parked or
 * taken over, whose call still waits for a person on the gate).
 *
 * @category spans
 * @since 0.1.0
 */
export const approval = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  call: { readonly tool: string; readonly callId: string; readonly handedOn?: (() => boolean) | undefined }
): Effect.Effect<A, E, R> =>
  Tracing.span(
    self,
    span.approval,
    () => ({ [genAi.toolName]: call.tool, [genAi.toolCallId]: call.callId }),
    (exit) => {
      if (Exit.isSuccess(exit)) return { [runtime.approval]: "approved" }
      const why = Tracing.errorTypeOf(exit.cause)
      // Review 151: a park was traced as a withdrawal, then the same call as approved.
      if (why === "interrupted" && call.handedOn?.() === true) return { [runtime.approval]: "pending" }
      return {
        [runtime.approval]: decisions[why] ?? why,
        ...(why === "interrupted" ? {} : { [errorType]: why })
      }
    }
  )

/**
 * Validation of the loop's outcome: how many checks ran and how many failed.
 *
 * @category spans
 * @since 0.1.0
 */
export const validation = <
  A extends { readonly checks: ReadonlyArray<unknown>; readonly failed: ReadonlyArray<unknown> },
  E,
  R
>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Tracing.span(
    self,
    span.validation,
    () => ({}),
    (exit) =>
      Exit.isSuccess(exit)
        ? {
            [runtime.checks]: exit.value.checks.length,
            // As the report counts them: an optional step not done is unfinished, not failed.
            [runtime.failedChecks]: exit.value.failed.length
          }
        : failed(exit)
  )
