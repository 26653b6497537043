/**
 * Retained heap per suspended run (4): 10,000 runs parked inside a tool handler, via
 * `Run.start` or as forked `Run.run` fibers; then half cancelled, half released.
 */
import { Deferred, Effect, Exit, Fiber, Schema, Scope } from "effect"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { settledHeap } from "../heap.ts"
import type { Errors } from "../report.ts"
import { SUSPENDED } from "./internal/settings.ts"

export interface MemoryFigures {
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

const waitUntil = ({ error }: Errors, label: string, done: () => boolean, what: () => string) =>
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
export const memoryBench = (variant: "Run.start" | "fork Run.run", errors: Errors) =>
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
      errors,
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

/**
 * What a caller's own fiber costs while it waits, with no run at all: `SUSPENDED` forked
 * fibers, each awaiting a `Deferred` (as a forked `Run.run` fiber awaits its run's result).
 * A forked `Run.run` is measured with its caller's fiber; this is that fiber's share.
 */
export const callerFiberBench = Effect.gen(function* () {
  const never = yield* Deferred.make<void>()
  const fibers: Array<Fiber.Fiber<void>> = new Array(SUSPENDED)
  const baseline = yield* settledHeap
  for (let i = 0; i < SUSPENDED; i++) fibers[i] = yield* Effect.forkChild(Deferred.await(never))
  yield* Effect.yieldNow
  const parked = yield* settledHeap
  yield* Fiber.interruptAll(fibers)
  return (parked - baseline) / SUSPENDED
})
