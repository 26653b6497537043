/**
 * Alarms on a `Clock`: callbacks due at absolute times, all of one clock watched by ONE
 * fiber that sleeps on that clock (`clock.sleep`, so the live clock and `TestClock` take
 * the same path) until the earliest live alarm, fires what is due, and ends when none is
 * left. The runs of one process share that fiber instead of one each. An alarm keeps its
 * time on the clock's monotonic time too, as its sleep is measured: the system clock stepped
 * while it waits does not move it, even when the sleeper is restarted for it.
 *
 * The alarms of a clock are a binary min-heap by time (then by order of setting). A
 * cleared alarm drops its callback at once; deeper in the heap it stays as a tombstone
 * until it reaches the top, and the heap is rebuilt without them once they outnumber the
 * live ones. When the earliest live alarm changes (an earlier one set, the head cleared),
 * the sleeper is restarted for it, so a cleared alarm never keeps the process waiting.
 *
 * Written here because effect has no synchronous priority queue (`TxPriorityQueue` is
 * transactional, and setting or clearing an alarm happens outside any fiber). The alarms are
 * kept per clock in a `WeakMap`: a clock (the live one, a test's `TestClock`) is the only
 * owner they can have, since a run's deadline is on the clock its caller gave it; a clock
 * nobody holds any more takes its alarms with it.
 */
import { type Clock, Duration, Effect, type Fiber, type Scheduler } from "effect"
import * as Instant from "./Instant.ts"

/** One alarm: set by {@link set}, given to {@link clear}. */
export class Alarm {
  readonly owner: Alarms | undefined
  /** Its absolute time on the clock's wall time, as it was given. */
  readonly at: number
  /**
   * The same time on the clock's monotonic time (milliseconds from the alarms' origin): its
   * absolute time turned, when it was set, into how long from then, by which alarms are
   * ordered. A system clock stepped afterwards moves no alarm (R4.1), even when the sleeper
   * is restarted for it or for another.
   */
  readonly due: number
  readonly order: number
  /** What it does when due; `undefined` once it fired or was cleared. */
  fire: (() => void) | undefined
  constructor(owner: Alarms | undefined, at: number, due: number, order: number, fire: (() => void) | undefined) {
    this.owner = owner
    this.at = at
    this.due = due
    this.order = order
    this.fire = fire
  }
}

/** The alarms of one clock, and its sleeper. */
class Alarms {
  readonly clock: Clock.Clock
  readonly scheduler: Scheduler.Scheduler
  readonly heap: Array<Alarm> = []
  /** Alarms in the heap that are neither fired nor cleared. */
  live = 0
  /** How many alarms were ever set: their order among equal times. */
  count = 0
  /** The fiber sleeping until the head's time (when one sleeps), and that time. */
  sleeper: Fiber.Fiber<void> | undefined = undefined
  until = Number.POSITIVE_INFINITY
  /** True while the sleeper fires what is due: it sleeps again for the new head itself. */
  firing = false
  /** The clock's monotonic time when these alarms began: what `due` counts from, in whole precision. */
  readonly origin: bigint
  constructor(clock: Clock.Clock, scheduler: Scheduler.Scheduler) {
    this.clock = clock
    this.scheduler = scheduler
    this.origin = clock.monotonicTimeNanosUnsafe()
  }
}

/** The clock's monotonic time, in milliseconds from the alarms' origin. */
const monotonic = (alarms: Alarms): number => Number(alarms.clock.monotonicTimeNanosUnsafe() - alarms.origin) / 1e6

/**
 * How far the wall time and the monotonic time may part before the wall clock is taken to
 * have been stepped: a `TestClock` keeps the one in fractions of a millisecond and the other
 * in whole nanoseconds, and they part by a hair; a step of the system clock (NTP) parts them
 * by seconds.
 */
const steppedMillis = 1

/**
 * How long until `alarm`: by the wall clock, as the alarm's time is given (to the nanosecond
 * on a `TestClock`, whose sleeps wake by it); by the monotonic time once the wall clock was
 * stepped since the alarm was set, which moves no sleep (R4.1).
 */
