// The README's effect/ai tools example, run against a scripted model: `npm run example:ai-tools`.
import { Effect, Schema } from "effect"
import { Tool as AiTool, Toolkit } from "effect/ai"
import { Run, Timeline } from "effect-agent-runtime"
import { ScriptedModel } from "effect-agent-runtime/testing"
import { AiTools } from "effect-agent-runtime/tools"

const GetWeather = AiTool.make("get_weather", {
  description: "The weather in a city",
  parameters: Schema.Struct({ city: Schema.String }),
  success: Schema.Struct({ celsius: Schema.Number })
}).annotate(AiTool.Readonly, true)

const WeatherKit = Toolkit.make(GetWeather)
const WeatherHandlers = WeatherKit.toLayer({
  get_weather: ({ city }) => Effect.succeed({ celsius: city === "Lisbon" ? 21 : 9 })
})

const program = Effect.gen(function* () {
  const tools = yield* AiTools.fromToolkit(WeatherKit, { get_weather: { timeout: "5 seconds" } })
  return yield* Run.run({ goal: "How warm is Lisbon?", tools })
}).pipe(Effect.provide(WeatherHandlers))

const model = ScriptedModel.layer([
  ScriptedModel.toolCall("get_weather", { city: "Lisbon" }),
  ScriptedModel.finalAnswer("21 °C in Lisbon")
])

const result = await Effect.runPromise(program.pipe(Effect.provide(model)))
console.log(result.status, result.stopReason) // completed goal_reached
console.log(Timeline.format(result.timeline))
