/**
 * The model call of one iteration, private to the loop: the call with its time layers
 * (R4.2) and circuit breaker (R3.9), recovery of a failed call (R3.3), and the switch
 * to the next fallback model when the model in use fails for good or its circuit is
 * open (R3.9). It answers with the response, or with the failure it gave up on; the
 * loop decides what that stop is.
 */
import { Cause, Effect, Exit } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as Model from "../../../model/Model.ts"
import * as Recovery from "../../../recovery/Recovery.ts"
import * as Recover from "../../internal/Recover.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type * as ToolExecutor from "../../pipeline/ToolExecutor.ts"
import * as ModelResponse from "./ModelResponse.ts"

/** What the call needs from the loop's configuration. */
export interface Settings {
  readonly registry: ToolExecutor.Registry
  readonly toolDefinitions: ReadonlyArray<Model.ToolDefinition>
  readonly recovery: Recovery.Settings
}

/** A model call that ended without a response: recovery gave up (`Exhausted`) or a failure nothing recovers. */
export class GaveUp {
  readonly reason: Recovery.Exhausted | Failure.Failure
  constructor(reason: Recovery.Exhausted | Failure.Failure) {
    this.reason = reason
  }
}

type CallError = ToolExecutor.ExecutionError

/** Why recovery gave up, when the next model may do better: not the run's own limits. */
const switchable: ReadonlySet<Recovery.GiveUp> = new Set<Recovery.GiveUp>([
  "circuit_open",
  "not_retryable",
  "owner_retried",
  "not_allowed",
  "schedule_exhausted"
])

/**
 * The model chain of one run: the model in use first, then its fallbacks in order. A
 * switch is for the rest of the run.
 */
export class ModelCall {
  readonly ctx: RunContext.RunContext
  readonly settings: Settings
  readonly chain: ReadonlyArray<Model.Fallback>
  active = 0
  constructor(ctx: RunContext.RunContext, settings: Settings, chain: ReadonlyArray<Model.Fallback>) {
    this.ctx = ctx
    this.settings = settings
    this.chain = chain
  }

  get current(): Model.Fallback {
    return this.chain[this.active] as Model.Fallback
  }

  /**
   * Calls the model now, recording the request; a call that throws is a defect of the
   * provider. The call gets min(the attempt timeout, what is left of the step, what is
   * left of the run) (R4.2): its request says so (`deadlineAt`), and a call still
   * running then is cut off here with a timeout naming the layer. When the run's own
   * deadline is the tightest, its timer does the cutting and no second timer is needed.
   */
  generate(iteration: number): Effect.Effect<Model.Response, Failure.Failure> {
    const { ctx, settings } = this
    RunContext.record(ctx, { _tag: "model.requested", iteration, runId: ctx.runId, seq: 0, at: 0 })
    const attemptMillis = settings.registry.time.attemptMillis
    const bounded = attemptMillis !== undefined || ctx.stepDeadlineAt !== Number.POSITIVE_INFINITY
    const limit = bounded ? RunContext.bound(ctx, attemptMillis, "attempt") : undefined
    const { name, model } = this.current
    const request: Model.Request = {
      runId: ctx.runId,
      iteration,
      messages: ctx.messages,
      tools: settings.toolDefinitions,
      deadlineAt: limit === undefined ? ctx.deadlineAt : RunContext.now(ctx) + limit.millis,
      deadlineLayer: limit === undefined ? "run" : limit.layer
    }
    const generated = UserCode.effect(
      {
        source: "provider",
        what: `the generate of model "${name}"`,
        advice: "generate must return an Effect (wrap a promise with Effect.tryPromise)",
        defectCode: "defect"
      },
      () => model.generate(request)
    )
    let call = Exit.isExit(generated)
      ? Exit.isSuccess(generated)
        ? ModelResponse.valid(generated.value)
        : generated
      : Effect.flatMap(generated, ModelResponse.valid)
    if (limit !== undefined && limit.layer !== "run" && !Exit.isExit(call)) {
      const { millis, layer } = limit
      call = Effect.timeoutOrElse(call, {
        duration: millis,
        orElse: () => Effect.fail(FailureBoundary.timeout({ source: "provider", layer, afterMillis: millis }))
      })
    }
    // The breaker sees one outcome per attempt, the timeout inside it.
    return ctx.breakers === undefined ? call : ctx.breakers.guard("provider", name, call)
  }

