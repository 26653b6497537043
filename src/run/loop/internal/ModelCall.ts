/**
 * The model call of one iteration, private to the loop: one attempt (its time layers,
 * R4.2, and circuit breaker, R3.9), one recovery episode over the attempts (R3.3), then
 * the next fallback model when the model in use fails for good or its circuit is open
 * (R3.9). It answers with the response, or with what it gave up on; the loop decides
 * what that stop is.
 */
import { Cause, Effect, Result } from "effect"
import * as RunLog from "../../../events/RunLog.ts"
import type * as RunState from "../../../events/RunState.ts"
import * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import * as Model from "../../../model/Model.ts"
import * as UsageParts from "../../../model/UsageParts.ts"
import * as Recovery from "../../../recovery/Recovery.ts"
import * as Deadline from "../../../time/Deadline.ts"
import * as Spans from "../../../tracing/Spans.ts"
import * as Commit from "../../internal/Commit.ts"
import * as PhaseWaits from "../../internal/PhaseWaits.ts"
import * as Recover from "../../internal/Recover.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type * as Registry from "../../pipeline/Registry.ts"
import { afterPaidFailure, record } from "./Checkpoint.ts"
import type { Config, Outcome } from "./LoopConfig.ts"
import { recordCutOff, recordRequest } from "./ModelRecords.ts"
import * as ModelResponse from "./ModelResponse.ts"

/** What the call needs from the loop's configuration. */
export interface Settings extends Pick<Config<unknown>, "policies"> {
  readonly registry: Registry.Registry
  readonly toolDefinitions: ReadonlyArray<Model.ToolDefinition>
  readonly recovery: Recovery.Settings
}

/**
 * What the model call of an iteration came to: a response, the reason it ended without
 * one (recovery gave up, `Exhausted`, or a failure nothing recovers), or the run's stop a
 * policy decided after a failed answer that was paid for (its budget spent, R2.1).
 */
export type Answer =
  | { readonly _tag: "Responded"; readonly response: Model.Response }
  | { readonly _tag: "GaveUp"; readonly reason: Recovery.Exhausted | Failure.Failure }
  | { readonly _tag: "Stopped"; readonly outcome: Outcome }

/** The run's stop, once a policy decided it after a paid failure: nothing more is asked. */
interface Halt {
  outcome: Outcome | undefined
}

/** The model chain of a run: the model it starts with, then its fallbacks in order. */
export type Chain = readonly [Model.Fallback, ...Array<Model.Fallback>]

/** Why recovery gave up, when the next model may do better: not the run's own limits. */
const switchable: ReadonlySet<Recovery.GiveUp> = new Set<Recovery.GiveUp>([
  "circuit_open",
  "not_retryable",
  "owner_retried",
  "not_allowed",
  "schedule_exhausted"
])

/**
 * One attempt: records the request with its deadline, calls the model through the
 * user-code boundary, checks the response, and bounds it by min(the attempt timeout,
 * what is left of the step, what is left of the run) (R4.2). Every failure is recorded;
 * a call the run's deadline cuts off is recorded when the run ends (see {@link recordCutOff}).
 */
