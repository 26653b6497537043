/**
 * The steps of a tool call after its handler succeeded: output schema, postcondition,
 * then the observation the model sees, cut to the run's limit, and the `tool.succeeded`
 * record. Private to the runtime.
 */
import { Cause, Effect, Exit, Schema } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import * as Deadline from "../../../time/Deadline.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import type * as Tool from "../../../tools/Tool.ts"
import * as ToolArguments from "../../../tools/ToolArguments.ts"
import type * as ToolResult from "../../../tools/ToolResult.ts"
import * as OwnCopy from "../../internal/OwnCopy.ts"
import * as RunContext from "../../internal/RunContext.ts"
import {
  type Call,
  cutToObservation,
  describeTimeout,
  failed,
  inputFor,
  maskedObservation,
  mayHaveEffects,
  waitOf
} from "./ToolCall.ts"
import { recordInterruptedCheck } from "./ToolInterruption.ts"

/** The most values, and the deepest nesting, an output may have: more than any output a model can read. */
const outputNodes = 1_000_000
const outputDepth = 512

/**
 * A tool execution error (R3.7): the handler's output is not what the tool promises. It
 * is the tool's failure, as a failing handler is: the run fails fast (`tool_error`) unless
 * the tool hands its errors to the model (`recoverErrors`). Never retried: the same code
 * would return the same output.
 */
const invalidOutput = (c: Call<unknown>, what: string, shown?: unknown): ToolResult.ToolResult => {
  const failure = new Failure.Permanent({
    source: "tool",
    category: "invalid_output",
    code: "output_validation_failed",
    attempts: 1,
    // What the schema says of the output may quote it, and it may hold the call's secrets.
    hint: Redaction.maskText(`the tool returned output that ${what}`, c.secrets)
  })
  return failed(
    c.ctx,
    c.call,
    {
      code: "output_validation_failed",
      message: cutToObservation(`${failure.hint}${carriedOut(c)}`, c.registry.limits.maxObservationChars),
      correctable: false,
      failure: Failure.summarize(failure)
    },
    c.tool.metadata.maxRetries,
    { sideEffect: c.tool.metadata.sideEffect, output: shown }
  )
}

/**
 * What the model is told when a call that may change the world failed after its handler
 * returned: the action took place, so that it does not ask for it again.
 */
const carriedOut = (c: Call<unknown>): string =>
  mayHaveEffects(c.tool) ? " (the handler returned: what the call did took place; do not repeat it)" : ""

/**
 * The output schema and the JSON check of what a handler returned: its encoded form, or
 * the call's failed result.
 */
export const checkOutput = (
  c: Call<unknown>,
  output: unknown
):
  | { readonly _tag: "Encoded"; readonly encoded: unknown }
  | { readonly _tag: "Ended"; readonly result: ToolResult.ToolResult } => {
  const encoded = c.codec.encode(output)
  if (Exit.isFailure(encoded)) {
    const schemaError = Cause.squash(encoded.cause)
    const why = Schema.isSchemaError(schemaError)
      ? `does not match its output schema (${ToolArguments.describeIssue(schemaError.issue, "output").message})`
      : // The schema broke (a step that throws, or one that needs a fiber).
        `could not be encoded by its output schema (${Failure.safeDescription(schemaError)})`
    return { _tag: "Ended", result: invalidOutput(c, why) }
  }
  // The output is stored in the log and sent to the model: it must be JSON the runtime can walk.
  const notJson = ToolArguments.jsonIssue(encoded.value, {
    root: "output",
    maxDepth: outputDepth,
    maxNodes: outputNodes,
    strict: true
  })
  if (notJson !== undefined) return { _tag: "Ended", result: invalidOutput(c, `is not plain JSON (${notJson})`) }
  // The log keeps its own copy, as JSON reads it back (a journal, a resumed run): a handler
  // that changes the object it returned later changes nothing recorded (R9.1).
  // A plain schema's encoding is a new value already: only frozen, not copied again.
  if (c.codec.plainOutput) return { _tag: "Encoded", encoded: OwnCopy.ownFrozen(encoded.value) }
  const copy = OwnCopy.frozenCopy(encoded.value)
  return copy._tag === "Copied"
    ? { _tag: "Encoded", encoded: copy.value }
    : { _tag: "Ended", result: invalidOutput(c, `cannot be read (${copy.why})`) }
}

/**
 * The tool's postcondition (R6.4), bounded as a wait of the call: `undefined` when it
 * holds, else the call's `inconsistent` result. Never started past the deadline (R3.11);
 * interrupted, the call is recorded as done but unconfirmed.
 */
