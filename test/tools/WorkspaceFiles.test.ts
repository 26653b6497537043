/**
 * R3.6 R12: one file under a root, read as the file tools read it (the artifact checks use it).
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as WorkspaceFiles from "../../src/tools/WorkspaceFiles.ts"

const reasonOf = (root: string, path: string, maxBytes = 1_000) =>
  Effect.match(WorkspaceFiles.read(root, path, maxBytes), {
    onSuccess: (bytes) => new TextDecoder().decode(bytes),
    onFailure: (error) => error.reason
  })

describe("WorkspaceFiles", () => {
  it.effect(
    "R3.6 R12 reads a file under the root, and nothing a path or a link leads to outside it; bad input is a typed error",
    () =>
      Effect.gen(function* () {
        const base = mkdtempSync(join(tmpdir(), "workspace-files-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(base, { recursive: true, force: true })))
        const root = join(base, "root")
        mkdirSync(join(root, "notes"), { recursive: true })
        writeFileSync(join(base, "secret.txt"), "outside")
        writeFileSync(join(root, "notes", "a.txt"), "inside")
        writeFileSync(join(root, "big.txt"), "x".repeat(2_000))
        symlinkSync("../secret.txt", join(root, "out.txt"))
        symlinkSync("notes/a.txt", join(root, "in.txt"))
        const reasons = yield* Effect.forEach(
          [
            "notes/a.txt",
            "in.txt",
            "out.txt",
            "../secret.txt",
            join(base, "secret.txt"),
            "notes",
            ".",
            "missing.txt",
            "big.txt"
          ],
          (path) => reasonOf(root, path)
        )
        // Bad input gets a typed error before the file system is asked.
        const refused = yield* Effect.forEach(
          [
            [root, "notes/a.txt", Number.NaN],
            [root, "notes/a.txt", -1],
            [root, "notes/a.txt", 1.5],
            ["", "notes/a.txt", 10],
            [root, "", 10],
            [root, "a\u0000b", 10],
            [root, "notes/a.txt/", 10],
            [root, "notes/a.txt/.", 10]
          ] as const,
          ([at, path, max]) => reasonOf(at, path, max)
        )
        assert.deepStrictEqual(refused, [
          "invalid_argument",
          "invalid_argument",
          "invalid_argument",
          "invalid_argument",
          "invalid_argument",
          "invalid_argument",
          "is_a_directory",
          "is_a_directory"
        ])
        assert.strictEqual(yield* reasonOf(root, "notes/a.txt", Number.POSITIVE_INFINITY), "inside")
        assert.deepStrictEqual(reasons, [
          "inside",
          "inside",
          "outside_root",
          "outside_root",
          "outside_root",
          "is_a_directory",
          "is_a_directory",
          "not_found",
          "too_large"
        ])
      })
  )

  it.effect(
    "R12 a path or a root with a lone surrogate fails invalid_argument, and the file U+FFFD names is not read",
    () =>
      Effect.gen(function* () {
        const root = mkdtempSync(join(tmpdir(), "workspace-files-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(root, { recursive: true, force: true })))
        writeFileSync(join(root, "report-\ufffd.txt"), "someone else's")
        assert.strictEqual(yield* reasonOf(root, "report-\ud800.txt"), "invalid_argument")
        assert.strictEqual(yield* reasonOf(root, "report-\ufffd.txt"), "someone else's")
        assert.strictEqual(yield* reasonOf(`${root}/\udfff`, "a.txt"), "invalid_argument")
      })
  )
})
