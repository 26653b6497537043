import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Exit, Fiber, Layer, Schema } from "effect"
import * as Abortable from "../../src/cancellation/Abortable.ts"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"

const GRACE = 200

interface Settled {
  readonly settlement: Tool.Settlement
  readonly detail: string
}

/** A call context that records what the handler settled. */
const makeContext = (callId = "c1", sideEffect: Tool.SideEffect | "not given" = "read") => {
  const settled: Array<Settled> = []
  const context: Tool.CallContext = {
    runId: "r",
    callId,
    idempotencyKey: `r:${callId}`,
    settle: (settlement, detail) => {
      settled.push({ settlement, detail })
    },
    ...(sideEffect === "not given" ? {} : { sideEffect })
  }
  return { context, settled }
}

/** Sleeps in real time, whatever the clock. */
const nap = (millis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Resolves with `value` after `millis`, whatever the signal says (an unref'd timer). */
const resolveAfter = <A>(millis: number, value: A): Promise<A> =>
  new Promise((resolve) => setTimeout(() => resolve(value), millis).unref())

/** Never resolves; rejects with the signal's reason once it is aborted. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }))

/** Forks `effect`, lets it run `millis` (real time), interrupts it, and times the interruption. */
const interruptAfter = <A, E>(effect: Effect.Effect<A, E>, millis: number) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(effect, { startImmediately: true })
    yield* nap(millis)
    const start = performance.now()
    const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
    return { exit, millis: performance.now() - start }
  })

const failureOf = <A>(exit: Exit.Exit<A, Failure.Failure>): Failure.Failure | undefined => {
  const error = Exit.findErrorOption(exit)
  return error._tag === "Some" ? error.value : undefined
}

