/**
 * Cancellation benchmark: `npm run bench:cancel` (node bench/cancellation.ts), about 30 s.
 *
 * 1. Deadline overshoot under a subprocess tool that ignores cancellation (R4, R5.2): a
 *    run with `runTimeout` 300 ms whose only call runs a child that ignores SIGTERM, with
 *    grace period G: a node child (test/fixtures/child.mjs ignore-term; G = 200 and 500
 *    ms) and a shell child (`trap '' TERM`, with a `sleep` in its group; G = 200 ms, in
 *    its own cgroup where the machine allows it, and kept to its process group with
 *    `cgroup: false`; the header says which containment is available). Overshoot = the
 *    wall-clock time when `Run.run` returns minus the run's deadline (`deadlineAt` of `run.started`, by the same clock). The child must be
 *    SIGKILLed after G, so the floor is G; the target is G + 10 ms. Each run is checked:
 *    the call is recorded `outcome_unknown` and the child's pid is gone (ESRCH) when the
 *    result appears.
 * 2. For comparison, an in-process tool that ignores cancellation (an uninterruptible
 *    1 s sleep): the run cannot stop before the tool does (no target). And its remedy
 *    (R5.1): an `Abortable.handler` promise that ignores its `AbortSignal` (a 1 s timer),
 *    with grace period G = 50 and 200 ms: the run gives up on it after G, so the floor is
 *    G and the target G + 10 ms; each run is checked to record the call `outcome_unknown`.
 * 3. Cancellation latency with cooperative in-process tools (R5.1): a batch of 1, 10 or
 *    100 calls to a tool that waits forever (`Effect.never`), `concurrency: 100`; once
 *    every call is inside its handler, `handle.cancel` is timed until the run's result is
 *    available (every child fiber is then done). Target: median < 1 ms.
 *
 * Prints figures, targets and PASS/MISS; it never fails on a missed target, and exits 0.
 * Options: `--only=overshoot` or `--only=latency`; `--runs=N` for the overshoot runs per G.
 */
import * as path from "node:path"
import { NodeServices } from "@effect/platform-node"
import { Deferred, Effect, Layer, Schema } from "effect"
import * as Abortable from "../src/cancellation/Abortable.ts"
import * as Subprocess from "../src/cancellation/Subprocess.ts"
import * as Run from "../src/run/Run.ts"
import * as ScriptedModel from "../src/testing/ScriptedModel.ts"
import * as Tool from "../src/tools/Tool.ts"
import { median, quantile } from "./stats.ts"

// ---------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------

const argValue = (name: string): string | undefined => {
  const prefix = `--${name}=`
  return process.argv.find((a) => a.startsWith(prefix))?.slice(prefix.length)
}

const only = argValue("only")
const RUN_TIMEOUT_MS = 300
const GRACES = [200, 500] as const
const OVERSHOOT_RUNS = Number(argValue("runs") ?? 15)
const INPROCESS_RUNS = 5
const ABORTABLE_GRACES = [50, 200] as const
const BATCHES = [1, 10, 100] as const
const LATENCY_WARMUP = 20
const LATENCY_RUNS = 60

const TARGET_OVERSHOOT_SLACK_MS = 10
const TARGET_LATENCY_MS = 1

const child = path.join(import.meta.dirname, "..", "test", "fixtures", "child.mjs")

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

const verdict = (ok: boolean): string => (ok ? "PASS" : "MISS")
const ms = (x: number, digits = 1): string => `${x.toFixed(digits)} ms`

const errors: Array<string> = []
const error = (message: string) => {
  errors.push(message)
  console.log(`ERROR: ${message}`)
}

const isGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ESRCH"
  }
}

const table = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)))
  rows.forEach((row, r) => {
    console.log(
      row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join("  ")
    )
    if (r === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "))
  })
}

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

// ---------------------------------------------------------------------------------
// 1 and 2. Deadline overshoot
// ---------------------------------------------------------------------------------

