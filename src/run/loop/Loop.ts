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
import { Context, Effect, Option, Result } from "effect"
import * as RunLog from "../../events/RunLog.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Model from "../../model/Model.ts"
import * as Deadline from "../../time/Deadline.ts"
import * as Permission from "../../tools/Permission.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import * as Spans from "../../tracing/Spans.ts"
import * as Commit from "../internal/Commit.ts"
import * as FinalOutput from "../internal/FinalOutput.ts"
import * as RunContext from "../internal/RunContext.ts"
import * as ApprovalWait from "../pipeline/ApprovalWait.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import { beforeCorrections, beforeOutputCorrection, checkpoint, decide, remind } from "./internal/Checkpoint.ts"
import type { Config, Outcome } from "./internal/LoopConfig.ts"
import * as LoopStops from "./internal/LoopStops.ts"
import * as ModelCall from "./internal/ModelCall.ts"
import * as ModelRecords from "./internal/ModelRecords.ts"
import { holdsStop, recordedStop } from "./internal/RecordedStop.ts"
import { inDoubt, type OpenBatch, reconcileLate, stepLeft, type Unfinished, unfinished } from "./internal/Unfinished.ts"

/** The run's live context, which the loop's functions take (internal to `run/`). */
export type { RunContext } from "../internal/RunContext.ts"
export type { Config, Models, Outcome } from "./internal/LoopConfig.ts"
export { holdsStop, inDoubt, reconcileLate }
/** The model call a run's deadline cut off, recorded when the run ends. */
export const recordCutOff = (ctx: RunContext.RunContext): void => ModelRecords.recordCutOff(ctx)

type Chain = ModelCall.Chain

/**
 * The model answered with tool calls: each made ready once (its identity, its arguments
 * parsed, its signature), then recorded as the log and the conversation keep them (R12).
 */
const record = <R>(ctx: RunContext.RunContext, config: Config<R>, iteration: number, response: Model.Response) => {
  const truncated = response.finishReason === "length"
  const prepared = response.toolCalls.map((call) => {
    const ready = ToolExecutor.prepare(config.registry, ctx.callIds, call)
    return truncated ? LoopStops.cutOffArguments(ready) : ready
  })
  // The optional fields last: the fields every response has are one shape.
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "model.responded",
    iteration,
    text: response.text,
    // Frozen (the response is the run's own copy): the model is handed them back in its conversation (R12).
    toolCalls: Object.freeze(
      response.toolCalls.map((call, i) => {
        const args = prepared[i]?.recorded
        return Object.freeze(args === call.arguments ? call : { ...call, arguments: args })
      })
    ),
    callIds: Object.freeze(prepared.map((p) => p.call.id)),
    signatures: Object.freeze(prepared.map((p) => p.signature)),
    usage: response.usage,
    runId,
    seq,
    at,
    ...(response.finishReason === undefined ? {} : { finishReason: response.finishReason }),
    ...(response.reasoning === undefined ? {} : { reasoning: response.reasoning }),
    ...(response.reasoningParts === undefined ? {} : { reasoningParts: response.reasoningParts })
  }))
  return prepared
}

/**
 * The batch: `concurrency` calls at a time, results in call order, then what the batch
 * comes to (see {@link afterBatch}). A rejected or expired approval (R7), or a call whose
 * result stops the run (a tool error, an unknown outcome: R3.11), fails the batch: the
 * rest of it is interrupted, and the run stops.
 */
