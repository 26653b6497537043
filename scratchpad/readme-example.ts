// The README's example, verbatim: `npm run example`.
import { Effect, Schema } from "effect"
import { Run, Timeline, Tool } from "effect-agent-runtime"
import { ScriptedModel } from "effect-agent-runtime/testing"

const add = Tool.make({
  name: "add",
  description: "Add two numbers",
  input: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  output: Schema.Number,
  sideEffect: "none",
  handler: ({ a, b }) => Effect.succeed(a + b)
})

const model = ScriptedModel.layer([ScriptedModel.toolCall("add", { a: 2, b: 3 }), ScriptedModel.finalAnswer("5")])

const result = await Effect.runPromise(
  Run.run({ goal: "What is 2 + 3?", tools: [add], limits: { maxIterations: 5 } }).pipe(Effect.provide(model))
)
console.log(result.status, result.stopReason) // completed goal_reached
console.log(Timeline.format(result.timeline))