const attempt = (
  ctx: RunContext.RunContext,
  settings: Settings,
  current: Model.Fallback,
  iteration: number,
  n: number
): Effect.Effect<Model.Response, Failure.Failure> => {
  const own = { layer: "attempt", millis: settings.registry.time.attemptMillis } as const
  return Effect.flatMap(Deadline.left(own), (limit) => {
    // No request starts past the run deadline (R3.11): a retry or a fallback after a call that blocked past it.
    if (RunContext.deadlinePassed(ctx)) return RunContext.expire(ctx)
    // Nor once nothing is left of its step (R4.2): it times out at once, asking nothing.
    if (limit.millis <= 0 && limit.layer !== "run") {
      return Effect.fail(
        FailureBoundary.timeout({ source: "provider", layer: limit.layer, limitMillis: 0, afterMillis: 0 })
      )
    }
    recordRequest(ctx, iteration, n, limit)
    const request: Model.Request = {
      runId: ctx.runId,
      iteration,
      messages: RunLog.messages(ctx.log),
      tools: settings.toolDefinitions,
      deadlineAt: limit.at,
      deadlineLayer: limit.layer
    }
    // What the answer cost so far when the run's own timers cut it off, as the model reports it (R2.1).
    let paid: Model.Usage | undefined
    // Called as the attempt runs, inside its circuit: a call the circuit refuses never calls the model (R3.9).
    const call = Effect.suspend(() =>
      UserCode.effect(
        {
          source: "provider",
          what: `the generate of model "${current.name}"`,
          advice: "generate must return an Effect (wrap a promise with Effect.tryPromise)",
          defectCode: "defect"
        },
        () => current.model.generate(request)
      )
    ).pipe(
      // What a failed answer cost, as the run counts it: the span, the event and the counters read one value.
      Effect.mapError((failure) => FailureBoundary.withUsageCounted(failure, UsageParts.whole)),
      Effect.flatMap(ModelResponse.valid),
      Effect.provideService(Model.CutOffUsage, (usage) => {
        paid = ModelResponse.cutOffUsage(usage) ?? paid
      })
    )
    // Bounded by what is left of the attempt's limit as recorded (R4.2): the time a circuit's
    // store took to admit the call is the call's, and with nothing left the call is not made.
    // Its timeout counts from the request, and names the attempt's own limit apart (R4.3).
    const timedOut = ({ layer, afterMillis }: Deadline.Timeout) =>
      Effect.clockWith((clock) =>
        Effect.fail(
          FailureBoundary.withUsage(
            FailureBoundary.timeout({
              source: "provider",
              layer,
              limitMillis: layer === own.layer ? own.millis : undefined,
              afterMillis: Math.max(afterMillis, clock.currentTimeMillisUnsafe() - limit.now)
            }),
            paid
          )
        )
      )
    // The provider's timeout of the deadline it was handed, fired at that deadline, is restated
    // as the run's own (R4.3): the provider counts from when its request began, and knows the
    // deadline, not the limit. A timeout it reports before then is its own word, kept.
    const restated = Effect.catchIf(
      call,
      (failure) => failure.category === "timeout" && failure.timeout?.layer === limit.layer,
      (failure) =>
        Effect.clockWith((clock) => {
          const now = clock.currentTimeMillisUnsafe()
          if (now < limit.at - 1) return Effect.fail(failure)
          const limitMillis = limit.layer === own.layer ? own.millis : undefined
          const restatement = FailureBoundary.timeout({
            source: "provider",
            layer: limit.layer,
            limitMillis,
            afterMillis: now - limit.now,
            attempts: failure.attempts
          })
          return Effect.fail(FailureBoundary.withUsage(restatement, failure.usage ?? paid))
        })
    )
    const generated = Deadline.withinOrElse(restated, {
      layer: own.layer,
      until: own.millis === undefined ? undefined : limit.now + own.millis,
      orElse: timedOut,
      ifNoTime: timedOut
    })
    // The breaker sees one outcome per attempt, the timeout inside it. Its store's waits are
    // not cut off (effect's breaker admits uninterruptibly); the time they take is the call's.
    const guarded = ctx.breakers === undefined ? generated : ctx.breakers.guard("provider", current.name, generated)
    const traced = Spans.chat(guarded, {
      model: current.name,
      iteration,
      attempt: n,
      messages: () => request.messages,
      // As the run counts it: a cut-off is recorded with its usage when the run's deadline or cancel made it.
      cutOff: () => (ctx.log.stopping === undefined ? undefined : paid)
    })
    return traced.pipe(
      // A defect, or an error outside the algebra (a Model that broke its contract), is the
      // provider's failure as `Failure.fromCause` makes it; interruption passes through.
      Effect.catchCause((cause) => {
        if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
        const failure = Failure.fromCause("provider", cause)
        RunContext.emit(ctx, ({ runId, seq, at }) => ({
          _tag: "model.failed",
          iteration,
          failure: Failure.summarize(failure),
          ...(failure.usage === undefined ? {} : { usage: failure.usage }),
          runId,
          seq,
          at
        }))
        return Effect.fail(failure)
      }),
      // Cut off by the run's deadline or cancel with what it cost so far: recorded now, with that usage.
      Effect.onInterrupt(() => (paid === undefined ? Effect.void : Effect.sync(() => recordCutOff(ctx, paid))))
    )
  })
}

/**
 * One model's recovery episode once its first attempt has failed (`cause`): its further
 * attempts, retried as `Recovery.decide` allows (R3.3).
 */