const batch = <R>(
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
      const result = Effect.map(ToolExecutor.execute(ctx, config.registry, p, permission, standings?.[i]), (r) => {
        // Known before it is committed: a host parks no run that is stopping (review 148).
        if (LoopStops.callStop(config, r) !== undefined) ctx.stopFound = true
        return r
      })
      // The result of a call that may act twice is committed at once (R9): a resumed run never re-runs it.
      const tool = config.registry.tools.get(p.call.name)
      if (tool !== undefined && ToolExecutor.mayActTwice(tool)) return Effect.tap(result, () => Commit.barrier(ctx))
      // So is every result while a call waits for a person: the run may park on that wait, and a
      // park keeps what is committed (R9.3; a read's result held back kept the run from parking).
      if (ctx.journal === undefined || !config.approvals) return result
      return Effect.tap(result, () => (ctx.log.approvals.length > 0 ? Commit.barrier(ctx) : Effect.void))
    }
    // A result that stops the run stops the rest of the batch at once (R3.11), as a rejection does.
    // Each call ends on a turn of its own: `forEach` interrupts the calls left as each one ends, so they
    // would end inside one another (review 196: 1,000 cut off at once overflowed the stack, killing the process).
    const stopping = (p: ToolExecutor.Prepared, i: number) =>
      Effect.flatMap(run(p, i), (result) => {
        const stop = LoopStops.callStop(config, result)
        return stop === undefined ? Effect.succeed(result) : Effect.fail(stop)
      }).pipe(Effect.onInterrupt(() => Effect.yieldNow))
    const [first] = prepared
    // A call alone has no rest to stop: its result goes to the batch's end as it is.
    const alone =
      prepared.length === 1 && first !== undefined
        ? Effect.flatMap(run(first, 0), (result) => afterBatch(ctx, config, [result]))
        : undefined
    if (alone !== undefined && !config.approvals) return alone
    // A resumed batch whose log holds a result that stops the run stops at once: the calls it left
    // waiting are let go, never taken up (review 148: a sibling's error, then an approval, paid).
    // So does one with a rejection or an expiry whose stop was not committed (its siblings' waits not taken up).
    const stopped = recordedStop(config, ctx.events.slice(from), standings ?? [])
    const ran =
      stopped !== undefined
        ? Effect.fail(stopped)
        : (alone ??
          Effect.flatMap(Effect.forEach(prepared, stopping, { concurrency: config.concurrency }), (results) =>
            afterBatch(ctx, config, results)
          ))
    // A call that needs approval, or whose result stops the run, stops the batch.
    return Effect.catchIf(
      ran,
      (e): e is ApprovalWait.Stop | LoopStops.CallStop =>
        LoopStops.isCallStop(e) || (config.approvals && ApprovalWait.isStop(e)),
      (stop) =>
        // A resumed batch's calls stopped before they took up their waits again are settled first (R5.2, R7).
        Effect.map(ToolExecutor.settleUntaken(ctx, config.registry), () => LoopStops.batchStop(ctx, config, stop, from))
    )
  })

/** The batch ran: corrections, hard stops, then the policies again. */
const afterBatch = <R>(ctx: RunContext.RunContext, config: Config<R>, results: ReadonlyArray<ToolResult.ToolResult>) =>
  Effect.suspend(() => {
    const needCorrection: Array<ToolResult.ToolResult> = []
    for (const result of results) {
      const pending = RunContext.correctionOf(ctx, result.name)
      if (result.status === "succeeded" && pending !== undefined) {
        RunContext.emit(ctx, ({ runId, seq, at }) => ({
          _tag: "recovery.completed",
          kind: "tool_argument_correction",
          attempt: pending,
          callId: result.callId,
          runId,
          seq,
          at
        }))
      }
      if (result.status === "failed" && result.error?.correctable === true) needCorrection.push(result)
    }

    const forced = LoopStops.hardStop(ctx, config, results)
    if (forced !== undefined) return Effect.succeed(forced)
    const policies = () => checkpoint(ctx, config, "after_tools")
    if (needCorrection.length === 0) return Effect.succeed(policies())
    // A stop the policies take already is taken before a correction is announced (R3.5).
    const stop = beforeCorrections(ctx, config)
    return stop !== undefined ? Effect.succeed(stop) : Effect.map(askCorrections(ctx, config, needCorrection), policies)
  })

/**
 * The corrections of a batch's calls: the model corrects them all in its next turn, one
 * attempt of the correction budget (R3.5); with the budget spent, one give-up record for
 * the batch.
 */
const askCorrections = Effect.fnUntraced(function* <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  needCorrection: ReadonlyArray<ToolResult.ToolResult>
) {
  const attempt = ctx.log.counters.toolCorrectionAttempts + 1
  for (const [i, result] of needCorrection.entries()) {
    yield* LoopStops.correct(ctx, config, {
      kind: "tool_argument_correction",
      cause: result.error?.code ?? "input_validation_failed",
      scope: "run",
      callId: result.callId,
      attempt,
      recordSpent: i === 0
    })
  }
})

/**
 * One iteration, inside its step deadline: the model call, its answer, its tool batch.
 * Each stage hands over to the next by returning it (`flatMap`), so nothing of this one
 * stays on the stack while the batch runs.
 */