interface Overshoot {
  readonly label: string
  readonly target: number | undefined
  readonly samples: ReadonlyArray<number>
  /** deadline -> SIGTERM (the runtime interrupting the call), SIGTERM -> reap, reap -> result. */
  readonly parts?: {
    readonly toSigterm: ReadonlyArray<number>
    readonly reclaim: ReadonlyArray<number>
    readonly toResult: ReadonlyArray<number>
  }
}

/** Wall-clock milliseconds with sub-millisecond resolution, comparable to `Date.now()`. */
const wallNow = (): number => performance.timeOrigin + performance.now()

const children = {
  node: { label: "node child", spec: { command: process.execPath, args: [child, "ignore-term"] } },
  shell: {
    label: "shell child",
    spec: { command: "/bin/sh", args: ["-c", "trap '' TERM; sleep 30 & wait"] }
  }
} as const

const subprocessOvershoot = (kind: keyof typeof children, graceMillis: number, cgroup = true) =>
  Effect.gen(function* () {
    const pids: Array<number> = []
    const ignoring = Subprocess.tool({
      name: "ignore_term",
      description: "a child that ignores SIGTERM",
      input: Schema.Struct({}),
      output: Schema.String,
      command: () => children[kind].spec,
      parse: (result) => result.stdout,
      graceMillis,
      cgroup,
      onSpawn: (pid) => pids.push(pid),
      onSettled: (s) => {
        settled = { at: wallNow(), millis: s.millis }
      }
    })
    let settled: { readonly at: number; readonly millis: number } | undefined
    const samples: Array<number> = []
    const toSigterm: Array<number> = []
    const reclaim: Array<number> = []
    const toResult: Array<number> = []
    for (let i = 0; i < OVERSHOOT_RUNS; i++) {
      const result = yield* Run.run({
        goal: "x",
        tools: [ignoring],
        time: { run: `${RUN_TIMEOUT_MS} millis` }
      }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("ignore_term", {})])))
      const now = wallNow()
      const started = result.timeline[0]
      if (started?._tag !== "run.started" || settled === undefined) {
        error(`run ${i}: no run.started event, or the child was not settled`)
        continue
      }
      samples.push(now - started.deadlineAt)
      toSigterm.push(settled.at - settled.millis - started.deadlineAt)
      reclaim.push(settled.millis)
      toResult.push(now - settled.at)
      settled = undefined
      const pid = pids[pids.length - 1]
      if (pids.length !== i + 1 || pid === undefined) error(`run ${i}: the child did not start`)
      else if (!isGone(pid)) error(`run ${i}: pid ${pid} still exists when the result appears`)
      const interrupted = result.timeline.find((e) => e._tag === "tool.interrupted")
      if (interrupted?._tag !== "tool.interrupted" || interrupted.settlement !== "outcome_unknown") {
        error(
          `run ${i}: the call is not recorded outcome_unknown (${interrupted?._tag === "tool.interrupted" ? `${interrupted.settlement}: ${interrupted.detail}` : "no tool.interrupted"})`
        )
      }
    }
    return {
      label: `${children[kind].label} ignoring SIGTERM, G = ${graceMillis} ms${cgroup ? "" : " (cgroup: false)"}`,
      target: graceMillis + TARGET_OVERSHOOT_SLACK_MS,
      samples,
      parts: { toSigterm, reclaim, toResult }
    } satisfies Overshoot
  })

const inProcessOvershoot = Effect.gen(function* () {
  const stubborn = Tool.make({
    name: "stubborn",
    description: "an in-process tool that ignores cancellation",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "external",
    handler: () => Effect.uninterruptible(Effect.as(Effect.sleep("1 second"), "done"))
  })
  const samples: Array<number> = []
  for (let i = 0; i < INPROCESS_RUNS; i++) {
    const result = yield* Run.run({
      goal: "x",
      tools: [stubborn],
      time: { run: `${RUN_TIMEOUT_MS} millis` }
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("stubborn", {})])))
    const now = wallNow()
    const started = result.timeline[0]
    if (started?._tag === "run.started") samples.push(now - started.deadlineAt)
  }
  return {
    label: "in-process tool ignoring cancellation (uninterruptible 1 s sleep)",
    target: undefined,
    samples
  } satisfies Overshoot
})

