/**
 * Loop benchmark: `npm run bench` (node --expose-gc bench/loop.ts).
 *
 * 1. Per-step cost of a full `Run.run` (default policies, schema validation, timeline)
 *    with a zero-latency scripted model and a no-op tool, at K=10 and K=200 steps.
 * 2. The same calls in a minimal hand-written Effect loop, and the ratio run/minimal.
 * 3. Growth: per-step cost at K=200 over per-step cost at K=10.
 * 4. Retained heap per suspended run: 10,000 runs parked inside a tool handler.
 * 5. Heap growth per completed step: runs parked at iteration 1, 5 and 20, and the slope.
 *
 * Prints figures, targets and PASS/MISS; it never fails on a missed target.
 * Options: `--only=steps` or `--only=memory` runs one part; `--rounds=N` changes the
 * number of measured rounds of the step benchmark.
 */
import { NodeServices } from "@effect/platform-node"
import { Deferred, Effect, Exit, Fiber, Schema, Scope } from "effect"
import * as Model from "../src/model/Model.ts"
import * as Run from "../src/run/Run.ts"
import type * as RunResult from "../src/run/RunResult.ts"
import * as ScriptedModel from "../src/testing/ScriptedModel.ts"
import * as Tool from "../src/tools/Tool.ts"
import { settledHeap } from "./heap.ts"
import { slopeBench } from "./slope.ts"
import { median, quantile } from "./stats.ts"

// ---------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------

const argValue = (name: string): string | undefined => {
  const prefix = `--${name}=`
  return process.argv.find((a) => a.startsWith(prefix))?.slice(prefix.length)
}

const only = argValue("only")
const ROUNDS = Number(argValue("rounds") ?? 12)
/** Time spent per case and round; cases are interleaved round by round against drift. */
const SLICE_MS = 125
const WARMUP_MS = 500
const KS = [10, 200] as const
const SUSPENDED = 10_000

/** Per step at K=200, median, on these machines (issue 10); the ratio to the minimal loop is printed beside it. */
const TARGET_STEP_MS = 0.02
const SLOPE_RUNS = 2_000
/** Growth per completed step: 1 KB plus the step's payload (a few bytes of arguments and output here). */
const TARGET_SLOPE_BYTES = 1024
const TARGET_GROWTH = 1.25
const TARGET_BYTES = 10 * 1024

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

const us = (ms: number): string => `${(ms * 1000).toFixed(2)} µs`
const kb = (bytes: number): string => `${(bytes / 1024).toFixed(2)} KB`
const verdict = (ok: boolean): string => (ok ? "PASS" : "MISS")

const errors: Array<string> = []
const error = (message: string): void => {
  errors.push(message)
  console.log(`ERROR: ${message}`)
}

// ---------------------------------------------------------------------------------
// 1-3. Per-step cost
// ---------------------------------------------------------------------------------

const noop = Tool.make({
  name: "noop",
  description: "Does nothing; echoes its step number.",
  input: Schema.Struct({ i: Schema.Number }),
  output: Schema.Struct({ i: Schema.Number }),
  sideEffect: "none",
  idempotent: true,
  handler: ({ i }) => Effect.succeed({ i })
})

const noopTools = [noop]

/** K tool calls with distinct arguments (so `repeated_tool_call` never fires), then a final answer. */
const script = (k: number): ReadonlyArray<Model.Response> => [
  ...Array.from({ length: k }, (_, n) => ScriptedModel.toolCall("noop", { i: n })),
  ScriptedModel.finalAnswer("done")
]

/** A zero-latency model: the precomputed response for the request's iteration. */
const modelLayer = (responses: ReadonlyArray<Model.Response>) => {
  const last = ScriptedModel.finalAnswer("done")
  return ScriptedModel.layerFunction((request) => responses[request.iteration - 1] ?? last)
}

const runOptions = (k: number): Run.Options<typeof noop> => ({
  goal: "call noop until told to stop",
  tools: noopTools,
  limits: { maxIterations: k + 10, maxToolCalls: k + 10 }
})

/** The full run; returns an error text when the run did not do the K steps. */
const fullRun = (k: number) => {
  const options = runOptions(k)
  return Run.run(options).pipe(
    Effect.map((result: RunResult.RunResult) =>
      result.status === "completed" && result.counters.iterations === k + 1 && result.counters.toolCalls === k
        ? undefined
        : `K=${k}: run ended ${result.status}/${result.stopReason} after ${result.counters.iterations} iterations ` +
          `and ${result.counters.toolCalls} tool calls (${result.detail})`
    )
  )
}

const noopContext: Tool.CallContext = {
  runId: "minimal",
  callId: "call",
  idempotencyKey: "minimal:call",
  settle: () => {}
}
const noMessages: ReadonlyArray<Model.Message> = []

