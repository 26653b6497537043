// The same run in TypeScript, type-checked with moduleResolution nodenext and bundler, then
// bundled by esbuild. It names the public types a user writes down, and builds (never runs) a
// real provider's layer over each kind of HttpClient, so `effect-agent-runtime/providers` and
// `effect-agent-runtime/providers/node` are checked as well.
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Redacted, Schema } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import type { HttpClient } from "effect/http/HttpClient"
import { type Model, Run, type RunResult, type StopReason, Tool } from "effect-agent-runtime"
import { OpenAiCompatible } from "effect-agent-runtime/providers"
import { NodeTransport } from "effect-agent-runtime/providers/node"
import { ScriptedModel } from "effect-agent-runtime/testing"

const add = Tool.make({
  name: "add",
  description: "Add two numbers",
  input: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  output: Schema.Number,
  sideEffect: "none",
  handler: ({ a, b }) => Effect.succeed(a + b)
})
const model: Layer.Layer<Model.Model> = ScriptedModel.layer([
  ScriptedModel.toolCall("add", { a: 2, b: 3 }),
  ScriptedModel.finalAnswer("5")
])
const openai: Layer.Layer<Model.Model, OpenAiCompatible.InvalidOptions, HttpClient> = OpenAiCompatible.layer(
  OpenAiCompatible.openai({ apiKey: Redacted.make("sk-not-used") })
)

const overUndici: Layer.Layer<Model.Model, OpenAiCompatible.InvalidOptions | NodeTransport.InvalidOptions> =
  openai.pipe(Layer.provide(NodeTransport.layer({ maxSockets: 8 })))
const overFetch: Layer.Layer<Model.Model, OpenAiCompatible.InvalidOptions> = openai.pipe(
  Layer.provide(FetchHttpClient.layer)
)

const result: RunResult.RunResult = await Effect.runPromise(
  Run.run({ goal: "What is 2 + 3?", tools: [add], limits: { maxIterations: 5 } }).pipe(
    Effect.provide(Layer.mergeAll(model, NodeServices.layer))
  )
)
const reason: StopReason.StopReason = result.stopReason
if (![openai, overUndici, overFetch].every(Layer.isLayer)) throw new Error("a provider layer is not a Layer")
console.log(result.status, reason)
