// A typed final output (`npm run example:output`): the first answer does not decode, so the
// model is told which field is wrong; the second does, and `result.output` is typed.
import { Effect, Schema } from "effect"
import { Run, Timeline } from "effect-agent-runtime"
import { ScriptedModel } from "effect-agent-runtime/testing"

const Capital = Schema.Struct({ city: Schema.String, population: Schema.Number })

const model = ScriptedModel.layer([
  ScriptedModel.finalAnswer('{"city": "Paris", "population": "about two million"}'),
  ScriptedModel.finalAnswer('```json\n{"city": "Paris", "population": 2102650}\n```')
])

const result = await Effect.runPromise(
  Run.run({ goal: "The capital of France and its population, as JSON", tools: [], output: Capital }).pipe(
    Effect.provide(model)
  )
)
console.log(result.status, result.stopReason) // completed goal_reached
console.log(result.output?.city, result.output?.population) // Paris 2102650
console.log(Timeline.format(result.timeline))
