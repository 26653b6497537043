import { linkSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Path } from "effect"
import type * as Failure from "../../src/failure/Failure.ts"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Workspace from "../../src/tools/internal/workspace/Workspace.ts"

const context = { runId: "run-1", callId: "call-1", idempotencyKey: "run-1/call-1", settle: () => {} }

// base/root is the tools' root; base/outside is a neighbour they must never touch. No
// permission policy anywhere in this file: the tools hold their root by themselves.
const workspace = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const base = yield* fs.makeTempDirectoryScoped({ prefix: "file-tools-escape-" })
  const root = path.join(base, "root")
  const outside = path.join(base, "outside")
  mkdirSync(path.join(root, "a", "b"), { recursive: true })
  mkdirSync(outside)
  writeFileSync(path.join(outside, "secret.txt"), "OUTSIDE SECRET")
  writeFileSync(path.join(root, "a", "b", "inner.txt"), "inner")
  writeFileSync(path.join(root, "a", "at-a.txt"), "at a")
  writeFileSync(path.join(root, "top.txt"), "top")
  const tools = yield* FileTools.make({ root })
  const at = (...names: ReadonlyArray<string>) => path.join(root, ...names)
  return { path, base, root, outside, tools, at }
})

const assertCode = (error: Failure.Failure, code: string, ...hidden: ReadonlyArray<string>) => {
  assert.strictEqual(error._tag, "Permanent")
  assert.strictEqual(error.code, code, error.hint)
  for (const text of hidden) assert.notInclude(error.hint, text)
}

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("FileTools without a policy", (it) => {
  describe("links that lead out of the root", () => {
    it.effect("R3.6 read_file never reads through a link to outside (a file, /etc/passwd, a linked directory)", () =>
      Effect.gen(function* () {
        const { tools, outside, at, base } = yield* workspace
        symlinkSync(`${outside}/secret.txt`, at("innocent.txt"))
        symlinkSync("/etc/passwd", at("passwd"))
        symlinkSync(outside, at("out-dir"))
        symlinkSync("../outside/secret.txt", at("relative.txt"))
        for (const target of ["innocent.txt", "passwd", "out-dir/secret.txt", "relative.txt"]) {
          const error = yield* Effect.flip(tools.readFile.handler({ path: target }, context))
          assertCode(error, "outside_root", base, "/etc")
        }
      })
    )

    it.effect("R3.6 a write through a link to outside changes nothing outside", () =>
      Effect.gen(function* () {
        const { tools, outside, at } = yield* workspace
        symlinkSync(`${outside}/secret.txt`, at("existing-link.txt"))
        symlinkSync(`${outside}/new.txt`, at("dangling-link.txt"))
        symlinkSync(outside, at("out-dir"))
        for (const target of ["existing-link.txt", "dangling-link.txt", "out-dir/x.txt", "out-dir/new/deep.txt"]) {
          const error = yield* Effect.flip(tools.writeTextFile.handler({ path: target, content: "PWNED" }, context))
          assertCode(error, "outside_root", outside)
        }
        assert.deepStrictEqual(readdirSync(outside), ["secret.txt"])
        assert.strictEqual(readFileSync(`${outside}/secret.txt`, "utf8"), "OUTSIDE SECRET")
      })
    )

    it.effect("R3.6 list_files does not list through a link to outside, and hides entries that lead outside", () =>
      Effect.gen(function* () {
        const { tools, outside, at } = yield* workspace
        symlinkSync(outside, at("a", "out-dir"))
        symlinkSync("/etc/passwd", at("a", "out-file"))
        symlinkSync("b", at("a", "in-dir"))
        symlinkSync("at-a.txt", at("a", "in-file"))
        symlinkSync("missing.txt", at("a", "dangling"))
        assertCode(yield* Effect.flip(tools.listFiles.handler({ path: "a/out-dir" }, context)), "outside_root")
        const listed = yield* tools.listFiles.handler({ path: "a" }, context)
        assert.deepStrictEqual(listed.entries, [
          { name: "at-a.txt", kind: "file" },
          { name: "b", kind: "directory" },
          { name: "in-dir", kind: "directory" },
          { name: "in-file", kind: "file" }
        ])
      })
    )

    it.effect("R3.6 `..` in a link's target cannot climb above the root", () =>
      Effect.gen(function* () {
        const { tools, at, outside } = yield* workspace
        symlinkSync("..", at("up"))
        symlinkSync("../../outside", at("a", "climb"))
        symlinkSync("b/../../..", at("a", "deep"))
        for (const target of ["up/outside/secret.txt", "a/climb/secret.txt", "a/deep/outside/secret.txt"]) {
          assertCode(yield* Effect.flip(tools.readFile.handler({ path: target }, context)), "outside_root")
          const write = tools.writeTextFile.handler({ path: target.replace("secret", "new"), content: "x" }, context)
          assertCode(yield* Effect.flip(write), "outside_root")
        }
        assert.deepStrictEqual(readdirSync(outside), ["secret.txt"])
      })
    )

    it.effect("R3.6 a loop of links is a typed link_loop failure", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace
        symlinkSync("loop-b", at("loop-a"))
        symlinkSync("loop-a", at("loop-b"))
        assertCode(yield* Effect.flip(tools.readFile.handler({ path: "loop-a" }, context)), "link_loop")
        assertCode(yield* Effect.flip(tools.listFiles.handler({ path: "loop-a" }, context)), "link_loop")
        const write = tools.writeTextFile.handler({ path: "loop-a/x.txt", content: "x" }, context)
        assertCode(yield* Effect.flip(write), "link_loop")
      })
    )
  })

  describe("links that stay inside the root", () => {
    it.effect("R3.6 links inside the root keep working, `..` after a link resolved as the kernel would", () =>
      Effect.gen(function* () {
        const { tools, at, root } = yield* workspace
        symlinkSync("a/b", at("to-b"))
        symlinkSync(at("a", "b", "inner.txt"), at("absolute.txt"))
        // `x/..` where x leads to a/b is a/b's parent a, not the root.
        symlinkSync("to-b/..", at("parent-of-b"))
        symlinkSync("../../top.txt", at("a", "b", "up-top.txt"))
        const read = (target: string) => tools.readFile.handler({ path: target }, context)
        assert.strictEqual((yield* read("to-b/inner.txt")).content, "inner")
        assert.strictEqual((yield* read("absolute.txt")).content, "inner")
        assert.strictEqual((yield* read("parent-of-b/at-a.txt")).content, "at a")
        assert.strictEqual((yield* read("a/b/up-top.txt")).content, "top")
        // A write through a link inside the root lands where the link points.
        yield* tools.writeTextFile.handler({ path: "to-b/written.txt", content: "w" }, context)
        assert.strictEqual(readFileSync(`${root}/a/b/written.txt`, "utf8"), "w")
        const listed = yield* tools.listFiles.handler({ path: "parent-of-b" }, context)
        assert.deepStrictEqual(
          listed.entries.map((entry) => entry.name),
          ["at-a.txt", "b"]
        )
      })
    )
  })

  describe("hard links and odd paths", () => {
    it.effect("R3.6 a write never changes an outside file through a hard link: it replaces the name", () =>
      Effect.gen(function* () {
        const { tools, at, outside } = yield* workspace
        linkSync(`${outside}/secret.txt`, at("hard.txt"))
        const written = yield* tools.writeTextFile.handler({ path: "hard.txt", content: "new" }, context)
        assert.deepStrictEqual(written, { path: "hard.txt", bytes: 3 })
        assert.strictEqual(readFileSync(at("hard.txt"), "utf8"), "new")
        assert.strictEqual(readFileSync(`${outside}/secret.txt`, "utf8"), "OUTSIDE SECRET")
      })
    )

    it.effect("R3.6 a write keeps the mode of the file it replaces and leaves no temporary file", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace
        writeFileSync(at("script.sh"), "old", { mode: 0o750 })
        yield* tools.writeTextFile.handler({ path: "script.sh", content: "new" }, context)
        const fs = yield* FileSystem.FileSystem
        const info = yield* fs.stat(at("script.sh"))
        assert.strictEqual(info.mode & 0o777, 0o750)
        assert.deepStrictEqual(readdirSync(at()).sort(), ["a", "script.sh", "top.txt"])
      })
    )

    it.effect("R3.6 very long paths and names are invalid_path, with a short hint", () =>
      Effect.gen(function* () {
        const { tools } = yield* workspace
        const longPath = `${"d/".repeat(3000)}f.txt`
        const longName = `${"n".repeat(300)}.txt`
        for (const target of [longPath, longName]) {
          for (const error of [
            yield* Effect.flip(tools.readFile.handler({ path: target }, context)),
            yield* Effect.flip(tools.writeTextFile.handler({ path: target, content: "x" }, context)),
            yield* Effect.flip(tools.listFiles.handler({ path: target }, context))
          ]) {
            assertCode(error, "invalid_path")
            assert.isBelow(error.hint.length, 300)
          }
        }
      })
    )

    it.effect("R3.6 a path that names a directory (newdir/, a/., ..) is never read or written as a file", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace
        for (const target of ["newdir/", "top.txt/", "a/.", "a/..", "."]) {
          for (const error of [
            yield* Effect.flip(tools.writeTextFile.handler({ path: target, content: "x" }, context)),
            yield* Effect.flip(tools.readFile.handler({ path: target }, context))
          ]) {
            assertCode(error, "invalid_path")
            assert.include(error.hint, "names a directory")
          }
        }
        assert.deepStrictEqual(readdirSync(at()).sort(), ["a", "top.txt"])
        assert.strictEqual(readFileSync(at("top.txt"), "utf8"), "top")
      })
    )

    it.effect("R3.6 a file on the way where a directory is needed is not_a_directory, and nothing is created", () =>
      Effect.gen(function* () {
        const { tools, at } = yield* workspace
        const error = yield* Effect.flip(
          tools.writeTextFile.handler({ path: "top.txt/x/y.txt", content: "x" }, context)
        )
        assertCode(error, "not_a_directory", at())
        assert.strictEqual(readFileSync(at("top.txt"), "utf8"), "top")
      })
    )
  })

  describe("without /proc/self/fd (the walk by path, as on macOS)", () => {
    it.effect("R3.6 links are still resolved against the root: inside ones work, outside ones are refused", () =>
      Effect.gen(function* () {
        const { root, outside, at } = yield* workspace
        const byPath = yield* Workspace.make({ root, descriptorPaths: false })
        symlinkSync("a/b", at("to-b"))
        symlinkSync(outside, at("out-dir"))
        symlinkSync("..", at("up"))
        linkSync(`${outside}/secret.txt`, at("hard.txt"))
        const reason = (effect: Effect.Effect<unknown, Workspace.WorkspaceError>) =>
          Effect.map(Effect.flip(effect), (error) => error.reason)
        assert.strictEqual((yield* byPath.read(["to-b", "inner.txt"], 100)).toString(), "inner")
        assert.strictEqual(yield* reason(byPath.read(["out-dir", "secret.txt"], 100)), "outside_root")
        assert.strictEqual(yield* reason(byPath.read(["up", "outside", "secret.txt"], 100)), "outside_root")
        assert.strictEqual(yield* reason(byPath.write(["out-dir", "x.txt"], Buffer.from("x"))), "outside_root")
        yield* byPath.write(["to-b", "new", "w.txt"], Buffer.from("w"))
        assert.strictEqual(readFileSync(at("a", "b", "new", "w.txt"), "utf8"), "w")
        yield* byPath.write(["hard.txt"], Buffer.from("new"))
        assert.strictEqual(readFileSync(`${outside}/secret.txt`, "utf8"), "OUTSIDE SECRET")
        assert.deepStrictEqual(readdirSync(outside), ["secret.txt"])
        const listed = yield* byPath.list([], 100)
        assert.deepStrictEqual(listed.entries.map((entry) => entry.name).sort(), ["a", "hard.txt", "to-b", "top.txt"])
      })
    )
  })
})
