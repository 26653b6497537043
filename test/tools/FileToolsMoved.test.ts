import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { afterEach, assert, describe, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Path } from "effect"
import * as FileTools from "../../src/tools/FileTools.ts"

// Another process moving a directory out of the root at the worst moment of a write. The
// moment is made exact by hooking one call of node:fs/promises, the module the workspace
// uses: the hook moves the directory, then lets the call go on.
const fsp: Record<"rename" | "mkdir", (...args: ReadonlyArray<unknown>) => Promise<unknown>> = createRequire(
  import.meta.url
)("node:fs/promises")
const original = { rename: fsp.rename, mkdir: fsp.mkdir }

const hookOnce = (name: "rename" | "mkdir", before: () => void) => {
  let armed = true
  fsp[name] = (...args) => {
    // Only the workspace's own calls, made through a descriptor of the directory.
    if (armed && String(args[0]).startsWith("/proc/self/fd/")) {
      armed = false
      before()
    }
    return original[name](...args)
  }
  syncBuiltinESMExports()
}

afterEach(() => {
  fsp.rename = original.rename
  fsp.mkdir = original.mkdir
  syncBuiltinESMExports()
})

const context = { runId: "run-1", callId: "call-1", idempotencyKey: "run-1/call-1", settle: () => {} }

// Every name under `dir`, relative to it.
const tree = (dir: string, path: Path.Path): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const at = path.join(dir, entry.name)
    return [entry.name, ...(entry.isDirectory() ? tree(at, path).map((name) => path.join(entry.name, name)) : [])]
  })

const workspace = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const base = yield* fs.makeTempDirectoryScoped({ prefix: "file-tools-moved-" })
  const root = path.join(base, "root")
  const outside = path.join(base, "outside")
  mkdirSync(path.join(root, "d"), { recursive: true })
  mkdirSync(outside)
  const tools = yield* FileTools.make({ root })
  const moveOut = () => renameSync(path.join(root, "d"), path.join(outside, "d"))
  return { root, outside, tools, moveOut, path }
})

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("FileTools and a directory moved out", (it) => {
  describe.skipIf(!existsSync("/proc/self/fd"))("R12 R3.11 nothing is left outside the root (review 188)", () => {
    it.effect("a directory moved out between the write's check and its rename: the file is taken back out", () =>
      Effect.gen(function* () {
        const { outside, tools, moveOut, path } = yield* workspace
        hookOnce("rename", moveOut)
        const result = yield* Effect.result(tools.writeTextFile.handler({ path: "d/f.txt", content: "x" }, context))
        // Before, the write succeeded and outside/d/f.txt held it.
        assert.strictEqual(result._tag, "Failure")
        if (result._tag === "Failure") {
          assert.strictEqual(result.failure.code, "outside_root")
          assert.include(result.failure.hint, "moved out of it while the call ran")
        }
        assert.deepStrictEqual(tree(outside, path), ["d"])
      })
    )

    it.effect("a directory moved out while the walk makes missing ones: what it made out there is removed", () =>
      Effect.gen(function* () {
        const { root, outside, tools, moveOut, path } = yield* workspace
        hookOnce("mkdir", moveOut)
        const result = yield* Effect.result(
          tools.writeTextFile.handler({ path: "d/new1/new2/f.txt", content: "x" }, context)
        )
        assert.strictEqual(result._tag, "Failure")
        if (result._tag === "Failure") assert.strictEqual(result.failure.code, "outside_root")
        // Before, outside/d/new1/new2 was made and stayed.
        assert.deepStrictEqual(tree(outside, path), ["d"])
        assert.deepStrictEqual(tree(root, path), [])
      })
    )

    it.effect(
      "the file taken back is the write's own: one another process put there since is left alone (review 191)",
      () =>
        Effect.gen(function* () {
          const { outside, tools, moveOut, path } = yield* workspace
          let armed = true
          fsp.rename = async (...args) => {
            const renamed = await original.rename(...args)
            if (armed && String(args[0]).startsWith("/proc/self/fd/")) {
              armed = false
              // Placed; then the directory is moved out, and its new owner puts its own report there.
              moveOut()
              writeFileSync(path.join(outside, "d", "mine"), "the owner's")
              renameSync(path.join(outside, "d", "mine"), path.join(outside, "d", "f.txt"))
            }
            return renamed
          }
          syncBuiltinESMExports()
          const result = yield* Effect.result(tools.writeTextFile.handler({ path: "d/f.txt", content: "x" }, context))
          assert.strictEqual(result._tag === "Failure" ? result.failure.code : "succeeded", "outside_root")
          // Before, the write's cleanup unlinked the owner's file by its name.
          assert.strictEqual(readFileSync(path.join(outside, "d", "f.txt"), "utf8"), "the owner's")
        })
    )

    it.effect("a directory that stays inside is written to as before", () =>
      Effect.gen(function* () {
        const { root, tools, path } = yield* workspace
        hookOnce("mkdir", () => {})
        yield* tools.writeTextFile.handler({ path: "d/new1/f.txt", content: "x" }, context)
        assert.deepStrictEqual(tree(root, path).sort(), ["d", "d/new1", "d/new1/f.txt"])
      })
    )
  })
})
