/**
 * The demo: a scripted agent writes a small report through the real file tools in a
 * temporary folder. It sends one bad tool argument (a write without `content`), gets the
 * field-level error back as an observation, corrects the call, finishes, and passes
 * validation (plan steps backed by tool results, artifact contracts on the files).
 *
 *   npm run demo
 *   npm run demo -- --provider openai   (or deepseek: a real model; needs OPENAI_API_KEY or DEEPSEEK_API_KEY)
 */
import { NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, FileSystem, Layer, Schema } from "effect"
import { Criterion, type Model, Permission, Run, Timeline, Validation } from "../src/index.ts"
import { Explain, LiveView } from "../src/observability/index.ts"
import { OpenAiCompatible } from "../src/providers/index.ts"
import { NodeTransport } from "../src/providers/node/index.ts"
import { ScriptedModel } from "../src/testing/index.ts"
import { FileTools } from "../src/tools/index.ts"

const Summary = Schema.Struct({ title: Schema.String, findings: Schema.Array(Schema.String) })

const report = `# Weekly insight report

- Sign-ups rose 12% week over week.
- Churn held at 2.1%.
`

// What a model might do: look around, write the report but forget `content`, read the
// field error, write it properly, add a JSON summary, and say it is done.
const script = [
  ScriptedModel.toolCall("list_files", { path: "." }),
  ScriptedModel.toolCall("write_markdown_file", { path: "report.md" }),
  ScriptedModel.toolCall("write_markdown_file", { path: "report.md", content: report }),
  ScriptedModel.toolCall("write_json_file", {
    path: "summary.json",
    content: { title: "Weekly insight report", findings: ["sign-ups +12%", "churn 2.1%"] }
  }),
  ScriptedModel.finalAnswer("The report is in report.md and its summary in summary.json.")
]

const program = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "agent-demo-" })
  const tools = yield* FileTools.make({ root })

  const result = yield* Run.run({
    goal: "Write this week's insight report as report.md and a JSON summary as summary.json.",
    tools: tools.all,
    limits: { maxIterations: 10 },
    time: { run: "2 minutes" },
    validation: {
      root,
      plan: [
        Validation.step("report", "write the markdown report", [
          Criterion.toolSucceeded("write_markdown_file", (input) =>
            Schema.is(Schema.Struct({ path: Schema.Literal("report.md") }))(input)
          )
        ]),
        Validation.step("summary", "write the JSON summary", [Criterion.toolSucceeded("write_json_file")])
      ],
      artifacts: [Validation.artifact("report.md"), Validation.artifact("summary.json", { schema: Summary })]
    }
  }).pipe(
    Effect.provide(Permission.layer({ roots: [root] })),
    // The live view: redrawn in place on a terminal, one line per event when not a TTY (CI).
    Effect.provide(LiveView.layer())
  )

  // Not on a TTY, the live view printed each event already.
  if (process.stdout.isTTY === true) yield* Console.log(`\nTimeline\n${Timeline.format(result.timeline)}`)
  yield* Console.log(`
Result
  status       ${result.status}
  stopReason   ${result.stopReason}
  finalAnswer  ${result.finalAnswer ?? "-"}
  checks       ${result.checks.map((c) => `${c.passed ? "✓" : "✗"} ${c.name}`).join("  ")}
  evidence     ${result.evidence.map((e) => `${e.item} ← ${e.kind} ${e.ref}`).join("; ")}
  counters     iterations=${result.counters.iterations} toolCalls=${result.counters.toolCalls} toolErrors=${result.counters.toolErrors} corrections=${result.counters.toolCorrectionAttempts}
  elapsed      ${result.elapsedMillis} ms`)
  yield* Console.log(`\nWhy it stopped\n${Explain.format(Explain.explain(result.timeline))}`)
  if (result.status !== "completed") return yield* Effect.fail(new Error(`demo run ended ${result.status}`))
})

// `--provider openai|deepseek` runs the same task against a real model; the default is the script.
const flag = process.argv.indexOf("--provider")
const provider = flag >= 0 ? process.argv[flag + 1] : undefined
if (provider !== undefined && provider !== "openai" && provider !== "deepseek") {
  console.error(`Unknown provider "${provider}". Use --provider openai or --provider deepseek.`)
  process.exit(2)
}
const model: Layer.Layer<Model.Model, unknown> =
  provider === undefined
    ? ScriptedModel.layer(script)
    : OpenAiCompatible.layerConfig(provider).pipe(Layer.provide(NodeTransport.layer()))

Effect.runPromise(
  program.pipe(Effect.scoped, Effect.provide(Layer.mergeAll(model, NodeServices.layer)), Effect.exit)
).then((exit) => {
  if (exit._tag === "Success") return
  const error = Cause.squash(exit.cause)
  const message = error instanceof Error ? error.message : String(error)
  console.error(
    provider !== undefined && message.includes("API_KEY")
      ? `Cannot run the demo against ${provider}: ${message}`
      : Cause.pretty(exit.cause)
  )
  process.exitCode = 1
})
