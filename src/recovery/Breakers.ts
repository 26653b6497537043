/**
 * Circuit breakers per provider and per tool (R3.9): a dependency that keeps failing is
 * not hammered. A thin layer over effect's `persistence/CircuitBreaker`, shared by every
 * run of the application (a breaker only means something when shared across runs).
 *
 * Each circuit is keyed `${kind}:${name}` and is closed, open or half-open. While open,
 * a call is rejected without running, as a {@link Failure.Retryable} `circuit_open` with
 * `retryAfterMillis`; once the open time ends one trial call runs, and its outcome closes
 * or reopens the circuit. The others are refused meanwhile as `circuit_half_open`, with
 * a `retryAfterMillis` of {@link Recovery.trialPollMillis} (250 ms): a run's recovery
 * asks again then, doubling the wait (2 s at most) while the trial runs, and spends no
 * retry on it.
 *
 * How an attempt's exit counts (see {@link classify}):
 *
 * | exit                                                  | outcome  |
 * |-------------------------------------------------------|----------|
 * | success                                               | success  |
 * | a category recovery never retries (`conflict`: the dependency answered) | ignored |
 * | `Retryable` (its `retryAfterMillis` lengthens an opening) | failure |
 * | `UnknownOutcome`                                      | failure  |
 * | `Permanent` in {@link brokenCategories}               | failure  |
 * | another `Permanent` (a bad request: the caller's fault) | ignored |
 * | a run or step deadline (`run_timeout`, `step_timeout`) | ignored |
 * | a defect                                              | failure  |
 * | interruption only                                     | ignored  |
 *
 * Every transition is reported twice: on {@link Service.transitions} (all of them, for
 * dashboards) and to the {@link Observer} of the fiber whose call caused it (so that it
 * reaches that run's timeline). The store given to effect's breaker is wrapped: its
 * `admit` and `record` run in the calling fiber and return the transition they made.
 *
 * @since 0.1.0
 */
import type { Take } from "effect"
import { Cause, Context, Duration, Effect, Exit, Fiber, Layer, PubSub, Schedule, Schema, Scope, Stream } from "effect"
import { CircuitBreaker } from "effect/persistence"
import type * as Failure from "../failure/Failure.ts"
import * as BreakerOptions from "./internal/BreakerOptions.ts"
import { rejection, storeFailure } from "./internal/Rejection.ts"
import * as Recovery from "./Recovery.ts"

/**
 * What a circuit guards.
 *
 * @category models
 * @since 0.1.0
 */
export const Kind = Schema.Literals(["provider", "tool"])

/**
 * @category models
 * @since 0.1.0
 */
export type Kind = typeof Kind.Type

/**
 * @category models
 * @since 0.1.0
 */
export const CircuitState = Schema.Literals(["closed", "open", "half_open"])

/**
 * @category models
 * @since 0.1.0
 */
export type CircuitState = typeof CircuitState.Type

/**
 * One state change of one circuit, as plain (JSON-safe) data. `retryAfterMillis` is set
 * on an opening: how long the circuit stays open.
 *
 * @category models
 * @since 0.1.0
 */
