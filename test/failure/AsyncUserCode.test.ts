import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as LiveView from "../../src/observability/LiveView.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunObserver from "../../src/run/RunObserver.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"

/**
 * What a JavaScript caller writes: an `async` function where an Effect, a decision or
 * nothing is due. Its Promise rejects; Node ends the process on a rejection nothing handles.
 */
const rejecting = (what: string) => async () => {
  throw new Error(`${what} is down`)
}

/** Erased boundary: the untyped caller's value, as JavaScript hands it over. */
const untyped = <A>(value: unknown): A => value as A

const rejections: Array<unknown> = []
const onRejection = (reason: unknown) => {
  rejections.push(reason)
}

/** Runs `run`, then lets a turn of the event loop pass, and says which rejections nothing handled. */
const unhandledAfter = <A, E>(run: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    rejections.length = 0
    process.on("unhandledRejection", onRejection)
    const result = yield* run
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    process.off("unhandledRejection", onRejection)
    return { result, unhandled: rejections.map(String) }
  })

const plain = (name: string, options: Partial<Tool.Options<object, string, never>> = {}) =>
  Tool.make({
    name,
    description: name,
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "read",
    handler: () => Effect.succeed("ok"),
    ...options
  })

const callThenAnswer = (name: string) =>
  ScriptedModel.layer([ScriptedModel.toolCall(name, {}), ScriptedModel.finalAnswer("done")])