const abortableOvershoot = (graceMillis: number) =>
  Effect.gen(function* () {
    const ignoring = Tool.make({
      name: "ignore_abort",
      description: "an in-process promise that ignores its AbortSignal",
      input: Schema.Struct({}),
      output: Schema.String,
      sideEffect: "external",
      handler: Abortable.handler(
        () => new Promise<string>((resolve) => setTimeout(() => resolve("done"), 1000).unref()),
        { grace: graceMillis }
      )
    })
    const samples: Array<number> = []
    for (let i = 0; i < OVERSHOOT_RUNS; i++) {
      const result = yield* Run.run({
        goal: "x",
        tools: [ignoring],
        time: { run: `${RUN_TIMEOUT_MS} millis` }
      }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("ignore_abort", {})])))
      const now = wallNow()
      const started = result.timeline[0]
      if (started?._tag !== "run.started") {
        error(`abortable run ${i}: no run.started event`)
        continue
      }
      samples.push(now - started.deadlineAt)
      const interrupted = result.timeline.find((e) => e._tag === "tool.interrupted")
      if (interrupted?._tag !== "tool.interrupted" || interrupted.settlement !== "outcome_unknown") {
        error(`abortable run ${i}: the call is not recorded outcome_unknown`)
      }
    }
    return {
      label: `Abortable promise ignoring its AbortSignal, G = ${graceMillis} ms`,
      target: graceMillis + TARGET_OVERSHOOT_SLACK_MS,
      samples
    } satisfies Overshoot
  })

// ---------------------------------------------------------------------------------
// 3. Cancellation latency, cooperative tools
// ---------------------------------------------------------------------------------

const cancelLatency = (inFlight: number) =>
  Effect.gen(function* () {
    const samples: Array<number> = []
    for (let i = 0; i < LATENCY_WARMUP + LATENCY_RUNS; i++) {
      let entered = 0
      const all = yield* Deferred.make<void>()
      const hang = Tool.make({
        name: "hang",
        description: "waits forever",
        input: Schema.Struct({ i: Schema.Number }),
        output: Schema.String,
        sideEffect: "none",
        handler: () =>
          Effect.suspend(() => {
            entered++
            return entered === inFlight ? Deferred.succeed(all, undefined) : Effect.void
          }).pipe(Effect.andThen(Effect.never))
      })
      const calls = Array.from({ length: inFlight }, (_, n) => ["hang", { i: n }] as const)
      const millis = yield* Effect.gen(function* () {
        const handle = yield* Run.start({
          goal: "x",
          tools: [hang],
          concurrency: 100,
          limits: { maxToolCalls: 1000 }
        })
        const ready = yield* Effect.timeoutOption(Deferred.await(all), "5 seconds")
        if (ready._tag === "None") {
          const result = yield* handle.cancel
          error(`batch of ${inFlight}: only ${entered} calls started; the run ended ${result.stopReason}`)
          return undefined
        }
        const start = performance.now()
        const result = yield* handle.cancel
        const end = performance.now()
        if (result.status !== "cancelled") error(`batch of ${inFlight}: the run ended ${result.status}`)
        const interrupted = result.timeline.filter((e) => e._tag === "tool.interrupted").length
        if (interrupted !== inFlight) error(`batch of ${inFlight}: ${interrupted} calls recorded interrupted`)
        return end - start
      }).pipe(Effect.scoped, Effect.provide(withScript([ScriptedModel.toolCalls(...calls)])))
      if (millis === undefined) break
      if (i >= LATENCY_WARMUP) samples.push(millis)
    }
    return { inFlight, samples }
  })

// ---------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------

