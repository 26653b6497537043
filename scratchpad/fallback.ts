// Circuit breakers and a fallback model (R3.9), runnable: `npm run example:fallback`.
// The primary provider is down (HTTP 503 on every call). The first run retries it, gives
// up, and falls back to the backup; its failures open the primary's circuit. The second
// run finds the circuit open and goes straight to the backup, without calling the primary.
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { type Model, Run, Timeline } from "effect-agent-runtime"
import { Breakers } from "effect-agent-runtime/recovery"
import { FaultyModel, ScriptedModel } from "effect-agent-runtime/testing"

const primary = FaultyModel.make(Array.from({ length: 10 }, () => FaultyModel.httpError(503)))

const backup = (): Model.Fallback => ({
  name: "backup",
  model: ScriptedModel.make([ScriptedModel.finalAnswer("answered by the backup")])
})

const program = Effect.gen(function* () {
  for (const label of ["first run", "second run"]) {
    const before = primary.calls.length
    const result = yield* Run.run({
      goal: "Say hello",
      tools: [],
      modelName: "primary",
      recovery: { fallbackModels: [backup()] }
    })
    console.log(`\n${label}: ${result.status} (${result.stopReason}) by model "${result.model}"`)
    console.log(`  primary called ${primary.calls.length - before} times`)
    for (const s of result.fallbacks) console.log(`  fell back ${s.from} → ${s.to} after ${s.failure.code}`)
    const changes = result.timeline.filter((e) => e._tag === "circuit.changed" || e._tag === "model.fallback")
    console.log(Timeline.format(changes))
  }
}).pipe(
  Effect.provide(
    Layer.mergeAll(
      FaultyModel.layer(primary),
      NodeServices.layer,
      // One breaker store for the whole application: the circuit outlives a run.
      Breakers.layerMemory({ provider: { tripPolicy: CircuitBreaker.consecutive(3), openDuration: "30 seconds" } })
    )
  )
)

await Effect.runPromise(program)
