import { symlinkSync } from "node:fs"
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Exit, FileSystem, Layer, Path, Schema } from "effect"
import * as Failure from "../../src/failure/Failure.ts"
import * as FileTools from "../../src/tools/FileTools.ts"

const context = { runId: "run-1", callId: "call-1", idempotencyKey: "run-1/call-1", settle: () => {} }

// base/root is the tools' root; base/outside is a neighbour they must not touch.
const workspace = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const base = yield* fs.makeTempDirectoryScoped({ prefix: "file-tools-" })
  const root = path.join(base, "root")
  const outside = path.join(base, "outside")
  yield* fs.makeDirectory(root)
  yield* fs.makeDirectory(outside)
  const tools = yield* FileTools.make({ root })
  return { fs, path, base, root, outside, tools }
})

const assertPermanent = (error: Failure.Failure, code: string): Failure.Permanent => {
  if (error._tag !== "Permanent") return assert.fail(`expected Permanent ${code}, got ${error._tag}`)
  assert.strictEqual(error.code, code, error.hint)
  assert.strictEqual(error.source, "tool")
  assert.strictEqual(error.attempts, 1)
  return error
}

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("FileTools", (it) => {
  describe("metadata", () => {
    it.effect("R3.7 every tool declares its side effect, idempotence and checked fields", () =>
      Effect.gen(function* () {
        const { tools } = yield* workspace
        assert.deepStrictEqual(
          tools.all.map((tool) => tool.name),
          ["read_file", "list_files", "write_text_file", "write_markdown_file", "write_json_file"]
        )
        for (const tool of tools.all) {
          assert.deepStrictEqual(tool.metadata.pathFields, ["path"], tool.name)
          assert.isTrue(tool.metadata.idempotent, tool.name)
        }
        // A refusal goes back to the model: every tool hands its errors over (review 77).
        assert.isTrue(
          tools.all.every((tool) => tool.metadata.recoverErrors),
          "recoverErrors"
        )
        assert.strictEqual(tools.readFile.metadata.sideEffect, "read")
        assert.strictEqual(tools.readFile.metadata.maxRetries, 2)
        assert.strictEqual(tools.listFiles.metadata.sideEffect, "read")
        for (const tool of [tools.writeTextFile, tools.writeMarkdownFile, tools.writeJsonFile]) {
          assert.strictEqual(tool.metadata.sideEffect, "write", tool.name)
          assert.deepStrictEqual(tool.metadata.contentFields, ["content"], tool.name)
        }
      })
    )
  })

  describe(".env files", () => {
    it.effect("R3.6 a .env file, or a link to one, is neither read nor written: env_file, the secret unread", () =>
      Effect.gen(function* () {
        const { fs, path, root, tools } = yield* workspace
        yield* fs.writeFileString(path.join(root, ".env"), "OPENAI_API_KEY=sk-secret\n")
        yield* fs.writeFileString(path.join(root, ".env~"), "OPENAI_API_KEY=sk-secret\n")
        symlinkSync(path.join(root, ".env"), path.join(root, "settings.txt"))
        for (const target of [".env", "settings.txt", ".env~"]) {
          const read = yield* Effect.flip(tools.readFile.handler({ path: target }, context))
          assertPermanent(read, "env_file")
          assert.notInclude(JSON.stringify(read), "sk-secret")
        }
        const written = yield* Effect.flip(tools.writeTextFile.handler({ path: "settings.txt", content: "x" }, context))
        assertPermanent(written, "env_file")
        assert.strictEqual(yield* fs.readFileString(path.join(root, ".env")), "OPENAI_API_KEY=sk-secret\n")
        // Turned off, as the policy's option: the file is read.
        const open = yield* FileTools.make({ root, denyEnvFiles: false })
        const shown = yield* open.readFile.handler({ path: "settings.txt" }, context)
        assert.include(shown.content, "sk-secret")
      })
    )

    it.effect("R3.6 R12 denyEnvFiles that is no boolean is refused when the tools are made", () =>
      Effect.gen(function* () {
        const { root } = yield* workspace
        const made = yield* Effect.exit(FileTools.make({ root, denyEnvFiles: "no" as unknown as boolean }))
        assert.isTrue(Exit.isFailure(made))
        assert.match(String(Exit.isFailure(made) ? made.cause : ""), /denyEnvFiles must be a boolean/)
      })
    )
  })

  describe("read and write", () => {
    it.effect("a written text file reads back the same, with relative paths in the outputs", () =>
      Effect.gen(function* () {
        const { tools } = yield* workspace
        const written = yield* tools.writeTextFile.handler({ path: "hello.txt", content: "héllo\n" }, context)
        assert.deepStrictEqual(written, { path: "hello.txt", bytes: 7 })
        const read = yield* tools.readFile.handler({ path: "hello.txt" }, context)
        assert.deepStrictEqual(read, { path: "hello.txt", content: "héllo\n" })
      })
    )

    it.effect("R3.7 writing the same content twice leaves the same file (idempotent)", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        const input = { path: "same.txt", content: "once" }
        const first = yield* tools.writeTextFile.handler(input, context)
        const second = yield* tools.writeTextFile.handler(input, context)
        assert.deepStrictEqual(first, second)
        assert.strictEqual(yield* fs.readFileString(path.join(root, "same.txt")), "once")
      })
    )

    it.effect("a writer creates missing parent directories", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        const written = yield* tools.writeTextFile.handler({ path: "a/b/c/deep.txt", content: "deep" }, context)
        assert.strictEqual(written.path, path.join("a", "b", "c", "deep.txt"))
        assert.strictEqual(yield* fs.readFileString(path.join(root, "a", "b", "c", "deep.txt")), "deep")
      })
    )

    it.effect("an absolute path inside the root is reported relative to it", () =>
      Effect.gen(function* () {
        const { tools, path, root } = yield* workspace
        const written = yield* tools.writeTextFile.handler({ path: path.join(root, "abs.txt"), content: "" }, context)
        assert.deepStrictEqual(written, { path: "abs.txt", bytes: 0 })
      })
    )
  })

  describe("list_files", () => {
    it.effect("lists entries sorted by name with their kind; a link counts as its target", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        yield* fs.writeFileString(path.join(root, "b.txt"), "b")
        yield* fs.writeFileString(path.join(root, "a.txt"), "a")
        yield* fs.makeDirectory(path.join(root, "c-dir"))
        yield* fs.writeFileString(path.join(root, "c-dir", "inner.txt"), "inner")
        symlinkSync(path.join(root, "c-dir"), path.join(root, "d-link"))
        const listed = yield* tools.listFiles.handler({ path: "." }, context)
        assert.deepStrictEqual(listed, {
          path: ".",
          entries: [
            { name: "a.txt", kind: "file" },
            { name: "b.txt", kind: "file" },
            { name: "c-dir", kind: "directory" },
            { name: "d-link", kind: "directory" }
          ]
        })
        const inner = yield* tools.listFiles.handler({ path: "c-dir" }, context)
        assert.deepStrictEqual(inner, { path: "c-dir", entries: [{ name: "inner.txt", kind: "file" }] })
      })
    )
  })

  describe("failures", () => {
    it.effect("R3.1 reading a missing file is Permanent not_found with a relative hint and no absolute path", () =>
      Effect.gen(function* () {
        const { tools, base } = yield* workspace
        const error = yield* Effect.flip(tools.readFile.handler({ path: "reports/x.md" }, context))
        const failure = assertPermanent(error, "not_found")
        assert.strictEqual(failure.category, "not_found")
        assert.strictEqual(failure.hint, "no file at reports/x.md; list the directory first")
        assert.notInclude(failure.hint, base)
        assert.notMatch(Failure.summarize(failure).hint, /(^|\s)\//, "no absolute path in the safe summary")
        // The detail is kept, but only in the diagnostic.
        assert.include(failure.diagnostic ?? "", base)
      })
    )

    it.effect("R3.1 listing a missing directory is Permanent not_found", () =>
      Effect.gen(function* () {
        const { tools } = yield* workspace
        const error = yield* Effect.flip(tools.listFiles.handler({ path: "nowhere" }, context))
        assert.include(assertPermanent(error, "not_found").hint, "nowhere")
      })
    )

    it.effect("R3.1 reading a directory is is_a_directory; listing a file is not_a_directory", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        yield* fs.makeDirectory(path.join(root, "dir"))
        yield* fs.writeFileString(path.join(root, "file.txt"), "x")
        const readDir = yield* Effect.flip(tools.readFile.handler({ path: "dir" }, context))
        assert.include(assertPermanent(readDir, "is_a_directory").hint, "list_files")
        const listFile = yield* Effect.flip(tools.listFiles.handler({ path: "file.txt" }, context))
        assert.include(assertPermanent(listFile, "not_a_directory").hint, "read_file")
        const writeUnderFile = yield* Effect.flip(
          tools.writeTextFile.handler({ path: "file.txt/child.txt", content: "x" }, context)
        )
        assert.strictEqual(writeUnderFile._tag, "Permanent")
        assert.notInclude(writeUnderFile.hint, root)
      })
    )

    it.effect("R3.6 a path outside the root is refused by the tool itself as outside_root", () =>
      Effect.gen(function* () {
        const { tools, fs, path, outside } = yield* workspace
        for (const target of ["../outside/escaped.txt", path.join(outside, "escaped.txt")]) {
          const error = yield* Effect.flip(tools.writeTextFile.handler({ path: target, content: "x" }, context))
          const failure = assertPermanent(error, "outside_root")
          assert.notInclude(failure.hint, outside)
        }
        assert.isFalse(yield* fs.exists(path.join(outside, "escaped.txt")))
        const read = yield* Effect.flip(tools.readFile.handler({ path: "../outside" }, context))
        assertPermanent(read, "outside_root")
        const list = yield* Effect.flip(tools.listFiles.handler({ path: ".." }, context))
        assertPermanent(list, "outside_root")
      })
    )
  })

  describe("a root reached through a symbolic link", () => {
    it.effect(
      "R3.6 R12 an absolute path under the root's real path is inside it, as under the root as given; one outside either is not",
      () =>
        Effect.gen(function* () {
          // Review 118's sibling: the root a link (macOS's /tmp), the model given the real path (`pwd`).
          const { fs, path, base, root, outside } = yield* workspace
          const link = path.join(base, "link")
          symlinkSync(root, link)
          yield* fs.writeFileString(path.join(root, "a.txt"), "hello")
          const tools = yield* FileTools.make({ root: link })
          for (const target of [path.join(root, "a.txt"), path.join(link, "a.txt"), "a.txt"]) {
            const read = yield* tools.readFile.handler({ path: target }, context)
            assert.include(read.content, "hello", target)
          }
          yield* tools.writeTextFile.handler({ path: path.join(root, "b.txt"), content: "written" }, context)
          assert.strictEqual(yield* fs.readFileString(path.join(root, "b.txt")), "written")
          for (const target of [path.join(outside, "x.txt"), path.join(root, "..", "outside", "x.txt"), base]) {
            const error = yield* Effect.flip(tools.writeTextFile.handler({ path: target, content: "x" }, context))
            assertPermanent(error, "outside_root")
          }
          assert.isFalse(yield* fs.exists(path.join(outside, "x.txt")))
        })
    )
  })

  describe("write_markdown_file", () => {
    it.effect("R3.5 a path not ending in .md fails the input schema and the handler", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        const decode = Schema.decodeUnknownExit(tools.writeMarkdownFile.input)
        assert.isTrue(Exit.isFailure(decode({ path: "notes.txt", content: "# x" })))
        assert.isTrue(Exit.isSuccess(decode({ path: "notes.md", content: "# x" })))
        const error = yield* Effect.flip(
          tools.writeMarkdownFile.handler({ path: "notes.txt", content: "# x" }, context)
        )
        assertPermanent(error, "not_markdown")
        assert.isFalse(yield* fs.exists(path.join(root, "notes.txt")))
      })
    )

    it.effect("writes a .md file", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        const written = yield* tools.writeMarkdownFile.handler(
          { path: "docs/README.md", content: "# Title\n" },
          context
        )
        assert.deepStrictEqual(written, { path: path.join("docs", "README.md"), bytes: 8 })
        assert.strictEqual(yield* fs.readFileString(path.join(root, "docs", "README.md")), "# Title\n")
      })
    )
  })

  describe("write_json_file", () => {
    it.effect("pretty-prints the JSON value with two-space indentation and a final newline", () =>
      Effect.gen(function* () {
        const { tools, fs, path, root } = yield* workspace
        const content = { name: "report", items: [1, 2], nested: { ok: true, none: null } }
        const written = yield* tools.writeJsonFile.handler({ path: "out/data.json", content }, context)
        const text = yield* fs.readFileString(path.join(root, "out", "data.json"))
        assert.strictEqual(text, `${JSON.stringify(content, null, 2)}\n`)
        assert.include(text, '\n  "items": [\n    1,\n    2\n  ],')
        assert.strictEqual(written.bytes, text.length)
        assert.deepStrictEqual(JSON.parse(text), content)
      })
    )

    it.effect("R3.5 the content must be a JSON value", () =>
      Effect.gen(function* () {
        const { tools } = yield* workspace
        const decode = Schema.decodeUnknownExit(tools.writeJsonFile.input)
        assert.isTrue(Exit.isSuccess(decode({ path: "a.json", content: [1, "two", null] })))
        assert.isTrue(Exit.isFailure(decode({ path: "a.json" })))
        assert.isTrue(Exit.isFailure(decode({ path: "a.json", content: Number.NaN })))
      })
    )
  })
})
