/**
 * Tracing benchmark: `npm run bench:tracing` (node --expose-gc bench/tracing.ts).
 *
 * Per-step cost of a full `Run.run` (K=200 steps, zero-latency scripted model, no-op tool)
 * with no tracer installed and with an in-memory tracer, interleaved round by round. Run
 * the same file in a checkout without the tracing code (`--label=...` names the tree) to
 * compare "tracing code present, no tracer" with "no tracing code": the target is at most
 * 1.05x. Prints figures; never fails.
 */
import { Effect, Schema, Tracer } from "effect"
import * as Run from "../src/run/Run.ts"
import * as ScriptedModel from "../src/testing/ScriptedModel.ts"
import * as Tool from "../src/tools/Tool.ts"
import { median } from "./stats.ts"

const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const K = 200
const ROUNDS = Number(arg("rounds", "15"))
const RUNS_PER_ROUND = Number(arg("runs", "10"))
const label = arg("label", "this tree")

const noop = Tool.make({
  name: "noop",
  description: "Does nothing.",
  input: Schema.Struct({ i: Schema.Number }),
  output: Schema.Struct({ i: Schema.Number }),
  sideEffect: "none",
  idempotent: true,
  handler: ({ i }) => Effect.succeed({ i })
})
const responses = [
  ...Array.from({ length: K }, (_, n) => ScriptedModel.toolCall("noop", { i: n })),
  ScriptedModel.finalAnswer("done")
]
const last = ScriptedModel.finalAnswer("done")
const model = ScriptedModel.layerFunction((request) => responses[request.iteration - 1] ?? last)
const run = Run.run({
  goal: "call noop",
  tools: [noop],
  limits: { maxIterations: K + 10, maxToolCalls: K + 10 }
}).pipe(Effect.provide(model))

let spanCount = 0
const memory = Tracer.make({
  span: (options) => {
    spanCount++
    return new Tracer.NativeSpan(options)
  }
})

const round = (traced: boolean) =>
  Effect.gen(function* () {
    const start = performance.now()
    for (let i = 0; i < RUNS_PER_ROUND; i++) {
      const result = yield* traced ? Effect.withTracer(run, memory) : run
      if (result.counters.iterations !== K + 1) throw new Error(`run ended ${result.stopReason}`)
    }
    return ((performance.now() - start) * 1000) / (RUNS_PER_ROUND * K)
  })

const program = Effect.gen(function* () {
  // Warm-up.
  for (let i = 0; i < 3; i++) {
    yield* round(false)
    yield* round(true)
  }
  const off: Array<number> = []
  const on: Array<number> = []
  for (let i = 0; i < ROUNDS; i++) {
    globalThis.gc?.()
    off.push(yield* round(false))
    globalThis.gc?.()
    on.push(yield* round(true))
  }
  const spansPerStep = spanCount / ((ROUNDS + 3) * RUNS_PER_ROUND * (K + 1))
  console.log(`tracing bench (${label}), node ${process.version}, K=${K}, ${ROUNDS} rounds of ${RUNS_PER_ROUND} runs`)
  console.log(`per step, no tracer:        ${median(off).toFixed(2)} us (median of rounds)`)
  console.log(`per step, in-memory tracer: ${median(on).toFixed(2)} us (${spansPerStep.toFixed(1)} spans per step)`)
  console.log(`in-memory tracer / no tracer: ${(median(on) / median(off)).toFixed(2)}x (reported, no target)`)
})

Effect.runPromise(program)