const remainingOf = (alarms: Alarms, alarm: Alarm): number => {
  const byWall = Instant.remaining(alarm.at, alarms.clock.currentTimeMillisUnsafe())
  const byMonotonic = Instant.remaining(alarm.due, monotonic(alarms))
  return Math.abs(byWall - byMonotonic) < steppedMillis ? byWall : byMonotonic
}

const byClock = new WeakMap<Clock.Clock, Alarms>()

/** An alarm that never fires (for a time that never comes): nothing is kept for it. */
const never = new Alarm(undefined, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, 0, undefined)

/**
 * Sets an alarm: `fire` is called (synchronously, by the clock's sleeper) once `clock`
 * reaches `at`, unless {@link clear}ed first. The sleeper runs on `scheduler`, the one of
 * the fiber that first set an alarm on this clock (a `TestClock` counts on its own).
 */
export const set = (clock: Clock.Clock, scheduler: Scheduler.Scheduler, at: number, fire: () => void): Alarm => {
  // A time that is no number (`NaN`) never comes either.
  if (!(at < Number.POSITIVE_INFINITY)) return never
  let alarms = byClock.get(clock)
  if (alarms === undefined) {
    alarms = new Alarms(clock, scheduler)
    byClock.set(clock, alarms)
  }
  const alarm = new Alarm(
    alarms,
    at,
    monotonic(alarms) + Instant.remaining(at, clock.currentTimeMillisUnsafe()),
    alarms.count++,
    fire
  )
  push(alarms.heap, alarm)
  alarms.live++
  if (!alarms.firing && alarms.heap[0] === alarm) wake(alarms)
  return alarm
}

/**
 * Clears an alarm, at once: its callback is dropped (with what it holds) and will not
 * be called. Clearing an alarm that fired or was cleared already does nothing.
 */
export const clear = (alarm: Alarm): void => {
  const alarms = alarm.owner
  if (alarm.fire === undefined || alarms === undefined) return
  alarm.fire = undefined
  alarms.live--
  const head = alarms.heap[0] === alarm
  if (head) dropCleared(alarms.heap)
  if (alarms.heap.length - alarms.live > alarms.live) compact(alarms.heap)
  if (head && !alarms.firing) wake(alarms)
}

/** How many alarms are kept for `clock`, cleared ones not yet dropped included (for tests). */
export const kept = (clock: Clock.Clock): number => byClock.get(clock)?.heap.length ?? 0

/** Whether `clock` has a sleeper now (for tests). */
export const sleeping = (clock: Clock.Clock): boolean => byClock.get(clock)?.sleeper !== undefined

/** The sleeper for the current head: kept if it sleeps until then, restarted otherwise, stopped if none. */
const wake = (alarms: Alarms): void => {
  const head = alarms.heap[0]
  if (alarms.sleeper !== undefined && head?.due === alarms.until) return
  const previous = alarms.sleeper
  alarms.sleeper = undefined
  alarms.until = Number.POSITIVE_INFINITY
  previous?.interruptUnsafe()
  if (head === undefined) return
  const fiber = Effect.runFork(sleep(alarms), { scheduler: alarms.scheduler })
  alarms.sleeper = fiber
  // A sleeper that ended by itself (none left, or a callback that threw) is replaced if some are left.
  fiber.addObserver(() => {
    if (alarms.sleeper !== fiber) return
    alarms.sleeper = undefined
    alarms.until = Number.POSITIVE_INFINITY
    if (alarms.heap.length > 0) wake(alarms)
  })
}

/** The longest one sleep of the sleeper: about 104 days, whose nanoseconds are a safe integer. */
const maxSleepMillis = Math.floor(Number.MAX_SAFE_INTEGER / 1e6)

