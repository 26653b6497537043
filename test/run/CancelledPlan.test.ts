/**
 * R5.1, R6.3: a cancelled run ends `cancelled` whatever it did, and with a plan it lists
 * the steps it completed with evidence and those it did not, as a partial run does.
 * Before, a cancelled run listed nothing: 8 of 10 items done read as nothing done.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Schema } from "effect"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import type * as Validation from "../../src/validation/Validation.ts"

const fetchTool = Tool.make({
  name: "fetch",
  description: "Fetches the data.",
  input: Schema.Struct({}),
  output: Schema.Struct({ rows: Schema.Number }),
  sideEffect: "none",
  handler: () => Effect.succeed({ rows: 3 })
})

/** A tool that signals it started, then waits: as `stuck`, in a region no interruption reaches. */
const waitingTool = (entered: Deferred.Deferred<void>, stuck: boolean) =>
  Tool.make({
    name: "report",
    description: "Writes the report.",
    input: Schema.Struct({}),
    output: Schema.Struct({ ok: Schema.Boolean }),
    sideEffect: "none",
    handler: () => {
      const wait = Effect.sleep("1 hour")
      return Deferred.succeed(entered, undefined).pipe(
        Effect.andThen(stuck ? Effect.uninterruptible(wait) : wait),
        Effect.as({ ok: true })
      )
    }
  })

const plan: ReadonlyArray<Validation.PlanStep> = [
  { id: "fetch", description: "fetch the data", required: true, criteria: [Criterion.toolSucceeded("fetch")] },
  { id: "report", description: "write the report", required: true, criteria: [Criterion.toolSucceeded("report")] }
]

const model = Layer.mergeAll(
  ScriptedModel.layer([
    ScriptedModel.toolCall("fetch", {}),
    ScriptedModel.toolCall("report", {}),
    ScriptedModel.finalAnswer("done")
  ]),
  NodeServices.layer
)

/** A run cancelled while its second step's tool runs. */
const cancelledWhileReporting = (options: { readonly stuck: boolean; readonly plan?: typeof plan }) =>
  Effect.gen(function* () {
    const entered = yield* Deferred.make<void>()
    const handle = yield* Run.start({
      goal: "Fetch the data and write the report.",
      tools: [fetchTool, waitingTool(entered, options.stuck)],
      time: { stopGrace: "200 millis" },
      ...(options.plan === undefined ? {} : { validation: { plan: options.plan } })
    })
    yield* Deferred.await(entered)
    return yield* handle.cancel
  }).pipe(Effect.scoped, Effect.provide(model))

const phases = (result: RunResult.RunResult) =>
  result.timeline.flatMap((e) => (e._tag === "state.changed" ? [e.to] : []))

describe("R5.1 R6.3 a cancelled run's plan report", () => {
  for (const stuck of [false, true]) {
    it.live(
      `R6.3 cancelled with one of two plan steps done (${stuck ? "left behind past the stop grace" : "stopped in time"}): cancelled, the done step listed with its evidence`,
      () =>
        Effect.gen(function* () {
          const result = yield* cancelledWhileReporting({ stuck, plan })
          assert.strictEqual(result.status, "cancelled")
          assert.strictEqual(result.stopReason, "cancelled")
          assert.deepStrictEqual(
            result.completed.map((item) => item.id),
            ["fetch"]
          )
          assert.deepStrictEqual(
            result.unfinished.map((item) => item.id),
            ["report"]
          )
          // A call left running has an unknown outcome: the next safe step is to check it, not more plan work (R6.3).
          assert.deepStrictEqual(
            [result.nextStep, result.pendingActions.map((a) => a.callId)],
            stuck ? [undefined, ["call_2"]] : ["write the report", []]
          )
          assert.isAbove(result.evidence.length, 0)
          assert.deepStrictEqual(phases(result).slice(-2), ["validating", "cancelled"])
          assert.isTrue(result.timeline.some((e) => e._tag === "validation.checked"))
          if (stuck) assert.include(result.detail, "left behind")
          assert.strictEqual(result.timeline.at(-1)?._tag, "run.finished")
        })
    )
  }

  it.live("R5.1 a cancelled run with no plan ends as it stands: no validating phase, nothing listed", () =>
    Effect.gen(function* () {
      const result = yield* cancelledWhileReporting({ stuck: false })
      assert.strictEqual(result.status, "cancelled")
      assert.deepStrictEqual(result.completed, [])
      assert.deepStrictEqual(result.checks, [])
      assert.notInclude(phases(result), "validating")
    })
  )
})