describe("Abortable.handler", () => {
  it.live("R5.1 a promise that resolves is the call's output, and nothing is settled", () =>
    Effect.gen(function* () {
      const { context, settled } = makeContext()
      const double = Abortable.handler((n: number) => resolveAfter(5, n * 2))
      assert.strictEqual(yield* double(21, context), 42)
      assert.deepStrictEqual(settled, [])
    })
  )

  it.live("R5.1 a rejection is a typed failure: Permanent tool_failed by default, a Failure as is, or classify", () =>
    Effect.gen(function* () {
      const { context } = makeContext()
      const rejects = (error: unknown) => () => Promise.reject(error)
      const byDefault = failureOf(
        yield* Effect.exit(Abortable.handler(rejects(new TypeError("bad\nstack")))(0, context))
      )
      assert.strictEqual(byDefault?._tag, "Permanent")
      assert.strictEqual(byDefault?.code, "tool_failed")
      assert.strictEqual(byDefault?.source, "tool")
      assert.strictEqual(byDefault?.hint, "TypeError")
      const retryable = new Failure.Retryable({
        source: "tool",
        category: "rate_limited",
        code: "rate_limited",
        attempts: 1,
        hint: "slow down"
      })
      const passed = failureOf(yield* Effect.exit(Abortable.handler(rejects(retryable))(0, context)))
      assert.strictEqual(passed, retryable)
      const classified = failureOf(
        yield* Effect.exit(
          Abortable.handler(rejects(new Error("503")), {
            classify: (error) => new Failure.Retryable({ ...retryable, hint: String(error) })
          })(0, context)
        )
      )
      assert.strictEqual(classified?._tag, "Retryable")
      assert.strictEqual(classified?.hint, "Error: 503")
    })
  )

  it.live("R5.1 a synchronous throw from the function is a typed failure", () =>
    Effect.gen(function* () {
      const { context, settled } = makeContext()
      const throws = Abortable.handler((_: number): Promise<number> => {
        throw new RangeError("out of range")
      })
      const failure = failureOf(yield* Effect.exit(throws(0, context)))
      assert.strictEqual(failure?._tag, "Permanent")
      assert.strictEqual(failure?.hint, "RangeError")
      assert.deepStrictEqual(settled, [])
    })
  )

  it("R5.1 a grace that is not a finite duration >= 0 is refused when the handler is built", () => {
    assert.throws(() => Abortable.handler(() => Promise.resolve(1), { grace: "Infinity" }), RangeError)
    assert.throws(() => Abortable.handler(() => Promise.resolve(1), { grace: -1 }), RangeError)
    assert.throws(() => Abortable.handler(() => Promise.resolve(1), { grace: Number.NaN }), RangeError)
  })

  it.live("R5.1 interruption aborts the signal with an AbortError naming the call; stopping on it is cancelled", () =>
    Effect.gen(function* () {
      const { context, settled } = makeContext("call_42")
      let seen: AbortSignal | undefined
      const stops = Abortable.handler((_: undefined, signal) => {
        seen = signal
        return untilAborted(signal)
      })
      const { exit, millis } = yield* interruptAfter(stops(undefined, context), 10)
      assert.isTrue(Exit.hasInterrupts(exit))
      assert.isTrue(seen?.aborted)
      const reason: unknown = seen?.reason
      assert.instanceOf(reason, DOMException)
      assert.strictEqual((reason as DOMException).name, "AbortError")
      assert.include((reason as DOMException).message, "tool call call_42 was cancelled")
      assert.deepStrictEqual(
        settled.map((s) => s.settlement),
        ["cancelled"]
      )
      assert.match(settled[0]?.detail ?? "", /stopped on the abort signal \(AbortError\)/)
      assert.isBelow(millis, 50, "a cooperating promise does not wait for the grace period")
    })
  )

  it.live(
    "R12 R5.1 abort listeners that throw are caught: never an uncaught exception, the call cancelled (review 167)",
    () =>
      Effect.gen(function* () {
        const uncaught: Array<unknown> = []
        const onUncaught = (error: unknown) => uncaught.push(error)
        process.on("uncaughtException", onUncaught)
        const { context, settled } = makeContext("call_7")
        const heard: Array<string> = []
        const removed = () => heard.push("removed")
        const throwing = Abortable.handler(
          (_: undefined, signal) =>
            new Promise<string>((_resolve, reject) => {
              signal.addEventListener("abort", () => {
                reject(signal.reason)
                throw new Error("listener broke")
              })
              signal.addEventListener("abort", {
                handleEvent: () => {
                  heard.push("object")
                  throw new Error("object listener broke")
                }
              })
              signal.onabort = () => {
                heard.push("onabort")
                throw new Error("onabort broke")
              }
              // A listener taken off is not called.
              signal.addEventListener("abort", removed)
              signal.removeEventListener("abort", removed)
            })
        )
        const { exit } = yield* interruptAfter(throwing(undefined, context), 10)
        // Node rethrows a listener's error on the next tick: wait past it.
        yield* nap(50)
        process.off("uncaughtException", onUncaught)
        assert.isTrue(Exit.hasInterrupts(exit))
        // Before: each throw an uncaught exception, which ends a process outside vitest.
        assert.deepStrictEqual(uncaught.map(String), [])
        assert.deepStrictEqual(heard.sort(), ["object", "onabort"])
        assert.deepStrictEqual(
          settled.map((s) => s.settlement),
          ["cancelled"]
        )
      })
  )

  it.live(
    "R12 R5.1 an async abort listener whose cleanup rejects reaches neither process handler (reviews 169, 171, 172)",
    () =>
      Effect.gen(function* () {
        const reached: Array<string> = []
        const onUncaught = (error: unknown) => reached.push(`uncaught ${String(error)}`)
        const onUnhandled = (error: unknown) => reached.push(`unhandled ${String(error)}`)
        process.on("uncaughtException", onUncaught)
        process.on("unhandledRejection", onUnhandled)
        const { context, settled } = makeContext("call_8")
        const cleanups = Abortable.handler(
          (_: undefined, signal) =>
            new Promise<string>((_resolve, reject) => {
              signal.addEventListener("abort", async () => {
                reject(signal.reason)
                await Promise.resolve()
                throw new Error("async cleanup broke")
              })
              signal.onabort = async () => {
                throw new Error("async onabort broke")
              }
              // A thenable whose own `then` gives a promise that rejects (review 171).
              // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose, as hostile code returns one
              signal.addEventListener("abort", () => ({ then: async () => Promise.reject(new Error("then rejected")) }))
              // One level down: a thenable whose `then` gives a thenable whose `then` rejects (review 172).
              signal.addEventListener("abort", () => ({
                // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose, as hostile code returns one
                then: () => ({ then: async () => Promise.reject(new Error("inner then rejected")) })
              }))
              // A `then` that gives itself: followed a few levels, then let be.
              const loops = {
                // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose, as hostile code returns one
                then: () => loops
              }
              signal.addEventListener("abort", () => loops)
              // No listener at all, as the platform takes it: nothing added, nothing thrown.
              signal.addEventListener("abort", undefined as never)
              signal.removeEventListener("abort", undefined as never)
            })
        )
        const { exit } = yield* interruptAfter(cleanups(undefined, context), 10)
        yield* nap(50)
        process.off("uncaughtException", onUncaught)
        process.off("unhandledRejection", onUnhandled)
        assert.isTrue(Exit.hasInterrupts(exit))
        // Before: both rejections unhandled, which ends a process under Node's default.
        assert.deepStrictEqual(reached, [])
        assert.deepStrictEqual(
          settled.map((s) => s.settlement),
          ["cancelled"]
        )
      })
  )

  it.live(
    "R5.2 R3.8 a write or external action that stopped on the signal may have taken effect: outcome_unknown",
    () =>
      Effect.gen(function* () {
        for (const sideEffect of ["write", "external", "not given"] as const) {
          const { context, settled } = makeContext("c1", sideEffect)
          const stops = Abortable.handler((_: undefined, signal) => untilAborted(signal))
          yield* interruptAfter(stops(undefined, context), 10)
          assert.deepStrictEqual(
            settled.map((s) => s.settlement),
            ["outcome_unknown"]
          )
          assert.match(settled[0]?.detail ?? "", /stopped on the abort signal .*may or may not have taken effect/)
        }
        // A read whose rejection says its outcome is unknown is not taken for cancelled either.
        const { context, settled } = makeContext("c2", "read")
        const unknown = Abortable.handler((_: undefined, signal) =>
          untilAborted(signal).catch(() => {
            throw new Failure.UnknownOutcome({
              source: "tool",
              category: "connection",
              code: "lost",
              attempts: 1,
              hint: "lost"
            })
          })
        )
        yield* interruptAfter(unknown(undefined, context), 10)
        assert.deepStrictEqual(
          settled.map((s) => s.settlement),
          ["outcome_unknown"]
        )
      })
  )

  it.live("R5.2 what the function tells settle itself stands, unless its promise ignored the signal", () =>
    Effect.gen(function* () {
      const told = makeContext("c1", "external")
      const knows = Abortable.handler((_: undefined, signal, context) =>
        untilAborted(signal).catch((error: unknown) => {
          context.settle("cancelled", "the bank says the payment was never taken")
          throw error
        })
      )
      yield* interruptAfter(knows(undefined, told.context), 10)
      assert.deepStrictEqual(told.settled.at(-1), {
        settlement: "cancelled",
        detail: "the bank says the payment was never taken"
      })
      const ignoring = makeContext("c2", "read")
      const ignores = Abortable.handler(
        (_: undefined, _signal, context) => {
          context.settle("cancelled", "said too early")
          return resolveAfter(1_000, "late")
        },
        { grace: 20 }
      )
      yield* interruptAfter(ignores(undefined, ignoring.context), 10)
      assert.strictEqual(ignoring.settled.at(-1)?.settlement, "outcome_unknown")
    })
  )

  it.live("R5.1 a promise that finishes during the grace period is completed; one that ignores it, unknown", () =>
    Effect.gen(function* () {
      const finishing = makeContext()
      const finishes = Abortable.handler(() => resolveAfter(60, "done"), { grace: GRACE })
      const a = yield* interruptAfter(finishes(undefined, finishing.context), 20)
      assert.deepStrictEqual(
        finishing.settled.map((s) => s.settlement),
        ["completed"]
      )
      assert.isBelow(a.millis, GRACE, "the decision is made as soon as the promise settles")

      const ignoring = makeContext()
      const ignores = Abortable.handler(() => resolveAfter(5_000, "late"), { grace: GRACE })
      const b = yield* interruptAfter(ignores(undefined, ignoring.context), 20)
      assert.deepStrictEqual(
        ignoring.settled.map((s) => s.settlement),
        ["outcome_unknown"]
      )
      assert.match(ignoring.settled[0]?.detail ?? "", /may still be running in this process/)
      assert.isAtLeast(b.millis, GRACE - 2)
      assert.isBelow(b.millis, GRACE + 50, "the interruption never waits much longer than the grace period")
    })
  )

  it.effect("R4 the grace period runs in real time, even on a TestClock that never moves", () =>
    Effect.gen(function* () {
      const { context, settled } = makeContext()
      const ignores = Abortable.handler(() => resolveAfter(5_000, 1), { grace: 30 })
      const fiber = yield* Effect.forkChild(ignores(undefined, context), { startImmediately: true })
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(
        settled.map((s) => s.settlement),
        ["outcome_unknown"]
      )
    })
  )

  it.live("R5.1 a promise that rejects after the grace period is not an unhandled rejection", () =>
    Effect.gen(function* () {
      const unhandled: Array<unknown> = []
      const listener = (reason: unknown) => {
        unhandled.push(reason)
      }
      process.on("unhandledRejection", listener)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.off("unhandledRejection", listener)))
      const { context, settled } = makeContext()
      let rejected = false
      const late = Abortable.handler(
        () =>
          new Promise<never>((_, reject) =>
            setTimeout(() => {
              rejected = true
              reject(new Error("too late"))
            }, 60)
          ),
        { grace: 20 }
      )
      yield* interruptAfter(late(undefined, context), 5)
      assert.strictEqual(settled[0]?.settlement, "outcome_unknown")
      // The rejection happens now, long after the call ended; give Node time to report it.
      yield* nap(120)
      assert.isTrue(rejected)
      assert.deepStrictEqual(unhandled, [])
    }).pipe(Effect.scoped)
  )
})

