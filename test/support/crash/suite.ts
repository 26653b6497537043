/**
 * The real-crash suite (R9, R3.8, R7), over one journal: a child process runs agents that
 * pay through a ledger of their own, the test `kill -9`s it at a marker or at a random
 * moment, and a new process runs `Run.recover`. Then, from the journal and the ledger as
 * they are on disk: every payment was made exactly once, or its run ended `unknown_outcome`
 * with it pending; every event committed before a kill is still there, in place, with
 * `run.resumed` after it; every run's result is committed.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Exit, Option } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import type * as Event from "../../../src/events/Event.ts"
import * as Timeline from "../../../src/events/Timeline.ts"
import * as Journal from "../../../src/journal/Journal.ts"
import * as JournalLoad from "../../../src/run/journal/JournalLoad.ts"
import type * as RunResult from "../../../src/run/RunResult.ts"
import { type Config, journalLayer, type Where } from "./config.ts"
import * as Harness from "./harness.ts"
import * as Ledger from "./ledger.ts"

export interface Setup {
  readonly name: string
  /** A journal of its own for the test named `test`, in `dir`. */
  readonly where: (dir: string, test: string) => Where
  readonly randomKills: number
}

/** A run as the journal holds it, after a kill or at the end. */
interface Kept {
  readonly events: ReadonlyArray<Event.Event>
  readonly result: RunResult.RunResult | undefined
}

/** The payments a run's model asks for, from its id (see child.ts). */
const planned = (runId: string): number => {
  const [, kind, count] = /^(pay|blind|approve)(\d*)-/.exec(runId) ?? []
  return kind === "approve" ? 2 : Number(count)
}

const keysOf = (runId: string) => Array.from({ length: planned(runId) }, (_, i) => `${runId}:c${i + 1}`)

const ofTag = <T extends Event.Event["_tag"]>(events: ReadonlyArray<Event.Event>, tag: T) =>
  events.filter((e): e is Event.Of<T> => e._tag === tag)

/**
 * Exactly once, or in doubt (R3.8): each call the run's timeline says succeeded was paid
 * once; its pending call (a run that ended `unknown_outcome`) at most once; a call it
 * found not applied, after every attempt its tool allows, and those it never made, never.
 * A completed run made every payment its model asked for.
 */
const assertPaid = (result: RunResult.RunResult, counts: ReadonlyMap<string, number>) => {
  const paid = keysOf(result.runId).map((key) => counts.get(key) ?? 0)
  const what = `${result.runId} ended ${result.status} (${result.stopReason}: ${result.detail}), payments ${JSON.stringify(paid)}\n${Timeline.format(result.timeline)}`
  const succeeded = new Set(ofTag(result.timeline, "tool.succeeded").map((e) => e.callId))
  const notApplied = new Set(
    ofTag(result.timeline, "tool.failed").flatMap((e) => (e.error.failure?.code === "not_applied" ? [e.callId] : []))
  )
  const pending = result.pendingActions.map((p) => p.callId)
  if (result.status === "completed") assert.strictEqual(succeeded.size, paid.length, what)
  else if (result.status === "unknown_outcome") assert.lengthOf(pending, 1, what)
  else {
    assert.strictEqual(result.stopReason, "tool_error", what)
    assert.strictEqual(notApplied.size, 1, what)
  }
  paid.forEach((count, i) => {
    const callId = `c${i + 1}`
    if (succeeded.has(callId)) assert.strictEqual(count, 1, `${callId}: ${what}`)
    else if (pending.includes(callId)) assert.isAtMost(count, 1, `${callId}: ${what}`)
    else assert.strictEqual(count, 0, `${callId}: ${what}`)
  })
}

/** Every event committed before (`earlier`) is still there, in place, and the run was resumed after it. */
const assertKept = (runId: string, earlier: Kept | undefined, now: Kept | undefined) => {
  if (earlier === undefined || earlier.events.length === 0) return
  assert.isDefined(now, `${runId} is still in the journal`)
  assert.deepStrictEqual(now?.events.slice(0, earlier.events.length), earlier.events, `${runId}: committed events kept`)
  if (earlier.result === undefined && now?.result !== undefined) {
    const resumed = ofTag(now.events.slice(earlier.events.length), "run.resumed")
    assert.isAtLeast(resumed.length, 1, `${runId}: run.resumed after the kill`)
    assert.strictEqual(resumed[0]?.fromSeq, earlier.events.length, `${runId}: resumed from the last committed event`)
  }
}

/** The run ended and its result is committed: the stored result is the run's, with the whole log as its timeline. */
const assertFinished = (runId: string, kept: Kept | undefined): RunResult.RunResult => {
  const result = kept?.result
  assert.isDefined(result, `${runId}: its result is committed`)
  if (result === undefined || kept === undefined) throw new Error("unreachable")
  assert.deepStrictEqual(
    result.timeline.map((e) => e.seq),
    kept.events.map((e) => e.seq),
    `${runId}: the result's timeline is the committed log`
  )
  return result
}