export const Transition = Schema.Struct({
  kind: Kind,
  name: Schema.String,
  key: Schema.String,
  from: CircuitState,
  to: CircuitState,
  retryAfterMillis: Schema.optionalKey(Schema.Finite)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Transition = typeof Transition.Type

/**
 * One breaker policy. `openDuration` is a duration or a `Schedule` (the n-th
 * consecutive opening lasts its n-th delay); `maxOpenDuration` (default one hour) caps
 * how far a `Retry-After` hint may lengthen an opening.
 *
 * @category models
 * @since 0.1.0
 */
export interface Policy {
  readonly tripPolicy: CircuitBreaker.TripPolicy
  readonly openDuration: Duration.Input | Schedule.Schedule<unknown, number, never, never>
  readonly maxOpenDuration?: Duration.Input | undefined
}

/**
 * The application's breakers.
 *
 * @category models
 * @since 0.1.0
 */
export interface Service {
  /** Runs one call (one attempt) through the circuit of (kind, name). */
  readonly guard: <A, R>(
    kind: Kind,
    name: string,
    call: Effect.Effect<A, Failure.Failure, R>
  ) => Effect.Effect<A, Failure.Failure, R>
  /**
   * The circuit's state in the store (`closed` when it has no breaker). A circuit past
   * its open time reads `open` until the next call moves it to `half_open`. Fails only
   * when the store cannot be read.
   */
  readonly state: (kind: Kind, name: string) => Effect.Effect<CircuitState, Failure.Retryable>
  /** Every transition this service made, in order; the oldest are dropped past 128 unread. */
  readonly transitions: Stream.Stream<Transition>
}

/**
 * The application's breakers; `undefined` (the default) means no breakers: calls run
 * unguarded.
 *
 * @category services
 * @since 0.1.0
 */
export const Breakers = Context.Reference<Service | undefined>("effect-agent-runtime/Breakers", {
  defaultValue: () => undefined
})

/**
 * Where the transitions a fiber's own calls caused are reported: a run sets it so that
 * they reach its timeline. It is called synchronously, in the calling fiber, and must not
 * throw (an exception is swallowed).
 *
 * @category services
 * @since 0.1.0
 */
export const Observer = Context.Reference<((transition: Transition) => void) | undefined>(
  "effect-agent-runtime/Breakers/Observer",
  { defaultValue: () => undefined }
)

/**
 * Five failures in a row open a circuit; openings last 1 s, 2 s, 4 s, … (exponential)
 * and at most one minute each (`Schedule.min` with a one-minute `Schedule.spaced`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const defaultPolicy: Policy = Object.freeze({
  tripPolicy: CircuitBreaker.consecutive(5),
  openDuration: Schedule.min([Schedule.exponential("1 second"), Schedule.spaced("1 minute")])
})

/**
 * Which breaker guards what. For each kind, `false` means no breaker and an omitted
 * policy means {@link defaultPolicy}; `tools` overrides the `tool` policy per tool name.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  readonly provider?: Policy | false | undefined
  readonly tool?: Policy | false | undefined
  readonly tools?: Readonly<Record<string, Policy | false>> | undefined
}

/**
 * `Permanent` categories that say the dependency itself is broken, not the request: a
 * response that does not parse, a defect (the handler or client threw), a subprocess
 * killed by a signal, or an executable that cannot be started. They count as failures.
 *
 * @category models
 * @since 0.1.0
 */
export const brokenCategories: ReadonlySet<Failure.Category> = new Set(["corrupt_response", "defect", "crash", "spawn"])

// The caller's own time budget ran out: this says nothing about the dependency.
const isDeadline = (failure: Failure.Failure): boolean =>
  failure.timeout?.layer === "run" || failure.timeout?.layer === "step"

// A business answer (a conflict: the version moved) goes back to the model, never retried
// (R3.10): the dependency worked. `Recovery.defaults.neverRetried`, as a run uses it.
const isBusinessAnswer = (failure: Failure.Failure): boolean =>
  Recovery.defaults.neverRetried.includes(failure.category)

/**
 * How one attempt's exit counts for its circuit (the table in the module docs).
 *
 * @category combinators
 * @since 0.1.0
 */
export const classify = (exit: Exit.Exit<unknown, Failure.Failure>): CircuitBreaker.Outcome => {
  if (Exit.isSuccess(exit)) return CircuitBreaker.success
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "None") return CircuitBreaker.failure()
  const failure = error.value
  if (isDeadline(failure) || isBusinessAnswer(failure)) return CircuitBreaker.ignored
  switch (failure._tag) {
    case "Retryable":
      return CircuitBreaker.failure({ retryAfter: failure.retryAfterMillis })
    case "UnknownOutcome":
      return CircuitBreaker.failure()
    case "Permanent":
      return brokenCategories.has(failure.category) ? CircuitBreaker.failure() : CircuitBreaker.ignored
  }
}

const states = { Closed: "closed", Open: "open", HalfOpen: "half_open" } as const

const toTransition = (transition: CircuitBreaker.Transition): Transition | undefined => {
  const at = transition.key.indexOf(":")
  const prefix = transition.key.slice(0, at)
  const kind = prefix === "provider" || prefix === "tool" ? prefix : undefined
  if (kind === undefined) return undefined
  const base: Transition = {
    kind,
    name: transition.key.slice(at + 1),
    key: transition.key,
    from: states[transition.from],
    to: states[transition.to]
  }
  if (transition.to !== "Open") return base
  const millis = Duration.toMillis(transition.retryAfter)
  return Number.isFinite(millis) ? { ...base, retryAfterMillis: Math.ceil(millis) } : base
}

/**
 * Builds the breakers over the current `CircuitBreakerStore`: one effect breaker per
 * distinct policy (keys never collide, so breakers may share a store). They live as long
 * as the scope. Options that cannot make breakers (an option or a policy field it does not
 * know, a policy with no trip policy, an open duration that is no duration >= 0 nor a
 * `Schedule`) die with a `RangeError` naming the option.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (
  options: Options = {}
): Effect.fn.Return<Service, never, CircuitBreaker.CircuitBreakerStore | Scope.Scope> {
  // Options that cannot make breakers are a programming error, found where the layer is built.
  const invalid = BreakerOptions.problem(options)
  if (invalid !== undefined) return yield* Effect.die(new RangeError(`Breakers: ${invalid}`))
  const store = yield* CircuitBreaker.CircuitBreakerStore
  const pubsub = yield* PubSub.sliding<Take.Take<Transition>>(128)
  yield* Scope.addFinalizer(yield* Effect.scope, PubSub.end(pubsub, Exit.void))

  // Runs in the fiber that called `admit` or `record`, which is the fiber of the call.
  const report = (made: CircuitBreaker.Transition | undefined): Effect.Effect<void> => {
    const transition = made === undefined ? undefined : toTransition(made)
    if (transition === undefined) return Effect.void
    return Effect.withFiber((fiber) => {
      const observer = fiber.getRef(Observer)
      if (observer !== undefined) {
        try {
          observer(transition)
        } catch {
          // An observer never breaks a call.
        }
      }
      return Effect.asVoid(PubSub.publish(pubsub, [transition]))
    })
  }

  const observed = CircuitBreaker.CircuitBreakerStore.of({
    admit: (key) => Effect.tap(store.admit(key), (admission) => report(admission.transition)),
    record: (recorded) => Effect.tap(store.record(recorded), report),
    state: store.state
  })

  const built = new Map<Policy, CircuitBreaker.CircuitBreaker>()
  const breakerFor = Effect.fnUntraced(function* (policy: Policy | false | undefined) {
    if (policy === false) return undefined
    const chosen = policy ?? defaultPolicy
    const existing = built.get(chosen)
    if (existing !== undefined) return existing
    const breaker = yield* Effect.provideService(
      CircuitBreaker.make({
        tripPolicy: chosen.tripPolicy,
        openDuration: chosen.openDuration,
        maxOpenDuration: chosen.maxOpenDuration
      }),
      CircuitBreaker.CircuitBreakerStore,
      observed
    )
    built.set(chosen, breaker)
    return breaker
  })

  const provider = yield* breakerFor(options.provider)
  const tool = yield* breakerFor(options.tool)
  const tools = new Map<string, CircuitBreaker.CircuitBreaker | undefined>()
  for (const [name, policy] of Object.entries(options.tools ?? {})) tools.set(name, yield* breakerFor(policy))

  const breakerOf = (kind: Kind, name: string): CircuitBreaker.CircuitBreaker | undefined =>
    kind === "provider" ? provider : tools.has(name) ? tools.get(name) : tool

  return {
    guard: <A, R>(kind: Kind, name: string, call: Effect.Effect<A, Failure.Failure, R>) => {
      const breaker = breakerOf(kind, name)
      if (breaker === undefined) return call
      // The call runs in a fiber of its own that `execute` joins: cut off, the join ends at once
      // and the breaker records it (`Ignored`: a trial frees its slot), while the call is still
      // awaited here as before. A trial that would not stop, which the run left behind, held the
      // circuit half-open for every later run (review 189).
      const recorded = Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          // Forked once admitted: a call its circuit refuses never starts.
          let running: Fiber.Fiber<A, Failure.Failure> | undefined
          const joined = Effect.flatMap(Effect.forkChild(restore(call)), (fiber) => {
            running = fiber
            return Fiber.join(fiber)
          })
          const exit = yield* Effect.exit(restore(breaker.execute(joined, { key: `${kind}:${name}`, classify })))
          if (running !== undefined && Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause))
            yield* Fiber.interrupt(running)
          return yield* exit
        })
      )
      // `mapError`, not `catchTag`: it keeps the call's own cause as it is.
      return Effect.mapError(recorded, (error) =>
        error._tag === "CircuitBreakerError" ? rejection(kind, name, error) : error
      )
    },
    state: (kind, name) => {
      const breaker = breakerOf(kind, name)
      if (breaker === undefined) return Effect.succeed("closed")
      return breaker.state(`${kind}:${name}`).pipe(
        Effect.map((state) => states[state._tag]),
        Effect.mapError((error) => storeFailure(error.message))
      )
    },
    transitions: Stream.fromPubSubTake(pubsub)
  }
})

/**
 * Provides {@link Breakers} over the current `CircuitBreakerStore` (in memory with
 * `CircuitBreaker.layerStoreMemory()`, shared between processes with `layerStoreRedis`).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Options = {}): Layer.Layer<never, never, CircuitBreaker.CircuitBreakerStore> =>
  Layer.effect(Breakers, make(options))

/**
 * {@link layer} with an in-memory store: breakers shared by the runs of this process.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerMemory = (options: Options = {}): Layer.Layer<never> =>
  layer(options).pipe(Layer.provide(CircuitBreaker.layerStoreMemory()))
