/**
 * Time in one place (R4.2): the deadlines of a run, from the widest to the narrowest
 * layer — the run, the step (one model call and its tool batch, with their retries),
 * and the wait at hand (a model attempt, a tool attempt, an approval, a status query,
 * a postcondition).
 *
 * The run and step deadlines travel in the fiber's context as a {@link Budget}; a wait
 * is bounded by {@link within}, which gives it min(its own limit, what is left of the
 * step, what is left of the run) and fails with a {@link Timeout} naming the layer that
 * was the tightest. The run's own deadline is not enforced by `within`: the run races
 * its whole body against that one deadline (see `Run`), so a wait whose tightest bound
 * is the run needs no timer of its own. Every clock read goes through effect's `Clock`,
 * so `TestClock` and the live clock take the same path.
 *
 * @since 0.3.0
 */
import { Clock, Context, Data, Effect, type Fiber, Option, Scheduler } from "effect"
import { dual } from "effect/Function"
import type * as Failure from "../failure/Failure.ts"
import * as Alarms from "./internal/Alarms.ts"
import * as Instant from "./internal/Instant.ts"
import { noTime, refused } from "./internal/TimeArguments.ts"

/**
 * The layers a wait can be cut off by, from the widest: `run`, `step`, then the wait's
 * own (`attempt` for a model call, `tool` for a tool call and its checks, `approval`).
 *
 * @category models
 * @since 0.3.0
 */
export type Layer = Failure.TimeoutLayer

/**
 * The absolute deadlines (epoch milliseconds on the run's `Clock`) in force: infinite
 * when there is none.
 *
 * @category models
 * @since 0.3.0
 */
export interface Budget {
  readonly runAt: number
  readonly stepAt: number
}

/**
 * The budget of the current wait. Outside a run there is none: both infinite.
 *
 * @category references
 * @since 0.3.0
 */
export class Current extends Context.Reference<Budget>("effect-agent-runtime/Deadline/Current", {
  defaultValue: () => unbounded
}) {}

const unbounded: Budget = { runAt: Number.POSITIVE_INFINITY, stepAt: Number.POSITIVE_INFINITY }

/**
 * A wait cut off by its deadline: the layer that was the tightest when it started, the
 * bound it was given then (`limitMillis`: its own limit, or what was left of the step),
 * and how long it took (`afterMillis`: more than its bound when code that could not be
 * interrupted held it past it; 0 for a wait that never started).
 *
 * @category errors
 * @since 0.3.0
 */
export class Timeout extends Data.TaggedError("Timeout")<{
  readonly layer: Layer
  readonly limitMillis: number
  readonly afterMillis: number
}> {}

/**
 * How long a wait that starts at `now` may last: min(its own limit, what is left of the
 * step, what is left of the run), and the layer that sets it. On a tie the run names
 * it; between the step and the wait's own limit, the wait's own. A number that is no time
 * (`NaN`, an own limit below 0) is a `RangeError` naming it, thrown.
 *
 * @category computations
 * @since 0.3.0
 */
export const bound = (
  budget: Budget,
  now: number,
  own: { readonly layer: Layer; readonly millis?: number | undefined }
): { readonly millis: number; readonly layer: Layer } => {
  const error = refused(
    "bound",
    noTime("budget.runAt", budget.runAt, "instant", false),
    noTime("budget.stepAt", budget.stepAt, "instant", false),
    noTime("now", now, "instant", false),
    noTime("millis", own.millis, "limit")
  )
  if (error !== undefined) throw error
  return boundOf(budget, now, own)
}

/** {@link bound} of numbers known to be times. */
const boundOf = (
  budget: Budget,
  now: number,
  own: { readonly layer: Layer; readonly millis?: number | undefined }
): { readonly millis: number; readonly layer: Layer } => {
  const run = Instant.remaining(budget.runAt, now)
  const step = Instant.remaining(budget.stepAt, now)
  const mine = own.millis ?? Number.POSITIVE_INFINITY
  // Instants that differ by less than the clock's resolution are a tie (see `Instant`).
  const tie = Instant.resolutionMillis
  if (run <= step + tie && run <= mine + tie) return { millis: run, layer: "run" }
  if (step < mine - tie) return { millis: step, layer: "step" }
  return { millis: mine, layer: own.layer }
}