export const crashSuite = (setup: Setup) =>
  describe(`Durable runs killed with kill -9 (${setup.name})`, () => {
    let dir = ""
    let script = ""
    beforeAll(async () => {
      dir = Harness.tempDir()
      script = await Harness.bundle(dir)
    }, 60_000)
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

    /** A journal and a ledger of the test's own, and what the parent reads back from them. */
    const world = (test: string) => {
      const where = setup.where(dir, test)
      const ledger = path.join(dir, `${test}-ledger.db`)
      const config = (extra: Omit<Config, "journal" | "ledger">): Config => ({ journal: where, ledger, ...extra })
      const read = (runIds: ReadonlyArray<string>) =>
        Effect.runPromise(
          Effect.gen(function* () {
            const journal = yield* Journal.Journal
            const runs = new Map<string, Kept>()
            for (const runId of runIds) {
              const stored = yield* journal.read(runId)
              if (Option.isNone(stored)) continue
              const result = JournalLoad.storedResult(stored.value)
              if (result !== undefined && Exit.isFailure(result)) throw new Error(`${runId}: bad result`)
              runs.set(runId, {
                events: stored.value.events,
                result: result !== undefined && Exit.isSuccess(result) ? result.value : undefined
              })
            }
            return { runs, approvals: yield* journal.pendingApprovals() }
          }).pipe(Effect.provide(journalLayer(where)))
        )
      const payments = () => {
        const books = Ledger.open(ledger)
        try {
          return books.counts()
        } finally {
          books.close()
        }
      }
      return { config, read, payments }
    }

    /** Starts `runId` in a child, kills it at the `hold` marker, and reads what survived. */
    const killedAt = async (test: string, runId: string, hold: string) => {
      const w = world(test)
      const child = Harness.start(script, w.config({ runs: [runId], hold }))
      await child.waitFor(hold)
      await child.kill()
      return { w, before: await w.read([runId]), paidBefore: w.payments() }
    }

    /** A new process recovers every unfinished run; gives what it printed and the journal after. */
    const recovered = async (w: ReturnType<typeof world>, runId: string) => {
      const child = Harness.start(script, w.config({ recover: true }))
      await child.succeeded()
      const after = await w.read([runId])
      const result = assertFinished(runId, after.runs.get(runId))
      assert.deepStrictEqual(
        child.results().map((r) => [r.runId, r.status]),
        [[runId, result.status]]
      )
      return { after, result, events: after.runs.get(runId)?.events ?? [] }
    }

    /** Pays two invoices, killed at `marker` of the second; a new process recovers. */
    const payThenRecover = async (marker: string, inDoubt: ReadonlyArray<string>, paidBefore: number) => {
      const runId = "pay2-a"
      const { w, before, paidBefore: counts } = await killedAt(marker, runId, `${marker} ${runId} c2`)
      assert.strictEqual(counts.get(`${runId}:c1`), 1, "the first payment was made before the kill")
      assert.strictEqual(counts.get(`${runId}:c2`) ?? 0, paidBefore)
      const { result, events } = await recovered(w, runId)
      assert.strictEqual(result.status, "completed")
      assertPaid(result, w.payments())
      assertKept(runId, before.runs.get(runId), { events, result })
      assert.deepStrictEqual(ofTag(events, "run.resumed")[0]?.inDoubt, inDoubt)
      return events
    }

    it("R9.2 killed before the intent record of its second payment: the restart pays it once", async () => {
      const events = await payThenRecover("before-intent", [], 0)
      assert.deepStrictEqual(ofTag(events, "tool.reconciled"), [], "nothing was in doubt")
    }, 90_000)

    it("R9.2 killed after the intent record, before the payment: found not applied, paid once under the same key", async () => {
      const events = await payThenRecover("intent-committed", ["c2"], 0)
      assert.deepStrictEqual(
        ofTag(events, "tool.reconciled").map((e) => [e.callId, e.verdict]),
        [["c2", "not_applied"]]
      )
    }, 90_000)

    it("R9.2 killed after the payment, before its result was committed: found applied, never paid twice", async () => {
      const events = await payThenRecover("paid", ["c2"], 1)
      assert.deepStrictEqual(
        ofTag(events, "tool.reconciled").map((e) => [e.callId, e.verdict]),
        [["c2", "applied"]]
      )
    }, 90_000)

    it("R3.8 killed after a payment that has no status query: never resent, the run ends unknown_outcome with it pending", async () => {
      const runId = "blind1-a"
      const { w, before } = await killedAt("blind", runId, `paid ${runId} c1`)
      const { result, events } = await recovered(w, runId)
      assert.strictEqual(result.status, "unknown_outcome")
      assert.deepStrictEqual(
        result.pendingActions.map((p) => p.callId),
        ["c1"]
      )
      assert.strictEqual(w.payments().get(`${runId}:c1`), 1)
      assertPaid(result, w.payments())
      assertKept(runId, before.runs.get(runId), { events, result })
    }, 90_000)

    it("R7 killed while awaiting approval: the restarted run waits again, another process approves, the call runs once", async () => {
      const runId = "approve-a"
      const { w, before, paidBefore } = await killedAt("approval", runId, `awaiting-approval ${runId} c2`)
      assert.deepStrictEqual(
        before.approvals.map((a) => [a.runId, a.callId]),
        [[runId, "c2"]],
        "the request is a row in the journal"
      )
      assert.strictEqual(paidBefore.get(`${runId}:c2`), undefined)
      const recovering = Harness.start(script, w.config({ recover: true }))
      await recovering.waitFor(`awaiting-approval ${runId} c2`)
      assert.strictEqual(w.payments().get(`${runId}:c2`), undefined, "nothing runs before the decision")
      const person = Harness.start(script, w.config({ decide: { expect: 1 } }))
      await person.succeeded()
      await recovering.succeeded()
      const after = await w.read([runId])
      const result = assertFinished(runId, after.runs.get(runId))
      const events = after.runs.get(runId)?.events ?? []
      assert.strictEqual(result.status, "completed")
      assertPaid(result, w.payments())
      assertKept(runId, before.runs.get(runId), { events, result })
      const [asked] = ofTag(events, "approval.requested")
      assert.deepStrictEqual(
        ofTag(events, "approval.decided").map((e) => [e.callId, e.decision, e.by]),
        [["c2", "approved", "ops"]]
      )
      assert.lengthOf(ofTag(events, "approval.requested"), 1, "asked once: the request was put back, not asked again")
      assert.isDefined(asked)
      assert.deepStrictEqual(after.approvals, [])
    }, 90_000)

    it(`R9 killed at ${setup.randomKills} random moments, each restart recovering what the last left: exactly once or in doubt, no committed step lost`, async () => {
      const seed = Number(process.env.CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31))
      const random = mulberry32(seed)
      const w = world("random")
      const runsOf = (round: number) => [`pay3-r${round}`, `blind2-r${round}`]
      const all: Array<string> = []
      /** One process: it recovers what is unfinished, starts round `n`'s runs (none for the last), and is killed after `delay` ms. */
      const round = async (n: number | undefined, delay?: number) => {
        const runs = n === undefined ? [] : runsOf(n)
        all.push(...runs)
        const child = Harness.start(script, w.config({ recover: true, runs }))
        await child.waitFor("ready")
        const began = performance.now()
        if (delay === undefined) await child.succeeded()
        else {
          await new Promise((resolve) => setTimeout(resolve, delay))
          await child.kill()
        }
        const { code, signal } = await child.exited
        if (signal === null) assert.strictEqual(code, 0, `round ${n} (seed ${seed}): ${child.lines.join(" | ")}`)
        return { killed: signal === "SIGKILL", span: performance.now() - began }
      }
      // Round 0 runs to its end: how long a round's work takes, to spread the kills over.
      const { span } = await round(0)
      let before = await w.read(all)
      let killed = 0
      for (let n = 1; n <= setup.randomKills; n++) {
        const delay = random() * span
        if ((await round(n, delay)).killed) killed++
        const now = await w.read(all)
        for (const runId of all) assertKept(runId, before.runs.get(runId), now.runs.get(runId))
        for (const [key, count] of w.payments()) assert.isAtMost(count, 1, `${key} paid twice (seed ${seed})`)
        before = now
      }
      // The last restart is left to finish.
      await round(undefined)
      const end = await w.read(all)
      const counts = w.payments()
      const tally = new Map<string, number>()
      const count = (what: string) => tally.set(what, (tally.get(what) ?? 0) + 1)
      for (const runId of new Set(all)) {
        const kept = end.runs.get(runId)
        if (kept === undefined || kept.events.length === 0) {
          // Killed before its first commit: nothing of it happened, nothing to resume.
          count("never_started")
          for (const key of keysOf(runId)) assert.strictEqual(counts.get(key), undefined, `${key} (seed ${seed})`)
          continue
        }
        const result = assertFinished(runId, kept)
        assertPaid(result, counts)
        count(result.status)
        if (ofTag(kept.events, "run.resumed").length > 0) count("resumed")
        for (const e of ofTag(kept.events, "tool.reconciled")) count(e.verdict)
      }
      console.log(
        `${setup.name}: ${setup.randomKills} random kills (seed ${seed}, over ${Math.round(span)} ms), ${killed} mid-run; ${JSON.stringify(Object.fromEntries(tally))}`
      )
      assert.isAtLeast(killed, setup.randomKills / 2, "most kills landed while the child was working")
      assert.isAtLeast(tally.get("resumed") ?? 0, setup.randomKills / 4, "runs were cut and resumed")
    }, 180_000)
  })

/** A small seeded generator, so that a failing sequence of kills can be replayed (`CRASH_SEED`). */
const mulberry32 = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
