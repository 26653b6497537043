/**
 * What a tool's handler, postcondition and `reconcile` require flows, each its own, to the
 * tool and to `Run.run`'s requirements (review 173: a handler and a postcondition needing
 * different services did not compile). Checked by the compiler (`npm test` typechecks the
 * tests) and by running the tool with each service provided.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Schema } from "effect"
import { Tool as AiTool, Toolkit } from "effect/ai"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as AiTools from "../../src/tools/AiTools.ts"
import * as Tool from "../../src/tools/Tool.ts"

class Orders extends Context.Service<Orders, { readonly place: (sku: string) => string }>()("test/Orders") {}
class Ledger extends Context.Service<Ledger, { readonly has: (order: string) => boolean }>()("test/Ledger") {}
class Bank extends Context.Service<Bank, { readonly status: (sku: string) => string | undefined }>()("test/Bank") {}

/** Whether `A` is exactly `B`. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false

/** The handler, on `Orders`; the postcondition, on `Ledger`. */
const place = ({ sku }: { readonly sku: string }) =>
  Effect.gen(function* () {
    return (yield* Orders).place(sku)
  })
const booked = (_input: unknown, output: string) =>
  Effect.gen(function* () {
    return (yield* Ledger).has(output)
  })

const order = Tool.make({
  name: "order",
  description: "places an order",
  input: Schema.Struct({ sku: Schema.String }),
  output: Schema.String,
  sideEffect: "external",
  handler: place,
  postcondition: booked,
  reconcile: ({ sku }) =>
    Effect.gen(function* () {
      const found = (yield* Bank).status(sku)
      return found === undefined ? { _tag: "NotApplied" as const } : { _tag: "Applied" as const, output: found }
    })
})

describe("R12 a tool's requirements: the handler's, the postcondition's and reconcile's (review 173)", () => {
  it.effect("each flows to the tool and to Run.run's R, and the run uses each", () => {
    const requires: Same<Tool.Requirements<typeof order>, Orders | Ledger | Bank> = true
    assert.isTrue(requires)
    const run = Run.run({ goal: "order one", tools: [order] })
    const runRequires: Same<Effect.Services<typeof run> & (Orders | Ledger | Bank), Orders | Ledger | Bank> = true
    assert.isTrue(runRequires)
    const placed: Array<string> = []
    return Effect.gen(function* () {
      const result = yield* run.pipe(
        Effect.provide(
          ScriptedModel.layer([ScriptedModel.toolCall("order", { sku: "a1" }), ScriptedModel.finalAnswer("ordered")])
        ),
        Effect.provideService(Orders, {
          place: (sku) => {
            placed.push(sku)
            return `order-${sku}`
          }
        }),
        Effect.provideService(Ledger, { has: (o) => o === "order-a1" }),
        Effect.provideService(Bank, { status: () => undefined })
      )
      assert.deepStrictEqual([result.status, placed], ["completed", ["a1"]])
      const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
      assert.isDefined(succeeded)
    })
  })

  it("so do an effect/ai tool's, through AiTools.fromTool", () => {
    const Place = AiTool.make("place", { parameters: Schema.Struct({ sku: Schema.String }), success: Schema.String })
    const tool = AiTools.fromTool(Place, { handler: place, postcondition: booked })
    const requires: Same<Tool.Requirements<typeof tool>, Orders | Ledger> = true
    assert.isTrue(requires)
    assert.strictEqual(Toolkit.make(Place).tools.place.name, tool.name)
  })
})
