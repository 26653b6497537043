/**
 * The steps of a tool call after its handler succeeded: output schema, postcondition,
 * then the observation the model sees, cut to the run's limit, and the `tool.succeeded`
 * record. Private to the runtime.
 */
import { Cause, Effect, Exit, Schema } from "effect"
import * as Failure from "../Failure.ts"
import * as Signature from "../Signature.ts"
import type * as Tool from "../Tool.ts"
import * as ToolArguments from "../ToolArguments.ts"
import type * as ToolResult from "../ToolResult.ts"
import * as RunContext from "./RunContext.ts"
import { type Call, failed, type Ran } from "./ToolCall.ts"

const truncate = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… [observation cut: ${text.length - max} more characters]`

/** Output schema, postcondition, observation: the steps after a handler succeeded. */
export const afterHandler = (c: Call, output: unknown): Ran => {
  const { ctx, call, tool } = c
  const encoded = c.codec.encode(output)
  if (Exit.isFailure(encoded)) {
    const schemaError = Cause.squash(encoded.cause)
    const detail = Schema.isSchemaError(schemaError)
      ? ToolArguments.describeIssue(schemaError.issue).message
      : "invalid output"
    return Exit.succeed(
      failed(
        ctx,
        call,
        {
          code: "output_validation_failed",
          message: `the tool returned output that does not match its output schema (${detail.replaceAll("arguments", "output")})`,
          correctable: false
        },
        tool.metadata.maxRetries
      )
    )
  }
  if (tool.postcondition === undefined) return Exit.succeed(succeeded(c, output, encoded.value))
  const postcondition = tool.postcondition as (
    input: unknown,
    output: unknown,
    context: Tool.CallContext
  ) => Effect.Effect<boolean, Failure.Failure, unknown>
  return Effect.flatMap(
    Effect.exit(Effect.suspend(() => postcondition(c.input, output, c.context))),
    (confirmed): Ran => {
      if (Exit.isFailure(confirmed) && Cause.hasInterruptsOnly(confirmed.cause))
        return Effect.failCause(confirmed.cause)
      if (Exit.isFailure(confirmed) || !confirmed.value) {
        const why = Exit.isFailure(confirmed)
          ? `the check failed: ${Failure.fromCause("tool", confirmed.cause).hint}`
          : "the check answered false"
        return Exit.succeed(
          failed(
            ctx,
            call,
            {
              code: "inconsistent_result",
              message: `the tool reported success but its postcondition does not hold (${why})`,
              correctable: false
            },
            tool.metadata.maxRetries,
            "inconsistent"
          )
        )
      }
      return Exit.succeed(succeeded(c, output, encoded.value))
    }
  ) as Ran
}

/** Renders the observation and records the success. */
const succeeded = (c: Call, output: unknown, encoded: unknown): ToolResult.ToolResult => {
  const { ctx, call, tool } = c
  const observe = tool.observe as ((output: unknown) => string) | undefined
  let rendered: string
  try {
    rendered = observe !== undefined ? observe(output) : (JSON.stringify(encoded) ?? "null")
  } catch (defect) {
    const failure = Failure.fromCause("tool", Cause.die(defect))
    return failed(
      ctx,
      call,
      {
        code: "tool_failed",
        message: `rendering the output failed: ${failure.hint}`,
        correctable: false,
        failure: Failure.summarize(failure)
      },
      tool.metadata.maxRetries
    )
  }
  const observation = truncate(rendered, c.registry.limits.maxObservationChars)
  RunContext.record(ctx, {
    _tag: "tool.succeeded",
    callId: call.id,
    name: call.name,
    sideEffect: tool.metadata.sideEffect,
    observationDigest: Signature.digest(observation),
    input: c.args,
    output: encoded,
    runId: ctx.runId,
    seq: 0,
    at: 0
  })
  return { callId: call.id, name: call.name, status: "succeeded", output: encoded, observation }
}
