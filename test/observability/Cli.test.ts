import { spawn, spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Schema } from "effect"
import * as Timeline from "../../src/events/Timeline.ts"
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

  it.effect(
    "R12 a FIFO nothing reads or a directory as the output fails at once, saying so; a device is written to",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${directory}/run.jsonl`, jsonl)
        // The default output, beside the input, is a FIFO nobody reads: writing to it would wait for good.
        spawnSync("mkfifo", [`${directory}/run.html`])
        const fifo = yield* failed(["view", `${directory}/run.jsonl`])
        assert.include(fifo.message, `cannot write ${directory}/run.html: it is a FIFO that nothing reads`)
        assert.strictEqual(fifo.exitCode, 1)
        yield* fs.makeDirectory(`${directory}/out`)
        const inDirectory = yield* failed(["view", `${directory}/run.jsonl`, "-o", `${directory}/out`])
        assert.include(inDirectory.message, "it is a directory")
        assert.include(yield* Cli.main(["view", `${directory}/run.jsonl`, "-o", "/dev/null"]), "wrote /dev/null")
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.live("a FIFO something reads gets the whole page (`-o /dev/stdout` piped on)", () =>
    Effect.gen(function* () {
      const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "view-fifo-"))
      Fs.writeFileSync(`${directory}/run.jsonl`, jsonl)
      spawnSync("mkfifo", [`${directory}/out.html`])
      const reader = spawn("sh", ["-c", `cat "${directory}/out.html" > "${directory}/read.html"`])
      const done = Effect.callback<void>((resume) => {
        reader.on("exit", () => resume(Effect.void))
      })
      // Time for the reader to open its end (a FIFO nobody reads yet is refused).
      yield* Effect.sleep("500 millis")
      yield* Cli.main(["view", `${directory}/run.jsonl`, "-o", `${directory}/out.html`]).pipe(Effect.provide(nodeLayer))
      // The reader sees the end of its input after the whole page, and exits.
      yield* done
      assert.include(Fs.readFileSync(`${directory}/read.html`, "utf8"), "goal_reached")
      Fs.rmSync(directory, { recursive: true })
    })
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

  it.effect(
    "R12 R13 -o naming a symbolic or a hard link to the input is refused: the recording is never replaced",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const fs = yield* FileSystem.FileSystem
        const input = `${directory}/run.jsonl`
        yield* fs.writeFileString(input, jsonl)
        yield* fs.symlink("run.jsonl", `${directory}/symlink.html`)
        yield* fs.link(input, `${directory}/hardlink.html`)
        // The default output, run.html, is a link to the input too.
        yield* fs.symlink("run.jsonl", `${directory}/run.html`)
        for (const args of [
          ["view", input, "-o", `${directory}/symlink.html`],
          ["view", input, "-o", `${directory}/hardlink.html`],
          ["view", input]
        ]) {
          const error = yield* failed(args)
          assert.strictEqual(error.exitCode, 2, args.join(" "))
          assert.include(error.message, "the page would overwrite its input")
        }
        assert.strictEqual(yield* fs.readFileString(input), jsonl)
        // Another file, existing or not, takes the page.
        yield* fs.writeFileString(`${directory}/old.html`, "old")
        yield* Cli.main(["view", input, "-o", `${directory}/old.html`])
        yield* Cli.main(["view", input, "-o", `${directory}/new.html`])
        assert.include(yield* fs.readFileString(`${directory}/old.html`), "goal_reached")
        assert.strictEqual(yield* fs.readFileString(input), jsonl)
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R12 what the command prints of a file or a name has its control characters written out", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      // A file that clears the terminal and retitles it, were its bytes printed as they are.
      yield* fs.writeFileString(`${directory}/esc.jsonl`, "\x1b[2J\x1b[3J\x1b[H\x1b]0;owned\x07xx\n")
      const error = yield* failed(["view", `${directory}/esc.jsonl`])
      assert.strictEqual(error.exitCode, 1)
      assert.include(error.message, "esc.jsonl: not JSON: line 1")
      assert.include(error.message, "\\x1b[2J\\x1b[3J")
      const name = `${directory}/run\x1b[2J.jsonl`
      yield* fs.writeFileString(name, jsonl)
      // Line breaks apart (the usage's), nothing is left for the terminal to obey.
      for (const printed of [
        yield* Cli.main(["view", name]),
        (yield* failed(["view", name, "--\x1b[2J"])).message,
        (yield* failed(["view", `${directory}/gone\u202e.jsonl`])).message
      ])
        for (const line of printed.split("\n")) assert.strictEqual(line, Timeline.visible(line))
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
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
