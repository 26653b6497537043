import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { echo } from "../support/tools.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const looping = withScript(Array.from({ length: 10 }, (_, i) => ScriptedModel.toolCall("echo", { text: `${i}` })))

describe("Run.runOrFail", () => {
  it.effect("R6.5 a completed run succeeds with its result", () =>
    Effect.gen(function* () {
      const result = yield* Run.runOrFail({ goal: "say hi", tools: [echo] })
      assert.isTrue(RunResult.isCompleted(result))
      assert.strictEqual(result.finalAnswer, "hi")
      // A guard: the status narrows.
      const status: "completed" | undefined = RunResult.isCompleted(result) ? result.status : undefined
      assert.strictEqual(status, "completed")
    }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("hi")])))
  )

  it.effect("R6.5 a run that stops for any other reason fails with RunStopped, carrying the whole result", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Run.runOrFail({ goal: "loop", tools: [echo], limits: { maxIterations: 3 } }))
      assert.strictEqual(error._tag, "RunStopped")
      assert.strictEqual(error.result.status, "failed")
      assert.strictEqual(error.result.stopReason, "max_iterations")
      assert.isFalse(RunResult.isCompleted(error.result))
      assert.include(error.message, "max_iterations")
      assert.strictEqual(error.result.timeline.at(-1)?._tag, "run.finished")
    }).pipe(Effect.provide(looping))
  )

  it.effect("R6.5 Effect.catchTag reads the stopped run's result", () =>
    Effect.gen(function* () {
      const reason = yield* Run.runOrFail({ goal: "loop", tools: [echo], limits: { maxIterations: 2 } }).pipe(
        Effect.map((result) => result.stopReason),
        Effect.catchTag("RunStopped", (stopped) => Effect.succeed(`stopped: ${stopped.result.stopReason}`))
      )
      assert.strictEqual(reason, "stopped: max_iterations")
    }).pipe(Effect.provide(looping))
  )
})
