/**
 * The agent loop: ask the model, record its answer, check the termination policies, run
 * the tool batch, check again, until a policy or a hard stop ends it.
 *
 * The loop never decides whether the run *succeeded*: it returns an {@link Outcome}
 * (why it stopped, and the final answer if there was one), and `Run` takes it through
 * validation. A final answer is only a candidate (R6.1). Everything the loop decides by
 * is read from the run's log (its fold, `ctx.log`): the counters, the conversation, the
 * corrections outstanding, the model in use.
 *
 * @since 0.1.0
 */
import { Effect, Result } from "effect"
import type * as Event from "../../events/Event.ts"
import * as Model from "../../model/Model.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as Commit from "../internal/Commit.ts"
import * as FinalOutput from "../internal/FinalOutput.ts"
import * as RunContext from "../internal/RunContext.ts"
import * as ApprovalWait from "../pipeline/ApprovalWait.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import type { Config, Outcome } from "./internal/LoopConfig.ts"
import {
  approvalStop,
  askToFinish,
  checkpoint,
  correct,
  correctOutput,
  cutOffArguments,
  decide,
  fencedOff,
  hardStop,
  modelStop,
  remind
} from "./internal/LoopStops.ts"
import * as ModelCall from "./internal/ModelCall.ts"

export type { Config, Models, Outcome } from "./internal/LoopConfig.ts"

type Chain = ModelCall.Chain

/**
 * The model answered with tool calls: each made ready once (its identity, its arguments
 * parsed, its signature), then recorded as the log and the conversation keep them (R12).
 */
const record = <R>(ctx: RunContext.RunContext, config: Config<R>, iteration: number, response: Model.Response) => {
  const truncated = response.finishReason === "length"
  const prepared = response.toolCalls.map((call) => {
    const ready = ToolExecutor.prepare(config.registry, ctx.callIds, call)
    return truncated ? cutOffArguments(ready) : ready
  })
  RunContext.emit(ctx, {
    _tag: "model.responded",
    iteration,
    text: response.text,
    toolCalls: response.toolCalls.map((call, i) => {
      const args = prepared[i]?.recorded
      return args === call.arguments ? call : { ...call, arguments: args }
    }),
    callIds: prepared.map((p) => p.call.id),
    signatures: prepared.map((p) => p.signature),
    usage: response.usage,
    ...(response.finishReason === undefined ? {} : { finishReason: response.finishReason }),
    ...(response.reasoning === undefined ? {} : { reasoning: response.reasoning })
  })
  return prepared
}

/**
 * The batch: `concurrency` calls at a time, results in call order. A rejected or expired
 * approval fails the batch (the rest of it is interrupted) and stops the run (R7).
 */
const execute = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  prepared: ReadonlyArray<ToolExecutor.Prepared>,
  permission: Permission.PermissionService,
  standings?: ReadonlyArray<ToolExecutor.Standing>
) =>
  Effect.suspend(() => {
    const from = ctx.events.length
    const run = (p: ToolExecutor.Prepared, i: number) => {
      const result = ToolExecutor.execute(ctx, config.registry, p, permission, standings?.[i])
      // The result of a call that may act twice is committed at once (R9): a resumed run never re-runs it.
      const tool = config.registry.tools.get(p.call.name)
      const acts = tool !== undefined && !tool.metadata.idempotent && ToolExecutor.mayHaveEffects(tool)
      return acts ? Effect.tap(result, () => Commit.barrier(ctx)) : result
    }
    const [first] = prepared
    const batch =
      prepared.length === 1 && first !== undefined
        ? Effect.map(run(first, 0), (result) => [result])
        : Effect.forEach(prepared, run, { concurrency: config.concurrency })
    return Effect.catchIf(
      Effect.map(batch, (results) => ({ _tag: "Ran" as const, results })),
      ApprovalWait.isStop,
      (stop) => Effect.succeed({ _tag: "Stopped" as const, outcome: approvalStop(ctx, stop, from) })
    )
  })

