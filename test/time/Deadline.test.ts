import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Deadline from "../../src/time/Deadline.ts"

const budget = (runAt: number, stepAt = Number.POSITIVE_INFINITY): Deadline.Budget => ({ runAt, stepAt })

describe("Deadline.bound", () => {
  const rows: ReadonlyArray<
    readonly [string, Deadline.Budget, { layer: Deadline.Layer; millis?: number }, number, Deadline.Layer]
  > = [
    ["the wait's own limit when it is the tightest", budget(1_000, 500), { layer: "tool", millis: 100 }, 100, "tool"],
    ["the step when it ends first", budget(1_000, 300), { layer: "attempt", millis: 400 }, 300, "step"],
    ["the run when it ends first", budget(200, 300), { layer: "attempt", millis: 400 }, 200, "run"],
    ["the run without a step or an own limit", budget(700), { layer: "approval" }, 700, "run"],
    ["the step without an own limit", budget(700, 600), { layer: "tool" }, 600, "step"],
    ["on a tie, the run", budget(300, 300), { layer: "tool", millis: 300 }, 300, "run"],
    ["on a tie of the step and its own limit, its own", budget(900, 300), { layer: "tool", millis: 300 }, 300, "tool"],
    ["nothing left once the run has passed", budget(-50, 300), { layer: "tool", millis: 10 }, 0, "run"]
  ]
  for (const [name, b, own, millis, layer] of rows) {
    it(`R4.2 ${name}`, () => {
      assert.deepStrictEqual(Deadline.bound(b, 0, own), { millis, layer })
    })
  }
})

describe("Deadline.within", () => {
  it.effect("R4.2 R4.3 a wait cut off by its own limit fails with a Timeout naming its layer", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.never.pipe(
        Deadline.within({ layer: "tool", millis: 100 }),
        Deadline.run(10_000),
        Effect.flip,
        Effect.forkChild
      )
      yield* TestClock.adjust(100)
      const timeout = yield* Fiber.join(fiber)
      assert.isTrue(Deadline.isTimeout(timeout))
      assert.deepStrictEqual([timeout.layer, timeout.afterMillis], ["tool", 100])
    })
  )

  it.effect(
    "R4.2 R4.3 a wait that cannot be interrupted holds its layer until it ends: the timeout says how long it took",
    () =>
      Effect.gen(function* () {
        const fiber = yield* Effect.uninterruptible(Effect.sleep(500)).pipe(
          Deadline.within({ layer: "tool", millis: 100 }),
          Deadline.run(10_000),
          Effect.flip,
          Effect.forkChild
        )
        yield* TestClock.adjust(100)
        assert.isUndefined(fiber.pollUnsafe(), "the wait is not left behind below the run")
        yield* TestClock.adjust(400)
        const timeout = yield* Fiber.join(fiber)
        assert.deepStrictEqual([timeout.layer, timeout.afterMillis], ["tool", 500])
      })
  )

  it.effect("R4.3 a Timeout says the bound its wait was given apart from how long the wait took", () =>
    Effect.gen(function* () {
      const held = yield* Effect.uninterruptible(Effect.sleep(500)).pipe(
        Deadline.within({ layer: "tool", millis: 100 }),
        Deadline.run(10_000),
        Effect.flip,
        Effect.forkChild
      )
      yield* TestClock.adjust(500)
      assert.deepInclude(yield* Fiber.join(held), { layer: "tool", limitMillis: 100, afterMillis: 500 })
      // Inside a step, the bound is what was left of it.
      const stepped = yield* Effect.gen(function* () {
        yield* Effect.sleep(150)
        return yield* Effect.flip(Deadline.within(Effect.never, { layer: "attempt", millis: 5_000 }))
      }).pipe(Deadline.step(400), Deadline.run(10_000), Effect.forkChild)
      yield* TestClock.adjust(400)
      assert.deepInclude(yield* Fiber.join(stepped), { layer: "step", limitMillis: 250, afterMillis: 250 })
    })
  )

  it.effect("R4.2 inside a step, a wait gets only what is left of the step", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.gen(function* () {
        yield* Effect.sleep(150)
        return yield* Effect.flip(Deadline.within(Effect.never, { layer: "attempt", millis: 5_000 }))
      }).pipe(Deadline.step(400), Deadline.run(10_000), Effect.forkChild)
      yield* TestClock.adjust(150)
      yield* TestClock.adjust(250)
      const timeout = yield* Fiber.join(fiber)
      assert.deepStrictEqual([timeout.layer, timeout.afterMillis], ["step", 250])
    })
  )

  it.effect("R4.2 when the run is the tightest, within arms no timer: the run's own race cuts the wait", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.sleep(2_000).pipe(
        Effect.as("finished"),
        Deadline.within({ layer: "tool", millis: 5_000 }),
        Deadline.run(1_000),
        Effect.forkChild
      )
      yield* TestClock.adjust(1_500)
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust(500)
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.succeed("finished"))
    })
  )

  it.effect("a wait that ends in time gives its value, and outside a run nothing bounds it", () =>
    Effect.gen(function* () {
      assert.strictEqual(
        yield* Effect.succeed(1).pipe(Deadline.within({ layer: "tool", millis: 10 }), Deadline.run(100)),
        1
      )
      const fiber = yield* Effect.sleep(60_000).pipe(Effect.as(2), Deadline.within({ layer: "tool" }), Effect.forkChild)
      yield* TestClock.adjust(60_000)
      assert.strictEqual(yield* Fiber.join(fiber), 2)
    })
  )
})

