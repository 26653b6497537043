import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"

// BUG (src/run/internal/FinalOutput.ts:28-34): an output schema that throws (user code) is reported as the model's
// mismatch ("it does not match the output schema"): the model is asked to correct a valid answer until the budget is
// spent, the run ends validation_failed, and the thrown error is named nowhere (README Guarantees: named in the detail).
describe("review: an output schema that throws", () => {
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
      assert.include(`${result.detail} ${result.checks.map((c) => c.detail).join(" ")}`, "schema boom")
    })
  )
})