const iteration = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  chain: Chain,
  permission: Permission.PermissionService,
  waiting?: ModelCall.Waiting
) =>
  Effect.suspend(() => {
    const n = ctx.log.counters.iterations + 1
    const called =
      waiting === undefined
        ? ModelCall.call(ctx, config, chain, n)
        : ModelCall.resumeWaiting(ctx, config, chain, n, waiting)
    return Effect.flatMap(called, (answer) => {
      if (answer._tag === "GaveUp") return LoopStops.modelGaveUp(ctx, config, answer.reason)
      if (answer._tag === "Stopped") return Effect.succeed(answer.outcome)
      const response = answer.response
      const prepared = record(ctx, config, n, response)
      // Tokens are paid for and the calls are fixed: a resumed run never asks for this choice again (R9).
      return Effect.andThen(Commit.barrier(ctx), () =>
        // An answer that arrived after the deadline is not accepted (R3.11), whatever the policies say;
        // nor one after its step's (R4.2): a model that blocked past them.
        RunContext.deadlinePassed(ctx)
          ? RunContext.expire(ctx)
          : LoopStops.afterStepCheck(config, (late) =>
              late
                ? Effect.succeed(LoopStops.stepLate(ctx, "the model's answer came after its step's deadline"))
                : responded(ctx, config, response, prepared, permission)
            )
      )
    })
  })

/**
 * What follows a response, once it is committed: its checks, then its tool batch. A
 * resumed run whose log stopped right after the response goes on from here (R9).
 */
const responded = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  response: Model.Response,
  prepared: ReadonlyArray<ToolExecutor.Prepared>,
  permission: Permission.PermissionService
) =>
  Effect.suspend(() => {
    const truncated = response.finishReason === "length"
    // An answer whole again, or that decodes, ends the episode of asking for it (R3.3).
    if (!truncated) LoopStops.episodeEnded(ctx, "output_truncation", ctx.log.truncation)
    // A typed output (R6.1): a final answer that does not decode goes back as a correction.
    if (config.output !== undefined && prepared.length === 0 && !truncated && !Model.isBlank(response.text)) {
      const decoded = FinalOutput.decode(config.output, response.text, config.registry.limits)
      if (Result.isFailure(decoded)) {
        // A schema that breaks is user code failing, not the model's answer (R12): it ends the run.
        if (decoded.failure._tag === "Broken") {
          return Effect.succeed(decide(ctx, "runtime", "internal_error", decoded.failure.message))
        }
        // With a correction to spend, a stop the policies take already is taken before it is announced.
        const spent = ctx.log.counters.toolCorrectionAttempts >= config.correctionBudget
        const stop = spent ? undefined : beforeOutputCorrection(ctx, config)
        if (stop !== undefined) return Effect.succeed(stop)
        return Effect.flatMap(LoopStops.correctOutput(ctx, config, decoded.failure.message), (corrected) =>
          checked(ctx, config, response, prepared, permission, corrected)
        )
      }
      LoopStops.episodeEnded(ctx, "output_correction", ctx.log.outputCorrection)
      // The value decoded here is the one judged (review 90: a second decode decided the run).
      const output = { value: decoded.success }
      return Effect.map(checked(ctx, config, response, prepared, permission, false), (outcome) =>
        outcome?.reason === "goal_reached" ? { ...outcome, output } : outcome
      )
    }
    return checked(ctx, config, response, prepared, permission, false)
  })

/** A checked response: the policies after the model, then its batch, or what an answer without calls comes to. */
const checked = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  response: Model.Response,
  prepared: ReadonlyArray<ToolExecutor.Prepared>,
  permission: Permission.PermissionService,
  corrected: boolean
) => {
  const afterModel = checkpoint(ctx, config, "after_model", response.text)
  if (afterModel !== undefined) return Effect.succeed(afterModel)
  if (prepared.length > 0) return finishBatch(ctx, config, { prepared }, permission)
  // Cut off by the output token limit: never a final answer (R11).
  if (response.finishReason === "length") return LoopStops.askToFinish(ctx, config)
  if (corrected) return Effect.succeed(undefined)
  // An answer no policy took as final (the run's own policies may leave `final_answer` out) is no empty one.
  if (Model.isBlank(response.text)) {
    remind(ctx, "empty_output", "Your last response was empty. Call a tool, or give your final answer as text.")
  } else {
    remind(ctx, "answer_not_final", "Your answer did not end the run: go on with the task, using the tools.")
  }
  return Effect.succeed(undefined)
}

