/**
 * Loop benchmark: `npm run bench` (node --expose-gc bench/loop/main.ts).
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
 *
 * The parts live beside this file: `steps.ts` (1-3), `memory.ts` (4), `slope.ts` (5),
 * with `internal/settings.ts` (options and targets) and `../report.ts` (printing, shared).
 */
import { NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { kb, makeErrors, table, us, verdict } from "../report.ts"
import { median, quantile } from "../stats.ts"
import {
  KS,
  only,
  SLOPE_RUNS,
  SUSPENDED,
  TARGET_BYTES,
  TARGET_GROWTH,
  TARGET_SLOPE_BYTES,
  TARGET_STEP_MS
} from "./internal/settings.ts"
import { callerFiberBench, type MemoryFigures, memoryBench } from "./memory.ts"
import { slopeBench, stepPayloadBench } from "./slope.ts"
import { stepBench } from "./steps.ts"

const program = Effect.gen(function* () {
  const errors = makeErrors()
  const { error } = errors
  console.log(`effect-agent-runtime loop benchmark — ${new Date().toISOString()}`)
  console.log(
    `node ${process.version}, ${process.platform}/${process.arch}, gc exposed: ${globalThis.gc !== undefined}`
  )
  if (globalThis.gc === undefined)
    error("globalThis.gc is not exposed (run with node --expose-gc): heap figures are noisy")
  console.log("")

  const summary: Array<ReadonlyArray<string>> = [["target", "figure", "limit", "verdict"]]

  if (only === undefined || only === "steps") {
    const cases = yield* stepBench(errors)
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
      figures.push(yield* memoryBench(variant, errors))
    }
    const callerFiber = yield* callerFiberBench
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
    console.log(
      `a caller's own forked fiber awaiting a Deferred, with no run: ${kb(callerFiber)} (in the fork Run.run figure)`
    )
    for (const f of figures) {
      const perRun = (f.suspended - f.baseline) / SUSPENDED
      summary.push([
        `heap per suspended run (${f.variant})`,
        f.variant === "fork Run.run" ? `${kb(perRun)} (its caller's fiber: ${kb(callerFiber)})` : kb(perRun),
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
    const payload = yield* stepPayloadBench(SLOPE_RUNS * 10)
    console.log(`the step's payload once (its tool call, output and observation): ${payload.toFixed(0)} B`)
    const limit = TARGET_SLOPE_BYTES + payload
    summary.push([
      "heap growth per completed step (slope)",
      `${slopeBytes.toFixed(0)} B`,
      `<= ${limit.toFixed(0)} B (1 KB + ${payload.toFixed(0)} B payload)`,
      verdict(slopeBytes <= limit)
    ])
  }

  console.log("")
  table(summary)
  if (errors.count() > 0) console.log(`\n${errors.count()} error(s): see ERROR lines above`)
})

Effect.runPromise(program.pipe(Effect.provide(NodeServices.layer))).catch((cause: unknown) => {
  console.log("benchmark crashed:", cause)
  process.exitCode = 1
})