describe("Deadline.withinOrElse", () => {
  it.effect("R4.2 a cut-off wait comes to what orElse makes of its timeout, the layer that cut it named", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.never.pipe(
        Deadline.withinOrElse({
          layer: "tool",
          millis: 500,
          orElse: (timeout) => Effect.succeed(`${timeout.layer} after ${timeout.afterMillis} ms`)
        }),
        Deadline.step(200),
        Deadline.run(10_000),
        Effect.forkChild
      )
      yield* TestClock.adjust(199)
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust(1)
      assert.strictEqual(yield* Fiber.join(fiber), "step after 200 ms")
    })
  )

  it.effect(
    "R4.2 a wait that continues one begun earlier keeps its end (until); with nothing left, ifNoTime stands in for it",
    () =>
      Effect.gen(function* () {
        let started = 0
        const wait = Effect.suspend(() => {
          started++
          return Effect.never
        })
        const until = (at: number) =>
          wait.pipe(
            Deadline.withinOrElse({
              layer: "tool",
              until: at,
              orElse: (timeout) => Effect.succeed(`cut: ${timeout.layer} after ${timeout.afterMillis} ms`),
              ifNoTime: (timeout) => Effect.succeed(`not started: ${timeout.layer} after ${timeout.afterMillis} ms`)
            }),
            Deadline.step(1_000),
            Deadline.run(10_000)
          )
        // Its own limit ends at +300: 300 ms from now, however long ago it began.
        const fiber = yield* Effect.forkChild(until(300))
        yield* TestClock.adjust(300)
        assert.strictEqual(yield* Fiber.join(fiber), "cut: tool after 300 ms")
        assert.strictEqual(started, 1)
        // An end already reached: the wait does not start.
        assert.strictEqual(yield* until(200), "not started: tool after 0 ms")
        assert.strictEqual(started, 1)
        // Nor once the step is spent, whatever its own limit.
        const stepSpent = yield* wait.pipe(
          Deadline.withinOrElse({
            layer: "tool",
            millis: 5_000,
            orElse: () => Effect.succeed("cut"),
            ifNoTime: (timeout) => Effect.succeed(`not started: ${timeout.layer}`)
          }),
          Deadline.step(0),
          Deadline.run(10_000)
        )
        assert.strictEqual(stepSpent, "not started: step")
        assert.strictEqual(started, 1)
      })
  )

  it.effect("a wait in time, or bounded by the run only, never reaches orElse", () =>
    Effect.gen(function* () {
      const orElse = () => Effect.succeed("cut off")
      assert.strictEqual(
        yield* Effect.succeed("in time").pipe(
          Deadline.withinOrElse({ layer: "tool", millis: 10, orElse }),
          Deadline.run(100)
        ),
        "in time"
      )
      const fiber = yield* Effect.sleep(2_000).pipe(
        Effect.as("finished"),
        Deadline.withinOrElse({ layer: "tool", millis: 5_000, orElse }),
        Deadline.run(1_000),
        Effect.forkChild
      )
      yield* TestClock.adjust(2_000)
      assert.strictEqual(yield* Fiber.join(fiber), "finished")
    })
  )
})

describe("Deadline.within on the live clock", () => {
  it.live(
    "R4.2 a wait that blocks the event loop before it yields is cut off at its bound, not its bound after the block",
    () =>
      Effect.gen(function* () {
        const started = Date.now()
        // Blocks 600 ms synchronously (code that holds the event loop), then never answers.
        const blocking = Effect.suspend(() => {
          while (Date.now() - started < 600) {
            // Busy: nothing else runs.
          }
          return Effect.never
        })
        const exit = yield* Effect.exit(blocking.pipe(Deadline.within({ layer: "tool", millis: 300 })))
        const elapsed = Date.now() - started
        assert.isTrue(Exit.isFailure(exit))
        // Its 300 ms ran out while it blocked: cut off as soon as it yields, not 300 ms later.
        assert.isBelow(elapsed, 850)
      })
  )
})