describe("R12 user code written as an async function that rejects", () => {
  it.live("R12 a tool handler: the call fails not_an_effect and the process lives on", () =>
    Effect.gen(function* () {
      const lookup = plain("lookup", { handler: untyped(rejecting("the database")) })
      const { result, unhandled } = yield* unhandledAfter(
        Run.run({ goal: "g", tools: [lookup] }).pipe(Effect.provide(callThenAnswer("lookup")))
      )
      assert.deepStrictEqual(unhandled, [])
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.strictEqual(failed?._tag === "tool.failed" && failed.error.failure?.code, "not_an_effect")
    })
  )

  it.live(
    "R12 a tool's observe, a termination policy, a stop hook, a custom criterion, an observer and a permission check",
    () =>
      Effect.gen(function* () {
        const observed = plain("observed", { observe: untyped(rejecting("observe")) })
        const cases: ReadonlyArray<readonly [string, Effect.Effect<RunResult.RunResult>]> = [
          ["observe", Run.run({ goal: "g", tools: [observed] }).pipe(Effect.provide(callThenAnswer("observed")))],
          [
            "policy",
            Run.run({
              goal: "g",
              tools: [],
              policies: (defaults) => [{ name: "mine", decide: untyped(rejecting("policy")) }, ...defaults]
            }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))
          ],
          [
            "stop hook",
            Run.run({
              goal: "g",
              tools: [],
              validation: { stopHooks: [{ name: "h", check: untyped(rejecting("hook")) }] }
            }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))
          ],
          [
            "custom criterion",
            Run.run({
              goal: "g",
              tools: [],
              validation: {
                plan: [Validation.step("s", "s", [Criterion.custom("c", untyped(rejecting("criterion")))])]
              }
            }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))
          ],
          [
            "observer",
            Run.run({ goal: "g", tools: [] }).pipe(
              Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])),
              Effect.provide(
                RunObserver.layer(
                  Effect.succeed<RunObserver.Observer>({
                    attach: () => ({ event: untyped(rejecting("observer")), settled: Effect.void })
                  })
                )
              )
            )
          ],
          [
            "permission",
            Run.run({ goal: "g", tools: [plain("lookup")] }).pipe(
              Effect.provide(callThenAnswer("lookup")),
              Effect.provideService(Permission.Permission, { check: untyped(rejecting("permission")) })
            )
          ]
        ]
        for (const [what, run] of cases) {
          const { result, unhandled } = yield* unhandledAfter(run)
          assert.deepStrictEqual(unhandled, [], what)
          assert.isString(result.stopReason, what)
        }
      })
  )

  it.live("R12 a model's generate and an approval gate's request end the run, the process lives on", () =>
    Effect.gen(function* () {
      const model = Layer.succeed(Model.Model, {
        generate: untyped<Model.Model["Service"]["generate"]>(rejecting("model"))
      })
      const byModel = yield* unhandledAfter(Run.run({ goal: "g", tools: [] }).pipe(Effect.provide(model)))
      assert.deepStrictEqual(byModel.unhandled, [])
      assert.strictEqual(byModel.result.stopReason, "model_error")

      const pay = plain("pay", { sideEffect: "external", needsApproval: true })
      const gate = untyped<Approval.Gate>({
        request: rejecting("gate"),
        decide: () => Effect.void,
        expire: () => Effect.void,
        pending: Effect.succeed([])
      })
      const byGate = yield* unhandledAfter(
        Run.run({ goal: "g", tools: [pay] }).pipe(
          Effect.provide(callThenAnswer("pay")),
          Effect.provideService(Approval.ApprovalGate, gate)
        )
      )
      assert.deepStrictEqual(byGate.unhandled, [])
      assert.strictEqual(byGate.result.stopReason, "internal_error")
    })
  )

  it.live("R12 an observer's attach and a live view's write: the run ends as it would, the process lives on", () =>
    Effect.gen(function* () {
      const answer = ScriptedModel.layer([ScriptedModel.finalAnswer("done")])
      const attach = yield* unhandledAfter(
        Run.run({ goal: "g", tools: [] }).pipe(
          Effect.provide(answer),
          Effect.provide(
            RunObserver.layer(Effect.succeed<RunObserver.Observer>({ attach: untyped(rejecting("attach")) }))
          )
        )
      )
      assert.deepStrictEqual([attach.unhandled, attach.result.stopReason], [[], "goal_reached"])
      const view = yield* unhandledAfter(
        Run.run({ goal: "g", tools: [] }).pipe(
          Effect.provide(answer),
          Effect.provide(LiveView.layer({ write: untyped(rejecting("the terminal")), tty: false }))
        )
      )
      assert.deepStrictEqual([view.unhandled, view.result.stopReason], [[], "goal_reached"])
    })
  )

  it.live("R6.2 R12 a criterion's async match is no match: only true is, and its rejection is handled", () =>
    Effect.gen(function* () {
      const echo = plain("echo")
      const { result, unhandled } = yield* unhandledAfter(
        Run.run({
          goal: "g",
          tools: [echo],
          validation: {
            plan: [
              Validation.step("yes", "echo said yes", [
                Criterion.toolSucceeded(
                  "echo",
                  untyped(async () => false)
                )
              ]),
              Validation.step("ok", "echo was fine", [Criterion.toolSucceeded("echo", untyped(rejecting("match")))])
            ]
          }
        }).pipe(Effect.provide(callThenAnswer("echo")))
      )
      assert.deepStrictEqual(unhandled, [])
      assert.notStrictEqual(result.status, "completed")
      assert.strictEqual(result.stopReason, "validation_failed")
    })
  )

  it.live("R10 a FaultyJournal predicate written async is refused when asked: its fault would never be injected", () =>
    Effect.gen(function* () {
      const { result, unhandled } = yield* unhandledAfter(
        Effect.gen(function* () {
          const faulty = FaultyJournal.make(yield* Journal.Journal, { conflictOn: untyped(rejecting("conflictOn")) })
          return yield* Run.run({ goal: "g", tools: [] }).pipe(
            Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])),
            Effect.provideService(Journal.Journal, faulty.journal)
          )
        }).pipe(Effect.provide(Journal.layerMemory))
      )
      assert.deepStrictEqual(unhandled, [])
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "conflictOn(1) answered a Promise, not a boolean")
    })
  )
})
