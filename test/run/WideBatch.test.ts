/**
 * A batch of many calls in flight at once, cut off (R5.1, R12, R8): effect's `forEach`
 * interrupts the calls left each time one ends, and calls that end as they are interrupted
 * had ended inside one another. Review 196: 1,000 calls cancelled at once overflowed the
 * stack (the process died, "async hook stack has become corrupted"), or the run waited out its
 * whole stop grace and said its calls were left behind; with approvals, calls were withdrawn twice.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"

const calls = 1_500

/** A model whose first answer asks for `calls` calls of `name` at once. */
const wide = (name: string) =>
  Layer.mergeAll(
    ScriptedModel.layerFunction((request) =>
      request.iteration === 1
        ? ScriptedModel.toolCalls(...Array.from({ length: calls }, (_, k) => [name, { k }] as const))
        : ScriptedModel.finalAnswer("done")
    ),
    NodeServices.layer,
    Approval.layerMemory
  )

const options = { goal: "g", concurrency: calls, limits: { maxToolCalls: calls }, time: { stopGrace: 20_000 } }

/** Cancels the run once `ready` says all its calls wait, and gives its result. */
const cancelWhen = (tool: Tool.Any<never>, ready: (handle: Run.Handle) => Effect.Effect<boolean, unknown>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* Run.start({ ...options, tools: [tool] })
      while (!(yield* ready(handle))) yield* Effect.sleep(10)
      return yield* handle.cancel
    })
  )

describe("a wide batch cut off (R5.1, R12)", () => {
  it.live(
    "R5.1 R12 1,500 calls in flight, cancelled at once: each is interrupted once, nothing left behind (review 196)",
    () =>
      Effect.gen(function* () {
        let entered = 0
        const hang = Tool.make({
          name: "hang",
          description: "waits",
          input: Schema.Struct({ k: Schema.Number }),
          output: Schema.String,
          handler: () =>
            Effect.andThen(
              Effect.sync(() => entered++),
              Effect.never
            )
        })
        const result = yield* cancelWhen(hang, () => Effect.sync(() => entered === calls)).pipe(
          Effect.provide(wide("hang"))
        )
        assert.strictEqual(result.stopReason, "cancelled")
        assert.notInclude(result.detail, "left behind")
        const interrupted = result.timeline.flatMap((e) => (e._tag === "tool.interrupted" ? [e.callId] : []))
        assert.strictEqual(new Set(interrupted).size, calls)
        assert.strictEqual(interrupted.length, calls)
      })
  )

  it.live("R7 R8 1,500 calls waiting for approval, cancelled at once: each is decided once (review 196)", () =>
    Effect.gen(function* () {
      const ask = Tool.make({
        name: "ask",
        description: "needs approval",
        input: Schema.Struct({ k: Schema.Number }),
        output: Schema.String,
        needsApproval: true,
        handler: () => Effect.succeed("done")
      })
      const result = yield* cancelWhen(ask, (handle) =>
        Effect.map(handle.pendingApprovals, (pending) => pending.length === calls)
      ).pipe(Effect.provide(wide("ask")))
      assert.strictEqual(result.stopReason, "cancelled")
      assert.notInclude(result.detail, "left behind")
      const decided = result.timeline.flatMap((e) => (e._tag === "approval.decided" ? [e.callId] : []))
      // Before, 75 to 174 calls were withdrawn twice.
      assert.strictEqual(decided.length, calls)
      assert.strictEqual(new Set(decided).size, calls)
    })
  )
})
