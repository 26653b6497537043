import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Layer, Schema, Scope } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as RunObserver from "../../src/run/RunObserver.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"

/** Each run's model asks for `work` with its own number, then answers. */
const numbered = (next: () => number) =>
  Layer.merge(
    ScriptedModel.layerFunction((request) =>
      request.iteration === 1 ? ScriptedModel.toolCall("work", { n: next() }) : ScriptedModel.finalAnswer("done")
    ),
    NodeServices.layer
  )

describe("Run.start in a scope", () => {
  it.live(
    "R5.1 closing a scope tells every run of it and of the scopes forked from it to stop at once, then waits for each (reviews 194, 195)",
    () =>
      Effect.gen(function* () {
        const runs = 8
        const entered = Array.from({ length: runs }, () => Deferred.makeUnsafe<void>())
        let told = 0
        const toldWhenCleaned: Array<number> = []
        // A tool that works until it is told to stop, then takes a while to clean up.
        const work = Tool.make({
          name: "work",
          description: "works until cancelled",
          input: Schema.Struct({ n: Schema.Number }),
          output: Schema.String,
          handler: ({ n }) =>
            Effect.andThen(Deferred.succeed(entered[n] as Deferred.Deferred<void>, undefined), Effect.never).pipe(
              Effect.onInterrupt(() =>
                Effect.sync(() => told++).pipe(
                  Effect.andThen(Effect.sleep(30)),
                  Effect.andThen(Effect.sync(() => toldWhenCleaned.push(told)))
                )
              )
            )
        })
        let n = 0
        const scope = yield* Scope.make()
        // Runs in the scope, in a scope forked from it, and in one forked from that.
        const child = yield* Scope.fork(scope)
        const scopes = [scope, child, yield* Scope.fork(child)]
        const handles = yield* Effect.forEach(Array.from({ length: runs }), (_, k) =>
          Run.start({ goal: "g", tools: [work] }).pipe(
            Scope.provide(scopes[k % scopes.length] as Scope.Scope),
            Effect.provide(numbered(() => n++))
          )
        )
        yield* Effect.forEach(entered, Deferred.await, { discard: true })
        yield* Scope.close(scope, Exit.void)
        // Before, each run was told only once the one before it had ended: the first cleanup
        // ended with one run told, and the last run kept working all that time (review 194);
        // then the runs of each forked scope were told only once the scope below had closed (195).
        assert.deepStrictEqual(
          toldWhenCleaned,
          Array.from({ length: runs }, () => runs)
        )
        const results = yield* Effect.forEach(handles, (handle) => handle.result)
        assert.deepStrictEqual(new Set(results.map((result) => result.stopReason)), new Set(["cancelled"]))
      })
  )

  it.effect("R5 a run that ended leaves the scope it was started in; one still going stays (review 194)", () =>
    Effect.gen(function* () {
      const work = Tool.make({
        name: "work",
        description: "answers",
        input: Schema.Struct({ n: Schema.Number }),
        output: Schema.String,
        handler: ({ n }) => Effect.succeed(`done ${n}`)
      })
      let n = 0
      const scope = yield* Scope.make()
      for (let i = 0; i < 50; i++) {
        const handle = yield* Run.start({ goal: "g", tools: [work] }).pipe(
          Scope.provide(scope),
          Effect.provide(numbered(() => n++))
        )
        assert.strictEqual((yield* handle.result).status, "completed")
      }
      // Before, each ended run's cancel stayed among the scope's finalizers, with its whole log,
      // until the scope closed (10,000 ended runs held 300 MB).
      assert.strictEqual(scope.state._tag, "Empty")
      const hang = Tool.make({
        name: "work",
        description: "waits",
        input: Schema.Struct({ n: Schema.Number }),
        output: Schema.String,
        handler: () => Effect.never
      })
      const going = yield* Run.start({ goal: "g", tools: [hang] }).pipe(
        Scope.provide(scope),
        Effect.provide(numbered(() => n++))
      )
      assert.strictEqual(scope.state._tag, "Open")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual((yield* going.result).stopReason, "cancelled")
    })
  )

  it.live(
    "R1.2 R8 a cancel from an observer of the terminal state is no stop: run.finished follows it (review 194)",
    () =>
      Effect.gen(function* () {
        let handle: Run.Handle | undefined
        const observer: RunObserver.Observer = {
          attach: () => ({
            event: (event) => {
              if (event._tag === "state.changed" && event.to === "completed" && handle !== undefined) {
                Effect.runSync(Effect.forkDetach(handle.cancel, { startImmediately: true }))
              }
            },
            settled: Effect.void
          })
        }
        const result = yield* Effect.scoped(
          Effect.gen(function* () {
            handle = yield* Run.start({ goal: "g", tools: [] })
            return yield* handle.result
          })
        ).pipe(
          Effect.provide(RunObserver.layer(Effect.succeed(observer))),
          Effect.provide(
            Layer.merge(
              ScriptedModel.layerFunction(() => Effect.as(Effect.sleep(5), ScriptedModel.finalAnswer("done"))),
              NodeServices.layer
            )
          )
        )
        assert.strictEqual(result.status, "completed")
        // Before, `run.stopping { by: "cancel", state: "completed" }` came between them.
        assert.deepStrictEqual(
          result.timeline.slice(-2).map((event) => event._tag),
          ["state.changed", "run.finished"]
        )
        assert.isFalse(result.timeline.some((event) => event._tag === "run.stopping"))
      })
  )
})
