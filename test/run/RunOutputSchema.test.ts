import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema, SchemaGetter } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"

describe("Run.run({ output }) with a schema that throws", () => {
  it.effect("R12 R6.1 a throwing output schema is not the model's mistake: no correction, the defect is named", () =>
    Effect.gen(function* () {
      const Throws = Schema.Struct({ a: Schema.Number }).check(
        Schema.makeFilter(() => {
          throw new Error("schema boom")
        })
      )
      let asked = 0
      const answer = ScriptedModel.finalAnswer('{"a":1}')
      const result = yield* Run.run({ goal: "g", tools: [], output: Throws }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            () => {
              asked++
              return answer
            },
            () => {
              asked++
              return answer
            },
            () => {
              asked++
              return answer
            },
            () => {
              asked++
              return answer
            }
          ])
        )
      )
      const corrections = result.timeline.filter((e) => e._tag === "recovery.started" && e.kind === "output_correction")
      assert.lengthOf(corrections, 0)
      assert.strictEqual(asked, 1)
      // User code that broke its contract ends the run, described safely by its type (R3.1, R12).
      assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"])
      assert.include(result.detail, "the output schema failed while decoding the final answer")
    })
  )

  it.effect(
    "R12 R6.1 an output that throws when read (a getter, a Proxy) is the schema's defect, not a completed run (review 79)",
    () =>
      Effect.gen(function* () {
        const hostile = [
          Object.defineProperty({}, "city", {
            enumerable: true,
            get: () => {
              throw new Error("getter boom")
            }
          }),
          new Proxy(
            {},
            {
              getPrototypeOf: () => {
                throw new Error("trap boom")
              }
            }
          )
        ]
        for (const value of hostile) {
          const Odd = Schema.Unknown.pipe(
            Schema.decodeTo(Schema.Unknown, {
              decode: SchemaGetter.transform(() => value),
              encode: SchemaGetter.transform((out) => out)
            })
          )
          const result = yield* Run.run({ goal: "g", tools: [], output: Odd }).pipe(
            Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer('{"city":"Paris"}')]))
          )
          // Before: completed, no checks, no output, and a defect for its detail.
          assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"])
          assert.include(result.detail, "the output schema failed while decoding the final answer")
        }
      })
  )

  it.effect("R6.1 R12 the answer the loop decoded is the one judged: the schema runs once per answer (review 90)", () =>
    Effect.gen(function* () {
      // Decodes the first time, then throws, or refuses: a second decode decided the run.
      for (const second of ["throws", "refuses"] as const) {
        let decodes = 0
        const Flaky = Schema.Struct({ a: Schema.Number }).check(
          Schema.makeFilter(() => {
            decodes += 1
            if (decodes === 1) return true
            if (second === "throws") throw new Error("second decode")
            return "refused the second time"
          })
        )
        const result = yield* Run.run({ goal: "g", tools: [], output: Flaky }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer('{"a":1}')]))
        )
        assert.deepStrictEqual([result.status, result.stopReason], ["completed", "goal_reached"], second)
        assert.deepStrictEqual(result.output, { a: 1 })
        assert.strictEqual(decodes, 1, second)
      }
    })
  )

  it.effect(
    "R6.1 R12 the typed output is the run's own frozen copy: objects a schema put in from outside stay the user's (review 90)",
    () =>
      Effect.gen(function* () {
        // Module-level defaults a transform puts into the decoded value: the run froze them in place.
        const defaults = { tags: ["a"], limits: { n: 1 } }
        const WithDefaults = Schema.Unknown.pipe(
          Schema.decodeTo(Schema.Unknown, {
            decode: SchemaGetter.transform((value) => ({ value, defaults })),
            encode: SchemaGetter.transform((out) => out)
          })
        )
        const result = yield* Run.run({ goal: "g", tools: [], output: WithDefaults }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer('{"x":1}')]))
        )
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(result.output, { value: { x: 1 }, defaults: { tags: ["a"], limits: { n: 1 } } })
        assert.isTrue(Object.isFrozen(result.output))
        assert.isFalse(Object.isFrozen(defaults) || Object.isFrozen(defaults.tags) || Object.isFrozen(defaults.limits))
        defaults.tags.push("b")
        assert.deepStrictEqual(result.output, { value: { x: 1 }, defaults: { tags: ["a"], limits: { n: 1 } } })
      })
  )
})