// ---------------------------------------------------------------------------------
// In a run
// ---------------------------------------------------------------------------------

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const interruptedEvents = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.flatMap((e) => (e._tag === "tool.interrupted" ? [e] : []))

const Mode = Schema.Struct({ mode: Schema.Literals(["finish", "stop", "ignore"]) })

/** One in-process tool in three behaviours: finish in 100 ms, stop on the signal, ignore it for 5 s. */
const makeWorker = (
  options: {
    readonly timeout?: Duration.Input
    readonly onEnter?: () => void
    readonly sideEffect?: Tool.SideEffect
  } = {}
) =>
  Tool.make({
    name: "worker",
    description: "works in process",
    input: Mode,
    output: Schema.String,
    sideEffect: options.sideEffect ?? "write",
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
    handler: Abortable.handler(
      ({ mode }, signal) => {
        options.onEnter?.()
        return mode === "finish"
          ? resolveAfter(100, "done")
          : mode === "stop"
            ? untilAborted(signal)
            : resolveAfter(5_000, "late")
      },
      { grace: GRACE }
    )
  })

describe("Abortable.handler in a run", () => {
  it.live("R5.1 seeds exercise in process: one call completed, one cancelled, one outcome unknown", () => {
    let entered = 0
    let allEntered: () => void = () => {}
    const ready = new Promise<void>((resolve) => {
      allEntered = resolve
    })
    const worker = makeWorker({ onEnter: () => ++entered === 3 && allEntered(), sideEffect: "read" })
    return Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [worker], concurrency: 3 })
      yield* Effect.promise(() => ready)
      const started = performance.now()
      // At 50 ms the 100 ms call is halfway: it finishes during the grace period.
      yield* nap(50)
      const cancelled = performance.now()
      const result = yield* handle.cancel
      const millis = performance.now() - cancelled
      assert.isBelow(cancelled - started, 100, "the cancel came before the 100 ms call finished")
      assert.strictEqual(result.status, "cancelled")
      assert.strictEqual(result.stopReason, "cancelled")
      const settled = Object.fromEntries(interruptedEvents(result.timeline).map((e) => [e.callId, e.settlement]))
      assert.deepStrictEqual(settled, { finishes: "completed", stops: "cancelled", ignores: "outcome_unknown" })
      assert.isFalse(result.timeline.some((e) => e._tag === "tool.succeeded"))
      // The call that ignores the signal holds the result back for the grace period, no more.
      assert.isAtLeast(millis, GRACE - 2)
      assert.isBelow(millis, GRACE + 50)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        withScript([
          ScriptedModel.toolCalls(
            ["worker", { mode: "finish" }, "finishes"],
            ["worker", { mode: "stop" }, "stops"],
            ["worker", { mode: "ignore" }, "ignores"]
          )
        ])
      )
    )
  })

  it.live("R5.2 R3.8 a cancelled external call whose promise stopped on the signal is listed in pendingActions", () =>
    Effect.gen(function* () {
      let entered: () => void = () => {}
      const inFlight = new Promise<void>((resolve) => {
        entered = resolve
      })
      const worker = makeWorker({ sideEffect: "external", onEnter: () => entered() })
      const result = yield* Effect.gen(function* () {
        const handle = yield* Run.start({ goal: "x", tools: [worker] })
        yield* Effect.promise(() => inFlight)
        return yield* handle.cancel
      }).pipe(Effect.scoped)
      assert.strictEqual(result.stopReason, "cancelled")
      assert.deepStrictEqual(
        interruptedEvents(result.timeline).map((e) => e.settlement),
        ["outcome_unknown"]
      )
      assert.deepStrictEqual(
        result.pendingActions.map((a) => a.callId),
        ["pays"]
      )
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("worker", { mode: "stop" }, "pays")])))
  )

  it.live("R4 R5.1 at the run deadline a promise that ignores the signal is outcome_unknown, after the grace", () =>
    Effect.gen(function* () {
      const start = performance.now()
      const result = yield* Run.run({ goal: "x", tools: [makeWorker()], time: { run: "300 millis" } })
      const millis = performance.now() - start
      assert.strictEqual(result.stopReason, "run_timeout")
      const interrupted = interruptedEvents(result.timeline)
      assert.deepStrictEqual(
        interrupted.map((e) => e.settlement),
        ["outcome_unknown"]
      )
      assert.isAtLeast(millis, 300 + GRACE - 2)
      assert.isBelow(millis, 300 + GRACE + 150)
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("worker", { mode: "ignore" })])))
  )

  it.live(
    "R4 R5.1 R3.8 a tool timeout on a cooperating write tool: the promise stops, the outcome is still unknown",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "x", tools: [makeWorker({ timeout: "100 millis" })] })
        assert.deepStrictEqual(
          interruptedEvents(result.timeline).map((e) => e.settlement),
          ["outcome_unknown"]
        )
        // The failure names the layer that fired (R4.3).
        const failed = result.timeline.find((e) => e._tag === "tool.failed")
        const failure = failed?._tag === "tool.failed" ? failed.error.failure : undefined
        assert.strictEqual(failure?.code, "tool_timeout")
        // It stopped on the signal, so nothing is left running; but a write that was cut off
        // may still have taken effect: the outcome is unknown, to be reconciled (R3.8).
        assert.strictEqual(failure?.classification, "unknown")
        assert.strictEqual(failure?.timeout?.mayHaveSideEffects, true)
        assert.strictEqual(result.stopReason, "unknown_outcome")
        assert.lengthOf(result.pendingActions, 1)
      }).pipe(
        Effect.provide(withScript([ScriptedModel.toolCall("worker", { mode: "stop" }), ScriptedModel.finalAnswer("x")]))
      )
  )
})