/** The batch ran: corrections, hard stops, then the policies again. */
const afterBatch = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  results: ReadonlyArray<ToolResult.ToolResult>
) {
  const needCorrection: Array<ToolResult.ToolResult> = []
  for (const result of results) {
    const pending = RunContext.correctionOf(ctx, result.name)
    if (result.status === "succeeded" && pending !== undefined) {
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
  if (forced !== undefined) return forced

  // One give-up record for the batch, however many of its calls the spent budget leaves uncorrected.
  let spent = false
  for (const result of needCorrection) {
    const asked = yield* correct(ctx, config, {
      kind: "tool_argument_correction",
      cause: result.error?.code ?? "input_validation_failed",
      scope: "run",
      callId: result.callId,
      recordSpent: !spent
    })
    if (!asked) spent = true
  }

  return checkpoint(ctx, config, "after_tools")
})

/** One iteration, inside its step deadline: the model call, its answer, its tool batch. */
const iteration = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  chain: Chain,
  permission: Permission.PermissionService
) {
  const n = ctx.log.counters.iterations + 1
  const answer = yield* ModelCall.call(ctx, config, chain, n)
  if (answer._tag === "GaveUp") return modelStop(ctx, answer.reason)
  const response = answer.response
  const truncated = response.finishReason === "length"
  const prepared = record(ctx, config, n, response)
  // Tokens are paid for and the calls are fixed: a resumed run never asks for this choice again (R9).
  yield* Commit.barrier(ctx)
  // An answer that arrived after the deadline is not accepted (R3.11), whatever the policies say.
  if (RunContext.deadlinePassed(ctx)) return yield* RunContext.expire(ctx)
  const truncation = ctx.log.truncation
  if (truncation !== undefined && !truncated) {
    RunContext.emit(ctx, { _tag: "recovery.completed", kind: "output_truncation", attempt: truncation })
  }

  // A typed output (R6.1): a final answer that does not decode goes back as a correction.
  let corrected = false
  if (config.output !== undefined && prepared.length === 0 && !truncated && response.text.trim() !== "") {
    const decoded = FinalOutput.decode(config.output, response.text)
    if (Result.isFailure(decoded)) {
      // A schema that breaks is user code failing, not the model's answer (R12): it ends the run.
      if (decoded.failure._tag === "Broken") return decide(ctx, "runtime", "internal_error", decoded.failure.message)
      corrected = yield* correctOutput(ctx, config, decoded.failure.message)
    } else if (ctx.log.outputCorrection !== undefined) {
      RunContext.emit(ctx, { _tag: "recovery.completed", kind: "output_correction", attempt: ctx.log.outputCorrection })
    }
  }

  const afterModel = checkpoint(ctx, config, "after_model", response.text)
  if (afterModel !== undefined) return afterModel
  if (prepared.length === 0) {
    // Cut off by the output token limit: never a final answer (R11).
    if (truncated) return yield* askToFinish(ctx, config)
    if (corrected) return undefined
    remind(ctx, "empty_output", "Your last response was empty. Call a tool, or give your final answer as text.")
    return undefined
  }

  yield* RunContext.transition(ctx, "tool_executing")
  const batch = yield* execute(ctx, config, prepared, permission)
  if (batch._tag === "Stopped") return batch.outcome
  return yield* afterBatch(ctx, config, batch.results)
})

/** The batch a resumed run's log left open: its calls, ready again, and where each stands. */
interface OpenBatch {
  readonly prepared: ReadonlyArray<ToolExecutor.Prepared>
  readonly standings: ReadonlyArray<ToolExecutor.Standing>
}

/**
 * The open batch of a restored log: the last response's calls when some have no result
 * yet (the fold's `batch` is not closed), under the identities the run gave them.
 */
const openBatch = <R>(ctx: RunContext.RunContext, config: Config<R>): OpenBatch | undefined => {
  if (ctx.log.batch === undefined || ctx.log.batch.closed) return undefined
  const at = ctx.events.findLastIndex((e) => e._tag === "model.responded")
  const responded = ctx.events[at] as Event.Of<"model.responded"> | undefined
  if (responded === undefined) return undefined
  const after = ctx.events.slice(at + 1)
  const prepared = responded.toolCalls.map((call, i) =>
    ToolExecutor.prepareAs(config.registry, responded.callIds[i] ?? call.id, call)
  )
  return { prepared, standings: prepared.map((p) => ToolExecutor.standingOf(after, p.call.id)) }
}

