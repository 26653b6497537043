import { spawnSync } from "node:child_process"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Scheduler } from "effect"
import { TestClock } from "effect/testing"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Deadline from "../../src/time/Deadline.ts"
import * as Alarms from "../../src/time/internal/Alarms.ts"

/** Alarms that note their name in `fired` when they go off. */
const recorder = () => {
  const fired: Array<string> = []
  const at = (millis: number, name: string) => Deadline.alarm(millis, () => fired.push(name))
  return { fired, at }
}

describe("Deadline.alarm", () => {
  it.effect("R3.11 an alarm goes off when the clock reaches its time, not before", () =>
    Effect.gen(function* () {
      const { fired, at } = recorder()
      yield* at(1_000, "a")
      yield* TestClock.adjust(999)
      assert.deepStrictEqual(fired, [])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(fired, ["a"])
    })
  )

  it.effect(
    "R4 an alarm further than a sleep can say goes off at its time, and one past any time does not break the others",
    () =>
      Effect.gen(function* () {
        const { fired, at } = recorder()
        const day = 24 * 60 * 60 * 1000
        // 1e303 ms: its nanoseconds are no safe integer (they were a RangeError for every alarm of the clock).
        yield* at(1e303, "never")
        yield* at(200 * day, "far")
        yield* at(1_000, "near")
        yield* TestClock.adjust(1_000)
        assert.deepStrictEqual(fired, ["near"])
        yield* TestClock.adjust(199 * day - 1_000 - 1)
        assert.deepStrictEqual(fired, ["near"], "not before its time")
        yield* TestClock.adjust(day + 1)
        assert.deepStrictEqual(fired, ["near", "far"])
        yield* at(1_000, "after")
        yield* TestClock.adjust(1_000)
        assert.deepStrictEqual(fired, ["near", "far", "after"])
      })
  )

  it.effect("alarms go off in order of time, equal times in the order they were set", () =>
    Effect.gen(function* () {
      const { fired, at } = recorder()
      yield* at(300, "c")
      yield* at(100, "a")
      yield* at(300, "d")
      yield* at(200, "b")
      yield* TestClock.adjust(250)
      assert.deepStrictEqual(fired, ["a", "b"])
      yield* TestClock.adjust(1_000)
      assert.deepStrictEqual(fired, ["a", "b", "c", "d"])
    })
  )

  it.effect("an alarm set earlier than the one the clock's fiber sleeps for goes off at its own time", () =>
    Effect.gen(function* () {
      const { fired, at } = recorder()
      yield* at(10_000, "late")
      yield* at(50, "early")
      yield* TestClock.adjust(50)
      assert.deepStrictEqual(fired, ["early"])
    })
  )

  it.effect("a cleared alarm never goes off and drops its callback; clearing twice does nothing", () =>
    Effect.gen(function* () {
      const { fired, at } = recorder()
      const a = yield* at(100, "a")
      const b = yield* at(200, "b")
      Deadline.clearAlarm(b)
      Deadline.clearAlarm(b)
      assert.isUndefined(b.fire)
      Deadline.clearAlarm(a)
      yield* TestClock.adjust(1_000)
      assert.deepStrictEqual(fired, [])
    })
  )

  it.effect("the clock's fiber ends when no alarm is left, and starts again for the next one", () =>
    Effect.gen(function* () {
      const clock = yield* Effect.clockWith(Effect.succeed)
      const { fired, at } = recorder()
      const a = yield* at(100, "a")
      const b = yield* at(60_000, "b")
      assert.isTrue(Alarms.sleeping(clock))
      // The head cleared: the fiber sleeps for the next one.
      Deadline.clearAlarm(a)
      assert.isTrue(Alarms.sleeping(clock))
      Deadline.clearAlarm(b)
      assert.isFalse(Alarms.sleeping(clock))
      assert.strictEqual(Alarms.kept(clock), 0)
      yield* at(500, "c")
      yield* TestClock.adjust(500)
      assert.deepStrictEqual(fired, ["c"])
      // It went off, and it was the last: nothing sleeps.
      assert.isFalse(Alarms.sleeping(clock))
    })
  )

  it.effect("an alarm at an infinite time keeps nothing", () =>
    Effect.gen(function* () {
      const clock = yield* Effect.clockWith(Effect.succeed)
      const alarm = yield* Deadline.alarm(Number.POSITIVE_INFINITY, () => assert.fail("fired"))
      assert.strictEqual(Alarms.kept(clock), 0)
      assert.isFalse(Alarms.sleeping(clock))
      Deadline.clearAlarm(alarm)
    })
  )

  it.effect(
    "R3.11 an alarm goes off when the clock reaches it from a fractional time its arithmetic cannot add up to",
    () =>
      Effect.gen(function* () {
        // From here, TestClock ends a sleep for what is left of 1000 ms at 999.9999999999999
        // (the sleep's Duration rounds it): a hair before the alarm's time, on every try.
        yield* TestClock.setTime(929.2320599999999)
        const { fired, at } = recorder()
        yield* at(1_000, "deadline")
        yield* TestClock.adjust(71)
        assert.deepStrictEqual(fired, ["deadline"])
        assert.isFalse(Alarms.sleeping(yield* Clock.Clock))
      })
  )

  it.effect(
    "R3.11 an alarm set at a fractional time goes off when the clock is set to its time, not a nanosecond later",
    () =>
      Effect.gen(function* () {
        // A sleep from 4e-7 ms for what is left of 1000 ms rounds up to whole nanoseconds.
        yield* TestClock.setTime(4e-7)
        const { fired, at } = recorder()
        yield* at(1_000, "deadline")
        yield* TestClock.setTime(1_000)
        assert.deepStrictEqual(fired, ["deadline"])
      })
  )

  it.effect("an alarm whose time has passed goes off at once", () =>
    Effect.gen(function* () {
      yield* TestClock.adjust(1_000)
      const { fired, at } = recorder()
      yield* at(400, "past")
      yield* TestClock.adjust(0)
      assert.deepStrictEqual(fired, ["past"])
    })
  )

  it.effect("alarms set and cleared by an alarm's callback are kept in order", () =>
    Effect.gen(function* () {
      const [clock, scheduler] = yield* Effect.withFiber((fiber) =>
        Effect.succeed([fiber.getRef(Clock.Clock), fiber.getRef(Scheduler.Scheduler)] as const)
      )
      const fired: Array<string> = []
      const later = yield* Deadline.alarm(300, () => fired.push("cleared by a"))
      yield* Deadline.alarm(100, () => {
        fired.push("a")
        Deadline.clearAlarm(later)
        // Set from inside the callback, due before the next one.
        Alarms.set(clock, scheduler, 150, () => fired.push("set by a"))
      })
      yield* Deadline.alarm(200, () => fired.push("b"))
      yield* TestClock.adjust(1_000)
      assert.deepStrictEqual(fired, ["a", "set by a", "b"])
      assert.isFalse(Alarms.sleeping(clock))
    })
  )

  it.effect("memory stays bounded: cleared alarms deep in the heap are dropped once they outnumber the live", () =>
    Effect.gen(function* () {
      const clock = yield* Effect.clockWith(Effect.succeed)
      const n = 10_000
      const alarms: Array<Deadline.Alarm> = []
      // Each alarm later than the one before, as the deadlines of runs started one after another.
      for (let i = 0; i < n; i++) alarms.push(yield* Deadline.alarm(1_000 + i, () => {}))
      // The first stays live; every other one ends, so none of those cleared is the head.
      let most = 0
      for (let i = 1; i < n; i++) {
        Deadline.clearAlarm(alarms[i] as Deadline.Alarm)
        most = Math.max(most, Alarms.kept(clock))
        assert.isAtMost(Alarms.kept(clock), 2 * (n - i) + 1)
      }
      assert.isAtMost(Alarms.kept(clock), 2)
      assert.strictEqual(most, n)
      Deadline.clearAlarm(alarms[0] as Deadline.Alarm)
      assert.strictEqual(Alarms.kept(clock), 0)
    })
  )
})

