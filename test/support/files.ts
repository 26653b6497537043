/**
 * Throwaway database files for a test file: each in a folder of its own under the system's
 * temporary folder, all removed when the file's tests are done.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"

/** A maker of fresh file paths named `prefix…/runs.db`; call it at a test file's top level. */
export const tempFiles = (prefix: string): (() => string) => {
  const dirs: Array<string> = []
  afterAll(() => {
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
    dirs.push(dir)
    return path.join(dir, "runs.db")
  }
}