/**
 * The bound a wait of `layer` with its own limit `millis` would get if it started now,
 * the absolute time it ends (for the records that say so, R4.2), and the time it was read
 * at (`now`: a record of the wait's start that agrees with its end). An own limit that is
 * no time (`NaN`, below 0) is a defect (`RangeError`) naming it.
 *
 * @category getters
 * @since 0.3.0
 */
export const left = (own: {
  readonly layer: Layer
  readonly millis?: number | undefined
}): Effect.Effect<{ readonly millis: number; readonly layer: Layer; readonly at: number; readonly now: number }> => {
  const error = refused("left", noTime("millis", own.millis, "limit"))
  return error !== undefined ? Effect.die(error) : Effect.withFiber((fiber) => Effect.succeed(leftIn(fiber, own)))
}

/** What {@link left} reads: the fiber's budget and clock, now. */
const leftIn = (
  fiber: Fiber.Fiber<unknown, unknown>,
  own: { readonly layer: Layer; readonly millis?: number | undefined }
): { readonly millis: number; readonly layer: Layer; readonly at: number; readonly now: number } => {
  const now = fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()
  const { millis, layer } = boundOf(fiber.getRef(Current), now, own)
  return { millis, layer, at: now + millis, now }
}

/**
 * Whether the run deadline has passed (R3.11). Checked after every wait, before its
 * result is used: the run's deadline cannot fire while code blocks the event loop, and
 * the fiber may run on before it does.
 *
 * @category getters
 * @since 0.3.0
 */
export const passed: Effect.Effect<boolean> = Effect.withFiber((fiber) =>
  Effect.succeed(hasPassed(fiber.getRef(Current).runAt, fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()))
)

/**
 * Whether a deadline at `at` has passed at `now`: the one definition, for code that holds
 * the deadline and the clock itself (the run, which checks its own deadline after every
 * wait; a provider's read). Less than a nanosecond before it counts as passed: effect
 * measures timers in whole nanoseconds, so on a clock at a fractional millisecond (a
 * `TestClock`) a timer set for a deadline may end that far before it.
 *
 * @category computations
 * @since 0.3.0
 */
export const hasPassed = (at: number, now: number): boolean => Instant.reached(at, now)

/**
 * Runs `self` as a step of at most `millis` (none when `undefined`): every wait inside
 * it is bounded by what is left of the step too. A step of 0 or less has nothing left (a
 * resumed run's, whose time is spent); `millis` that is no number (`NaN`) is a defect
 * (`RangeError`) naming it.
 *
 * @category combinators
 * @since 0.3.0
 */
export const step: {
  (millis: number | undefined): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, millis: number | undefined): Effect.Effect<A, E, R>
} = dual(2, <A, E, R>(self: Effect.Effect<A, E, R>, millis: number | undefined): Effect.Effect<A, E, R> => {
  const error = refused("step", noTime("millis", millis, "length"))
  if (error !== undefined) return Effect.die(error)
  return millis === undefined
    ? self
    : Effect.withFiber((fiber) =>
        Effect.provideService(self, Current, {
          runAt: fiber.getRef(Current).runAt,
          stepAt: fiber.getRef(Clock.Clock).currentTimeMillisUnsafe() + millis
        })
      )
})

/**
 * An alarm set by {@link alarm}, to give to {@link clearAlarm}.
 *
 * @category models
 * @since 0.3.0
 */
export type Alarm = Alarms.Alarm

