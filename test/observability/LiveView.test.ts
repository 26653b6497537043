import * as v8 from "node:v8"
import * as vm from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as LiveView from "../../src/observability/LiveView.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunObserver from "../../src/run/RunObserver.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { dies, layers, pay, payThenAnswer } from "../support/restart.ts"

/** A tool that takes 300 ms, so that a frame drawn while it runs has it in flight. */
const slowEcho = Tool.make({
  name: "slow_echo",
  description: "Echoes after 300 ms",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.String,
  sideEffect: "none",
  idempotent: true,
  handler: ({ text }) => Effect.as(Effect.sleep("300 millis"), text)
})

const options = {
  goal: "echo twice",
  tools: [slowEcho],
  limits: { maxIterations: 5, maxToolCalls: 4 },
  time: { run: "10 seconds" }
} as const

const script = [
  ScriptedModel.toolCall("slow_echo", { text: "a" }),
  ScriptedModel.toolCall("slow_echo", { text: "b" }),
  ScriptedModel.finalAnswer("done")
]

/** A tool that waits the milliseconds it is given. */
const waits = Tool.make({
  name: "wait",
  description: "waits",
  input: Schema.Struct({ millis: Schema.Number }),
  output: Schema.String,
  sideEffect: "read",
  handler: ({ millis }) => Effect.as(Effect.sleep(millis), "ok")
})

/** A run that waits `millis` in one call, then answers. */
const runFor = (runId: string, millis: number) =>
  Run.run({ goal: runId, runId, tools: [waits] }).pipe(
    Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("wait", { millis }), ScriptedModel.finalAnswer("done")]))
  )

/** Runs with the live view under the layer, writing into `out`. */
const viewed = (out: Array<string>, tty: boolean) =>
  Run.run(options).pipe(
    TestClockDriver.drive,
    Effect.provide(ScriptedModel.layer(script)),
    Effect.provide(LiveView.layer({ write: (text) => out.push(text), tty }))
  )

/** The engine's collector, to tell whether what a view was given is still held (review 130). */
const collect = (): (() => void) => {
  v8.setFlagsFromString("--expose-gc")
  return vm.runInNewContext("gc")
}

/** Lets the current job end (a `WeakRef` keeps its target through it), then collects. */
const collected = async (gc: () => void) => {
  await new Promise((resolve) => setTimeout(resolve, 0))
  gc()
  gc()
}

