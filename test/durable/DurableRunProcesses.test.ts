/**
 * DurableRun embedded on one SQLite file, across real processes (R9, R7, R5.1): a process
 * is `kill -9`ed by its pid, another is started on the same file, and what the runs did is
 * read back from the ledger of the payment service and the results the runs committed.
 */
import { Effect } from "effect"
import { assert, describe, it } from "vitest"
import * as Journal from "../../src/journal/Journal.ts"
import { assertNever, assertPaid, paidOf, resultOf, setUp } from "../support/durable/world.ts"

const { world } = setUp()

/** Starts `runId` in a first process on `filename`, waits for `marker`, and `kill -9`s it. */
const killedAt = async (w: ReturnType<typeof world>, runId: string, marker: string, hold?: string) => {
  const first = w.start({
    mode: { _tag: "embedded", filename: w.file("runs.db") },
    start: [runId],
    watch: [runId],
    hold
  })
  await first.waitFor(marker)
  await first.kill()
  assert.isEmpty(first.results(), "the run had not finished when its process was killed")
  return first
}

describe("DurableRun embedded on one SQLite file, across kill -9 (R9)", () => {
  it("R9.4 a process started again on the file resumes an unfinished run by itself: paid once, the payment in doubt reconciled", async () => {
    const w = world("restart")
    const runId = "pay2-a"
    await killedAt(w, runId, `paid ${runId} c1`, `paid ${runId} c1`)
    assert.deepStrictEqual(paidOf(runId, w.payments()), { c1: 1, c2: 0 }, "paid, its result not committed")
    // No start here: the engine finds the run unfinished in the file and drives it on.
    const second = w.start({ mode: { _tag: "embedded", filename: w.file("runs.db") }, watch: [runId] })
    const result = await resultOf(second, runId)
    assert.strictEqual(result.status, "completed", result.detail)
    assertPaid(result, w.payments())
    assert.isFalse(
      second.lines.some((line) => line.startsWith("started ")),
      "the second process started nothing"
    )
    assert.include(second.lines, `model ${runId} 2`, "the run went on in the second process")
    assert.deepStrictEqual(
      result.resumed.map((r) => r.inDoubt),
      [["c1"]]
    )
    assert.deepStrictEqual(result.reconciled, [{ callId: "c1", verdict: "applied" }])
  }, 60_000)

  it("R9.4 a second host on the file while the first lives is refused: the first pays once; a client-only process beside it sees the result", async () => {
    const w = world("second-host")
    const runId = "pay1-live"
    const filename = w.file("runs.db")
    const shardingConfig = { entityTerminationTimeout: "1 second" }
    const first = w.start({
      mode: { _tag: "embedded", filename },
      shardingConfig,
      start: [runId],
      watch: [runId],
      payMillis: 4000
    })
    await first.waitFor(`paying ${runId} c1`)
    // Another process opens the file to host while the first is in the payment: it would take
    // the run over, find the payment in doubt, and pay again.
    const second = w.start({ mode: { _tag: "embedded", filename }, shardingConfig, watch: [runId], payMillis: 5 })
    const exit = await second.exited
    assert.strictEqual(exit.code, 1, second.stderr())
    assert.include(second.stderr(), "hosted by another live process")
    assert.notInclude(second.lines, "ready")
    // A process beside the host, on the file, reads the run.
    const beside = w.start({ mode: { _tag: "embedded", filename, clientOnly: true }, shardingConfig, watch: [runId] })
    const [seen, own] = await Promise.all([resultOf(beside, runId), resultOf(first, runId)])
    assert.deepStrictEqual([seen.status, own.status], ["completed", "completed"], own.detail)
    assert.deepStrictEqual(paidOf(runId, w.payments()), { c1: 1 })
    assert.isFalse(beside.lines.some((line) => line.startsWith("model ") || line.startsWith("paying ")))
  }, 60_000)

  it("R7 a run parked on approval, its process killed: another process approves, the run finishes there, each payment once", async () => {
    const w = world("approve")
    const runId = "approve-a"
    const first = await killedAt(w, runId, `awaiting-approval ${runId} c2`)
    assert.deepStrictEqual(paidOf(runId, w.payments()), { c1: 1, c2: 0 }, "nothing runs before the decision")
    const second = w.start({ mode: { _tag: "embedded", filename: w.file("runs.db") }, approve: [runId] })
    const result = await resultOf(second, runId)
    assert.strictEqual(result.status, "completed", result.detail)
    assertPaid(result, w.payments())
    assert.include(second.lines, `approved ${runId} c2`)
    assert.include(second.lines, `paying ${runId} c2`, "the approved call ran in the second process")
    assertNever(first, `paying ${runId} c2`)
    assertNever(second, `paying ${runId} c1`)
    assert.include(result.tags, "approval.decided")
    assert.isNotEmpty(result.resumed)
  }, 60_000)

  it("R7 an approval's durable clock fires after a restart: approval_expired, the call never run", async () => {
    const w = world("expire")
    const runId = "expire-a"
    const first = await killedAt(w, runId, `awaiting-approval ${runId} c2`)
    const killed = performance.now()
    const second = w.start({ mode: { _tag: "embedded", filename: w.file("runs.db") }, watch: [runId] })
    const result = await resultOf(second, runId)
    console.log(`expiry after a restart: the result ${Math.round(performance.now() - killed)} ms after the kill`)
    assert.strictEqual(result.stopReason, "approval_expired", result.detail)
    assertPaid(result, w.payments())
    assert.deepStrictEqual(paidOf(runId, w.payments()), { c1: 1, c2: 0 })
    assertNever(first, `result ${runId}`)
    assert.isNotEmpty(result.resumed, "it expired in the second process")
  }, 60_000)

  it("R5.1 a run suspended on approval is cancelled from a process started after the kill: cancelled, the call never run nor pending", async () => {
    const w = world("cancel")
    const runId = "approve-c"
    await killedAt(w, runId, `awaiting-approval ${runId} c2`)
    const second = w.start({ mode: { _tag: "embedded", filename: w.file("runs.db") }, cancel: [runId] })
    const result = await resultOf(second, runId)
    assert.strictEqual(result.status, "cancelled", result.detail)
    assert.strictEqual(result.tags.filter((t) => t === "run.finished").length, 1)
    assertPaid(result, w.payments())
    assert.deepStrictEqual(paidOf(runId, w.payments()), { c1: 1, c2: 0 })
    await second.kill()
    const pending = await Effect.runPromise(
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        return yield* journal.pendingApprovals({ runId })
      }).pipe(Effect.provide(Journal.layerSqlite({ filename: w.file("runs.db") })))
    )
    assert.deepStrictEqual(pending, [], "the call is no longer pending")
  }, 60_000)
})
