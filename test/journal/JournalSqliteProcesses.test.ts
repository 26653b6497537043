import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { afterAll } from "vitest"
import * as Journal from "../../src/journal/Journal.ts"

const fixture = path.join(import.meta.dirname, "..", "fixtures", "journal-writer.ts")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "journal-processes-"))
const children = new Set<ChildProcess>()
const killAll = () => {
  for (const child of children) child.kill("SIGKILL")
}
process.on("exit", killAll)
afterAll(() => {
  killAll()
  fs.rmSync(dir, { recursive: true, force: true })
})

interface Writer {
  readonly child: ChildProcess
  readonly lines: Array<string>
  readonly exited: Promise<number | null>
}

const startWriter = (filename: string, runId: string, writer: string, count: number): Writer => {
  const child = spawn(
    process.execPath,
    ["--disable-warning=ExperimentalWarning", fixture, filename, runId, writer, String(count)],
    { stdio: ["pipe", "pipe", "inherit"] }
  )
  children.add(child)
  const lines: Array<string> = []
  let buffered = ""
  child.stdout?.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8")
    const parts = buffered.split("\n")
    buffered = parts.pop() ?? ""
    lines.push(...parts)
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  exited.then(() => children.delete(child))
  return { child, lines, exited }
}

/** Waits in real time, at most `millis`, for a condition. */
const until = (condition: () => boolean, millis: number, what: string) =>
  Effect.gen(function* () {
    const start = performance.now()
    while (!condition()) {
      if (performance.now() - start > millis) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    }
  })

describe("Journal on one SQLite file shared by processes", () => {
  it.live(
    "R9 two processes migrate one new file and append to one run: every write is committed or a typed Conflict, none lost to a lock",
    () =>
      Effect.gen(function* () {
        const filename = path.join(dir, "shared.db")
        const perWriter = 150
        const writers = ["a", "b"].map((name) => startWriter(filename, "shared", name, perWriter))
        yield* until(() => writers.every((w) => w.lines.includes("ready")), 30_000, "both writers ready")
        for (const writer of writers) writer.child.stdin?.end("go\n")
        const codes = yield* Effect.promise(() => Promise.all(writers.map((w) => w.exited))).pipe(
          Effect.timeout("60 seconds"),
          Effect.orDie
        )
        assert.deepStrictEqual(codes, [0, 0])
        const reports = writers.map((w) => JSON.parse(w.lines[w.lines.length - 1] as string))
        for (const report of reports) {
          assert.strictEqual(report.committed, perWriter)
          assert.deepStrictEqual(report.failures, {}, "no write failed but by a Conflict")
        }

        const stored = yield* Effect.gen(function* () {
          const journal = yield* Journal.Journal
          return Option.getOrThrow(yield* journal.read("shared"))
        }).pipe(Effect.provide(Journal.layerSqlite({ filename })))
        assert.strictEqual(stored.nextSeq, 2 * perWriter)
        assert.deepStrictEqual(
          stored.events.map((event) => event.seq),
          Array.from({ length: 2 * perWriter }, (_, seq) => seq)
        )
        for (const name of ["a", "b"]) {
          const own = stored.events.filter((event) => event._tag === "tool.started" && event.name === `pay-${name}`)
          assert.strictEqual(own.length, perWriter, name)
        }
        console.log(`writers' conflicts: ${reports.map((r) => r.conflicts).join(", ")}`)
      }),
    90_000
  )
})

describe("Journal on a new SQLite file opened by several processes at once", () => {
  it.live(
    "R9 three processes open, migrate and write one new file at the same moment, three times over: none fails",
    () =>
      Effect.gen(function* () {
        for (let round = 0; round < 3; round++) {
          const filename = path.join(dir, `opened-at-once-${round}.db`)
          const writers = ["a", "b", "c"].map((name) => startWriter(filename, "r", name, 2))
          yield* until(() => writers.every((w) => w.lines.includes("ready")), 30_000, "the writers ready")
          for (const writer of writers) writer.child.stdin?.end("go\n")
          const codes = yield* Effect.promise(() => Promise.all(writers.map((w) => w.exited))).pipe(
            Effect.timeout("60 seconds"),
            Effect.orDie
          )
          assert.deepStrictEqual(codes, [0, 0, 0], `round ${round}`)
        }
      }),
    120_000
  )
})

describe("Journal and node:sqlite's ExperimentalWarning", () => {
  const entry = pathToFileURL(path.join(import.meta.dirname, "..", "..", "src", "journal", "index.ts")).href
  /** Runs a small program in a fresh Node process; what it printed on stderr. */
  const stderrOf = (layer: string) => {
    const program = [
      `const { Journal } = await import(${JSON.stringify(entry)})`,
      `const { Effect } = await import("effect")`,
      `await Effect.runPromise(Effect.provide(Journal.Journal, ${layer}))`,
      `console.log("built")`
    ].join("\n")
    const result = spawnSync(process.execPath, ["--input-type=module", "--eval", program], {
      cwd: path.join(import.meta.dirname, "..", ".."),
      encoding: "utf8",
      timeout: 60_000
    })
    assert.strictEqual(result.stdout.trim(), "built", result.stderr)
    return result.stderr
  }

  it("R9 importing the journal and using the memory layer loads no node:sqlite, so prints no warning", () => {
    assert.notInclude(stderrOf("Journal.layerMemory"), "ExperimentalWarning")
  }, 60_000)

  it("R9 the SQLite layer loads node:sqlite when it is built (its warning is then printed)", () => {
    const filename = path.join(dir, "warning.db")
    assert.include(stderrOf(`Journal.layerSqlite({ filename: ${JSON.stringify(filename)} })`), "ExperimentalWarning")
  }, 60_000)
})
