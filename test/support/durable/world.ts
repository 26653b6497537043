/**
 * The parent's side of the durable-run process suites (R9, R7): the runner bundled once per
 * test file, a directory and a payment ledger per test, the processes it started (each
 * killed by pid after the test, and at exit), and the checks on what a run paid.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, assert, beforeAll } from "vitest"
import * as Harness from "../crash/harness.ts"
import * as Ledger from "../crash/ledger.ts"
import { type Config, planned, type Result } from "./config.ts"

export type Runner = Harness.Child<Result>

/** Registers the file's set-up: call at the top of the test file; `script()` is the bundle once built. */
export const setUp = () => {
  let dir = ""
  let script = ""
  const started: Array<Runner> = []
  beforeAll(async () => {
    dir = Harness.tempDir()
    script = await Harness.bundle(dir, path.join(import.meta.dirname, "runner.ts"))
  }, 60_000)
  // Every process a test started is killed by its pid, whatever became of the test.
  afterEach(async () => {
    await Promise.all(started.splice(0).map((child) => child.kill()))
  })
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  /** The test's own files in the file's directory, and the processes it starts on them. */
  const world = (test: string) => {
    const ledger = path.join(dir, `${test}-ledger.db`)
    const start = (config: Omit<Config, "ledger">): Runner => {
      const child = Harness.start<Result>(script, { ...config, ledger })
      started.push(child)
      return child
    }
    const payments = (): ReadonlyMap<string, number> => {
      const books = Ledger.open(ledger)
      try {
        return books.counts()
      } finally {
        books.close()
      }
    }
    return { file: (name: string) => path.join(dir, `${test}-${name}`), start, payments }
  }
  return { world }
}

/** Waits for the run's `result` line from `child`; gives the result. */
export const resultOf = async (child: Runner, runId: string): Promise<Result> => {
  await child.waitFor((line) => line.startsWith(`result {"runId":${JSON.stringify(runId)},`))
  const found = child.results().find((r) => r.runId === runId)
  if (found === undefined) throw new Error(`no result of ${runId}`)
  return found
}

/** What a run paid, per call of its plan (see `planned`): counts in the ledger under `<run>:<call>`. */
export const paidOf = (runId: string, counts: ReadonlyMap<string, number>): Readonly<Record<string, number>> =>
  Object.fromEntries(planned(runId).map((callId) => [callId, counts.get(`${runId}:${callId}`) ?? 0]))

/**
 * Exactly once, or in doubt (R3.8): each call the run's timeline says succeeded was paid
 * once; a call it ended in doubt about (`unknown_outcome`, the call pending) at most once;
 * any other call never. A completed run made every payment of its plan.
 */
export const assertPaid = (result: Result, counts: ReadonlyMap<string, number>) => {
  const paid = paidOf(result.runId, counts)
  const what = `${result.runId} ended ${result.status} (${result.stopReason}: ${result.detail}), paid ${JSON.stringify(paid)}, timeline ${result.tags.join(" ")}`
  if (result.status === "completed") assert.sameMembers([...result.succeeded], [...planned(result.runId)], what)
  if (result.status === "unknown_outcome") assert.lengthOf(result.pending, 1, what)
  for (const [callId, count] of Object.entries(paid)) {
    if (result.succeeded.includes(callId)) assert.strictEqual(count, 1, `${callId}: ${what}`)
    else if (result.pending.includes(callId)) assert.isAtMost(count, 1, `${callId}: ${what}`)
    else assert.strictEqual(count, 0, `${callId}: ${what}`)
  }
}

/** The process never printed `marker` (exact line). */
export const assertNever = (child: Runner, marker: string) =>
  assert.notInclude(child.lines, marker, `pid ${child.pid}: ${child.lines.join(" | ")}`)
