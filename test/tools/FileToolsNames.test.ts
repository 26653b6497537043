/**
 * R12: the file tools name one file by one path. A path that is not well-formed text, a name
 * that is not UTF-8, a name ending in a backslash on POSIX, and the writes' own temporary files.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs"
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Exit, FileSystem, Layer, Path } from "effect"
import type * as Failure from "../../src/failure/Failure.ts"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Workspace from "../../src/tools/internal/workspace/Workspace.ts"

const context = { runId: "run-1", callId: "call-1", idempotencyKey: "run-1/call-1", settle: () => {} }

const workspace = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "file-tools-names-" })
  const tools = yield* FileTools.make({ root })
  return { path, root, tools }
})

const codeOf = <A>(effect: Effect.Effect<A, Failure.Failure>) =>
  Effect.map(Effect.exit(effect), (exit) =>
    Exit.isSuccess(exit) ? "success" : exit.cause.reasons[0]?._tag === "Fail" ? exit.cause.reasons[0].error.code : "?"
  )

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000)

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("FileTools names", (it) => {
  describe("paths that are not well-formed text", () => {
    it.effect("R12 a path with a lone surrogate is invalid_path for every file tool, and nothing is written", () =>
      Effect.gen(function* () {
        const { root, tools } = yield* workspace
        const codes = [
          yield* codeOf(tools.writeTextFile.handler({ path: "report-\ud800.txt", content: "first" }, context)),
          yield* codeOf(tools.writeMarkdownFile.handler({ path: "report-\udfff.md", content: "second" }, context)),
          yield* codeOf(tools.writeJsonFile.handler({ path: "dir-\udc00/a.json", content: 1 }, context)),
          yield* codeOf(tools.readFile.handler({ path: "report-\ud800.txt" }, context)),
          yield* codeOf(tools.listFiles.handler({ path: "dir-\ud800" }, context))
        ]
        assert.deepStrictEqual(codes, ["invalid_path", "invalid_path", "invalid_path", "invalid_path", "invalid_path"])
        // Before, both writes landed in one file, report-\ufffd.txt, and the first was lost.
        assert.deepStrictEqual(readdirSync(root), [])
        // A surrogate pair is a character like any other.
        const emoji = yield* tools.writeTextFile.handler({ path: "report-\ud83d\ude00.txt", content: "ok" }, context)
        assert.strictEqual(emoji.path, "report-\ud83d\ude00.txt")
      })
    )

    it.effect("R12 list_files leaves out a name that is not valid UTF-8 and counts it in omitted", () =>
      Effect.gen(function* () {
        const { root, tools } = yield* workspace
        writeFileSync(Buffer.concat([Buffer.from(`${root}/data-`), Buffer.from([0xe9]), Buffer.from(".csv")]), "a,b\n")
        writeFileSync(`${root}/ok.txt`, "ok")
        writeFileSync(`${root}/data-\ufffd.txt`, "a real U+FFFD")
        const listed = yield* tools.listFiles.handler({ path: "." }, context)
        // Before, it was listed as data-\ufffd.csv, a name read_file cannot open.
        assert.deepStrictEqual(listed, {
          path: ".",
          entries: [
            { name: "data-\ufffd.txt", kind: "file" },
            { name: "ok.txt", kind: "file" }
          ],
          omitted: 1
        })
        const limited = yield* (yield* FileTools.make({ root, maxListEntries: 1 })).listFiles.handler(
          { path: "." },
          context
        )
        assert.deepStrictEqual(limited.entries, [{ name: "data-\ufffd.txt", kind: "file" }])
        assert.strictEqual(limited.omitted, 2)
      })
    )
  })

  describe("separators", () => {
    it("R12 only the platform's separators end a path in a directory: on POSIX `a\\` names a file", () => {
      assert.isFalse(Workspace.namesDirectory("a\\", "/"))
      assert.isFalse(Workspace.namesDirectory("notes\\.", "/"))
      assert.isTrue(Workspace.namesDirectory("notes/", "/"))
      assert.isTrue(Workspace.namesDirectory("notes/..", "/"))
      assert.isTrue(Workspace.namesDirectory("a\\", "\\"))
      assert.isTrue(Workspace.namesDirectory("notes\\.", "\\"))
      assert.isTrue(Workspace.namesDirectory("notes/", "\\"))
    })

    it.effect.skipIf(process.platform === "win32")(
      "R12 on POSIX a file whose name ends in a backslash is listed, read and written",
      () =>
        Effect.gen(function* () {
          const { path, root, tools } = yield* workspace
          writeFileSync(path.join(root, "a\\"), "x")
          const listed = yield* tools.listFiles.handler({ path: "." }, context)
          assert.deepStrictEqual(listed.entries, [{ name: "a\\", kind: "file" }])
          assert.deepStrictEqual(yield* tools.readFile.handler({ path: "a\\" }, context), { path: "a\\", content: "x" })
          yield* tools.writeTextFile.handler({ path: "a\\", content: "y" }, context)
          assert.strictEqual(readFileSync(path.join(root, "a\\"), "utf8"), "y")
        })
    )
  })

  describe("temporary files of writes", () => {
    it.effect("R12 list_files does not show the writes' temporary files, and the tools refuse their names", () =>
      Effect.gen(function* () {
        const { path, root, tools } = yield* workspace
        writeFileSync(path.join(root, ".0123456789abcdef.tmp"), "half a write")
        writeFileSync(path.join(root, "notes.txt"), "notes")
        // Not of the exact form: listed.
        writeFileSync(path.join(root, ".0123456789ABCDEF.tmp"), "mine")
        mkdirSync(path.join(root, ".fedcba9876543210.tmp"))
        const listed = yield* tools.listFiles.handler({ path: "." }, context)
        assert.deepStrictEqual(listed, {
          path: ".",
          entries: [
            { name: ".0123456789ABCDEF.tmp", kind: "file" },
            { name: ".fedcba9876543210.tmp", kind: "directory" },
            { name: "notes.txt", kind: "file" }
          ]
        })
        const codes = [
          yield* codeOf(tools.readFile.handler({ path: ".0123456789abcdef.tmp" }, context)),
          yield* codeOf(tools.writeTextFile.handler({ path: "sub/.0123456789abcdef.tmp", content: "x" }, context))
        ]
        assert.deepStrictEqual(codes, ["invalid_path", "invalid_path"])
        assert.isFalse(existsSync(path.join(root, "sub")))
      })
    )

    it.effect("R12 a write removes the stale temporary files of its directory, and only those", () =>
      Effect.gen(function* () {
        const { path, root, tools } = yield* workspace
        const stale = (name: string) => {
          writeFileSync(path.join(root, name), "left by a killed write")
          utimesSync(path.join(root, name), minutesAgo(5), minutesAgo(5))
        }
        stale(".0123456789abcdef.tmp")
        stale(".00000000000000ff.tmp")
        // Of another form, or a directory: kept, however old.
        stale(".0123456789ABCDEF.tmp")
        stale(".0123456789abcdef.tmp.bak")
        mkdirSync(path.join(root, ".1111111111111111.tmp"))
        utimesSync(path.join(root, ".1111111111111111.tmp"), minutesAgo(5), minutesAgo(5))
        // Young: maybe another write's, in progress.
        writeFileSync(path.join(root, ".fedcba9876543210.tmp"), "a write in progress")
        // In another directory than the one written to.
        mkdirSync(path.join(root, "sub"))
        writeFileSync(path.join(root, "sub", ".2222222222222222.tmp"), "old")
        utimesSync(path.join(root, "sub", ".2222222222222222.tmp"), minutesAgo(5), minutesAgo(5))

        yield* tools.writeTextFile.handler({ path: "notes.txt", content: "notes" }, context)
        assert.deepStrictEqual(readdirSync(root).sort(), [
          ".0123456789ABCDEF.tmp",
          ".0123456789abcdef.tmp.bak",
          ".1111111111111111.tmp",
          ".fedcba9876543210.tmp",
          "notes.txt",
          "sub"
        ])
        assert.deepStrictEqual(readdirSync(path.join(root, "sub")), [".2222222222222222.tmp"])
        yield* tools.writeTextFile.handler({ path: "sub/notes.txt", content: "notes" }, context)
        assert.deepStrictEqual(readdirSync(path.join(root, "sub")), ["notes.txt"])
      })
    )
  })
})