describe("Deadline.alarm on a system clock stepped while it waits (R4.1)", () => {
  /** The test's clock, with a wall time that can be stepped (as NTP steps the system clock); its sleeps and monotonic time are the test clock's. */
  const steppable = (test: Clock.Clock) => {
    const state = { offset: 0 }
    const now = () => test.currentTimeMillisUnsafe() + state.offset
    const clock: Clock.Clock = {
      currentTimeMillisUnsafe: now,
      currentTimeMillis: Effect.sync(now),
      currentTimeNanosUnsafe: () => BigInt(Math.round(now() * 1e6)),
      currentTimeNanos: Effect.sync(() => BigInt(Math.round(now() * 1e6))),
      monotonicTimeNanosUnsafe: () => test.monotonicTimeNanosUnsafe(),
      monotonicTimeNanos: test.monotonicTimeNanos,
      sleep: (duration) => test.sleep(duration)
    }
    return { clock, state }
  }

  for (const step of [-3_000, 3_000])
    it.effect(
      `R4.1 stepped ${step < 0 ? "back" : "forward"} 3 s, an alarm still goes off on time when the sleeper restarts for it`,
      () =>
        Effect.gen(function* () {
          const { clock, state } = steppable(yield* Effect.clockWith(Effect.succeed))
          const { fired, at } = recorder()
          const on = <A>(effect: Effect.Effect<A>) => Effect.provideService(effect, Clock.Clock, clock)
          yield* on(at(800, "later"))
          // The earlier alarm is the one slept for; cleared after the step, the sleeper restarts for the later one.
          const earlier = yield* on(at(300, "earlier"))
          yield* TestClock.adjust(100)
          state.offset = step
          Deadline.clearAlarm(earlier)
          yield* TestClock.adjust(699)
          assert.deepStrictEqual(fired, [], "not before its time")
          yield* TestClock.adjust(1)
          assert.deepStrictEqual(fired, ["later"])
        })
    )
  it.effect("R4.1 stepped back 1 h, an alarm set after the step does not hold back one set before it", () =>
    Effect.gen(function* () {
      const { clock, state } = steppable(yield* Effect.clockWith(Effect.succeed))
      const { fired, at } = recorder()
      const on = <A>(effect: Effect.Effect<A>) => Effect.provideService(effect, Clock.Clock, clock)
      // Run X's deadline, 10 minutes away; then the clock is stepped back an hour, and run Y starts with 30 minutes.
      yield* on(at(600_000, "x"))
      state.offset = -3_600_000
      yield* on(at(clock.currentTimeMillisUnsafe() + 1_800_000, "y"))
      // Before, Y's earlier wall time made it the one slept for, and X fired with it at 30 minutes.
      yield* TestClock.adjust(600_000)
      assert.deepStrictEqual(fired, ["x"])
      yield* TestClock.adjust(1_200_000)
      assert.deepStrictEqual(fired, ["x", "y"])
    })
  )
})

