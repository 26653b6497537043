import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Schema } from "effect"
import * as Cli from "../../src/observability/Cli.ts"
import * as Recording from "../../src/observability/Recording.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { nodeLayer, tempDirectory } from "./support.ts"

const result = Effect.runSync(
  Run.run({ goal: "What is 2 + 3?", tools: [] }).pipe(
    Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("5")]))
  )
)
const resultJson = JSON.stringify(Schema.encodeSync(Schema.toCodecJson(RunResult.RunResult))(result))
const jsonl = result.timeline.map((e) => Recording.line(e) ?? "").join("")

const failed = (args: ReadonlyArray<string>) => Effect.flip(Cli.main(args))

describe("effect-agent-runtime view", () => {
  it.effect("writes the page beside a JSONL recording, or where -o says", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${directory}/run.jsonl`, `${jsonl}{"_tag":"run.fin`)
      const said = yield* Cli.main(["view", `${directory}/run.jsonl`])
      assert.strictEqual(
        said,
        `wrote ${directory}/run.html: ${result.timeline.length} events (its torn last line skipped)`
      )
      assert.include(yield* fs.readFileString(`${directory}/run.html`), "goal_reached")
      yield* fs.writeFileString(`${directory}/result.json`, resultJson)
      yield* Cli.main(["view", `${directory}/result.json`, "-o", `${directory}/out.html`, "--no-content"])
      const page = yield* fs.readFileString(`${directory}/out.html`)
      assert.include(page, "goal_reached")
      assert.notInclude(page, "What is 2 + 3?")
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("a missing file, bad JSON and JSON that is no run fail saying so", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      const missing = yield* failed(["view", `${directory}/nope.json`])
      assert.isTrue(missing.message.startsWith(`${directory}/nope.json: no such file: `), missing.message)
      assert.strictEqual(missing.exitCode, 1)
      yield* fs.writeFileString(`${directory}/bad.json`, "{ not json")
      assert.include((yield* failed(["view", `${directory}/bad.json`])).message, "bad.json: not JSON")
      yield* fs.writeFileString(`${directory}/other.json`, '{"name":"package"}')
      assert.include((yield* failed(["view", `${directory}/other.json`])).message, "other.json: not a run: expected")
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("a wrong command line is exit 2 with the usage", () =>
    Effect.gen(function* () {
      for (const args of [
        [],
        ["show", "x"],
        ["view"],
        ["view", "a", "b"],
        ["view", "a", "-o"],
        ["view", "a", "--frob"],
        ["view", "-"],
        // The page never replaces its input.
        ["view", "run.html"],
        ["view", "run.jsonl", "-o", "./run.jsonl"]
      ]) {
        const error = yield* failed(args)
        assert.strictEqual(error.exitCode, 2, args.join(" "))
        assert.include(error.message, "usage: effect-agent-runtime view")
      }
      assert.strictEqual(yield* Cli.main(["--help"]), Cli.usage)
    }).pipe(Effect.provide(nodeLayer))
  )

  it("the bin prints what it wrote, or the error on stderr with its exit code", () => {
    const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "view-bin-"))
    try {
      const bin = Path.resolve(import.meta.dirname, "..", "..", "src", "observability", "bin.ts")
      const run = (...args: Array<string>) => spawnSync(process.execPath, [bin, ...args], { encoding: "utf8" })
      Fs.writeFileSync(Path.join(directory, "run.json"), resultJson)
      const ok = run("view", Path.join(directory, "run.json"))
      assert.strictEqual(ok.status, 0, ok.stderr)
      assert.include(ok.stdout, `wrote ${Path.join(directory, "run.html")}`)
      const missing = run("view", Path.join(directory, "missing.jsonl"))
      assert.strictEqual(missing.status, 1)
      assert.include(missing.stderr, "missing.jsonl: no such file")
      assert.strictEqual(run("view").status, 2)
    } finally {
      Fs.rmSync(directory, { recursive: true, force: true })
    }
  })
})