/**
 * The calls of a restored log whose handler was running when the log stopped: neither
 * their result nor a retry's wait is in it (R3.8). Each with its attempt, and whether
 * it may have acted (its tool writes or acts outside, or is gone).
 *
 * @category getters
 * @since 0.4.0
 */
export const inDoubt = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>
): ReadonlyArray<{ readonly call: Model.ToolCall; readonly attempt: number; readonly mayHaveActed: boolean }> => {
  const open = openBatch(ctx, config)
  if (open === undefined) return []
  return open.prepared.flatMap((p, i) => {
    const standing = open.standings[i]
    if (standing?._tag !== "InDoubt") return []
    const tool = config.registry.tools.get(p.call.name)
    return [
      {
        call: p.call,
        attempt: standing.attempt,
        mayHaveActed: tool === undefined || ToolExecutor.mayHaveEffects(tool)
      }
    ]
  })
}

/**
 * The hard stop of a restored log's last batch, when the log holds all its results but
 * not what the loop made of them (the process stopped before the loop went on): an
 * unknown outcome, a tool error, decided again from those results, as the loop would
 * have (R3.8). Without one, the loop goes on.
 */
const closedBatchStop = <R>(ctx: RunContext.RunContext, config: Config<R>): Outcome | undefined => {
  if (ctx.log.batch === undefined || !ctx.log.batch.closed) return undefined
  const at = ctx.events.findLastIndex((e) => e._tag === "model.responded")
  const responded = ctx.events[at] as Event.Of<"model.responded"> | undefined
  if (responded === undefined) return undefined
  const after = ctx.events.slice(at + 1)
  if (after.some((e) => e._tag === "model.requested")) return undefined
  const results = responded.callIds.flatMap((callId) => {
    const standing = ToolExecutor.standingOf(after, callId)
    return standing._tag === "Done" ? [standing.result] : []
  })
  return hardStop(ctx, config, results)
}

/** A resumed run's open batch, finished: the calls without a result go on from where they stand. */
const finishBatch = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  open: OpenBatch,
  permission: Permission.PermissionService
) {
  yield* RunContext.transition(ctx, "tool_executing")
  const batch = yield* execute(ctx, config, open.prepared, permission, open.standings)
  if (batch._tag === "Stopped") return batch.outcome
  return yield* afterBatch(ctx, config, batch.results)
})

/**
 * Runs the loop until it stops. `R` is what the tools need; the model comes from the
 * context (`Model.Model`), the permission policy too (`Permission.Permission`).
 *
 * A resumed run (`resumed`) goes on from its restored log: the open batch first, if its
 * log left one, then the loop as ever; a model request without its response is simply
 * asked again (R9).
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = Effect.fnUntraced(function* <R>(ctx: RunContext.RunContext, config: Config<R>, resumed = false) {
  const model = yield* Model.Model
  const permission = yield* Permission.Permission
  const chain: Chain = [{ name: config.models.name, model }, ...config.models.fallbacks]
  const open = resumed ? openBatch(ctx, config) : undefined
  if (open !== undefined) {
    const outcome: Outcome | undefined = yield* Deadline.step(
      finishBatch(ctx, config, open, permission),
      config.registry.time.stepMillis
    )
    if (outcome !== undefined) return outcome
    yield* Commit.barrier(ctx)
  } else if (resumed) {
    const stop = closedBatchStop(ctx, config)
    if (stop !== undefined) return stop
  }
  while (true) {
    const fenced = fencedOff(ctx)
    if (fenced !== undefined) return fenced
    yield* RunContext.transition(ctx, "model_thinking")
    if (RunContext.deadlinePassed(ctx)) {
      return decide(ctx, "run_timeout", "run_timeout", "the run deadline passed before the model call")
    }
    const outcome: Outcome | undefined = yield* Deadline.step(
      iteration(ctx, config, chain, permission),
      config.registry.time.stepMillis
    )
    if (outcome !== undefined) return outcome
    // The end of an iteration: the rest of its events reach the journal together.
    yield* Commit.barrier(ctx)
  }
})