describe("LiveView", () => {
  it.effect("plain mode (not a TTY) prints one line per event, then the final frame", () =>
    Effect.gen(function* () {
      const out: Array<string> = []
      const result = yield* viewed(out, false)
      const startedAt = result.timeline[0]?.at ?? 0
      assert.deepStrictEqual(
        out.slice(0, result.timeline.length),
        result.timeline.map((e) => `${LiveView.line(e, startedAt)}\n`)
      )
      assert.strictEqual(out.length, result.timeline.length + 1)
      const last = out[out.length - 1] ?? ""
      assert.include(last, "ended  completed  goal_reached")
      for (const text of out) assert.notInclude(text, "\x1b[")
    })
  )

  it.effect(
    "the frame while a tool runs: phase, iteration, budgets beside their limits, countdowns, the call in flight",
    () =>
      Effect.gen(function* () {
        const result = yield* viewed([], false)
        const events = result.timeline
        const attempted = events.findIndex((e) => e._tag === "tool.started")
        const prefix = events.slice(0, attempted + 1)
        const started = events[0]
        assert.strictEqual(started?._tag, "run.started")
        if (started?._tag !== "run.started") return
        const at = (prefix[prefix.length - 1]?.at ?? 0) + 100
        const lines = LiveView.frame(prefix, at)
        assert.include(lines[0], `run ${result.runId}  tool_executing  iteration 1`)
        assert.include(lines[0], `deadline in ${((started.deadlineAt - at) / 1000).toFixed(1)}s`)
        assert.include(lines[1], "iterations 1/5")
        assert.include(lines[1], "toolCalls 1/4")
        assert.match(lines[2] ?? "", /^in flight {2}tool_call slow_echo \(\S+\) attempt 1 {2}for 0\.1s/)
        // The frame is a function of the events and the time: later, the countdown is lower.
        const later = LiveView.frame(prefix, at + 2000)
        assert.include(later[0], `deadline in ${((started.deadlineAt - at - 2000) / 1000).toFixed(1)}s`)
        assert.deepStrictEqual(LiveView.frame(prefix, at), lines)
      })
  )

  it.effect("TTY mode redraws the frame in place: cursor up over the last frame, clear, the new one", () =>
    Effect.gen(function* () {
      const out: Array<string> = []
      const result = yield* viewed(out, true)
      // Held back to one frame per 100 ms of real time: at most one a event.
      assert.isAtLeast(out.length, 2)
      assert.isAtMost(out.length, result.timeline.length)
      assert.notInclude(out[0], "\x1b[")
      for (let i = 1; i < out.length; i++) {
        // The frame before: one line for each newline it wrote (the cursor moves write none).
        const previous = ((out[i - 1] ?? "").match(/\n/g) ?? []).length
        assert.isTrue((out[i] ?? "").startsWith(`\x1b[${previous}F\x1b[J`), `redraw ${i}`)
      }
      assert.include(out[out.length - 1], "ended  completed  goal_reached")
      assert.strictEqual(LiveView.redraw(2, ["a", "b", "c"]), "\x1b[2F\x1b[Ja\nb\nc\n")
      assert.strictEqual(LiveView.redraw(0, ["a"]), "a\n")
    })
  )

  it.effect(
    "R13 on a TTY, events at one instant draw one frame, and the ending its own: two frames for a whole run",
    () =>
      Effect.gen(function* () {
        const instant = Tool.make({
          name: "instant",
          description: "answers at once",
          input: Schema.Struct({ n: Schema.Number }),
          output: Schema.String,
          handler: ({ n }) => Effect.succeed(`seen ${n}`)
        })
        const out: Array<string> = []
        const result = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "many", tools: [instant], limits: { maxIterations: 40 } })
          yield* LiveView.watch(handle, { write: (text) => out.push(text), tty: true })
          return yield* handle.result
        }).pipe(
          Effect.scoped,
          Effect.provide(
            ScriptedModel.layerFunction((request) =>
              request.iteration <= 30
                ? ScriptedModel.toolCall("instant", { n: request.iteration })
                : ScriptedModel.finalAnswer("done")
            )
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.isAbove(result.timeline.length, 150)
        // The TestClock stands still: the first event's frame, then the ending, drawn at once.
        assert.strictEqual(out.length, 2)
        assert.include(out[0], `run ${result.runId}`)
        assert.include(out[1], "ended  completed  goal_reached")
      })
  )

  it.effect("R13 on a TTY a frame held back is drawn on the next tick: the call in flight shows while it runs", () =>
    Effect.gen(function* () {
      const out: Array<string> = []
      const result = yield* Effect.gen(function* () {
        const handle = yield* Run.start(options)
        yield* LiveView.watch(handle, { write: (text) => out.push(text), tty: true })
        return yield* handle.result
      }).pipe(Effect.scoped, TestClockDriver.drive, Effect.provide(ScriptedModel.layer(script)))
      assert.isBelow(out.length, result.timeline.length)
      // Each call's events came at one instant, then it ran for 300 ms: a tick drew it in flight.
      const inFlight = out.filter((text) => /in flight {2}tool_call slow_echo \(\S+\) attempt 1/.test(text))
      assert.isAtLeast(inFlight.length, 2)
      assert.include(out[out.length - 1], "ended  completed  goal_reached")
    })
  )

  it.effect("R9 R13 a resumed run is shown from its resume on, and its last frame says how it ended", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      yield* dies({ crashAt: { commit: 3, when: "before" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
      const out: Array<string> = []
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
        Effect.provide(payThenAnswer),
        Effect.provide(LiveView.layer({ tty: false, write: (text) => out.push(text) }))
      )
      assert.strictEqual(resumed.status, "completed")
      assert.include(out[0], "run.resumed")
      const last = (out[out.length - 1] ?? "").split("\n")
      assert.match(last[0] ?? "", /^run r1 {2}\w+ {2}iteration \d+ {2}elapsed \d+\.\ds since its resume$/)
      assert.strictEqual(last[1], "budgets  counted in the run's log: this view began after its start")
      assert.include(last[2], "ended  completed  goal_reached")
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 R13 the first frame of a run resumed inside its batch says it resumed, not `created` in iteration 0 (review 166)",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        // The process dies with the payment's handler running (iteration 1, tool_executing).
        yield* dies(
          { crashAt: { commit: 4, when: "before" } },
          { goal: "pay 10", tools: [payment.tool] },
          payThenAnswer
        )
        const written: Array<string> = []
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
          Effect.provide(payThenAnswer),
          Effect.provide(LiveView.layer({ tty: true, columns: 200, write: (text) => written.push(text) }))
        )
        assert.strictEqual(resumed.status, "completed")
        const first = written[0] ?? ""
        assert.include(first, "run r1  resumed  iteration ?", first)
      }).pipe(Effect.provide(layers))
  )

  it.live("R13 two runs at once on one TTY: one block of frames, and each run's last frame stays on the screen", () =>
    Effect.gen(function* () {
      // A terminal as far as the view uses one: text, line breaks, cursor up (ESC[nF), clear below (ESC[J).
      const screen: Array<string> = [""]
      let row = 0
      const esc = String.fromCharCode(27)
      const pieces = new RegExp(`(${esc}\\[\\d+F|${esc}\\[J|\\n)`)
      const cursorUp = new RegExp(`^${esc}\\[(\\d+)F$`)
      const write = (text: string) => {
        for (const part of text.split(pieces)) {
          const up = cursorUp.exec(part)
          if (up !== null) row = Math.max(0, row - Number(up[1]))
          else if (part === `${esc}[J`) screen.splice(row, screen.length - row, "")
          else if (part === "\n") screen[++row] ??= ""
          else screen[row] = `${screen[row] ?? ""}${part}`
        }
      }
      const results = yield* Effect.all([runFor("run-a", 50), runFor("run-b", 250)], { concurrency: 2 }).pipe(
        Effect.provide(LiveView.layer({ tty: true, write }))
      )
      assert.deepStrictEqual(
        results.map((r) => r.status),
        ["completed", "completed"]
      )
      const shown = screen.join("\n")
      assert.strictEqual((shown.match(/ended {2}completed {2}goal_reached/g) ?? []).length, 2, shown)
      assert.include(shown, "run run-a")
      assert.include(shown, "run run-b")
      assert.notInclude(shown, "in flight", "no run is shown still going once both ended")
    })
  )

  it.live("R12 R13 a frame costs the run a tenth of its time at most, however slow it is to draw", () =>
    Effect.gen(function* () {
      // A slow terminal: each frame takes 40 ms to write; a run of 40 steps of 20 ms.
      const frameMillis = 40
      let frames = 0
      const write = () => {
        frames++
        const until = Date.now() + frameMillis
        while (Date.now() < until) {}
      }
      const steps = 40
      const waits = Tool.make({
        name: "wait",
        description: "waits",
        input: Schema.Struct({ i: Schema.Number }),
        output: Schema.String,
        sideEffect: "read",
        idempotent: true,
        handler: ({ i }) => Effect.as(Effect.sleep("20 millis"), `${i}`)
      })
      const calls = Array.from({ length: steps }, (_, i) => ScriptedModel.toolCall("wait", { i }))
      const started = Date.now()
      const result = yield* Run.run({
        goal: "g",
        tools: [waits],
        limits: { maxIterations: 50, maxToolCalls: 50 }
      }).pipe(
        Effect.provide(ScriptedModel.layer([...calls, ScriptedModel.finalAnswer("done")])),
        Effect.provide(LiveView.layer({ tty: true, write }))
      )
      const took = Date.now() - started
      assert.strictEqual(result.status, "completed")
      // Frames at most every 9 frames' time (360 ms), besides the first and the last: every 100 ms, they took half the run.
      assert.isAtMost(frames, Math.floor(took / (9 * frameMillis)) + 2, `${frames} frames in ${took} ms`)
    })
  )

  it.live(
    "R12 R13 runs ending together on a TTY: each writes its last frame, the others' block waits its turn (review 187)",
    () =>
      Effect.gen(function* () {
        const writes: Array<string> = []
        const runs = 200
        const started = Date.now()
        const results = yield* Effect.all(
          Array.from({ length: runs }, (_, i) => runFor(`run-${i}`, 100)),
          { concurrency: "unbounded" }
        ).pipe(Effect.provide(LiveView.layer({ tty: true, write: (text) => writes.push(text) })))
        const took = Date.now() - started
        assert.isTrue(results.every((result) => result.status === "completed"))
        // Every run's last frame is written.
        assert.strictEqual(writes.join("").match(/ended {2}completed/g)?.length, runs)
        // A write of several runs' frames is a block, drawn at most once a frame interval (100 ms).
        // Before, every run's end redrew all the others: 200 such writes, 61,000 lines, and runs
        // that ended later ran into their deadlines.
        const blocks = writes.filter((text) => (text.match(/run run-/g)?.length ?? 0) > 1).length
        assert.isAtMost(blocks, Math.floor(took / 100) + 2, `${blocks} blocks in ${took} ms`)
      })
  )

  it.live("R13 the block of runs going fits the terminal's height, less a row for the cursor (review 187)", () =>
    Effect.gen(function* () {
      const writes: Array<string> = []
      const echo = Tool.make({
        name: "echo",
        description: "echo",
        input: Schema.Struct({ text: Schema.String }),
        output: Schema.String,
        sideEffect: "none",
        idempotent: true,
        handler: ({ text }) => Effect.as(Effect.sleep("20 millis"), text)
      })
      const one = (i: number) =>
        Run.run({ goal: "g", runId: `run-${i}`, tools: [echo], limits: { maxIterations: 10, maxToolCalls: 100 } }).pipe(
          Effect.provide(
            ScriptedModel.layerFunction((request) =>
              ScriptedModel.toolCall("echo", { text: `${request.messages.length}` })
            )
          )
        )
      yield* Effect.all(
        Array.from({ length: 12 }, (_, i) => one(i)),
        { concurrency: "unbounded" }
      ).pipe(Effect.provide(LiveView.layer({ write: (text) => writes.push(text), tty: true, columns: 80, rows: 24 })))
      // Twelve runs take 36 rows or more: before, the block was redrawn with the cursor 36 rows up.
      for (const text of writes) {
        // ESC [ n F: the cursor n rows up.
        assert.isAtMost(text.startsWith("\u001b[") ? Number.parseInt(text.slice(2), 10) : 0, 23)
      }
      assert.isTrue(writes.some((text) => /… \d+ more runs going/.test(text)))
    })
  )

  it.live(
    "R12 a write that throws never takes the process down, on the TTY's countdown timer either (review 120)",
    () =>
      Effect.gen(function* () {
        const uncaught: Array<unknown> = []
        const count = (error: unknown) => uncaught.push(error)
        process.on("uncaughtException", count)
        const writes = { count: 0 }
        const result = yield* Run.run({ ...options, tools: [slowEcho] }).pipe(
          Effect.provide(ScriptedModel.layer(script)),
          Effect.provide(
            LiveView.layer({
              tty: true,
              refresh: 100,
              write: () => {
                writes.count += 1
                throw new Error("the terminal is gone")
              }
            })
          ),
          Effect.ensuring(Effect.sync(() => process.off("uncaughtException", count)))
        )
        // Let the last ticks fire before counting.
        yield* Effect.sleep("250 millis")
        assert.strictEqual(result.status, "completed", result.detail)
        assert.isAbove(writes.count, 2)
        assert.deepStrictEqual(uncaught, [])
      })
  )

  it.effect("R12 a frame's lines are cut to the terminal's width, so that it is redrawn in place", () =>
    Effect.gen(function* () {
      const out: Array<string> = []
      yield* Run.run(options).pipe(
        TestClockDriver.drive,
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(LiveView.layer({ tty: true, columns: 40, write: (text) => out.push(text) }))
      )
      // Each write is a frame, after the cursor's move up and the clear (see `redraw`).
      const frameOf = (chunk: string) => {
        const cleared = chunk.indexOf("\x1b[J")
        return cleared < 0 ? chunk : chunk.slice(cleared + 3)
      }
      const lines = out.flatMap((chunk) => frameOf(chunk).split("\n"))
      assert.isAbove(lines.length, 3)
      for (const line of lines) assert.isAtMost([...line].length, 39, line)
      assert.isTrue(lines.some((line) => line.endsWith("…")))
    })
  )

  it.effect("R12 a refresh that is no number of milliseconds from 100 to a day is a typed InvalidOptions", () =>
    Effect.gen(function* () {
      for (const refresh of [0, -5, 99, Number.NaN, Number.POSITIVE_INFINITY, 1e12]) {
        const error = yield* Effect.flip(
          Run.run(options).pipe(
            Effect.provide(ScriptedModel.layer(script)),
            Effect.provide(LiveView.layer({ tty: true, refresh, write: () => {} }))
          )
        )
        assert.instanceOf(error, LiveView.InvalidOptions)
        assert.include(error.message, "refresh")
      }
    })
  )

  it.effect("watch shows one started run until it ends", () =>
    Effect.gen(function* () {
      const out: Array<string> = []
      const result = yield* Effect.gen(function* () {
        const handle = yield* Run.start(options)
        yield* LiveView.watch(handle, { write: (text) => out.push(text), tty: false })
        return yield* handle.result
      }).pipe(Effect.scoped, TestClockDriver.drive, Effect.provide(ScriptedModel.layer(script)))
      assert.strictEqual(out.length, result.timeline.length + 1)
      assert.include(out[out.length - 1], "ended  completed")
    })
  )

  it("R12 R13 a LiveView without a TTY lets each finished run go (review 130)", async () => {
    const gc = collect()
    const view = await Effect.runPromise(LiveView.observer({ write: () => {}, tty: false }))
    // A run that ends under the view: `run.finished`, then settled.
    const finished = await Effect.runPromise(
      Run.run(options).pipe(
        TestClockDriver.drive,
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(RunObserver.layer(Effect.succeed(view))),
        Effect.map((result) => new WeakRef(result.timeline[result.timeline.length - 1] ?? {})),
        Effect.provide(TestClock.layer())
      )
    )
    // A run taken away: some events, no `run.finished`, then settled.
    const taken = await Effect.runPromise(
      Effect.gen(function* () {
        const result = yield* Run.run(options).pipe(TestClockDriver.drive, Effect.provide(ScriptedModel.layer(script)))
        const one = view.attach(result.runId)
        const events = result.timeline.slice(0, 3).map((event) => ({ ...event }))
        for (const event of events) one.event(event)
        yield* one.settled
        return new WeakRef(events[events.length - 1] ?? {})
      }).pipe(Effect.provide(TestClock.layer()))
    )
    await collected(gc)
    assert.isUndefined(finished.deref(), "a finished run's events are still held by the view")
    assert.isUndefined(taken.deref(), "a run taken away is still held by the view")
    // The view itself lives on: only the runs it showed are let go.
    assert.isFunction(view.attach)
  })
})
