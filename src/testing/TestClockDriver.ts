/**
 * Runs an effect that sleeps (a run with deadlines, backoff, approval expiry) on the
 * `TestClock`, moving the clock for it, so that a test of a 60-second scenario takes
 * milliseconds and never waits on the wall clock.
 *
 * @since 0.2.0
 */
import { Clock, Duration, Effect, Fiber, Predicate, Scheduler, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as UserCode from "../failure/UserCode.ts"
import * as Durations from "../time/Durations.ts"
import * as RealTime from "../time/RealTime.ts"

/**
 * The effect was still running after the driver had moved the clock as far as it was allowed.
 *
 * @category errors
 * @since 0.2.0
 */
export class StillRunning extends Schema.TaggedError<StillRunning>()("StillRunning", {
  movedMillis: Schema.Finite,
  steps: Schema.Int,
  /**
   * The `RealTime.held` regions still pending then: each held the clock still until its
   * `heldUpTo` of nothing had passed (held work that sleeps on the Clock, or never ends).
   */
  heldWaits: Schema.optional(Schema.Int)
}) {
  override get message(): string {
    const held =
      this.heldWaits === undefined
        ? ""
        : `; ${this.heldWaits} RealTime.held wait(s) still pending (held work should wait in real time, not on the Clock)`
    return `the effect was still running after the TestClock moved ${this.movedMillis} ms in ${this.steps} steps${held}`
  }
}

/**
 * @category models
 * @since 0.2.0
 */
export interface Options {
  /**
   * How far the clock moves at a time. A sleep wakes at its own time whatever the step, and
   * a sleeper that begins a wait in real time (the stop grace at a deadline) stops the move
   * at its instant: what follows the wait is stamped there, not at the step's end. Default 10 ms;
   * at least 1 ms (a finer step would change nothing but the number of moves: a 1 s sleep in
   * steps of 1 ns is 10^9 of them).
   */
  readonly step?: Duration.Input | undefined
  /** The most the clock moves in all. Default 10 minutes. */
  readonly upTo?: Duration.Input | undefined
  /**
   * The most milliseconds the clock moves for each millisecond of real time: for a run that
   * waits on real I/O (an HTTP server, a subprocess, a promise), which the `TestClock` would
   * otherwise race past, timing it out. `pace: 10` gives a 100 ms answer 1 s of the run's
   * time. Default: as fast as the driver can.
   */
  readonly pace?: number | undefined
  /**
   * How long, in real time, a `RealTime.held` region holds the clock still while no wait in
   * real time begins or ends. Past it the clock moves again: held work that sleeps on the
   * Clock then goes on, and work that never ends meets `upTo` (`StillRunning` counts it). A
   * wait with a timer of its own (a stop grace, a subprocess's grace, `RealTime.sleep`) holds
   * the clock until it ends, whatever this bound. Default 2 seconds.
   */
  readonly heldUpTo?: Duration.Input | undefined
  /**
   * The clock moves only while the effect waits: its computing takes no time. How long, in
   * real time, the effect may compute without a pause before it is taken for waiting all the
   * same, so that the deadline of a loop that never waits still comes. Default 500 ms; a
   * longer one for long runs that never wait (a replay of ten thousand instant steps), a
   * shorter one for tests of tools that spin.
   */
  readonly busyUpTo?: Duration.Input | undefined
}

/**
 * Runs `effect` in a child fiber under the `TestClock` and moves the clock `step` at a time,
 * while the effect waits (never while its fibers have work to run), until the effect ends;
 * then returns what it returned. Start what it drives inside `effect`: fibers started
 * outside it are not seen computing. If it is still running once the
 * clock has moved `upTo`, it is interrupted and the driver fails with {@link StillRunning}.
 * Run it inside a test that provides the `TestClock` (every `it.effect` of `@effect/vitest` does).
 * Options that are not an object, a `step` under 1 ms, or a `step`, `upTo`, `heldUpTo` or `busyUpTo` that
 * is not a finite duration, is a defect (`RangeError`) naming the option, raised before the
 * effect starts. A `RealTime.held` region holds the clock still at most `heldUpTo` of real
 * time with nothing begun or ended in real time (see {@link Options.heldUpTo}), so a drive
 * always ends.
 *
 * @category combinators
 * @since 0.2.0
 */
export const drive = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: Options = {}
): Effect.Effect<A, E | StillRunning, R> =>
  Effect.gen(function* () {
    // Options of whatever type (`null` from a caller's JavaScript): refused naming them, not a TypeError on a read.
    const given: unknown = options
    if (typeof given !== "object" || given === null) {
      return yield* Effect.die(
        new RangeError(
          `TestClockDriver.drive: options must be an object (step, upTo, pace), got ${UserCode.shown(given)}`
        )
      )
    }
    const stepMillis = millisOf("step", options.step ?? "10 millis")
    const upToMillis = millisOf("upTo", options.upTo ?? "10 minutes")
    const heldUpToMillis = millisOf("heldUpTo", options.heldUpTo ?? "2 seconds")
    const busyUpToMillis = millisOf("busyUpTo", options.busyUpTo ?? "500 millis")
    // Each move costs the driver a turn: a finer step buys nothing (a sleep wakes at its own time
    // whatever the step) but moves by the million (a 1 s sleep in steps of 1 ns: 10^9 of them).
    if (stepMillis < minStepMillis) {
      return yield* Effect.die(
        new RangeError(
          `TestClockDriver.drive: step must be a duration of at least 1 millisecond (a sleep wakes at its own time whatever the step), got ${UserCode.shown(options.step)}`
        )
      )
    }
    const pace = options.pace
    if (pace !== undefined && !(typeof pace === "number" && Number.isFinite(pace) && pace > 0)) {
      return yield* Effect.die(
        new RangeError(`TestClockDriver.drive: pace must be a finite number > 0, got ${UserCode.shown(pace)}`)
      )
    }
    const clock = yield* Clock.Clock
    if (!Predicate.hasProperty(clock, "adjust") || !Predicate.isFunction(clock.adjust)) {
      return yield* Effect.die(
        new TypeError(
          "TestClockDriver.drive: no TestClock in the context (run it in it.effect, or provide TestClock.layer())"
        )
      )
    }
    // The run's waits in real time (a stop grace, an abort's grace): the clock stands still meanwhile.
    const waits = holdingWaits(clock, heldUpToMillis)
    // Its work, counted: the clock moves while the effect waits, not while it computes.
    const work = countedWork(yield* Scheduler.Scheduler, busyUpToMillis)
    // Detached, so that the driver never waits for it: what cannot be interrupted is left to run.
    const fiber = yield* Effect.forkDetach(
      effect.pipe(Effect.provideService(RealTime.Waits, waits), Effect.provideService(Scheduler.Scheduler, work)),
      { startImmediately: true }
    )
    const running = () => fiber.pollUnsafe() === undefined
    return yield* Effect.onInterrupt(
      Effect.gen(function* () {
        const moved = yield* advanceWhile(clock, running, waits, work, stepMillis, upToMillis, pace)
        if (running()) {
          const held = waits.held()
          // Interrupting runs the effect's finalizers, which may sleep too: keep moving the clock
          // for them, as far again at most, and never wait for what still does not end.
          fiber.interruptUnsafe()
          yield* advanceWhile(clock, running, waits, work, stepMillis, upToMillis, pace)
          return yield* new StillRunning({
            movedMillis: moved.millis,
            steps: moved.steps,
            ...(held > 0 ? { heldWaits: held } : {})
          })
        }
        return yield* Fiber.join(fiber)
      }),
      () => Effect.sync(() => fiber.interruptUnsafe())
    )
  })