/** A batch run to its end: the calls without a result go on from where they stand (R9), then the batch's end. */
const finishBatch = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  open: OpenBatch,
  permission: Permission.PermissionService
) =>
  // A resumed batch keeps the phase its log's waits add up to (R1.3).
  Effect.andThen(
    Effect.suspend(() => RunContext.transition(ctx, RunLog.phaseOf(ctx.log, "tool_executing"))),
    batch(ctx, config, open.prepared, permission, open.standings)
  )

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
 * One turn of the loop: the checks before the model call, then the iteration inside its
 * step deadline. A resumed run whose log stopped in a retry's wait (`waiting`) goes on with
 * that iteration, in its phase and what is left of its step.
 */
const turn = <R>(
  ctx: RunContext.RunContext,
  config: Config<R>,
  chain: Chain,
  permission: Permission.PermissionService,
  waiting?: ModelCall.Waiting
) =>
  Effect.suspend(() => {
    const fenced = LoopStops.fencedOff(ctx)
    if (fenced !== undefined) return Effect.succeed(fenced)
    const n = ctx.log.counters.iterations + 1
    const { stepMillis } = config.registry.time
    return Effect.andThen(waiting === undefined ? RunContext.transition(ctx, "model_thinking") : Effect.void, () =>
      RunContext.deadlinePassed(ctx)
        ? Effect.succeed(decide(ctx, "run_timeout", "run_timeout", "the run deadline passed before the model call"))
        : Spans.step(
            Deadline.step(
              iteration(ctx, config, chain, permission, waiting),
              waiting === undefined ? stepMillis : stepLeft(ctx, stepMillis, n)
            ),
            n
          )
    )
  })

type Turn<R> = ReturnType<typeof turn<R>>

const noModel = new UserCode.UserCodeDefect(
  "no Model service was provided to the run: provide a model's layer (OpenAiCompatible.layer, LanguageModelAdapter.layer, or ScriptedModel.layer from effect-agent-runtime/testing)"
)

/**
 * Runs the loop until it stops. `R` is what the tools need; the model comes from the
 * context (`Model.Model`), the permission policy too (`Permission.Permission`).
 *
 * A resumed run (`resumed`) goes on from its restored log: the rest of its last
 * iteration first, if its log stopped inside one (after the response, or in its batch),
 * then the loop as ever; a model request without its response is simply asked again (R9).
 *
 * Each turn hands over to the next by returning it (`flatMap`), as the stages of an
 * iteration do, so nothing of the loop waits on the stack while a turn runs.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = <R>(ctx: RunContext.RunContext, config: Config<R>, resumed = false) =>
  Effect.contextWith((context: Context.Context<Model.Model>) => {
    // A caller without types (JavaScript) may have provided none: say so, not "a defect (Error)".
    const given = Context.getOption(context, Model.Model)
    if (Option.isNone(given)) return Effect.die(noModel)
    const model = given.value
    const permission = Context.get(context, Permission.Permission)
    const chain: Chain = [{ name: config.models.name, model }, ...config.models.fallbacks]
    // The end of an iteration: the rest of its events reach the journal together; then the next turn.
    const next = (
      outcome: Outcome | undefined
    ): Effect.Effect<Outcome, Effect.Error<Turn<R>>, Effect.Services<Turn<R>>> =>
      outcome !== undefined ? Effect.succeed(outcome) : Effect.andThen(Commit.barrier(ctx), turns)
    const turns = () => Effect.flatMap(turn(ctx, config, chain, permission), next)
    const open = resumed ? unfinished(ctx, config) : undefined
    const waiting = resumed && open === undefined ? ModelCall.waitingOf(ctx) : undefined
    if (waiting !== undefined) return Effect.flatMap(turn(ctx, config, chain, permission, waiting), next)
    if (open === undefined) return turns()
    // The rest of the iteration its log stopped in, on a step span of that iteration's number.
    return Effect.flatMap(
      Spans.step(
        Deadline.step(finishIteration(ctx, config, open, permission), stepLeft(ctx, config.registry.time.stepMillis)),
        ctx.log.counters.iterations
      ),
      next
    )
  })