const episode = (
  ctx: RunContext.RunContext,
  settings: Settings,
  chain: Chain,
  iteration: number,
  cause: Cause.Cause<Failure.Failure>,
  halt: Halt,
  made: Made
) => {
  const current = chain[ctx.log.fallbacks] ?? chain[0]
  const { recovery } = settings
  return Recover.recoverFrom(
    ctx,
    {
      kind: "provider_retry",
      source: "provider",
      resume: "model_thinking",
      schedule: recovery.schedule,
      maxRecoveries: recovery.maxRecoveries,
      neverRetried: recovery.neverRetried,
      maxRetries: Number.POSITIVE_INFINITY,
      allowed: true,
      // A failed answer that was paid for is committed with its retry before the wait, and every
      // wait after it: a process that dies in one is resumed with what it cost counted, waiting (R2.1, R9).
      commitsWait: made.commitsWait,
      attemptsMade: made.attempts,
      ...(made.refused === undefined ? {} : { refused: made.refused }),
      // With a next model, an open circuit hands over at once, on any attempt.
      handOff: ctx.log.fallbacks + 1 < chain.length,
      // What a failed answer cost may have spent the run's budget: the policies look before more is
      // paid for. Asked by the episode, so that a policy that throws is the run's defect, not the call's.
      // Only where more would be paid for (a retry, a next model): a failure that ends the run's
      // asking ends it with its own reason (a filtered answer), which says more than a budget.
      halted: (failure) => {
        const more = failure._tag === "Retryable" || ctx.log.fallbacks + 1 < chain.length
        if (failure.usage !== undefined && more) halt.outcome ??= afterPaidFailure(ctx, settings)
        return halt.outcome !== undefined
      }
    },
    (n) => attempt(ctx, settings, current, iteration, n),
    cause
  )
}

/**
 * The model call of one iteration over the run's model chain (the model in use first,
 * then its fallbacks in order; a switch is for the rest of the run, and the log says
 * which model is in use).
 */
export const call = (
  ctx: RunContext.RunContext,
  settings: Settings,
  chain: Chain,
  iteration: number
): Effect.Effect<Answer, RunState.IllegalTransition> =>
  Effect.suspend(() =>
    // The first attempt runs bare: a call that succeeds pays nothing for recovery.
    Effect.matchCauseEffect(attempt(ctx, settings, chain[ctx.log.fallbacks] ?? chain[0], iteration, 1), {
      onSuccess: (response) => Effect.succeed<Answer>({ _tag: "Responded", response }),
      onFailure: (cause) => failed(ctx, settings, chain, iteration, cause, { attempts: 1, commitsWait: false })
    })
  )

/**
 * The attempts of a call already made when its episode goes on, whether its waits are
 * committed, and the attempts among them its circuit refused (a resumed episode's, R3.9).
 */
interface Made {
  readonly attempts: number
  readonly commitsWait: boolean
  readonly refused?: { readonly count: number; readonly halfOpenInARow: number }
}

/**
 * Where a resumed run's model call stood when its log stopped, if in the wait for a retry:
 * a paid failure's episode commits its retry before the wait (R2.1, R9). The attempts made,
 * and when the wait ends.
 */
export interface Waiting {
  readonly attempts: number
  readonly wakeAt: number
}

const modelEvents: ReadonlySet<string> = new Set(["model.requested", "model.responded", "model.failed"])

/** The wait a restored log stopped in, if its last model event is a retry's start (see {@link Waiting}). */
export const waitingOf = (ctx: RunContext.RunContext): Waiting | undefined => {
  const last = ctx.events.findLast(
    (e) =>
      modelEvents.has(e._tag) ||
      ((e._tag === "recovery.started" || e._tag === "recovery.completed" || e._tag === "recovery.failed") &&
        e.kind === "provider_retry")
  )
  return last?._tag === "recovery.started" ? { attempts: last.attempt, wakeAt: last.at + last.delayMillis } : undefined
}

/**
 * The model call of a resumed run whose log stopped in a retry's wait ({@link waitingOf}):
 * it waits out the rest of the delay, then goes on with the next attempt, in the same
 * episode, as the live run would have (R9, R3.3).
 */