/**
 * Calls `fire` once the current fiber's `Clock` reaches `at` (absolute), unless the
 * alarm is cleared first; never for an infinite `at`. The alarms of one clock share one
 * fiber that sleeps on it until the earliest of them (the live clock and `TestClock` take
 * the same path), so an alarm costs no fiber of its own; `fire` is called synchronously
 * by that fiber and must not throw. A run's deadline is one (see `Lifecycle`). `at` that
 * is no number (`NaN`) is a defect (`RangeError`) naming it.
 *
 * @category constructors
 * @since 0.3.0
 */
export const alarm = (at: number, fire: () => void): Effect.Effect<Alarm> => {
  const error = refused("alarm", noTime("at", at, "instant", false))
  if (error !== undefined) return Effect.die(error)
  return Effect.withFiber((fiber) =>
    Effect.succeed(Alarms.set(fiber.getRef(Clock.Clock), fiber.getRef(Scheduler.Scheduler), at, fire))
  )
}

/**
 * Clears an alarm at once: its callback, and what it holds, is dropped and will not be
 * called. Clearing one that fired or was cleared does nothing.
 *
 * @category destructors
 * @since 0.3.0
 */
export const clearAlarm = (alarm: Alarm): void => Alarms.clear(alarm)

/**
 * Runs `self` under a run deadline at `runAt` (absolute, on the run's `Clock`; infinite
 * for none). `runAt` that is no number (`NaN`) is a defect (`RangeError`) naming it.
 *
 * @category combinators
 * @since 0.3.0
 */
export const run: {
  (runAt: number): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, runAt: number): Effect.Effect<A, E, R>
} = dual(2, <A, E, R>(self: Effect.Effect<A, E, R>, runAt: number): Effect.Effect<A, E, R> => {
  const error = refused("run", noTime("runAt", runAt, "instant", false))
  return error !== undefined
    ? Effect.die(error)
    : Effect.provideService(self, Current, { runAt, stepAt: Number.POSITIVE_INFINITY })
})

/**
 * Bounds a wait by min(its own limit, what is left of the step, what is left of the
 * run), measured when it starts, and fails with a {@link Timeout} naming the layer when
 * the step or its own limit cuts it off. When the run's deadline is the tightest, no
 * timer is armed here: the run's own race on its deadline interrupts the wait. An own
 * limit that is no time (`NaN`, below 0) is a defect (`RangeError`) naming it.
 *
 * @category combinators
 * @since 0.3.0
 */
export const within: {
  (own: {
    readonly layer: Layer
    readonly millis?: number | undefined
  }): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | Timeout, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    own: { readonly layer: Layer; readonly millis?: number | undefined }
  ): Effect.Effect<A, E | Timeout, R>
} = dual(
  2,
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    own: { readonly layer: Layer; readonly millis?: number | undefined }
  ): Effect.Effect<A, E | Timeout, R> => boundedBy("within", self, { ...own, orElse: Effect.fail })
)

/**
 * A wait's own layer and limit, and what it comes to when it is cut off (see {@link withinOrElse}).
 *
 * @category models
 * @since 0.3.0
 */
export interface OrElse<A, E, R> {
  readonly layer: Layer
  readonly millis?: number | undefined
  /**
   * The wait's own limit as the absolute time it ends, instead of `millis`: for a wait
   * that continues one begun earlier (an attempt's handler after its intent record), whose
   * own limit counts from then.
   */
  readonly until?: number | undefined
  readonly orElse: (timeout: Timeout) => Effect.Effect<A, E, R>
  /**
   * What the wait comes to when nothing is left of its bound (its own limit or the step;
   * the run's deadline is the run's) as it would start: given a timeout after 0 ms, in
   * place of the wait, which does not start. Without it the wait starts, and is cut off at once.
   */
  readonly ifNoTime?: ((timeout: Timeout) => Effect.Effect<A, E, R>) | undefined
}

/**
 * {@link within}, with what a cut-off wait comes to instead of its {@link Timeout}:
 * `orElse` is given the timeout and runs in the wait's place. A wait that nothing but the
 * run bounds runs as it is, with nothing around it. `millis` or `until` that is no time
 * (`NaN`, a limit below 0) is a defect (`RangeError`) naming it.
 *
 * @category combinators
 * @since 0.3.0
 */
