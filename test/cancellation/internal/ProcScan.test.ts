/**
 * The reader of `/proc` that tells a process group with a live member from one whose
 * members are all zombies (R5.2): what it answers, and that groups waited on at once share
 * its reads.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ProcScan from "../../../src/cancellation/internal/ProcScan.ts"

/** Beyond the largest pid_max Linux allows (2^22), so no group has it. */
const unusedPgid = 5_000_000

describe.runIf(process.platform === "linux")("ProcScan", () => {
  it.live("R5.2 a group with a running member is live; a group that does not exist is not", () =>
    Effect.gen(function* () {
      const child = spawn("sleep", ["30"], { detached: true, stdio: "ignore" })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      const pgid = child.pid ?? -1
      const scan = ProcScan.make()
      assert.isTrue(yield* scan.hasLiveMember(pgid))
      assert.isFalse(yield* scan.hasLiveMember(unusedPgid))
    }).pipe(Effect.scoped)
  )

  it.live("R5.2 groups asked about at once share the reads of /proc: 200 questions, at most two reads", () =>
    Effect.gen(function* () {
      const readdir = fs.promises.readdir
      let reads = 0
      // Counts the reads (each begins by listing /proc), and answers as the real one does.
      const counting: typeof readdir = ((...args: Parameters<typeof readdir>) => {
        if (args[0] === "/proc") reads++
        return readdir(...args)
      }) as typeof readdir
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          fs.promises.readdir = counting
        }),
        () =>
          Effect.sync(() => {
            fs.promises.readdir = readdir
          })
      )
      const scan = ProcScan.make()
      const answers = yield* Effect.forEach(
        Array.from({ length: 200 }, (_, i) => unusedPgid + i),
        (pgid) => scan.hasLiveMember(pgid),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(new Set(answers), new Set([false]))
      // Before, each question read /proc whole: 200 reads of every process on the host at once.
      assert.isAtMost(reads, 2)
      assert.isAtLeast(reads, 1)
      // A question asked after a read has ended gets a read of its own (it may not be answered by an old one).
      const before = reads
      yield* scan.hasLiveMember(unusedPgid)
      assert.strictEqual(reads, before + 1)
    }).pipe(Effect.scoped)
  )
})
