import { execFileSync } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"

const fixture = join(import.meta.dirname, "..", "fixtures", "write-as-user.ts")
const root = mkdtempSync(join(tmpdir(), "file-tools-ownership-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** The file tools' write of `content` to `path`, in a process of a user without root's override. */
const writeAsUser = (path: string, content: string): { readonly ok: boolean; readonly code?: string } =>
  JSON.parse(
    execFileSync(process.execPath, ["--disable-warning=ExperimentalWarning", fixture, root, path, content], {
      encoding: "utf8",
      timeout: 30_000
    })
  )

describe("FileTools and the file system's own permissions (R3.6)", () => {
  it("R3.6 write_text_file never replaces a file the user may not write: a read-only file stays as it was", () => {
    // The directory is writable by anyone: only the files' own permissions stand in the way.
    chmodSync(root, 0o777)
    writeFileSync(join(root, "locked.txt"), "ORIGINAL")
    chmodSync(join(root, "locked.txt"), 0o444)
    writeFileSync(join(root, "open.txt"), "before")
    chmodSync(join(root, "open.txt"), 0o666)
    assert.deepStrictEqual(writeAsUser("locked.txt", "OVERWRITTEN BY AGENT"), { ok: false, code: "permission_denied" })
    assert.strictEqual(readFileSync(join(root, "locked.txt"), "utf8"), "ORIGINAL")
    // The same user may replace a file it may write, and create a new one.
    assert.deepStrictEqual(writeAsUser("open.txt", "after"), { ok: true })
    assert.strictEqual(readFileSync(join(root, "open.txt"), "utf8"), "after")
    assert.deepStrictEqual(writeAsUser("new.txt", "fresh"), { ok: true })
    assert.strictEqual(readFileSync(join(root, "new.txt"), "utf8"), "fresh")
    // Three processes as another user, each bound at 30 s: on a busy host they take more than vitest's 5 s.
  }, 120_000)
})