/** The finest step the driver takes (see {@link Options.step}). */
const minStepMillis = 1

/** A finite duration of at least 0 ms, or a defect naming the option. */
const millisOf = (name: string, input: Duration.Input): number => {
  const millis = Durations.millisOf(input)
  if (millis === undefined || !Number.isFinite(millis) || millis < 0) {
    throw new RangeError(`TestClockDriver.drive: ${name} must be a finite duration >= 0, got ${UserCode.shown(input)}`)
  }
  return millis
}

/** Real time, for the driver itself (not one of the run's waits). */
const realWait = (millis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

const realMillisecond = realWait(1)

/** A turn of the event loop, in which the driven effect's queued fibers run. */
const realTurn = Effect.callback<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
})

/** The run's waits in real time, counted, and able to stop the clock's move that woke one. */
interface HoldingWaits extends RealTime.Waits {
  /** Whether the clock stands still: a timed wait is pending, or a held region within its `heldUpTo`. */
  readonly holding: () => boolean
  /** The `RealTime.held` regions pending. */
  readonly held: () => number
  /** Called when a wait begins while the clock moves, and the clock has moved since `from`. */
  hold: { readonly from: number; readonly stop: () => void } | undefined
}

/**
 * The waits of a driven effect. A wait that begins while the clock is being moved was begun by
 * a sleeper it woke (the clock has jumped to that sleeper's time): the move stops there, so
 * that nothing more of the step runs, and nothing is stamped past that instant (a deadline).
 * A wait begun before the move got under way (a fiber that polls in real time) does not stop
 * it: the clock would never move. A held region holds the clock only until `heldUpToMillis`
 * of real time pass with no wait begun or ended: it may be waiting on the clock itself.
 */