export const withinOrElse: {
  <A2, E2, R2>(
    own: OrElse<A2, E2, R2>
  ): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A | A2, E | E2, R | R2>
  <A, E, R, A2, E2, R2>(self: Effect.Effect<A, E, R>, own: OrElse<A2, E2, R2>): Effect.Effect<A | A2, E | E2, R | R2>
} = dual(
  2,
  <A, E, R, A2, E2, R2>(self: Effect.Effect<A, E, R>, own: OrElse<A2, E2, R2>): Effect.Effect<A | A2, E | E2, R | R2> =>
    boundedBy("withinOrElse", self, own)
)

/** {@link withinOrElse}, its refusals naming `fn`, the function its caller called. */
const boundedBy = <A, E, R, A2, E2, R2>(
  fn: string,
  self: Effect.Effect<A, E, R>,
  own: OrElse<A2, E2, R2>
): Effect.Effect<A | A2, E | E2, R | R2> => {
  const error = refused(fn, noTime("millis", own.millis, "limit"), noTime("until", own.until, "instant"))
  if (error !== undefined) return Effect.die(error)
  return Effect.withFiber((fiber) => {
    const clock = fiber.getRef(Clock.Clock)
    const start = clock.currentTimeMillisUnsafe()
    const mine = own.until === undefined ? own.millis : Math.max(0, own.until - start)
    const { millis, layer } = boundOf(fiber.getRef(Current), start, { layer: own.layer, millis: mine })
    if (layer === "run" || millis === Number.POSITIVE_INFINITY) return self
    if (millis <= 0 && own.ifNoTime !== undefined) {
      return own.ifNoTime(new Timeout({ layer, limitMillis: 0, afterMillis: 0 }))
    }
    // The timer ends `millis` after the wait's start, measured when it is set: the race
    // starts the wait first, and what the wait does before it first yields (code that
    // blocks the event loop) is not added to its bound.
    const timer = Effect.suspend(() => Effect.sleep(Math.max(0, start + millis - clock.currentTimeMillisUnsafe())))
    // The wait is interrupted, and awaited: code that cannot be interrupted holds it until
    // it ends (the run's deadline alone leaves such code behind). The timeout then says how
    // long the wait really took.
    return Effect.flatMap(
      Effect.raceFirst(Effect.asSome(self), Effect.as(timer, Option.none())),
      (ended): Effect.Effect<A | A2, E2, R2> =>
        Option.isSome(ended)
          ? Effect.succeed(ended.value)
          : Effect.suspend(() => {
              const elapsed = clock.currentTimeMillisUnsafe() - start
              const afterMillis = elapsed >= millis + 1 ? elapsed : millis
              return own.orElse(new Timeout({ layer, limitMillis: millis, afterMillis }))
            })
    )
  })
}

/**
 * Sleeps until `at` (absolute, on the fiber's clock), or until the step ends if that comes
 * first: the rest of a wait a resumed run's log recorded, which a shorter step given on
 * resume does not let it outlast (R3.3, R4.2). The run's deadline interrupts it, as every
 * wait. `at` that is no number (`NaN`) is a defect (`RangeError`) naming it.
 *
 * @category combinators
 * @since 0.3.0
 */
export const sleepUntil = (at: number): Effect.Effect<void> => {
  const error = refused("sleepUntil", noTime("at", at, "instant", false))
  if (error !== undefined) return Effect.die(error)
  return Effect.withFiber((fiber) =>
    withinOrElse(Effect.sleep(Math.max(0, at - fiber.getRef(Clock.Clock).currentTimeMillisUnsafe())), {
      layer: "step",
      orElse: () => Effect.void
    })
  )
}

/**
 * @category guards
 * @since 0.3.0
 */
export const isTimeout = (u: unknown): u is Timeout => u instanceof Timeout