/** The same calls with no runtime: model.generate, then the tool handler, and a counter. */
const minimalLoop = (k: number) =>
  Effect.gen(function* () {
    const model = yield* Model.Model
    const tools = [noop.definition]
    let steps = 0
    while (true) {
      const response = yield* model.generate({
        runId: "minimal",
        iteration: steps + 1,
        messages: noMessages,
        tools,
        deadlineAt: Number.POSITIVE_INFINITY
      })
      if (response.toolCalls.length === 0) break
      yield* noop.handler({ i: steps }, noopContext)
      steps++
    }
    return steps === k ? undefined : `minimal K=${k}: ${steps} steps`
  })

interface Case {
  readonly name: string
  readonly k: number
  readonly kind: "run" | "minimal"
  readonly samples: Array<number>
  /** Median wall time of each round, to show the spread between rounds. */
  readonly roundMedians: Array<number>
}

/** Runs `effect` repeatedly for `ms`, timing each run; collects into `samples`. */
const slice = <E>(
  effect: Effect.Effect<string | undefined, E, Model.Model | Run.Requirements<typeof noop, never>>,
  ms: number,
  samples: Array<number> | undefined
) =>
  Effect.gen(function* () {
    const end = performance.now() + ms
    let runs = 0
    const mine: Array<number> = []
    while (performance.now() < end || runs < 5) {
      const t0 = performance.now()
      const problem = yield* effect
      const t1 = performance.now()
      mine.push(t1 - t0)
      runs++
      if (problem !== undefined) {
        error(problem)
        return mine
      }
    }
    if (samples !== undefined) samples.push(...mine)
    return mine
  })

const stepBench = Effect.gen(function* () {
  const cases: Array<Case> = []
  for (const k of KS) {
    cases.push({ name: `Run.run K=${k}`, k, kind: "run", samples: [], roundMedians: [] })
    cases.push({ name: `minimal K=${k}`, k, kind: "minimal", samples: [], roundMedians: [] })
  }
  const layers = new Map(KS.map((k) => [k, modelLayer(script(k))] as const))
  const body = (c: Case) => {
    const layer = layers.get(c.k as (typeof KS)[number])
    if (layer === undefined) throw new Error(`no layer for K=${c.k}`)
    const effect = c.kind === "run" ? fullRun(c.k) : minimalLoop(c.k)
    return { layer, effect }
  }

  console.log(`warm-up: ${WARMUP_MS} ms per case`)
  for (const c of cases) {
    const { layer, effect } = body(c)
    yield* slice(effect, WARMUP_MS, undefined).pipe(Effect.provide(layer))
  }
  console.log(`measuring: ${ROUNDS} rounds x ${SLICE_MS} ms per case, interleaved`)
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of cases) {
      const { layer, effect } = body(c)
      const mine = yield* slice(effect, SLICE_MS, c.samples).pipe(Effect.provide(layer))
      c.roundMedians.push(median(mine))
    }
  }
  return cases
})

// ---------------------------------------------------------------------------------
// 4. Retained heap per suspended run
// ---------------------------------------------------------------------------------

interface MemoryFigures {
  readonly variant: string
  readonly baseline: number
  readonly suspended: number
  readonly afterEnd: number
  readonly entered: number
  readonly outcomes: Map<string, number>
  readonly startMillis: number
  readonly endMillis: number
}

const tally = (outcomes: Map<string, number>, key: string): void => {
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
}

const parkedTool = (release: Deferred.Deferred<void>, onEnter: () => void) =>
  Tool.make({
    name: "wait",
    description: "Waits until the benchmark releases it.",
    input: Schema.Struct({}),
    output: Schema.Struct({ ok: Schema.Boolean }),
    sideEffect: "none",
    handler: () => Effect.sync(onEnter).pipe(Effect.andThen(Deferred.await(release)), Effect.as({ ok: true }))
  })

/** Fresh response objects per call, as a real model would produce. */
const parkedModel = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("wait", {}) : ScriptedModel.finalAnswer("released")
)

const waitUntil = (label: string, done: () => boolean, what: () => string) =>
  Effect.gen(function* () {
    const deadline = performance.now() + 60_000
    while (!done()) {
      if (performance.now() > deadline) {
        error(`${label}: timed out waiting (${what()})`)
        return false
      }
      yield* Effect.sleep("2 millis")
    }
    return true
  })

/**
 * `start`: each run via `Run.start` in one scope; half are cancelled with `handle.cancel`,
 * the rest released to finish. `fork`: each run as a forked `Run.run` fiber; half are
 * interrupted, the rest released.
 */