const program = Effect.gen(function* () {
  console.log(`effect-agent-runtime cancellation benchmark — ${new Date().toISOString()}`)
  console.log(`node ${process.version}, ${process.platform}/${process.arch}`)
  const cgroups = yield* Subprocess.cgroupSupport
  console.log(
    `subprocess containment: ${cgroups.available ? `a cgroup per process (${cgroups.kill})` : `process group (no cgroups: ${cgroups.reason})`}, and a supervisor per process`
  )
  const summary: Array<Array<string>> = [["figure", "value", "target", ""]]

  if (only === undefined || only === "overshoot") {
    console.log("")
    console.log(`deadline overshoot: runTimeout ${RUN_TIMEOUT_MS} ms; overshoot = result time - run deadline`)
    const figures: Array<Overshoot> = []
    for (const grace of GRACES) figures.push(yield* subprocessOvershoot("node", grace))
    figures.push(yield* subprocessOvershoot("shell", GRACES[0]))
    figures.push(yield* subprocessOvershoot("shell", GRACES[0], false))
    figures.push(yield* inProcessOvershoot)
    for (const grace of ABORTABLE_GRACES) figures.push(yield* abortableOvershoot(grace))
    table([
      ["case", "runs", "min", "median", "p90", "max", "median - G"],
      ...figures.map((f) => {
        const grace = f.target === undefined ? undefined : f.target - TARGET_OVERSHOOT_SLACK_MS
        return [
          f.label,
          String(f.samples.length),
          ms(Math.min(...f.samples), 0),
          ms(median(f.samples), 0),
          ms(quantile(f.samples, 0.9), 0),
          ms(Math.max(...f.samples), 0),
          grace === undefined ? "-" : ms(median(f.samples) - grace, 0)
        ]
      })
    ])
    console.log("")
    console.log("where the subprocess overshoot goes (medians; SIGTERM -> reaped = G + SIGKILL -> reap):")
    table([
      ["case", "deadline -> SIGTERM", "SIGTERM -> reaped", "reaped -> result"],
      ...figures.flatMap((f) =>
        f.parts === undefined
          ? []
          : [[f.label, ms(median(f.parts.toSigterm)), ms(median(f.parts.reclaim)), ms(median(f.parts.toResult))]]
      )
    ])
    for (const f of figures) {
      if (f.target === undefined) continue
      summary.push([
        `median overshoot, ${f.label}`,
        ms(median(f.samples), 0),
        `<= ${f.target} ms`,
        verdict(median(f.samples) <= f.target)
      ])
    }
  }

  if (only === undefined || only === "latency") {
    console.log("")
    console.log(
      `cancellation latency: handle.cancel -> result, cooperative tools (Effect.never), concurrency 100, ` +
        `${LATENCY_RUNS} runs after ${LATENCY_WARMUP} warm-up`
    )
    const figures: Array<{ readonly inFlight: number; readonly samples: ReadonlyArray<number> }> = []
    for (const n of BATCHES) figures.push(yield* cancelLatency(n))
    table([
      ["in-flight tools", "runs", "p10", "median", "p90", "max"],
      ...figures.map((f) => [
        String(f.inFlight),
        String(f.samples.length),
        ms(quantile(f.samples, 0.1), 3),
        ms(median(f.samples), 3),
        ms(quantile(f.samples, 0.9), 3),
        ms(Math.max(...f.samples), 3)
      ])
    ])
    for (const f of figures) {
      summary.push([
        `median cancellation latency, ${f.inFlight} in-flight`,
        ms(median(f.samples), 3),
        `< ${TARGET_LATENCY_MS} ms`,
        verdict(median(f.samples) < TARGET_LATENCY_MS)
      ])
    }
  }

  console.log("")
  table(summary)
  if (errors.length > 0) console.log(`\n${errors.length} error(s): see ERROR lines above`)
})

Effect.runPromise(program).catch((cause: unknown) => {
  console.log("benchmark crashed:", cause)
})
