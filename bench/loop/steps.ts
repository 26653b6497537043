/**
 * Per-step cost (1-3): a full `Run.run` with a zero-latency scripted model and a no-op
 * tool at K=10 and K=200 steps, beside the same calls in a minimal hand-written Effect
 * loop, interleaved round by round.
 */
import { Effect, Schema } from "effect"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import type { Errors } from "../report.ts"
import { median } from "../stats.ts"
import { KS, ROUNDS, SLICE_MS, WARMUP_MS } from "./internal/settings.ts"

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

export interface Case {
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
  samples: Array<number> | undefined,
  { error }: Errors
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

/** Every case, measured. */
export const stepBench = (errors: Errors) =>
  Effect.gen(function* () {
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
      yield* slice(effect, WARMUP_MS, undefined, errors).pipe(Effect.provide(layer))
    }
    console.log(`measuring: ${ROUNDS} rounds x ${SLICE_MS} ms per case, interleaved`)
    for (let round = 0; round < ROUNDS; round++) {
      for (const c of cases) {
        const { layer, effect } = body(c)
        const mine = yield* slice(effect, SLICE_MS, c.samples, errors).pipe(Effect.provide(layer))
        c.roundMedians.push(median(mine))
      }
    }
    return cases
  })
