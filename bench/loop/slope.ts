/**
 * Heap growth per completed step: runs parked in a tool at iteration 1, 5 and 20 (each
 * earlier iteration one completed step: a model response with one tool call and its
 * result), the retained heap per parked run at each, and the slope between them.
 */
import { Deferred, Effect, Exit, Schema, Scope } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { settledHeap } from "../heap.ts"

export const PARK_AT = [1, 5, 20] as const

export interface Level {
  readonly at: number
  readonly runs: number
  readonly perRunBytes: number
  readonly completed: number
}

const stepTool = Tool.make({
  name: "step",
  description: "Returns its step number.",
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Struct({ n: Schema.Number }),
  sideEffect: "none",
  idempotent: true,
  handler: ({ n }) => Effect.succeed({ n })
})

/** `runs` runs, each parked in a tool at iteration `at`, via `Run.start` in one scope. */
const level = (at: number, runs: number) =>
  Effect.gen(function* () {
    let entered = 0
    const release = yield* Deferred.make<void>()
    const wait = Tool.make({
      name: "wait",
      description: "Waits until the benchmark releases it.",
      input: Schema.Struct({}),
      output: Schema.Struct({ ok: Schema.Boolean }),
      sideEffect: "none",
      handler: () =>
        Effect.sync(() => {
          entered++
        }).pipe(Effect.andThen(Deferred.await(release)), Effect.as({ ok: true }))
    })
    const model = ScriptedModel.layerFunction((request) =>
      request.iteration < at
        ? ScriptedModel.toolCall("step", { n: request.iteration })
        : request.iteration === at
          ? ScriptedModel.toolCall("wait", {})
          : ScriptedModel.finalAnswer("released")
    )
    const tools = [stepTool, wait]
    const scope = yield* Scope.make()
    // What the previous level left (its runs' fibers and timers) must be gone before the baseline.
    yield* Effect.sleep("200 millis")
    yield* settledHeap
    const baseline = yield* settledHeap
    const handles: Array<Run.Handle> = []
    for (let i = 0; i < runs; i++) {
      handles.push(
        yield* Run.start({ goal: `park at ${at}`, tools, limits: { maxIterations: 40, maxToolCalls: 40 } }).pipe(
          Scope.provide(scope),
          Effect.provide(model)
        )
      )
    }
    while (entered < runs) yield* Effect.sleep("2 millis")
    const parked = yield* settledHeap
    yield* Deferred.succeed(release, undefined)
    let completed = 0
    for (const handle of handles) if ((yield* handle.result).status === "completed") completed++
    yield* Scope.close(scope, Exit.void)
    return { at, runs, perRunBytes: (parked - baseline) / runs, completed } satisfies Level
  })

/** The levels, and the growth per completed step: the least-squares slope over them. */
export const slopeBench = (runs: number) =>
  Effect.gen(function* () {
    const levels: Array<Level> = []
    // A first pass warms up what every run shares (compiled code, caches), so that it is not counted against level 1.
    for (const at of PARK_AT) yield* level(at, Math.ceil(runs / 4))
    // Heap figures on a shared machine are noisy: each level is measured three times, in
    // turn with the others, and its median kept.
    const samples = new Map<number, Array<Level>>(PARK_AT.map((at) => [at, []]))
    for (let round = 0; round < 3; round++) for (const at of PARK_AT) samples.get(at)?.push(yield* level(at, runs))
    for (const at of PARK_AT) {
      const sorted = (samples.get(at) ?? []).toSorted((a, b) => a.perRunBytes - b.perRunBytes)
      const middle = sorted[1]
      if (middle !== undefined) levels.push(middle)
    }
    const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
    const xs = levels.map((l) => l.at)
    const ys = levels.map((l) => l.perRunBytes)
    const [mx, my] = [mean(xs), mean(ys)]
    const slope =
      xs.reduce((acc, x, i) => acc + (x - mx) * ((ys[i] ?? 0) - my), 0) / xs.reduce((acc, x) => acc + (x - mx) ** 2, 0)
    return { levels, slopeBytes: slope }
  })

/**
 * The step's payload once, as the target counts it ("1 KB plus the step's payload once"):
 * what one completed step of {@link level} brings into the run as data, each piece once:
 * the model's tool call (its id, name and argument text, as the scripted model sends it),
 * the tool's output, and the observation the model is sent (its rendered output). Measured
 * as the heap `runs` such payloads hold, each built as the step builds it, less their holders.
 */
export const stepPayloadBench = (runs: number) =>
  Effect.gen(function* () {
    const payloads: Array<unknown> = new Array(runs)
    for (let i = 0; i < runs; i++) {
      const n = i + 1
      const output = { n }
      payloads[i] = [
        { id: `call_${n}`, name: stepTool.name, arguments: JSON.stringify({ n }) },
        output,
        JSON.stringify(output)
      ]
    }
    const held = yield* settledHeap
    // Less what holds each payload here: an array of three slots, measured the same way.
    for (let i = 0; i < runs; i++) payloads[i] = [i, i, i]
    const holders = yield* settledHeap
    return (held - holders) / runs
  })