describe("Deadline.passed / left", () => {
  it.effect("R3.11 the run deadline has passed from the instant it is reached, on the run's clock", () =>
    Effect.gen(function* () {
      const at = 1_000
      assert.isFalse(yield* Deadline.passed.pipe(Deadline.run(at)))
      yield* TestClock.adjust(999)
      assert.isFalse(yield* Deadline.passed.pipe(Deadline.run(at)))
      yield* TestClock.adjust(1)
      assert.isTrue(yield* Deadline.passed.pipe(Deadline.run(at)))
      assert.isTrue(Deadline.hasPassed(at, 1_000))
      assert.isFalse(Deadline.hasPassed(at, 999))
    })
  )

  it.effect("R4.2 left gives the bound, the absolute time it ends and the time it was read at, for the records", () =>
    Effect.gen(function* () {
      yield* TestClock.adjust(100)
      const left = yield* Deadline.left({ layer: "attempt", millis: 50 }).pipe(Deadline.step(30), Deadline.run(10_000))
      assert.deepStrictEqual(left, { millis: 30, layer: "step", at: 130, now: 100 })
    })
  )
})

describe("Deadline given a time that is no time (R12)", () => {
  /** The defect `self` dies with: a RangeError, by its message. */
  const refusal = (self: Effect.Effect<unknown, unknown>) =>
    Effect.map(Effect.exit(self), (exit) => {
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), "a defect")
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(error, RangeError)
      return error instanceof RangeError ? error.message : ""
    })
  const slow = Effect.as(Effect.sleep(1_000), "finished")

  it.effect("R4.2 R12 NaN, a negative limit or a string is refused as a RangeError naming the argument", () =>
    Effect.gen(function* () {
      const notANumber = Number.NaN
      assert.strictEqual(
        yield* refusal(Deadline.within(slow, { layer: "tool", millis: notANumber })),
        "Deadline.within: millis must be a number of milliseconds >= 0 (or undefined for none), got NaN"
      )
      assert.strictEqual(
        yield* refusal(Deadline.within(slow, { layer: "tool", millis: -1 })),
        "Deadline.within: millis must be a number of milliseconds >= 0 (or undefined for none), got -1"
      )
      const orElse = () => Effect.succeed("timed out")
      assert.strictEqual(
        yield* refusal(Deadline.withinOrElse(slow, { layer: "tool", until: notANumber, orElse })),
        "Deadline.withinOrElse: until must be a time in epoch milliseconds (or undefined for none), got NaN"
      )
      assert.strictEqual(
        yield* refusal(Deadline.step(slow, notANumber)),
        "Deadline.step: millis must be a number of milliseconds (or undefined for none), got NaN"
      )
      const untyped: unknown = "1 second"
      assert.strictEqual(
        yield* refusal(Deadline.step(slow, untyped as number)), // as: a caller without types
        'Deadline.step: millis must be a number of milliseconds (or undefined for none), got "1 second"'
      )
      assert.strictEqual(
        yield* refusal(Deadline.run(Deadline.passed, notANumber)),
        "Deadline.run: runAt must be a time in epoch milliseconds, got NaN"
      )
      assert.strictEqual(
        yield* refusal(Deadline.left({ layer: "tool", millis: notANumber })),
        "Deadline.left: millis must be a number of milliseconds >= 0 (or undefined for none), got NaN"
      )
      assert.throws(
        () => Deadline.bound(budget(notANumber), 0, { layer: "tool" }),
        RangeError,
        "Deadline.bound: budget.runAt must be a time in epoch milliseconds, got NaN"
      )
      assert.throws(
        () => Deadline.bound(budget(1_000), 0, { layer: "tool", millis: notANumber }),
        RangeError,
        "Deadline.bound: millis must be a number of milliseconds >= 0 (or undefined for none), got NaN"
      )
    })
  )

  it.effect("R4.2 the edges that mean something still do: no limit, a step already spent, no run deadline", () =>
    Effect.gen(function* () {
      const infinite = Number.POSITIVE_INFINITY
      const unbounded = yield* Effect.forkChild(Deadline.within(slow, { layer: "tool", millis: infinite }))
      yield* TestClock.adjust(1_000)
      assert.deepStrictEqual(yield* Fiber.await(unbounded), Exit.succeed("finished"))
      // A step whose time is spent (a resumed run's): nothing is left of it.
      const spent = yield* Effect.flip(Deadline.step(Deadline.within(slow, { layer: "attempt" }), -5))
      assert.deepInclude(spent, { layer: "step", limitMillis: 0 })
      assert.isFalse(yield* Deadline.run(Deadline.passed, infinite))
    })
  )
})
