import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Layer, Schema } from "effect"
import * as Abortable from "../../src/cancellation/Abortable.ts"
import * as Subprocess from "../../src/cancellation/Subprocess.ts"
import * as Run from "../../src/run/Run.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as RealTime from "../../src/time/RealTime.ts"
import * as Tool from "../../src/tools/Tool.ts"

const slow = Tool.make({
  name: "slow",
  description: "takes a minute",
  input: Schema.Struct({}),
  output: Schema.String,
  handler: () => Effect.as(Effect.sleep("1 minute"), "done")
})

describe("TestClockDriver", () => {
  it.effect("R4.1 a run deadline of 5 s fires on the TestClock while a tool sleeps a minute", () =>
    Effect.gen(function* () {
      const result = yield* TestClockDriver.drive(Run.run({ goal: "wait", tools: [slow], time: { run: "5 seconds" } }))
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.isAtLeast(result.elapsedMillis, 5000)
      assert.isBelow(result.elapsedMillis, 5100)
    }).pipe(
      Effect.provide(Layer.mergeAll(ScriptedModel.layer([ScriptedModel.toolCall("slow", {})]), NodeServices.layer))
    )
  )

  it.effect(
    "R10 R5.2 the clock stands still during the run's waits in real time: a stop grace and an ignored abort end the run at its deadline",
    () =>
      Effect.gen(function* () {
        const stuck = Tool.make({
          name: "stuck",
          description: "cannot be interrupted",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          handler: () => Effect.uninterruptible(Effect.as(Effect.sleep("1 hour"), "x"))
        })
        const deaf = Tool.make({
          name: "deaf",
          description: "ignores its abort signal",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          handler: Abortable.handler(() => new Promise<string>((resolve) => setTimeout(() => resolve("late"), 2000)))
        })
        for (const tool of [stuck, deaf]) {
          const result = yield* TestClockDriver.drive(
            Run.run({ goal: "g", tools: [tool], time: { run: "5 seconds", stopGrace: "200 millis" } }).pipe(
              Effect.provide(
                ScriptedModel.layer([ScriptedModel.toolCall(tool.name, {}), ScriptedModel.finalAnswer("d")])
              )
            ),
            { upTo: "1 minute" }
          )
          assert.strictEqual(result.stopReason, "run_timeout", tool.name)
          assert.strictEqual(result.elapsedMillis, 5000, tool.name)
        }
      })
  )

  it.effect("returns what the effect returns once the clock has moved past its sleeps", () =>
    Effect.gen(function* () {
      const value = yield* TestClockDriver.drive(Effect.as(Effect.sleep("3 minutes"), 42), { step: "1 second" })
      assert.strictEqual(value, 42)
    })
  )

  it.effect("an effect still running after upTo is interrupted and the driver fails with StillRunning", () =>
    Effect.gen(function* () {
      let interrupted = false
      const error = yield* Effect.flip(
        TestClockDriver.drive(
          Effect.onInterrupt(Effect.never, () =>
            Effect.sync(() => {
              interrupted = true
            })
          ),
          { step: "1 second", upTo: "30 seconds" }
        )
      )
      assert.strictEqual(error._tag, "StillRunning")
      if (error._tag === "StillRunning") assert.strictEqual(error.movedMillis, 30_000)
      assert.isTrue(interrupted)
    })
  )

  it.effect(
    "R10 an effect that cannot be interrupted is left running: the driver still fails with StillRunning, at once",
    () =>
      Effect.gen(function* () {
        for (const stuck of [
          Effect.uninterruptible(Effect.sleep("1 hour")),
          Effect.never.pipe(Effect.ensuring(Effect.never))
        ]) {
          const error = yield* Effect.flip(TestClockDriver.drive(stuck, { upTo: "1 second" }))
          assert.strictEqual(error._tag, "StillRunning")
        }
      })
  )

  it.effect(
    "R10 with a pace, a run waiting on real I/O is not raced past: a 150 ms answer takes about 0.75 s of the run",
    () =>
      Effect.gen(function* () {
        // A tool whose answer comes from outside the run, in real time (a server, a subprocess).
        const remote = Tool.make({
          name: "remote",
          description: "asks a server",
          input: Schema.Struct({}),
          output: Schema.String,
          handler: () => Effect.promise(() => new Promise<string>((resume) => setTimeout(() => resume("answer"), 150)))
        })
        const run = Run.run({ goal: "ask", tools: [remote], time: { run: "5 seconds" } }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("remote", {}), ScriptedModel.finalAnswer("done")]))
        )
        // As fast as it can, the driver moved the clock past the deadline before the answer came: run_timeout.
        const paced = yield* TestClockDriver.drive(run, { pace: 5 })
        assert.deepStrictEqual([paced.status, paced.stopReason], ["completed", "goal_reached"])
        assert.isAtMost(paced.elapsedMillis, 5000)
        const refused = yield* Effect.exit(TestClockDriver.drive(Effect.void, { pace: 0 }))
        assert.include(
          Cause.pretty(refused._tag === "Failure" ? refused.cause : Cause.empty),
          "pace must be a finite number > 0"
        )
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it("R10 the driver outside a TestClock is a defect saying what to provide", async () => {
    const exit = await Effect.runPromiseExit(TestClockDriver.drive(Effect.void))
    assert.isTrue(Exit.isFailure(exit))
    assert.include(Cause.pretty(exit._tag === "Failure" ? exit.cause : Cause.empty), "no TestClock in the context")
  })

  it.effect("the effect's own failure comes through as it is", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        TestClockDriver.drive(Effect.andThen(Effect.sleep("2 seconds"), Effect.fail("boom")))
      )
      assert.strictEqual(error, "boom")
    })
  )

  it.effect("the clock never moves past upTo, even when upTo is not a multiple of step", () =>
    Effect.gen(function* () {
      const start = yield* Clock.currentTimeMillis
      const error = yield* Effect.flip(TestClockDriver.drive(Effect.never, { step: "7 millis", upTo: "100 millis" }))
      assert.strictEqual(error._tag === "StillRunning" ? error.movedMillis : -1, 100)
      assert.strictEqual((yield* Clock.currentTimeMillis) - start, 100)
    })
  )

  it.effect("finalizers that sleep still run when the driver gives up", () =>
    Effect.gen(function* () {
      let cleaned = false
      const effect = Effect.never.pipe(
        Effect.ensuring(
          Effect.sleep("1 second").pipe(
            Effect.andThen(
              Effect.sync(() => {
                cleaned = true
              })
            )
          )
        )
      )
      const error = yield* Effect.flip(TestClockDriver.drive(effect, { step: "100 millis", upTo: "2 seconds" }))
      assert.strictEqual(error._tag, "StillRunning")
      assert.isTrue(cleaned)
    })
  )

  for (const [name, options] of [
    ["an infinite upTo", { upTo: "Infinity" }],
    ["a negative upTo", { upTo: "-1 seconds" }],
    ["a NaN upTo", { upTo: Number.NaN }],
    ["a zero step", { step: 0 }],
    ["a step that is not a duration", { step: "garbage" }]
  ] as const) {
    it.effect(`${name} is a RangeError naming the option, before the effect starts`, () =>
      Effect.gen(function* () {
        let started = false
        const exit = yield* Effect.exit(
          TestClockDriver.drive(
            Effect.sync(() => {
              started = true
            }),
            options as TestClockDriver.Options
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
        assert.instanceOf(defect, RangeError)
        assert.match(String((defect as RangeError).message), /TestClockDriver\.drive: (step|upTo)/)
        assert.isFalse(started)
      })
    )
  }

  it.effect("R10 a step under 1 ms (1 nano) is a RangeError naming the option and its bound, not a billion moves", () =>
    Effect.gen(function* () {
      for (const [step, shown] of [
        ["1 nano", '"1 nano"'],
        [0.5, "0.5"]
      ] as const) {
        const exit = yield* Effect.exit(TestClockDriver.drive(Effect.as(Effect.sleep("1 second"), "ok"), { step }))
        const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
        assert.instanceOf(defect, RangeError)
        assert.strictEqual(
          (defect as RangeError).message, // as: checked just above
          `TestClockDriver.drive: step must be a duration of at least 1 millisecond (a sleep wakes at its own time whatever the step), got ${shown}`
        )
      }
      // 1 ms is the finest: a 1 s sleep in a thousand moves.
      assert.strictEqual(
        yield* TestClockDriver.drive(Effect.as(Effect.sleep("1 second"), "ok"), { step: "1 millis" }),
        "ok"
      )
    })
  )

  it.effect(
    "R10 R4.2 a wait in real time that a sleeper begins stops the clock at that sleeper: nothing is stamped past the deadline, whatever the step",
    () =>
      Effect.gen(function* () {
        // The driver itself: a sleeper of 5 ms begins a real wait; a step of 7 ms does not move on to 7 meanwhile.
        const start = yield* Clock.currentTimeMillis
        const seen = yield* TestClockDriver.drive(
          Effect.sleep(5).pipe(Effect.andThen(RealTime.sleep(20)), Effect.andThen(Clock.currentTimeMillis)),
          { step: "7 millis" }
        )
        assert.strictEqual(seen - start, 5)
        // Two sleepers of one instant that each begin one: the second is not stamped a step later.
        const again = yield* Clock.currentTimeMillis
        const both = yield* TestClockDriver.drive(
          Effect.all(
            [0, 1].map(() =>
              Effect.sleep(5).pipe(Effect.andThen(RealTime.sleep(20)), Effect.andThen(Clock.currentTimeMillis))
            ),
            { concurrency: 2 }
          ),
          { step: "7 millis" }
        )
        assert.deepStrictEqual(
          both.map((at) => at - again),
          [5, 5]
        )
        // A run whose tool cannot be interrupted: its deadline waits the stop grace, and every event is stamped at it.
        const stubborn = Tool.make({
          name: "stubborn",
          description: "cannot be interrupted",
          input: Schema.Struct({}),
          output: Schema.String,
          handler: () => Effect.as(Effect.uninterruptible(Effect.sleep("1 minute")), "done")
        })
        for (const step of ["3 millis", "7 millis"] as const) {
          const result = yield* TestClockDriver.drive(
            Run.run({ goal: "wait", tools: [stubborn], time: { run: "5 seconds", stopGrace: "30 millis" } }),
            { step, upTo: "1 minute" }
          ).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("stubborn", {})])))
          assert.include(result.detail, "left behind")
          const startedAt = result.timeline[0]?.at ?? 0
          assert.deepStrictEqual(
            [result.elapsedMillis, ...new Set(result.timeline.slice(-6).map((e) => e.at - startedAt))],
            [5_000, 5_000]
          )
          assert.deepStrictEqual(
            Properties.check(result, { runTimeoutMillis: 5_000, maxRecoveries: 8, scheduleRetries: 2 }),
            []
          )
        }
      }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R10 R5.2 a subprocess's whole grace holds the clock still, its polls included, whatever the step", () =>
    Effect.gen(function* () {
      for (const step of ["10 millis", "1 second"] as const) {
        const start = yield* Clock.currentTimeMillis
        // The leader exits on SIGTERM; a member of its group outlives it by 0.4 s, which the grace polls for.
        const at = yield* TestClockDriver.drive(
          Subprocess.run(
            { command: "/bin/sh", args: ["-c", "(trap '' TERM; sleep 0.4) & exec sleep 30"] },
            { graceMillis: 2_000, cgroup: false }
          ).pipe(Effect.timeout("1 second"), Effect.exit, Effect.andThen(Clock.currentTimeMillis)),
          { step, upTo: "1 minute", pace: 20 }
        )
        assert.strictEqual(at - start, 1_000, step)
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R10 a fiber that keeps polling in real time does not hold the clock still: the drive ends", () =>
    Effect.gen(function* () {
      const start = yield* Clock.currentTimeMillis
      const polling = Effect.raceFirst(
        Effect.sleep("100 millis").pipe(Effect.as("slept")),
        Effect.forever(RealTime.sleep(1)).pipe(Effect.as("polled"))
      )
      // A hang here is the test's own timeout.
      const out = yield* TestClockDriver.drive(polling, { upTo: "1 second" })
      assert.strictEqual(out, "slept")
      assert.strictEqual((yield* Clock.currentTimeMillis) - start, 100)
    })
  )

  it.effect(
    "R10 R4 a RealTime.held region that sleeps on the Clock holds it only heldUpTo: the drive ends, and one that never ends is StillRunning naming it",
    () =>
      Effect.gen(function* () {
        // A hang here ends at 3 s of real time, as "hung".
        const bounded = <A, E>(drive: Effect.Effect<A, E>) =>
          Effect.raceFirst(Effect.exit(drive), Effect.as(RealTime.sleep(3_000), "hung" as const))
        const start = yield* Clock.currentTimeMillis
        const slept = yield* bounded(
          TestClockDriver.drive(RealTime.held(Effect.as(Effect.sleep("1 second"), "slept")), {
            upTo: "5 seconds",
            heldUpTo: "50 millis"
          })
        )
        assert.deepStrictEqual(slept, Exit.succeed("slept"))
        assert.strictEqual((yield* Clock.currentTimeMillis) - start, 1_000)
        const never = yield* bounded(
          TestClockDriver.drive(RealTime.held(Effect.never), { upTo: "1 second", heldUpTo: "50 millis" })
        )
        const error = never !== "hung" && Exit.isFailure(never) ? Cause.squash(never.cause) : never
        assert.instanceOf(error, TestClockDriver.StillRunning)
        assert.strictEqual((error as TestClockDriver.StillRunning).heldWaits, 1)
        assert.include((error as TestClockDriver.StillRunning).message, "1 RealTime.held wait(s) still pending")
        // Held work that waits in real time holds the clock the whole time, past heldUpTo.
        const before = yield* Clock.currentTimeMillis
        const polled = yield* bounded(
          TestClockDriver.drive(
            Effect.raceFirst(
              RealTime.held(Effect.as(Effect.repeat(RealTime.sleep(20), { times: 9 }), "held")),
              Effect.as(Effect.sleep("10 millis"), "clock")
            ),
            { heldUpTo: "50 millis" }
          )
        )
        assert.deepStrictEqual(polled, Exit.succeed("held"))
        assert.isBelow((yield* Clock.currentTimeMillis) - before, 10)
      })
  )

  it.effect("R10 options that are no object (null from JavaScript) are a RangeError naming them, not a TypeError", () =>
    Effect.gen(function* () {
      for (const options of [null, "fast"]) {
        let started = false
        const exit = yield* Effect.exit(
          TestClockDriver.drive(
            Effect.sync(() => {
              started = true
            }),
            // A caller's JavaScript: options of whatever type.
            options as unknown as TestClockDriver.Options
          )
        )
        const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
        assert.instanceOf(defect, RangeError)
        assert.match(String((defect as RangeError).message), /TestClockDriver\.drive: options must be an object/)
        assert.isFalse(started)
      }
    })
  )

  it.effect("R10 R4.1 a run that never sleeps ends at the instant it began, whatever the step (review 147)", () =>
    Effect.gen(function* () {
      const echo = Tool.make({
        name: "echo",
        description: "echoes",
        input: Schema.Struct({ i: Schema.Number }),
        output: Schema.String,
        handler: ({ i }) => Effect.succeed(`got ${i}`)
      })
      const script = [
        ...Array.from({ length: 150 }, (_, i) => ScriptedModel.toolCall("echo", { i })),
        ScriptedModel.finalAnswer("done")
      ]
      for (const step of ["1 millis", "1 minute"] as const) {
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "echo",
            tools: [echo],
            limits: { maxIterations: 200, maxToolCalls: 200 },
            time: { run: "10 seconds" }
          }).pipe(Effect.provide(ScriptedModel.layer(script))),
          { step, upTo: "10 minutes" }
        )
        // Before, the clock moved a step each time the run's fiber gave up its turn: run_timeout with a step of a minute.
        assert.deepStrictEqual([result.stopReason, result.elapsedMillis], ["goal_reached", 0], step)
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R10 R4.1 an effect that computes for ever without waiting still meets its deadline under the driver", () =>
    Effect.gen(function* () {
      const spin = Tool.make({
        name: "spin",
        description: "never waits",
        input: Schema.Struct({}),
        output: Schema.String,
        handler: () => Effect.forever(Effect.yieldNow)
      })
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "spin", tools: [spin], time: { run: "200 millis" } }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("spin", {})]))
        ),
        // Past `busyUpTo` of real time computing without a pause, the clock moves again.
        { busyUpTo: "200 millis" }
      )
      assert.strictEqual(result.stopReason, "run_timeout")
    }).pipe(Effect.provide(NodeServices.layer))
  )
})
