import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Result, Schema } from "effect"
import * as RunLog from "../../../src/events/RunLog.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as Model from "../../../src/model/Model.ts"
import * as RunContext from "../../../src/run/internal/RunContext.ts"
import { resolve } from "../../../src/run/internal/resolve/Resolve.ts"
import * as Loop from "../../../src/run/loop/Loop.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as Deadline from "../../../src/time/Deadline.ts"
import * as Tool from "../../../src/tools/Tool.ts"

const echo = Tool.make({
  name: "echo",
  description: "Echoes its text.",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ text: Schema.String }),
  sideEffect: "none",
  idempotent: true,
  handler: ({ text }) => Effect.succeed({ text })
})

/** Runs the loop alone (no lifecycle, no validation) on a scripted model; returns its outcome and the requests. */
const loop = (script: ReadonlyArray<ScriptedModel.Step>, limits: { readonly maxIterations?: number } = {}) =>
  Effect.gen(function* () {
    const checked = resolve({ goal: "say hi", system: "be brief", tools: [echo], limits })
    if (Result.isFailure(checked)) return yield* Effect.die(checked.failure)
    const resolved = checked.success
    const clock = yield* Clock.Clock
    const ctx = RunContext.make({
      runId: "loop",
      clock,
      deadlineAt: clock.currentTimeMillisUnsafe() + 60_000,
      stopGraceMillis: 5_000
    })
    RunContext.emit(ctx, ({ runId, seq, at }) => ({
      _tag: "run.started",
      goal: "say hi",
      system: "be brief",
      model: "model",
      tools: ["echo"],
      deadlineAt: ctx.deadlineAt,
      runId,
      seq,
      at
    }))
    yield* RunContext.transition(ctx, "initializing")
    yield* RunContext.transition(ctx, "planning")
    const requests: Array<Model.Request> = []
    const model = ScriptedModel.make(script)
    const outcome = yield* Loop.run(ctx, resolved.loop).pipe(
      Deadline.run(ctx.deadlineAt),
      Effect.provideService(Model.Model, {
        generate: (request) => {
          requests.push(request)
          return model.generate(request)
        }
      })
    )
    return { outcome, requests, ctx }
  })

describe("Loop.run", () => {
  it.effect("R6.1 ask, run the batch, ask again: a final answer is the candidate it stops with", () =>
    Effect.gen(function* () {
      const { outcome, requests, ctx } = yield* loop([
        ScriptedModel.toolCall("echo", { text: "hi" }, "m1"),
        ScriptedModel.finalAnswer("hi")
      ])
      assert.deepStrictEqual([outcome.reason, outcome.finalAnswer], ["goal_reached", "hi"])
      assert.strictEqual(requests.length, 2)
      // The second request carries the first answer and its tool result, under the model's own id.
      assert.deepStrictEqual(
        requests[1]?.messages.map((m) => m._tag),
        ["system", "user", "assistant", "tool"]
      )
      assert.deepStrictEqual(requests[1]?.messages[3], {
        _tag: "tool",
        toolCallId: "m1",
        name: "echo",
        content: '{"text":"hi"}'
      })
      assert.deepStrictEqual(RunLog.messages(ctx.log).length, 5)
    })
  )

  it.effect("R2.2 an empty answer is no answer: the model is reminded and asked again", () =>
    Effect.gen(function* () {
      const { outcome, requests } = yield* loop([ScriptedModel.finalAnswer("  "), ScriptedModel.finalAnswer("done")])
      assert.strictEqual(outcome.reason, "goal_reached")
      assert.strictEqual(requests[1]?.messages.at(-1)?._tag, "user")
      assert.include(requests[1]?.messages.at(-1)?.content ?? "", "empty_output")
    })
  )

  it.effect("R11 an answer cut off by the output limit is sent back to be finished, never taken as final", () =>
    Effect.gen(function* () {
      const { outcome, ctx } = yield* loop([ScriptedModel.cutOff("hal"), ScriptedModel.finalAnswer("half done")])
      assert.deepStrictEqual([outcome.reason, outcome.finalAnswer], ["goal_reached", "half done"])
      const kinds = ctx.events.flatMap((e) =>
        e._tag === "recovery.started" || e._tag === "recovery.completed" ? [`${e._tag} ${e.kind}`] : []
      )
      assert.deepStrictEqual(kinds, ["recovery.started output_truncation", "recovery.completed output_truncation"])
    })
  )

  it.effect("R3.3 a model failure nothing recovers ends the loop with its own stop", () =>
    Effect.gen(function* () {
      const broken = new Failure.Permanent({
        source: "provider",
        category: "unauthorized",
        code: "http_401",
        attempts: 1,
        hint: "bad key"
      })
      const { outcome } = yield* loop([broken])
      assert.strictEqual(outcome.reason, "model_error")
      assert.include(outcome.detail, "http_401")
    })
  )

  it.effect("R2.1 a policy stops the loop at its checkpoint, with the policy named", () =>
    Effect.gen(function* () {
      const { outcome } = yield* loop(
        [ScriptedModel.toolCall("echo", { text: "1" }), ScriptedModel.toolCall("echo", { text: "2" })],
        { maxIterations: 2 }
      )
      assert.strictEqual(outcome.reason, "max_iterations")
      assert.strictEqual(outcome.policy, "max_iterations")
    })
  )
})