/** Sleeps until the earliest live alarm, fires every alarm due, and again while some are left. */
const sleep = Effect.fnUntraced(function* (alarms: Alarms) {
  const clock = alarms.clock
  let head = alarms.heap[0]
  while (head !== undefined) {
    const slept = head
    alarms.until = head.due
    const remaining = remainingOf(alarms, head)
    // A time further than a sleep can say in whole nanoseconds (a deadline of 1e303 ms) is
    // slept towards, a long sleep at a time.
    const whole = remaining <= maxSleepMillis
    // Whole nanoseconds, rounded down: the sleep never ends after `until` (see `Instant`).
    yield* clock.sleep(Duration.nanos(BigInt(Math.floor(Math.min(remaining, maxSleepMillis) * 1e6))))
    // The clock ended the sleep for `slept`, so its time has come, even where the clock's
    // arithmetic says a hair less; the others due by then go off with it.
    if (whole) fireDue(alarms, slept)
    head = alarms.heap[0]
  }
  alarms.until = Number.POSITIVE_INFINITY
})

/**
 * Whether `alarm`'s time has come (to within the resolution, see `Instant`): by the
 * monotonic time, or by the wall clock while the two agree (a wall clock stepped since the
 * alarm was set moves it neither way, R4.1).
 */
const isDue = (alarms: Alarms, alarm: Alarm): boolean => {
  const byWall = alarm.at - alarms.clock.currentTimeMillisUnsafe()
  const byMonotonic = alarm.due - monotonic(alarms)
  return (
    byMonotonic < Instant.resolutionMillis ||
    (byWall < Instant.resolutionMillis && Math.abs(byWall - byMonotonic) < steppedMillis)
  )
}

/**
 * Takes the alarm slept for (`slept`) and every other one due off the heap, and calls
 * them, in order of time.
 */
const fireDue = (alarms: Alarms, slept: Alarm): void => {
  alarms.firing = true
  try {
    for (
      let head = alarms.heap[0];
      head !== undefined && (head === slept || isDue(alarms, head));
      head = alarms.heap[0]
    ) {
      pop(alarms.heap)
      const fire = head.fire
      head.fire = undefined
      alarms.live--
      dropCleared(alarms.heap)
      fire?.()
    }
  } finally {
    alarms.firing = false
  }
}

/** Drops cleared alarms off the top, so the head is a live one (or there is none). */
const dropCleared = (heap: Array<Alarm>): void => {
  for (let head = heap[0]; head !== undefined && head.fire === undefined; head = heap[0]) pop(heap)
}

/** The heap rebuilt with its live alarms only. */
const compact = (heap: Array<Alarm>): void => {
  let n = 0
  for (const alarm of heap) if (alarm.fire !== undefined) heap[n++] = alarm
  heap.length = n
  for (let i = (n >> 1) - 1; i >= 0; i--) down(heap, i)
}

/** Whether the alarm at `i` comes before the one at `j` (by time, then by order of setting). */
const before = (heap: Array<Alarm>, i: number, j: number): boolean => {
  const a = heap[i]
  const b = heap[j]
  if (a === undefined || b === undefined) return false
  return a.due < b.due || (a.due === b.due && a.order < b.order)
}

const push = (heap: Array<Alarm>, alarm: Alarm): void => {
  heap.push(alarm)
  let i = heap.length - 1
  while (i > 0) {
    const parent = (i - 1) >> 1
    if (!before(heap, i, parent)) break
    swap(heap, i, parent)
    i = parent
  }
}

const pop = (heap: Array<Alarm>): void => {
  const last = heap.pop()
  if (last === undefined || heap.length === 0) return
  heap[0] = last
  down(heap, 0)
}

const down = (heap: Array<Alarm>, from: number): void => {
  let i = from
  for (;;) {
    const left = 2 * i + 1
    let least = i
    if (before(heap, left, least)) least = left
    if (before(heap, left + 1, least)) least = left + 1
    if (least === i) return
    swap(heap, i, least)
    i = least
  }
}

const swap = (heap: Array<Alarm>, i: number, j: number): void => {
  const a = heap[i]
  const b = heap[j]
  if (a === undefined || b === undefined) return
  heap[i] = b
  heap[j] = a
}