export const postcondition = Effect.fnUntraced(function* <R>(c: Call<R>, output: unknown, encoded: unknown) {
  const { ctx, call, tool } = c
  if (tool.postcondition === undefined) return undefined
  // The deadline its waits are bounded by: the run's, or the grace of a run resumed past it.
  if (yield* Deadline.passed) {
    recordInterruptedCheck(c)
    return yield* RunContext.expire(ctx)
  }
  // Erased boundary: the registry holds tools of any input type, and `c.input` was decoded by this tool's schema.
  const check = tool.postcondition as (
    input: unknown,
    output: unknown,
    context: Tool.CallContext
  ) => Effect.Effect<boolean, Failure.Failure, R>
  const confirmed = yield* Effect.exit(
    waitOf(
      c,
      Effect.suspend(() =>
        UserCode.effect(
          {
            source: "tool",
            what: `the postcondition of ${tool.name}`,
            advice: "a postcondition must return an Effect of a boolean",
            defectCode: "postcondition_defect"
          },
          () => check(inputFor(c, true), output, c.context)
        )
      )
    ).pipe(Effect.onInterrupt(() => Effect.sync(() => recordInterruptedCheck(c))))
  )
  if (Exit.isFailure(confirmed) && Cause.hasInterruptsOnly(confirmed.cause)) return yield* Effect.interrupt
  const answer = Exit.isSuccess(confirmed) && "value" in confirmed.value ? confirmed.value.value : undefined
  if (answer === true) return undefined
  // A check that failed or ran out of time keeps its failure, typed (a replay reads it back).
  const failure = Exit.isFailure(confirmed)
    ? Failure.fromCause("tool", confirmed.cause)
    : "timedOut" in confirmed.value
      ? FailureBoundary.actionTimeout({
          source: "tool",
          layer: confirmed.value.timedOut.layer,
          afterMillis: confirmed.value.timedOut.afterMillis,
          what: `the postcondition of ${tool.name}`,
          // The handler returned: what a write did took place, whatever the check would have said (R4.3).
          // Its outcome is known, so the failure is no unknown one (`idempotent` keeps it so).
          mayHaveSideEffects: mayHaveEffects(tool),
          idempotent: true
        })
      : undefined
  const why = Exit.isFailure(confirmed)
    ? `the check failed: ${failure?.hint}`
    : "timedOut" in confirmed.value
      ? `the check did not answer within ${describeTimeout(confirmed.value.timedOut)}`
      : answer === false
        ? "the check answered false"
        : `the check answered ${UserCode.kindOf(answer)}, not a boolean`
  return failed(
    ctx,
    call,
    {
      code: "inconsistent_result",
      // The check's failure may quote the call's arguments: its secrets are masked (R12).
      message: Redaction.maskText(`the tool reported success but its postcondition does not hold (${why})`, c.secrets),
      correctable: false,
      ...(failure === undefined ? {} : { failure: Redaction.maskSummary(Failure.summarize(failure), c.secrets) })
    },
    tool.metadata.maxRetries,
    // What the tool reported, as a success would have kept it.
    { sideEffect: tool.metadata.sideEffect, status: "inconsistent", output: shownOutput(c, output, encoded).shown }
  )
})

/** The output as the log keeps it: nothing the run derives copies a Redacted value of the input or the output (R3.1). */
const shownOutput = (c: Call<unknown>, output: unknown, encoded: unknown) => {
  const sensitive = c.codec.sensitiveOutput || c.secrets.size > 0
  const secrets = c.codec.sensitiveOutput ? Redaction.adding(c.secrets, Redaction.secretsOf(output)) : c.secrets
  const masked = sensitive ? (Redaction.shownBy(c.codec.encode, output, secrets) ?? Redaction.mask) : encoded
  // The masked output is the log's own copy too, as JSON reads it back.
  const copy = sensitive ? OwnCopy.frozenCopy(masked) : undefined
  const shown = copy === undefined ? encoded : copy._tag === "Copied" ? copy.value : Redaction.mask
  return { sensitive, secrets, shown }
}

/** Renders the observation and records the success. */
export const succeeded = (c: Call<unknown>, output: unknown, encoded: unknown): ToolResult.ToolResult => {
  const { ctx, call, tool } = c
  // Erased boundary: the registry holds tools of any output type, and `output` passed this tool's output schema.
  const observe = tool.observe as ((output: unknown) => string) | undefined
  let rendered: unknown
  try {
    rendered = observe !== undefined ? observe(output) : (JSON.stringify(encoded) ?? "null")
  } catch (defect) {
    const failure = Failure.fromDefect("tool", defect, "observe_defect")
    return failed(
      ctx,
      call,
      {
        code: "tool_failed",
        message: Redaction.maskText(`rendering the output failed: ${failure.hint}${carriedOut(c)}`, c.secrets),
        correctable: false,
        failure: Redaction.maskSummary(Failure.summarize(failure), c.secrets)
      },
      tool.metadata.maxRetries,
      // The output passed its schema: kept as a success keeps it (a replay renders it again).
      { sideEffect: tool.metadata.sideEffect, output: shownOutput(c, output, encoded).shown }
    )
  }
  const { sensitive, secrets, shown } = shownOutput(c, output, encoded)
  if (typeof rendered !== "string") {
    return invalidOutput(c, `was rendered by observe as ${UserCode.kindOf(rendered)}, not a string`, shown)
  }
  const text = sensitive && observe === undefined ? (JSON.stringify(shown) ?? "null") : rendered
  const observation = maskedObservation(text, secrets, c.registry.limits.maxObservationChars)
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "tool.succeeded",
    callId: call.id,
    name: call.name,
    sideEffect: tool.metadata.sideEffect,
    observation,
    // The arguments are in the call's model.responded already: kept again only masked (R9, R3.1).
    ...(c.secrets.size > 0 || c.codec.sensitiveInput ? { input: c.args } : {}),
    output: shown,
    runId,
    seq,
    at
  }))
  return { callId: call.id, name: call.name, status: "succeeded", output: shown, observation }
}
