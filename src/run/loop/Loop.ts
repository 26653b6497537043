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
import * as RunLog from "../../events/RunLog.ts"
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
    // The batch's events begin after its response: a resumed batch's earlier results count too (R3.8).
    const from = ctx.events.findLastIndex((e) => e._tag === "model.responded") + 1
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
      (stop) =>
        // A resumed batch's calls stopped before they took up their waits again are settled first (R5.2, R7).
        Effect.map(untaken(ctx, config), () => ({ _tag: "Stopped" as const, outcome: approvalStop(ctx, stop, from) }))
    )
  })

/** The calls of a stopped batch that never took up their waits again: withdrawn, never run; the phase follows. */
const untaken = <R>(ctx: RunContext.RunContext, config: Config<R>) =>
  Effect.suspend(() => {
    return ToolExecutor.recordUntaken(ctx, config.registry.tools)
      ? RunContext.release(ctx, "tool_executing")
      : Effect.void
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
  const prepared = record(ctx, config, n, response)
  // Tokens are paid for and the calls are fixed: a resumed run never asks for this choice again (R9).
  yield* Commit.barrier(ctx)
  // An answer that arrived after the deadline is not accepted (R3.11), whatever the policies say.
  if (RunContext.deadlinePassed(ctx)) return yield* RunContext.expire(ctx)
  return yield* responded(ctx, config, response, prepared, permission)
})

/**
 * What follows a response, once it is committed: its checks, then its tool batch. A
 * resumed run whose log stopped right after the response goes on from here (R9).
 */
const responded = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  response: Model.Response,
  prepared: ReadonlyArray<ToolExecutor.Prepared>,
  permission: Permission.PermissionService
) {
  const truncated = response.finishReason === "length"
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
  return yield* finishBatch(ctx, config, { prepared }, permission)
})

/** A batch: its calls, ready, and for a resumed run's where each stands in its log. */
interface OpenBatch {
  readonly prepared: ReadonlyArray<ToolExecutor.Prepared>
  readonly standings?: ReadonlyArray<ToolExecutor.Standing> | undefined
}

/**
 * Where a resumed run's log stopped in its last iteration (R9), when it stopped inside
 * one: right after the model's response (`Responded`: nothing of what follows it was
 * committed, so its checks run again, as they would have), or in its tool batch
 * (`InBatch`: some calls have no result yet, or all have and what the batch's end
 * decides, its corrections, limits and policies, was not committed).
 */
type Unfinished =
  | {
      readonly _tag: "Responded"
      readonly response: Model.Response
      readonly prepared: ReadonlyArray<ToolExecutor.Prepared>
    }
  | ({ readonly _tag: "InBatch" } & OpenBatch)

/** The events after a batch ends that say its end was decided: whatever else follows, the loop went on. */
const decidedAfterBatch: ReadonlySet<Event.Event["_tag"]> = new Set([
  "reminder.injected",
  "recovery.started",
  "recovery.completed",
  "recovery.failed",
  "termination.decided"
])

/** Where the last iteration of a restored log stopped, if inside it (see {@link Unfinished}). */
const unfinished = <R>(ctx: RunContext.RunContext, config: Config<R>): Unfinished | undefined => {
  const at = ctx.events.findLastIndex((e) => e._tag === "model.responded")
  const responded = ctx.events[at] as Event.Of<"model.responded"> | undefined
  if (responded === undefined) return undefined
  const after = ctx.events.slice(at + 1).filter((e) => e._tag !== "run.resumed")
  const truncated = responded.finishReason === "length"
  const prepared = responded.toolCalls.map((call, i) => {
    const ready = ToolExecutor.prepareAs(config.registry, responded.callIds[i] ?? call.id, call)
    return truncated ? cutOffArguments(ready) : ready
  })
  if (after.length === 0 && RunContext.state(ctx) === "model_thinking") {
    const response: Model.Response = {
      text: responded.text,
      toolCalls: responded.toolCalls,
      usage: responded.usage,
      ...(responded.finishReason === undefined ? {} : { finishReason: responded.finishReason }),
      ...(responded.reasoning === undefined ? {} : { reasoning: responded.reasoning })
    }
    return { _tag: "Responded", response, prepared }
  }
  if (prepared.length === 0) return undefined
  const standings = prepared.map((p) => ToolExecutor.standingOf(after, p.call.id))
  if (standings.some((s) => s._tag !== "Done")) return { _tag: "InBatch", prepared, standings }
  // Every result is in: the batch's end is still to decide unless something after the last result says it was.
  const last = after.findLastIndex(
    (e) =>
      (e._tag === "tool.succeeded" || e._tag === "tool.failed" || e._tag === "tool.blocked") &&
      responded.callIds.includes(e.callId)
  )
  return after.slice(last + 1).some((e) => decidedAfterBatch.has(e._tag))
    ? undefined
    : { _tag: "InBatch", prepared, standings }
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
  const open = unfinished(ctx, config)
  if (open?._tag !== "InBatch") return []
  return open.prepared.flatMap((p, i) => {
    const standing = open.standings?.[i]
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

/** A batch run to its end: the calls without a result go on from where they stand (R9), then the batch's end. */
const finishBatch = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  open: OpenBatch,
  permission: Permission.PermissionService
) {
  // A resumed batch keeps the phase its log's waits add up to (R1.3).
  yield* RunContext.transition(ctx, RunLog.phaseOf(ctx.log, "tool_executing"))
  const batch = yield* execute(ctx, config, open.prepared, permission, open.standings)
  if (batch._tag === "Stopped") return batch.outcome
  return yield* afterBatch(ctx, config, batch.results)
})

/**
 * What is left of the step of a resumed run's last iteration: the step began at the
 * iteration's first model request, and keeps its deadline across a restart (R4.2, R9).
 */
const stepLeft = (ctx: RunContext.RunContext, stepMillis: number | undefined): number | undefined => {
  if (stepMillis === undefined) return undefined
  const iteration = ctx.log.counters.iterations
  const began = ctx.events.find((e) => e._tag === "model.requested" && e.iteration === iteration)
  return began === undefined ? stepMillis : began.at + stepMillis - RunContext.now(ctx)
}

/** A resumed run's last iteration, finished from where its log stopped. */
const finishIteration = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  open: Unfinished,
  permission: Permission.PermissionService
) =>
  open._tag === "Responded"
    ? responded(ctx, config, open.response, open.prepared, permission)
    : finishBatch(ctx, config, open, permission)

/**
 * Runs the loop until it stops. `R` is what the tools need; the model comes from the
 * context (`Model.Model`), the permission policy too (`Permission.Permission`).
 *
 * A resumed run (`resumed`) goes on from its restored log: the rest of its last
 * iteration first, if its log stopped inside one (after the response, or in its batch),
 * then the loop as ever; a model request without its response is simply asked again (R9).
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = Effect.fnUntraced(function* <R>(ctx: RunContext.RunContext, config: Config<R>, resumed = false) {
  const model = yield* Model.Model
  const permission = yield* Permission.Permission
  const chain: Chain = [{ name: config.models.name, model }, ...config.models.fallbacks]
  const open = resumed ? unfinished(ctx, config) : undefined
  if (open !== undefined) {
    const outcome: Outcome | undefined = yield* Deadline.step(
      finishIteration(ctx, config, open, permission),
      stepLeft(ctx, config.registry.time.stepMillis)
    )
    if (outcome !== undefined) return outcome
    yield* Commit.barrier(ctx)
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
