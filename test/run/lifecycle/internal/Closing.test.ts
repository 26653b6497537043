import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import * as Journal from "../../../../src/journal/Journal.ts"
import * as Run from "../../../../src/run/Run.ts"
import * as ScriptedModel from "../../../../src/testing/ScriptedModel.ts"
import * as RealTime from "../../../../src/time/RealTime.ts"
import * as Approval from "../../../../src/tools/Approval.ts"
import * as Tool from "../../../../src/tools/Tool.ts"

const pay = Tool.make({
  name: "pay",
  description: "Pays",
  input: Schema.Struct({ amount: Schema.Number }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: () => Effect.succeed("paid")
})

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("pay", { amount: 10 }, "c1") : ScriptedModel.finalAnswer("paid")
)

/**
 * A run on a journal whose list of pending approvals hangs once its call is decided. The
 * result comes after how many milliseconds of real time, if within `millis`.
 */
const closedWithHangingList = (millis: number) =>
  Effect.gen(function* () {
    const inner = yield* Journal.Journal
    let hang = false
    const journal: Journal.Service = {
      ...inner,
      pendingApprovals: (filter) => (hang ? Effect.never : inner.pendingApprovals(filter))
    }
    const handle = yield* Run.start({ goal: "pay", tools: [pay], runId: "r1" }).pipe(
      Effect.provide(model),
      Effect.provideService(Journal.Journal, journal),
      Effect.provideService(Approval.ApprovalGate, Approval.makeMemory())
    )
    yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
    hang = true
    const started = performance.now()
    yield* handle.approve("c1", { by: "ops" })
    const given = yield* Effect.raceFirst(
      Effect.map(handle.result, Option.some),
      Effect.as(RealTime.sleep(millis), Option.none())
    )
    return Option.map(given, (result) => ({ result, tookMillis: performance.now() - started }))
  }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Journal.layerMemory, NodeServices.layer)))

describe("Closing: a finished run's leftover approvals (R7, R12)", () => {
  it.effect(
    "R12 R7 a store that never lists them holds no result up, with a TestClock never moved: the calls close with the run's last commit",
    () =>
      Effect.gen(function* () {
        const closed = yield* closedWithHangingList(4_000)
        // Before, the bound was on the run's clock: the result never came.
        assert.isTrue(Option.isSome(closed), "the result never came")
        const { result, tookMillis } = Option.getOrThrow(closed)
        assert.strictEqual(result.status, "completed", result.detail)
        assert.isBelow(tookMillis, 3_000)
      }),
    10_000
  )
})