const holdingWaits = (clock: Clock.Clock, heldUpToMillis: number): HoldingWaits => {
  let timed = 0
  let regions = 0
  let changedAt = performance.now()
  const waits: HoldingWaits = {
    begin: (held) => {
      if (held === true) regions++
      else timed++
      changedAt = performance.now()
      const hold = waits.hold
      // Only a move that made progress is stopped: a wait begun before it moved (not woken by it) lets it go on.
      if (hold !== undefined && clock.currentTimeMillisUnsafe() > hold.from) {
        waits.hold = undefined
        hold.stop()
      }
      let ended = false
      return () => {
        if (ended) return
        ended = true
        if (held === true) regions--
        else timed--
        changedAt = performance.now()
      }
    },
    holding: () => timed > 0 || (regions > 0 && performance.now() - changedAt < heldUpToMillis),
    held: () => regions,
    hold: undefined
  }
  return waits
}

/** The scheduler of a driven effect, which says whether its fibers have work to run. */
interface CountedWork extends Scheduler.Scheduler {
  /**
   * Whether a fiber of the effect is ready to run (a task of its is queued): the effect computes,
   * and takes no time of the clock. Once it has computed without a pause for `busyUpToMillis` of
   * real time (a loop that never waits), it is taken for waiting, so that its deadline comes.
   */
  readonly computing: () => boolean
}

/**
 * The driven effect's scheduler: the one it would have had (the `TestClock`'s, which follows the
 * fibers a move wakes), counting the tasks its fibers queue. A run that never sleeps ends at the
 * instant it began, whatever the step (review 147: the clock moved each time the run's fiber
 * yielded its turn, and 100 instant iterations driven in steps of a minute ended `run_timeout`).
 */
const countedWork = (inner: Scheduler.Scheduler, busyUpToMillis: number): CountedWork => {
  let queued = 0
  let busySince: number | undefined
  return {
    executionMode: inner.executionMode,
    shouldYield: (fiber) => inner.shouldYield(fiber),
    makeDispatcher: () => {
      const dispatcher = inner.makeDispatcher()
      return {
        scheduleTask: (task, priority) => {
          queued++
          dispatcher.scheduleTask(() => {
            queued--
            task()
          }, priority)
        },
        flush: () => dispatcher.flush()
      }
    },
    computing: () => {
      if (queued === 0) {
        busySince = undefined
        return false
      }
      busySince ??= performance.now()
      return performance.now() - busySince < busyUpToMillis
    }
  }
}

/**
 * Moves the clock by `millis`, waking its sleepers in order, unless one of them begins a wait
 * in real time: then it stops at that sleeper's time. Gives how far it moved.
 */
const moveClock = (clock: Clock.Clock, waits: HoldingWaits, millis: number) =>
  Effect.gen(function* () {
    const from = clock.currentTimeMillisUnsafe()
    let stopped = false
    const moving = yield* Effect.forkChild(TestClock.adjust(Duration.millis(millis)), { startImmediately: true })
    waits.hold = {
      from,
      stop: () => {
        stopped = true
        moving.interruptUnsafe()
      }
    }
    yield* Fiber.await(moving)
    waits.hold = undefined
    // Stopped at a sleeper's instant: the other sleepers of that instant wake too (a move of
    // nothing, which no wait stops, as it cannot stamp past the instant), each free to begin
    // its own wait there rather than a step later.
    if (stopped) yield* TestClock.adjust(Duration.zero)
    // A whole move counts as asked (no sum of clock readings, which may differ in the last bits).
    return stopped ? clock.currentTimeMillisUnsafe() - from : millis
  })

/**
 * Moves the clock `step` at a time, never past `upTo` in all, while `running` holds; while
 * one of the run's waits in real time holds it (see {@link holdingWaits}), it waits in real
 * time instead (and a move that woke one stops at its instant). With a `pace`, a step of `n` ms comes at least
 * `n / pace` real ms after the one before.
 */
const advanceWhile = (
  clock: Clock.Clock,
  running: () => boolean,
  waits: HoldingWaits,
  work: CountedWork,
  stepMillis: number,
  upToMillis: number,
  pace: number | undefined
) =>
  Effect.gen(function* () {
    // With a pace, each step waits out its share of real time since the step before: time
    // spent elsewhere (a wait in real time, the run's own work) is never made up in a burst.
    let steppedAt = performance.now()
    let millis = 0
    let steps = 0
    while (running() && millis < upToMillis) {
      if (waits.holding()) {
        yield* realMillisecond
        continue
      }
      // The effect's fibers have work queued: theirs is the turn, at no time of the clock.
      if (work.computing()) {
        yield* realTurn
        continue
      }
      const next = Math.min(stepMillis, upToMillis - millis)
      const early = pace === undefined ? 0 : next / pace - (performance.now() - steppedAt)
      if (early > 0) {
        yield* realWait(Math.ceil(early))
        continue
      }
      steppedAt = performance.now()
      millis += yield* moveClock(clock, waits, next)
      steps++
    }
    return { millis, steps }
  })
