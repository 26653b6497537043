/**
 * Reconciling an action whose outcome is unknown (R3.8).
 *
 * A non-idempotent call that timed out or lost its connection may or may not have taken
 * effect. It is never retried blindly: if the tool declares a `reconcile` status query,
 * the runtime asks it, by the call's idempotency key, what really happened. `Applied`
 * yields the real result; `NotApplied` means sending it again with the same key is safe,
 * and the runtime does so itself, as one of its retries; `Undecidable`, or a query that itself fails, keeps the
 * outcome unknown, and the run ends `unknown_outcome` with the action listed as pending.
 * Private to the runtime.
 */
import { Cause, Effect, Exit, Result, Schema } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import * as Redaction from "../../../tools/Redaction.ts"
import type * as Tool from "../../../tools/Tool.ts"
import * as RunContext from "../../internal/RunContext.ts"
import { type Call, describeTimeout, inputFor, waitOf } from "./ToolCall.ts"

/** What the status query found. */
export type Outcome =
  | { readonly _tag: "Applied"; readonly output: unknown }
  /** It did not take effect: a fresh retryable failure (one attempt), for the runtime to resend. */
  | { readonly _tag: "NotApplied"; readonly failure: Failure.Retryable }
  | { readonly _tag: "Failed"; readonly failure: Failure.Failure }

const checkAnswer = UserCode.check(
  Schema.Union([
    Schema.TaggedStruct("Applied", { output: Schema.Unknown }),
    Schema.TaggedStruct("NotApplied", {}),
    Schema.TaggedStruct("Undecidable", { detail: Schema.String })
  ]),
  "the status query's answer"
)

/** An outcome, typed as the union (each `return` of the query's steps is one member). */
const outcome = (o: Outcome): Outcome => o

/**
 * Asks the tool's status query about a call that ended with `failure`, an unknown
 * outcome, by the call's idempotency key; the query is bounded as a wait of the call
 * (`waitOf`). Interruption passes through.
 */
export const reconcile = Effect.fnUntraced(function* <R>(
  c: Call<R>,
  failure: Failure.UnknownOutcome,
  after?: Failure.Summary
) {
  const { ctx, tool, context } = c
  if (tool.reconcile === undefined) return outcome({ _tag: "Failed", failure })
  // Erased boundary: the registry holds tools of any input type, and `c.input` was decoded by this tool's schema.
  const query = tool.reconcile as (
    input: unknown,
    context: Tool.CallContext
  ) => Effect.Effect<Tool.Reconciliation<unknown>, Failure.Failure, R>
  const asked = yield* Effect.exit(
    waitOf(
      c,
      Effect.suspend(() =>
        UserCode.effect(
          {
            source: "tool",
            what: `the status query of ${tool.name}`,
            advice: "reconcile must return an Effect of Applied, NotApplied or Undecidable",
            defectCode: "reconcile_defect"
          },
          () => query(inputFor(c, true), context)
        )
      ).pipe(Effect.catchDefect((defect) => Effect.fail(Failure.fromDefect("tool", defect, "reconcile_defect"))))
    )
  )
  if (Exit.isFailure(asked) && Cause.hasInterruptsOnly(asked.cause)) return yield* Effect.interrupt
  const record = (verdict: "applied" | "not_applied" | "undecidable", detail: string) =>
    RunContext.emit(ctx, ({ runId, seq, at }) => ({
      _tag: "tool.reconciled",
      callId: context.callId,
      name: tool.name,
      idempotencyKey: context.idempotencyKey,
      verdict,
      // What the status query said may quote the call's arguments: its secrets are masked (R12).
      detail: Redaction.maskText(detail, c.secrets),
      ...(after === undefined ? {} : { after: Redaction.maskSummary(after, c.secrets) }),
      runId,
      seq,
      at
    }))
  const undecided = (detail: string): Outcome => {
    record("undecidable", detail)
    return {
      _tag: "Failed",
      failure: new Failure.UnknownOutcome({
        ...Failure.summarize(failure),
        hint: Redaction.maskText(`${failure.hint}; ${detail}`, c.secrets)
      })
    }
  }
  if (Exit.isFailure(asked)) {
    return undecided(`the status query failed: ${Failure.fromCause("tool", asked.cause).hint}`)
  }
  if ("timedOut" in asked.value) {
    return undecided(`the status query did not answer within ${describeTimeout(asked.value.timedOut)}`)
  }
  const checked = checkAnswer(asked.value.value)
  if (Result.isFailure(checked)) return undecided(checked.failure)
  const answer = checked.success
  switch (answer._tag) {
    case "Applied":
      record("applied", "the status query found the action applied")
      return outcome({ _tag: "Applied", output: answer.output })
    case "NotApplied":
      record("not_applied", "the status query found the action not applied; sending it again is safe")
      return outcome({
        _tag: "NotApplied",
        failure: new Failure.Retryable({
          source: "tool",
          category: "not_applied",
          code: "not_applied",
          attempts: 1,
          hint: `${tool.name} did not take effect (${failure.hint}); calling it again with the same arguments is safe`
        })
      })
    case "Undecidable":
      return undecided(answer.detail)
  }
})
