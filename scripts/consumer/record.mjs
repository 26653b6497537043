// A run recorded by the Recorder of `effect-agent-runtime/observability`, for the package
// check to open with the package's `bin` (`effect-agent-runtime view`). Prints the file.
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { Run, Tool } from "effect-agent-runtime"
import { Recorder } from "effect-agent-runtime/observability"
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
const recorded = Layer.provide(Recorder.layer({ directory: "runs" }), NodeServices.layer)

const file = await Effect.runPromise(
  Effect.gen(function* () {
    const result = yield* Run.run({ goal: "What is 2 + 3?", tools: [add] })
    const recorder = yield* Recorder.Recorder
    return recorder.path(result.runId)
  }).pipe(Effect.provide(model), Effect.provide(recorded))
)
console.log(file)
