import { execFileSync } from "node:child_process"
import {
  closeSync,
  constants,
  mkdirSync,
  openSync,
  readdirSync,
  symlinkSync,
  truncateSync,
  writeFileSync
} from "node:fs"
import * as Net from "node:net"
import { NodeFileSystem, NodePath, NodeServices } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, FileSystem, Layer, Option, Path, Schema } from "effect"
import type * as Failure from "../../src/failure/Failure.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as FileTools from "../../src/tools/FileTools.ts"

const context = { runId: "run-1", callId: "call-1", idempotencyKey: "run-1/call-1", settle: () => {} }

const MiB = 1024 * 1024

const workspace = (options: Omit<FileTools.Options, "root"> = {}) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const base = yield* fs.makeTempDirectoryScoped({ prefix: "file-tools-limits-" })
    const root = path.join(base, "root")
    mkdirSync(root)
    const tools = yield* FileTools.make({ root, ...options })
    return { root, base, tools, at: (name: string) => path.join(root, name) }
  })

const assertCode = (error: Failure.Failure, code: string) => {
  assert.strictEqual(error._tag, "Permanent")
  assert.strictEqual(error.code, code, error.hint)
}

// Nested arrays `depth` deep holding `leaves` zeros: small as compact JSON, large pretty-printed.
const nested = (depth: number, leaves: number): Schema.Json => {
  let value: Schema.Json = Array.from({ length: leaves }, () => 0)
  for (let d = 0; d < depth; d++) value = [value]
  return value
}

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("FileTools limits", (it) => {
  describe("files that are not regular files", () => {
    it.effect("R3.11 read_file refuses FIFOs, sockets and devices without blocking a thread", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace()
        // More FIFOs than libuv has threads (4): a blocking open of each would starve the pool.
        const fifos = Array.from({ length: 6 }, (_, n) => `fifo-${n}`)
        for (const fifo of fifos) execFileSync("mkfifo", [at(fifo)])
        // Should a read block on a FIFO after all, open its other end so the test can end.
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const fifo of fifos) closeSync(openSync(at(fifo), constants.O_RDWR | constants.O_NONBLOCK))
          })
        )
        const server = Net.createServer()
        yield* Effect.callback<void>((resume) => {
          server.listen(at("socket"), () => resume(Effect.void))
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => server.close()))
        const special = [...fifos, "socket"]
        // A character device (/dev/zero's numbers) where the machine lets us make one, as root.
        try {
          execFileSync("mknod", [at("zero"), "c", "1", "5"], { stdio: "ignore" })
          special.push("zero")
        } catch {}
        // /dev/zero itself is outside the root: through a link it is refused as such.
        symlinkSync("/dev/zero", at("zero-link"))
        assertCode(yield* Effect.flip(tools.readFile.handler({ path: "zero-link" }, context)), "outside_root")
        writeFileSync(at("regular.txt"), "regular")
        const reads = yield* Effect.forEach(
          special,
          (name) => Effect.flip(tools.readFile.handler({ path: name }, context)),
          { concurrency: "unbounded" }
        )
        for (const error of reads) assertCode(error, "not_a_regular_file")
        // The pool is free: a regular read completes (bounded wait; a starved pool hangs forever).
        const regular = yield* tools.readFile
          .handler({ path: "regular.txt" }, context)
          .pipe(Effect.timeoutOption("10 seconds"))
        assert.deepStrictEqual(regular, Option.some({ path: "regular.txt", content: "regular" }))
        // Writers and list_files refuse them too, and never open them.
        assertCode(
          yield* Effect.flip(tools.writeTextFile.handler({ path: "fifo-0", content: "x" }, context)),
          "not_a_regular_file"
        )
        const listed = yield* tools.listFiles.handler({ path: "." }, context)
        assert.deepStrictEqual(listed.entries, [{ name: "regular.txt", kind: "file" }])
      })
    )
  })

  describe("bounded reads", () => {
    it.effect("R12 list_files lists the first maxListEntries entries by name and counts the rest", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace({ maxListEntries: 3 })
        for (let i = 0; i < 2_000; i++) writeFileSync(at(`f-${String(i).padStart(4, "0")}.txt`), "")
        const listed = yield* tools.listFiles.handler({ path: "." }, context)
        assert.deepStrictEqual(
          listed.entries.map((e) => e.name),
          ["f-0000.txt", "f-0001.txt", "f-0002.txt"]
        )
        assert.strictEqual(listed.omitted, 1_997)
        const byDefault = yield* workspace()
        for (let i = 0; i < 1_500; i++) writeFileSync(byDefault.at(`g-${i}`), "")
        const all = yield* byDefault.tools.listFiles.handler({ path: "." }, context)
        // The directory is read in its own order, keeping the smallest names: the first 1,000 by name.
        const byName = Array.from({ length: 1_500 }, (_, i) => `g-${i}`).sort()
        assert.deepStrictEqual(
          all.entries.map((e) => e.name),
          byName.slice(0, 1_000)
        )
        assert.strictEqual(all.omitted, 500)
      })
    )

    it.effect("R3.11 a file over maxReadBytes is file_too_large, naming the size and the limit", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace({ maxReadBytes: 10 })
        writeFileSync(at("ten.txt"), "0123456789")
        writeFileSync(at("eleven.txt"), "0123456789A")
        assert.strictEqual((yield* tools.readFile.handler({ path: "ten.txt" }, context)).content, "0123456789")
        const error = yield* Effect.flip(tools.readFile.handler({ path: "eleven.txt" }, context))
        assertCode(error, "file_too_large")
        assert.include(error.hint, "eleven.txt")
        assert.include(error.hint, "11 bytes")
        assert.include(error.hint, "10 bytes")
        assert.notInclude(error.hint, "0123")
      })
    )

    it.effect("R3.11 by default a file over 1 MiB is refused; a 150 MiB file is never read into memory", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace()
        writeFileSync(at("limit.txt"), "x".repeat(MiB))
        writeFileSync(at("over.txt"), "x".repeat(MiB + 1))
        // Sparse: 150 MiB on paper, nothing on disk.
        writeFileSync(at("huge.bin"), "")
        truncateSync(at("huge.bin"), 150 * MiB)
        assert.strictEqual((yield* tools.readFile.handler({ path: "limit.txt" }, context)).content.length, MiB)
        assertCode(yield* Effect.flip(tools.readFile.handler({ path: "over.txt" }, context)), "file_too_large")
        const before = process.memoryUsage().arrayBuffers
        const error = yield* Effect.flip(tools.readFile.handler({ path: "huge.bin" }, context))
        assertCode(error, "file_too_large")
        assert.include(error.hint, `${150 * MiB} bytes`)
        assert.isBelow(process.memoryUsage().arrayBuffers - before, 16 * MiB)
      })
    )

    it.effect("R3.11 a run's timeline never holds a file larger than the read limit", () =>
      Effect.gen(function* () {
        const { root, at } = yield* workspace()
        writeFileSync(at("huge.txt"), "x".repeat(8 * MiB))
        const tools = yield* FileTools.make({ root })
        const result = yield* Run.run({ goal: "read", tools: tools.all }).pipe(
          Effect.provide(
            Layer.mergeAll(
              ScriptedModel.layer([
                ScriptedModel.toolCall("read_file", { path: "huge.txt" }),
                ScriptedModel.finalAnswer("done")
              ]),
              NodeServices.layer
            )
          )
        )
        const failed = result.timeline.find((event) => event._tag === "tool.failed")
        assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.code : undefined, "tool_failed")
        assert.isBelow(JSON.stringify(result.timeline).length, MiB)
      })
    )
  })

  describe("bounded writes", () => {
    it.effect("R3.6 write_text_file refuses content over maxWriteBytes, and writes nothing", () =>
      Effect.gen(function* () {
        const { tools, root } = yield* workspace({ maxWriteBytes: 10 })
        const ok = yield* tools.writeTextFile.handler({ path: "ten.txt", content: "0123456789" }, context)
        assert.strictEqual(ok.bytes, 10)
        // Bytes, not characters: six "é" are twelve bytes.
        const error = yield* Effect.flip(tools.writeTextFile.handler({ path: "e.txt", content: "éééééé" }, context))
        assertCode(error, "content_too_large")
        assert.include(error.hint, "12 bytes")
        assert.include(error.hint, "10 bytes")
        assert.deepStrictEqual(readdirSync(root), ["ten.txt"])
      })
    )

    it.effect("R3.6 write_json_file checks the pretty-printed bytes it would write, not the compact JSON", () =>
      Effect.gen(function* () {
        const { tools, root } = yield* workspace()
        // About 40 KB compact; about 2 MB with two-space indentation 50 levels deep.
        const content = nested(50, 20_000)
        assert.isBelow(JSON.stringify(content).length, 64 * 1024)
        const error = yield* Effect.flip(tools.writeJsonFile.handler({ path: "deep.json", content }, context))
        assertCode(error, "content_too_large")
        assert.include(error.hint, `${MiB} bytes`)
        assert.deepStrictEqual(readdirSync(root), [])
      })
    )

    it.effect(
      "R3.6 R12 a write the tool refuses goes back to the model: a hostile model cannot end the run by it",
      () =>
        Effect.gen(function* () {
          const { tools, root } = yield* workspace()
          // Under the policy's limit as compact JSON, over the tool's pretty-printed (review 77).
          const content = nested(50, 20_000)
          const result = yield* Run.run({ goal: "write", tools: tools.all }).pipe(
            Effect.provide(
              Layer.mergeAll(
                ScriptedModel.layer([
                  ScriptedModel.toolCall("write_json_file", { path: "deep.json", content }),
                  ScriptedModel.finalAnswer("done")
                ]),
                NodeServices.layer
              )
            )
          )
          assert.strictEqual(result.status, "completed", result.detail)
          const failed = result.timeline.find((event) => event._tag === "tool.failed")
          assert.include(failed?._tag === "tool.failed" ? failed.error.message : "", "over the write limit")
          assert.deepStrictEqual(readdirSync(root), [])
        })
    )

    it.effect.prop(
      "R3.6 write_json_file's limit is exact: the bytes it reports are the bytes written, one more is refused",
      { content: Schema.Json },
      ({ content }) =>
        Effect.gen(function* () {
          const fs = yield* FileSystem.FileSystem
          const text = `${JSON.stringify(content, null, 2)}\n`
          const bytes = Buffer.byteLength(text)
          const exact = yield* workspace({ maxWriteBytes: bytes })
          const written = yield* exact.tools.writeJsonFile.handler({ path: "v.json", content }, context)
          assert.strictEqual(written.bytes, bytes)
          assert.strictEqual(yield* fs.readFileString(exact.at("v.json")), text)
          const under = yield* workspace({ maxWriteBytes: bytes - 1 })
          const error = yield* Effect.flip(under.tools.writeJsonFile.handler({ path: "v.json", content }, context))
          assertCode(error, "content_too_large")
        }),
      { arbitrary: { runs: 100 } }
    )
  })

  describe("options, paths and interruptions", () => {
    it.effect("R12 a root that cannot be a workspace is refused when the tools are built, naming root", () =>
      Effect.gen(function* () {
        const { at } = yield* workspace()
        writeFileSync(at("file.txt"), "a file")
        for (const root of ["", at("file.txt"), at("file.txt/below"), undefined]) {
          // A caller without types may pass anything.
          const made = yield* Effect.exit(FileTools.make({ root } as FileTools.Options))
          const defect = Exit.isFailure(made) ? Cause.squash(made.cause) : undefined
          assert.instanceOf(defect, RangeError, String(root))
          assert.match(String(defect), /FileTools\.make: root/)
        }
        // A root not there yet: made by the first write; until then the workspace is said to be empty.
        const later = yield* FileTools.make({ root: at("later") })
        const read = yield* Effect.flip(later.readFile.handler({ path: "a.txt" }, context))
        assertCode(read, "workspace_unavailable")
        assert.include(read.hint, "the workspace is empty")
        yield* later.writeTextFile.handler({ path: "a.txt", content: "now" }, context)
        assert.strictEqual((yield* later.readFile.handler({ path: "a.txt" }, context)).content, "now")
      })
    )

    it.effect("R3.6 a path too long with the root's own is refused before a directory is made", () =>
      Effect.gen(function* () {
        const { tools, root } = yield* workspace()
        const deep = `${"a/".repeat(2040)}x.txt`
        assertCode(
          yield* Effect.flip(tools.writeTextFile.handler({ path: deep, content: "deep" }, context)),
          "invalid_path"
        )
        assert.deepStrictEqual(readdirSync(root), [])
        // A root of about 3,000 bytes reached through a short link: its real path counts.
        const { base } = yield* workspace()
        let long = base
        for (let i = 0; i < 12; i++) {
          long = `${long}/${"d".repeat(250)}`
          mkdirSync(long)
        }
        symlinkSync(long, `${base}/short`)
        const linked = yield* FileTools.make({ root: `${base}/short` })
        const below = `${"a/".repeat(800)}x.txt`
        assertCode(
          yield* Effect.flip(linked.writeTextFile.handler({ path: below, content: "x" }, context)),
          "invalid_path"
        )
        assert.deepStrictEqual(readdirSync(long), [])
        // An absolute path inside the root counts what lies below it, once.
        const inside = yield* linked.writeTextFile.handler({ path: `${base}/short/f.txt`, content: "x" }, context)
        assert.strictEqual(inside.path, "f.txt")
      })
    )

    it.effect("R3.11 a write interrupted at any moment leaves no temporary file behind", () =>
      Effect.gen(function* () {
        const { tools, root, at } = yield* workspace()
        const content = "N".repeat(256 * 1024)
        for (let i = 0; i < 120; i++) {
          const fiber = yield* Effect.forkChild(
            tools.writeTextFile.handler({ path: `d${i % 3}/t.txt`, content }, context),
            {
              startImmediately: true
            }
          )
          for (let k = 0; k < i % 30; k++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          yield* Fiber.interrupt(fiber)
        }
        const left = [root, at("d0"), at("d1"), at("d2")].flatMap((dir) =>
          readdirSync(dir).filter((name) => name.endsWith(".tmp"))
        )
        assert.deepStrictEqual(left, [])
      })
    )
  })
})