describe("Deadline.alarm on a TestClock set to a real date (R4.1, R10)", () => {
  it.effect(
    "R4.1 alarms at fractional instants of an epoch-scale clock go off at their time, never a hair before",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(1_765_000_000_000.123)
        const clock = yield* Effect.clockWith(Effect.succeed)
        const start = clock.currentTimeMillisUnsafe()
        const late: Array<string> = []
        const early: Array<string> = []
        // Eight alarms, as eight runs' deadlines; each one cleared when it fires restarts the sleeper for the next.
        for (let i = 0; i < 8; i++) {
          const at = start + 1000 + i * 137.3 + 3.77
          yield* Deadline.alarm(at, () => {
            const now = clock.currentTimeMillisUnsafe()
            if (!Deadline.hasPassed(at, now)) early.push(`a${i} at ${now - at} ms`)
            late.push(`a${i}`)
          })
        }
        // Moved as a driver moves it: to each sleeper's instant in turn, the alarms' one among them.
        yield* TestClockDriver.drive(Effect.sleep("2200 millis"), { step: "3 millis" })
        // Before (a monotonic count rounded to 256 ns at this scale), some went off 0.000244 ms early.
        assert.deepStrictEqual(early, [])
        assert.deepStrictEqual(late, ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"])
      })
  )
})

describe("Deadline.alarm on the live clock", () => {
  const script = Path.resolve(import.meta.dirname, "..", "fixtures", "one-run.ts")
  const exits = (mode: string) => {
    // A process kept alive by a finished run's deadline (minutes) would be killed at the timeout.
    const child = spawnSync(process.execPath, [script, mode], { encoding: "utf8", timeout: 20_000 })
    assert.isNull(child.signal, "the process did not exit by itself after its runs")
    assert.strictEqual(child.status, 0, child.stderr)
    return child.stdout.trim().split("\n")
  }

  it("R3.11 a program that does one run exits when it ends: its deadline keeps nothing alive", () => {
    assert.deepStrictEqual(exits("one"), ["completed"])
  })

  it("R3.11 two runs at once, the later one with the earlier deadline: the program exits when both end", () => {
    assert.deepStrictEqual(exits("two"), ["completed", "completed"])
  })

  it("R12 a run whose handler cannot be interrupted gives its result after the stop grace, in a program that holds nothing else open", () => {
    // The stop grace's timer keeps the program alive until the result (it exited with code 13, no result).
    // A write left running may have acted: its status is unknown_outcome, its stop reason run_timeout (review 158).
    assert.deepStrictEqual(exits("stuck"), ["unknown_outcome run_timeout stuck: still running"])
  })
})