const memoryBench = (variant: "Run.start" | "fork Run.run") =>
  Effect.gen(function* () {
    let entered = 0
    const release = yield* Deferred.make<void>()
    const tool = parkedTool(release, () => {
      entered++
    })
    const tools = [tool]
    const options = (i: number): Run.Options<typeof tool> => ({ goal: `wait #${i}`, tools })
    const handles: Array<Run.Handle> = new Array(SUSPENDED)
    const fibers: Array<Fiber.Fiber<RunResult.RunResult>> = new Array(SUSPENDED)
    const scope = yield* Scope.make()

    const baseline = yield* settledHeap
    const t0 = performance.now()
    for (let i = 0; i < SUSPENDED; i++) {
      if (variant === "Run.start") handles[i] = yield* Run.start(options(i)).pipe(Scope.provide(scope))
      else fibers[i] = yield* Effect.forkChild(Run.run(options(i)))
    }
    yield* waitUntil(
      variant,
      () => entered >= SUSPENDED,
      () => `${entered} of ${SUSPENDED} runs inside the tool`
    )
    const startMillis = performance.now() - t0
    const suspended = yield* settledHeap

    const outcomes = new Map<string, number>()
    const t1 = performance.now()
    const half = SUSPENDED / 2
    if (variant === "Run.start") {
      // Tally in place: holding 10,000 results here would keep their timelines alive.
      yield* Effect.forEach(handles.slice(0, half), (h) => Effect.map(h.cancel, (r) => tally(outcomes, r.status)), {
        concurrency: "unbounded",
        discard: true
      })
      yield* Deferred.succeed(release, undefined)
      yield* Effect.forEach(handles.slice(half), (h) => Effect.map(h.result, (r) => tally(outcomes, r.status)), {
        concurrency: "unbounded",
        discard: true
      })
      yield* Scope.close(scope, Exit.void)
    } else {
      yield* Fiber.interruptAll(fibers.slice(0, half))
      yield* Deferred.succeed(release, undefined)
      for (const fiber of fibers) {
        const exit = yield* Fiber.await(fiber)
        if (Exit.isSuccess(exit)) tally(outcomes, exit.value.status)
        else tally(outcomes, "interrupted (no result)")
      }
      yield* Scope.close(scope, Exit.void)
    }
    const endMillis = performance.now() - t1
    handles.length = 0
    fibers.length = 0
    const afterEnd = yield* settledHeap
    return { variant, baseline, suspended, afterEnd, entered, outcomes, startMillis, endMillis } satisfies MemoryFigures
  }).pipe(Effect.provide(parkedModel))

// ---------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------