export const resumeWaiting = (
  ctx: RunContext.RunContext,
  settings: Settings,
  chain: Chain,
  iteration: number,
  waiting: Waiting
): Effect.Effect<Answer, RunState.IllegalTransition> =>
  Effect.suspend(() => {
    const owner = { owner: "" }
    // The refusals of the episode, since its model's first attempt, spent no retry (review 156).
    const start = ctx.events.findLast((e) => e._tag === "model.requested" && e.attempt === 1)
    const refused = RunLog.refusalsOf(ctx.events, undefined, start?.seq)
    const made: Made = { attempts: waiting.attempts + 1, commitsWait: true, refused }
    const rest = Effect.onInterrupt(Deadline.sleepUntil(waiting.wakeAt), () =>
      Effect.ignore(PhaseWaits.release(ctx, "model_thinking", owner))
    )
    const next = Effect.matchCauseEffect(
      Effect.suspend(() => attempt(ctx, settings, chain[ctx.log.fallbacks] ?? chain[0], iteration, made.attempts)),
      {
        onSuccess: (response) => {
          RunContext.emit(ctx, ({ runId, seq, at }) => ({
            _tag: "recovery.completed",
            kind: "provider_retry",
            attempt: waiting.attempts,
            runId,
            seq,
            at
          }))
          return Effect.succeed<Answer>({ _tag: "Responded", response })
        },
        onFailure: (cause) => failed(ctx, settings, chain, iteration, cause, made)
      }
    )
    return rest.pipe(Effect.andThen(PhaseWaits.release(ctx, "model_thinking", owner)), Effect.andThen(next))
  })

/** After an attempt failed (`cause`): its episode's further attempts, then the next model of the chain. */
const failed = (
  ctx: RunContext.RunContext,
  settings: Settings,
  chain: Chain,
  iteration: number,
  cause: Cause.Cause<Failure.Failure>,
  made: Made
): Effect.Effect<Answer, RunState.IllegalTransition> => {
  const halt: Halt = { outcome: undefined }
  return Effect.flatMap(
    Recover.settled("provider", episode(ctx, settings, chain, iteration, cause, halt, made)),
    (answered) => {
      if (Result.isSuccess(answered)) return Effect.succeed<Answer>({ _tag: "Responded", response: answered.success })
      // A policy stopped the run after a paid failure: no retry was sent, nor is a fallback asked.
      // Its stop is recorded now that the episode has closed.
      if (halt.outcome !== undefined) {
        return Effect.succeed<Answer>({ _tag: "Stopped", outcome: record(ctx, halt.outcome) })
      }
      const reason = answered.failure
      const failure = Recovery.isExhausted(reason) ? reason.failure : reason
      const next = chain[ctx.log.fallbacks + 1]
      // A filtered answer is the provider's safety verdict, not a fault: no other model is asked to overrule it (R3.11).
      if (next === undefined || failure.category === "content_filter") {
        return Effect.succeed<Answer>({ _tag: "GaveUp", reason })
      }
      return Effect.flatMap(Deadline.left({ layer: "run" }), (left) => {
        // A retry that would wait past the step or the run (a Retry-After of an hour) leaves the
        // time there is to the next model; nothing is switched to once none is left of either.
        const canSwitch =
          !Recovery.isExhausted(reason) ||
          switchable.has(reason.why) ||
          reason.why === "deadline" ||
          reason.why === "step_deadline"
        if (!canSwitch || left.millis <= 0 || RunContext.deadlinePassed(ctx)) {
          return Effect.succeed<Answer>({ _tag: "GaveUp", reason })
        }
        return switchTo(ctx, settings, chain, iteration, next, failure)
      })
    }
  )
}

/** Switches the rest of the run to the next model of the chain, and asks it (R3.10). */
const switchTo = (
  ctx: RunContext.RunContext,
  settings: Settings,
  chain: Chain,
  iteration: number,
  next: Model.Fallback,
  failure: Failure.Failure
): Effect.Effect<Answer, RunState.IllegalTransition> => {
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "model.fallback",
    iteration,
    from: ctx.log.model,
    to: next.name,
    failure: Failure.summarize(failure),
    runId,
    seq,
    at
  }))
  // The switch is committed before the next model is asked, with what the failed answers cost: a
  // process that dies in the next model's call goes on with it, the cost counted (review 155).
  return Effect.andThen(Commit.barrier(ctx), call(ctx, settings, chain, iteration))
}