  /**
   * What the wrapper of a model call makes of its failure: a defect is the provider's
   * failure, and every failure is recorded on the timeline.
   */
  failure(iteration: number, cause: Cause.Cause<Failure.Failure>): Cause.Cause<Failure.Failure> {
    // Interruption passes through; a defect, or an error outside the algebra (a Model that
    // broke its contract), is the provider's failure as `Failure.fromCause` makes it.
    if (Cause.hasInterruptsOnly(cause)) return cause
    const failure = Failure.fromCause("provider", cause)
    RunContext.emit(this.ctx, { _tag: "model.failed", iteration, failure: Failure.summarize(failure) })
    return Cause.fail(failure)
  }

  /**
   * One model call with its wrapper, for retries: waits are marked for the deadline
   * (see `RunContext.waitingOnModel`), failures recorded.
   */
  attempt(iteration: number): Effect.Effect<Model.Response, Failure.Failure> {
    return Effect.suspend(() => {
      const call = this.generate(iteration)
      this.ctx.waitingOnModel = iteration
      return Effect.matchCauseEffect(call, {
        onSuccess: (response) => {
          this.ctx.waitingOnModel = undefined
          return Exit.succeed(response)
        },
        onFailure: (cause) => {
          this.ctx.waitingOnModel = undefined
          return Exit.failCause(this.failure(iteration, cause))
        }
      })
    })
  }

  /**
   * The model call of one iteration: the response, or what it gave up on. No timer per
   * call: the run's one deadline timer interrupts whatever is waiting, and the timeline
   * says which call it cut off (`waitingOnModel`). A call that has already finished (an
   * `Exit`) is used as it is.
   */
  call(iteration: number): Effect.Effect<Model.Response | GaveUp, CallError> {
    const call = this.generate(iteration)
    if (Exit.isExit(call)) {
      const done = call as Exit.Exit<Model.Response, Failure.Failure>
      return Exit.isSuccess(done) ? done : this.recover(iteration, done.cause)
    }
    this.ctx.waitingOnModel = iteration
    return Effect.catchCause(call, (cause) => {
      this.ctx.waitingOnModel = undefined
      return this.recover(iteration, cause)
    })
  }

  /** Recovery of a failed first call (R3.3); a rejection by an open circuit goes to the next model at once. */
  recover(iteration: number, cause: Cause.Cause<Failure.Failure>): Effect.Effect<Model.Response | GaveUp, CallError> {
    const recorded = this.failure(iteration, cause)
    const { recovery } = this.settings
    return Effect.catchCause(
      Recover.recoverFrom(
        this.ctx,
        {
          kind: "provider_retry",
          source: "provider",
          resume: "model_thinking",
          schedule: recovery.schedule,
          maxRecoveries: recovery.maxRecoveries,
          neverRetried: recovery.neverRetried,
          maxRetries: Number.POSITIVE_INFINITY,
          allowed: true,
          // With a next model, an open circuit hands over at once, on any attempt.
          handOff: this.active + 1 < this.chain.length
        },
        () => this.attempt(iteration),
        recorded
      ),
      (cause) => this.gaveUp(iteration, cause)
    )
  }

  /** Recovery gave up: the next model if there is one and the stop was not the run's own limit. */
  gaveUp(iteration: number, cause: Cause.Cause<CallError>): Effect.Effect<Model.Response | GaveUp, CallError> {
    if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
    const squashed = Cause.squash(cause)
    // A broken invariant (an illegal transition) is not the provider's failure: it goes on up.
    if (Cause.hasFails(cause) && !Failure.isFailure(squashed) && !Recovery.isExhausted(squashed)) {
      return Effect.failCause(cause)
    }
    const reason = Recovery.isExhausted(squashed) ? squashed : Failure.fromCause("provider", cause)
    const failure = Recovery.isExhausted(reason) ? reason.failure : reason
    const canSwitch = !Recovery.isExhausted(reason) || switchable.has(reason.why)
    if (canSwitch && this.active + 1 < this.chain.length) return this.fallBack(iteration, failure)
    return Exit.succeed(new GaveUp(reason))
  }

  /** Switches to the next model for the rest of the run, records it, and asks again. */
  fallBack(iteration: number, failure: Failure.Failure): Effect.Effect<Model.Response | GaveUp, CallError> {
    const from = this.current.name
    this.active++
    RunContext.emit(this.ctx, {
      _tag: "model.fallback",
      iteration,
      from,
      to: this.current.name,
      failure: Failure.summarize(failure)
    })
    return this.call(iteration)
  }
}