const pad = (s: string, n: number): string => (s.length >= n ? s : s + " ".repeat(n - s.length))
const lpad = (s: string, n: number): string => (s.length >= n ? s : " ".repeat(n - s.length) + s)

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): void => {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? []
  rows.forEach((row, r) => {
    console.log(row.map((cell, i) => (i === 0 ? pad(cell, widths[i] ?? 0) : lpad(cell, widths[i] ?? 0))).join("  "))
    if (r === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "))
  })
}

const program = Effect.gen(function* () {
  console.log(`effect-agent-runtime loop benchmark — ${new Date().toISOString()}`)
  console.log(
    `node ${process.version}, ${process.platform}/${process.arch}, gc exposed: ${globalThis.gc !== undefined}`
  )
  if (globalThis.gc === undefined)
    error("globalThis.gc is not exposed (run with node --expose-gc): heap figures are noisy")
  console.log("")

  const summary: Array<ReadonlyArray<string>> = [["target", "figure", "limit", "verdict"]]

  if (only === undefined || only === "steps") {
    const cases = yield* stepBench
    const perStep = (name: string) => {
      const c = cases.find((x) => x.name === name)
      return c === undefined ? Number.NaN : median(c.samples) / c.k
    }
    /** The median over rounds of the ratio of two cases' round medians (adjacent in time). */
    const pairedRatio = (a: string, b: string) => {
      const ca = cases.find((x) => x.name === a)
      const cb = cases.find((x) => x.name === b)
      if (ca === undefined || cb === undefined) return Number.NaN
      return median(ca.roundMedians.map((m, i) => m / (cb.roundMedians[i] ?? Number.NaN))) * (cb.k / ca.k)
    }
    /** The fast tail, less sensitive to a noisy host than the median. */
    const perStepFast = (name: string) => {
      const c = cases.find((x) => x.name === name)
      return c === undefined ? Number.NaN : quantile(c.samples, 0.1) / c.k
    }
    console.log("")
    table([
      ["case", "runs", "median/run", "p10/run", "p90/run", "round medians min..max", "per step", "per step (p10)"],
      ...cases.map((c) => [
        c.name,
        String(c.samples.length),
        us(median(c.samples)),
        us(quantile(c.samples, 0.1)),
        us(quantile(c.samples, 0.9)),
        `${us(Math.min(...c.roundMedians))}..${us(Math.max(...c.roundMedians))}`,
        us(median(c.samples) / c.k),
        us(quantile(c.samples, 0.1) / c.k)
      ])
    ])
    const step200 = perStep("Run.run K=200")
    summary.push([
      "per step, K=200 (median)",
      us(step200),
      `<= ${us(TARGET_STEP_MS)}`,
      verdict(step200 <= TARGET_STEP_MS)
    ])
    for (const k of KS) {
      const ratio = perStep(`Run.run K=${k}`) / perStep(`minimal K=${k}`)
      summary.push([`(info) run/minimal per step, K=${k}`, `${ratio.toFixed(1)}x`, "-", "-"])
    }
    for (const k of KS) {
      const fast = perStepFast(`Run.run K=${k}`) / perStepFast(`minimal K=${k}`)
      const paired = pairedRatio(`Run.run K=${k}`, `minimal K=${k}`)
      summary.push([
        `(info) same ratio from p10 / paired rounds, K=${k}`,
        `${fast.toFixed(1)}x / ${paired.toFixed(1)}x`,
        "-",
        "-"
      ])
    }
    const growth = perStep("Run.run K=200") / perStep("Run.run K=10")
    summary.push([
      "growth per step K=200 / K=10",
      `${growth.toFixed(2)}x`,
      `<= ${TARGET_GROWTH}x`,
      verdict(growth <= TARGET_GROWTH)
    ])
    const fastGrowth = perStepFast("Run.run K=200") / perStepFast("Run.run K=10")
    summary.push(["(info) same growth from p10", `${fastGrowth.toFixed(2)}x`, "-", "-"])
  }

  if (only === undefined || only === "memory") {
    console.log("")
    const figures: Array<MemoryFigures> = []
    for (const variant of ["Run.start", "fork Run.run"] as const) {
      console.log(`memory: ${SUSPENDED} suspended runs via ${variant}`)
      figures.push(yield* memoryBench(variant))
    }
    console.log("")
    table([
      [
        "variant",
        "in tool",
        "start+park",
        "heap before",
        "heap parked",
        "per run",
        "heap after end",
        "leak/run",
        "end",
        "outcomes"
      ],
      ...figures.map((f) => [
        f.variant,
        String(f.entered),
        `${f.startMillis.toFixed(0)} ms`,
        `${(f.baseline / 1048576).toFixed(1)} MB`,
        `${(f.suspended / 1048576).toFixed(1)} MB`,
        kb((f.suspended - f.baseline) / SUSPENDED),
        `${(f.afterEnd / 1048576).toFixed(1)} MB`,
        `${((f.afterEnd - f.baseline) / SUSPENDED).toFixed(0)} B`,
        `${f.endMillis.toFixed(0)} ms`,
        [...f.outcomes].map(([k, v]) => `${v} ${k}`).join(", ")
      ])
    ])
    for (const f of figures) {
      const perRun = (f.suspended - f.baseline) / SUSPENDED
      summary.push([
        `heap per suspended run (${f.variant})`,
        kb(perRun),
        `<= ${kb(TARGET_BYTES)}`,
        verdict(perRun <= TARGET_BYTES)
      ])
      const ended = [...f.outcomes.values()].reduce((a, b) => a + b, 0)
      if (ended !== SUSPENDED) error(`${f.variant}: ${ended} of ${SUSPENDED} runs ended`)
    }
  }

  if (only === undefined || only === "memory" || only === "slope") {
    console.log(`\nmemory: ${SLOPE_RUNS} runs parked at iterations ${"1, 5, 20"} via Run.start`)
    const { levels, slopeBytes } = yield* slopeBench(SLOPE_RUNS)
    table([
      ["parked at iteration", "runs", "heap per run", "completed after release"],
      ...levels.map((l) => [String(l.at), String(l.runs), kb(l.perRunBytes), String(l.completed)])
    ])
    for (const l of levels)
      if (l.completed !== l.runs) error(`parked at ${l.at}: ${l.completed} of ${l.runs} completed`)
    summary.push([
      "heap growth per completed step (slope)",
      `${slopeBytes.toFixed(0)} B`,
      `<= ${TARGET_SLOPE_BYTES} B`,
      verdict(slopeBytes <= TARGET_SLOPE_BYTES)
    ])
  }

  console.log("")
  table(summary)
  if (errors.length > 0) console.log(`\n${errors.length} error(s): see ERROR lines above`)
})

Effect.runPromise(program.pipe(Effect.provide(NodeServices.layer))).catch((cause: unknown) => {
  console.log("benchmark crashed:", cause)
  process.exitCode = 1
})
