import { DatabaseSync } from "node:sqlite"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Schedule, Stream } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../src/events/Event.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as RealTime from "../../src/time/RealTime.ts"
import * as Approval from "../../src/tools/Approval.ts"
import { tempFiles } from "../support/files.ts"

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("pay", { amount: 10 }, "c1") : ScriptedModel.finalAnswer("paid")
)

const payment = () =>
  FaultyTools.ledgered({
    name: "pay",
    idempotent: false,
    sideEffect: "external",
    behaviour: () => "apply",
    reconcile: true,
    needsApproval: true
  })

const poll = { pollInterval: "5 millis" } as const

/** A call as a row of the approvals table, but for its run. */
const row = {
  callId: "c1",
  tool: "pay",
  arguments: { amount: 10 },
  sideEffect: "external",
  requestedAt: 0,
  expiresAt: 600_000
} as const

/** Waits (live) until `gate` lists `n` pending calls. */
const pendingOn = (gate: Approval.Gate, n: number) =>
  Effect.gen(function* () {
    for (let i = 0; i < 2000; i++) {
      const pending = yield* gate.pending
      if (pending.length >= n) return pending
      yield* Effect.sleep("2 millis")
    }
    return assert.fail("the call was never listed as pending")
  })

const store = Effect.map(Layer.build(Journal.layerMemory), (context) => Context.get(context, Journal.Journal))

const fileOf = tempFiles("journal-approvals-")

describe("JournalApprovals (R7, R9.3)", () => {
  it.effect("R9 R12 a store that never lists its approvals holds Run.recover up for a few seconds at most", () =>
    Effect.gen(function* () {
      const journal = yield* store
      const stalled: Journal.Service = { ...journal, pendingApprovals: () => Effect.never }
      const fiber = yield* Effect.forkChild(
        Run.recover({ tools: [] }).pipe(Effect.provideService(Journal.Journal, stalled), Effect.provide(model))
      )
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* Fiber.join(fiber), [])
    })
  )

  it.live("R7 R9 a run resumed after its deadline passed while it was down withdraws the call it had put up", () =>
    Effect.gen(function* () {
      const journal = yield* store
      // A process killed outright withdraws nothing (in this one, the run's finalizers would).
      const gate = JournalApprovals.make({ ...journal, withdraw: () => Effect.void }, poll)
      const pay = payment()
      const options = { goal: "pay 10", runId: "r1", tools: [pay.tool], time: { run: "300 millis" } } as const
      // Commit 3: the approval request; the process dies right after it.
      const faulty = FaultyJournal.make(journal, { crashAt: { commit: 3, when: "after" } })
      yield* Effect.exit(
        Run.run(options).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provideService(Approval.ApprovalGate, gate),
          Effect.provide(model)
        )
      )
      assert.isTrue(faulty.crashed())
      assert.lengthOf(yield* journal.pendingApprovals({ runId: "r1" }), 1)
      yield* Effect.sleep("400 millis")
      const resumed = yield* Run.resume("r1", { tools: [pay.tool] }, "restart").pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, poll)),
        Effect.provide(model)
      )
      assert.strictEqual(resumed.stopReason, "run_timeout")
      assert.lengthOf(yield* journal.pendingApprovals({ runId: "r1" }), 0, "no call is left pending for good")
      assert.strictEqual(pay.calls.count, 0)
      // A row put up after the run ended (by a process the ending fenced off) is not pending: nobody decides it.
      const now = Date.now()
      const row = { runId: "r1", callId: "c9", tool: "pay", arguments: {}, sideEffect: "external" }
      yield* journal.requestApproval({ ...row, requestedAt: now, expiresAt: now + 60_000 })
      const again = yield* Run.resume("r1", { tools: [pay.tool] }, "restart").pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provide(model)
      )
      assert.strictEqual(again.stopReason, "run_timeout")
      assert.lengthOf(yield* journal.pendingApprovals({ runId: "r1" }), 0)
      // Nor after a restart's `Run.recover` (which resumes unfinished runs only).
      yield* journal.requestApproval({ ...row, callId: "c10", requestedAt: now, expiresAt: now + 60_000 })
      const recovered = yield* Run.recover({ tools: [pay.tool] }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provide(model)
      )
      assert.lengthOf(recovered, 0)
      assert.lengthOf(yield* journal.pendingApprovals({ runId: "r1" }), 0)
    })
  )

  it.live(
    "R7 R9 a call put back with its logged expiry keeps its row: no withdrawal, a decision meanwhile is taken",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        let withdrawn = 0
        const watched: Journal.Service = {
          ...journal,
          withdraw: (runId, callId, at) =>
            Effect.andThen(
              Effect.sync(() => withdrawn++),
              journal.withdraw(runId, callId, at)
            )
        }
        const now = Date.now()
        const base = {
          runId: "r1",
          callId: "c1",
          tool: "pay",
          arguments: { amount: 10 },
          sideEffect: "external"
        } as const
        yield* journal.requestApproval({ ...base, requestedAt: now, expiresAt: now + 60_000 })
        // A resumed run puts it back with its logged expiry, its request time its event's (a hair later).
        const gate = JournalApprovals.make(watched, poll)
        const asked = yield* Effect.forkChild(gate.request({ ...base, requestedAt: now + 3, expiresAt: now + 60_000 }))
        yield* Effect.sleep("20 millis")
        yield* gate.decide("r1", "c1", Approval.approved("ops"))
        assert.strictEqual((yield* Fiber.join(asked))._tag, "Approved")
        assert.strictEqual(withdrawn, 0)
      })
  )

  it.live(
    "R7 R9 a call put up by a process that died before its log said so: asked again, the row takes the times the run waits by",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        const now = Date.now()
        const base = {
          runId: "r1",
          callId: "c1",
          tool: "pay",
          arguments: { amount: 10 },
          sideEffect: "external"
        } as const
        // The dead process's row: it expires in 50 ms.
        yield* journal.requestApproval({ ...base, requestedAt: now - 4_000, expiresAt: now + 50 })
        const gate = JournalApprovals.make(journal, poll)
        const asked = yield* Effect.forkChild(gate.request({ ...base, requestedAt: now, expiresAt: now + 60_000 }))
        const [listed] = yield* Effect.repeat(journal.pendingApprovals({ runId: "r1" }), {
          until: (pending) => pending[0]?.expiresAt === now + 60_000,
          schedule: Schedule.spaced("2 millis"),
          times: 1000
        })
        assert.deepStrictEqual([listed?.requestedAt, listed?.expiresAt], [now, now + 60_000])
        // Past the dead process's expiry, the call can still be decided, and the run gets the decision.
        yield* Effect.sleep("100 millis")
        yield* gate.decide("r1", "c1", Approval.approved("ops"))
        const decision = yield* Fiber.join(asked)
        assert.strictEqual(decision._tag, "Approved")
      })
  )

  it.live(
    "R7 R12 a decision the store cannot take now is a typed ApprovalUnavailable: nothing decided, the call still waits",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        const pay = payment()
        let reachable = false
        const flaky: Journal.Service = {
          ...journal,
          decide: (decision) =>
            reachable
              ? journal.decide(decision)
              : Effect.fail(
                  JournalError.make(
                    new JournalError.Unavailable({ operation: "decide", detail: "unreachable (by the test)" })
                  )
                )
        }
        const gate = JournalApprovals.make(flaky, poll)
        const fiber = yield* Run.run({ goal: "pay 10", runId: "r9", tools: [pay.tool] }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(Approval.ApprovalGate, gate),
          Effect.provide(model),
          Effect.forkChild
        )
        yield* pendingOn(gate, 1)
        const refused = yield* Effect.flip(gate.decide("r9", "c1", Approval.approved("ops")))
        assert.strictEqual(refused._tag, "ApprovalUnavailable")
        assert.strictEqual(pay.calls.count, 0)
        assert.strictEqual((yield* gate.pending).length, 1)
        reachable = true
        yield* gate.decide("r9", "c1", Approval.approved("ops"))
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.status, "completed", result.detail)
        assert.strictEqual(pay.calls.count, 1)
      })
  )

  it.effect("R7 R12 a list the store cannot give is a typed ApprovalPendingUnavailable; a blip is read again", () =>
    Effect.gen(function* () {
      const journal = yield* store
      let failures = 0
      const flaky: Journal.Service = {
        ...journal,
        pendingApprovals: (filter) =>
          Effect.suspend(() =>
            failures-- > 0
              ? Effect.fail(
                  JournalError.make(
                    new JournalError.Unavailable({ operation: "pendingApprovals", detail: "by the test" })
                  )
                )
              : journal.pendingApprovals(filter)
          )
      }
      const gate = JournalApprovals.make(flaky, poll)
      failures = 2
      assert.deepStrictEqual(yield* gate.pending, [], "two failed reads in a row are read again")
      failures = 10
      const refused = yield* Effect.flip(gate.pending)
      assert.strictEqual(refused._tag, "ApprovalPendingUnavailable")
      assert.match(refused.message, /could not be listed now: journal unavailable during pendingApprovals: by the test/)
      const corrupt: Journal.Service = {
        ...journal,
        pendingApprovals: () =>
          Effect.fail(JournalError.make(new JournalError.Corrupt({ runId: "r1", detail: "a damaged row" })))
      }
      const broken = yield* Effect.flip(JournalApprovals.make(corrupt, poll).pending)
      assert.strictEqual(broken._tag, "ApprovalPendingUnavailable")
    })
  )

  it.effect("R7 R12 ids no row can have are NotPending to decide and have no decision to expire, never a defect", () =>
    Effect.gen(function* () {
      // Ids from a URL or a form reach the gate as they are (review 88: an empty one was a defect).
      const gate = JournalApprovals.make(yield* store, poll)
      const expire = gate.expire
      if (expire === undefined) return assert.fail("the journal's gate closes calls at their expiry")
      for (const id of ["", "a\u0000b", "half \ud800", "x".repeat(257), "line\nbreak"]) {
        for (const [runId, callId] of [
          [id, "c1"],
          ["r1", id]
        ] as const) {
          const decided = yield* Effect.exit(gate.decide(runId, callId, Approval.approved("ops")))
          // A defect has no error: it shows as undefined.
          const failed = Exit.isFailure(decided)
            ? Option.getOrUndefined(Exit.findErrorOption(decided))?._tag
            : "decided"
          assert.strictEqual(failed, "NotPending", JSON.stringify([runId, callId]))
          assert.deepStrictEqual(yield* expire(runId, callId), Option.none())
        }
      }
    })
  )

  it.effect(
    "R7 R12 JournalApprovals.record refuses what a handle refuses (a blank by): InvalidDecision, nothing recorded",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        yield* journal.requestApproval({ ...row, runId: "r1" })
        for (const decision of [
          Approval.approved(""),
          Approval.rejected("no", " \u200b"),
          Approval.approved("a\u0000b")
        ]) {
          // Before, the row was decided with it, and the run waiting on it ended internal_error.
          const refused = yield* Effect.flip(JournalApprovals.record(journal, "r1", "c1", decision))
          assert.strictEqual(refused._tag, "InvalidDecision", JSON.stringify(decision))
          assert.isTrue(Option.isNone(yield* journal.decision("r1", "c1")))
        }
        yield* JournalApprovals.record(journal, "r1", "c1", Approval.approved("ops"))
        assert.strictEqual(Option.getOrUndefined(yield* journal.decision("r1", "c1"))?.by, "ops")
      })
  )

  /**
   * A run on a SQLite journal whose call `c1` an older version decided past the checks the
   * journal makes now (`decided_by`, `reason` as given): the run's result.
   */
  const decidedByAnOlderVersion = (decision: "approve" | "reject", by: string, reason: string | null) =>
    Effect.gen(function* () {
      const filename = fileOf()
      const journal = yield* Effect.map(Layer.build(Journal.layerSqlite({ filename })), (context) =>
        Context.get(context, Journal.Journal)
      )
      const gate = JournalApprovals.make(journal, poll)
      const pay = payment()
      const run = yield* Effect.forkChild(
        Run.run({ goal: "pay 10", runId: "r1", tools: [pay.tool] }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(Approval.ApprovalGate, gate),
          Effect.provide(model)
        )
      )
      assert.lengthOf(yield* pendingOn(gate, 1), 1)
      const db = new DatabaseSync(filename)
      db.prepare(
        "UPDATE agent_approvals SET decision = ?, decided_by = ?, reason = ?, decided_at = ? WHERE run_id = 'r1' AND call_id = 'c1'"
      ).run(decision, by, reason, Date.now())
      db.close()
      const result = yield* Fiber.join(run)
      const decided = result.timeline.find((e) => e._tag === "approval.decided")
      return { result, paid: pay.calls.count, decided: decided?._tag === "approval.decided" ? decided : undefined }
    })

  it.live(
    "R7 R9 a decision stored with a blank by (a row decided before it was refused) decides the call, by nobody",
    () =>
      Effect.gen(function* () {
        const { result, paid, decided } = yield* decidedByAnOlderVersion("approve", " ", null)
        // Before, the run ended internal_error: "by is blank: it names nobody".
        assert.strictEqual(result.status, "completed", result.detail)
        assert.strictEqual(paid, 1)
        assert.strictEqual(decided?.decision, "approved")
        assert.isUndefined(decided?.by)
      })
  )

  it.live("R7 R9 a decision stored with a by or a reason too long stands, cut to what a run keeps (review 182)", () =>
    Effect.gen(function* () {
      const { result, paid, decided } = yield* decidedByAnOlderVersion("reject", "o".repeat(300), "x".repeat(5000))
      // Before, the run ended internal_error: "reason is 5000 characters long, over the limit of 4096".
      assert.strictEqual(result.stopReason, "approval_rejected", result.detail)
      assert.strictEqual(paid, 0)
      assert.strictEqual(decided?.decision, "rejected")
      assert.strictEqual(decided?.by?.length, Approval.maxChars.by)
      assert.strictEqual(decided?.reason?.length, Approval.maxChars.reason)
    })
  )

  it.effect("R12 a pollInterval that is not a positive, finite duration is a RangeError naming it", () =>
    Effect.gen(function* () {
      const journal = yield* store
      // 0 would read the table in a loop with no pause.
      for (const pollInterval of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "soon"]) {
        assert.throws(
          () => JournalApprovals.make(journal, { pollInterval: pollInterval as never }),
          RangeError,
          `JournalApprovals.make: pollInterval must be a positive, finite duration, got ${typeof pollInterval === "string" ? JSON.stringify(pollInterval) : String(pollInterval)}`
        )
      }
    })
  )

  it.live("R7 a call waiting for approval is a row: another process's gate lists it and decides, the run goes on", () =>
    Effect.gen(function* () {
      const journal = yield* store
      const pay = payment()
      // Two gates on one journal: the run's process, and a UI's.
      const runs = JournalApprovals.make(journal, poll)
      const ui = JournalApprovals.make(journal, poll)
      const fiber = yield* Run.run({ goal: "pay 10", runId: "r1", tools: [pay.tool] }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provideService(Approval.ApprovalGate, runs),
        Effect.provide(model),
        Effect.forkChild
      )
      const [pending] = yield* pendingOn(ui, 1)
      // A reason or a name the table would not give back as given is refused, and the call still waits.
      for (const decision of [Approval.rejected("no \ud800 way"), Approval.approved("ops\u0000")]) {
        const refused = yield* Effect.flip(ui.decide("r1", "c1", decision))
        assert.strictEqual(refused._tag, "InvalidDecision")
      }
      const direct = yield* Effect.flip(
        journal.decide({ runId: "r1", callId: "c1", decision: "reject", reason: "no \udc00", at: 0 })
      )
      assert.strictEqual(direct.reason._tag, "InvalidAppend")
      assert.strictEqual(pending?.runId, "r1")
      assert.strictEqual(pending?.callId, "c1")
      assert.strictEqual(pending?.tool, "pay")
      assert.strictEqual(pending?.sideEffect, "external")
      assert.deepStrictEqual(pending?.arguments, { amount: 10 })
      assert.strictEqual(pay.calls.count, 0)
      yield* ui.decide("r1", "c1", Approval.approved("ops"))
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(pay.ledger.total, 1)
      const decided = result.timeline.find((e: Event.Event) => e._tag === "approval.decided")
      assert.strictEqual(decided?._tag === "approval.decided" ? decided.by : undefined, "ops")
      // Decided once: a second decision is NotPending, and nothing is listed.
      const again = yield* Effect.exit(ui.decide("r1", "c1", Approval.rejected("late")))
      assert.isTrue(Exit.isFailure(again))
      assert.lengthOf(yield* ui.pending, 0)
    }).pipe(Effect.scoped)
  )

  it.live(
    "R7 approving on approval.requested works on a store with latency: the decision waits for the call's row",
    () =>
      Effect.gen(function* () {
        const inner = yield* store
        // Every operation of the store takes 3 ms, as a store over the network does.
        const slow = (effect: Effect.Effect<unknown, unknown>) => Effect.andThen(Effect.sleep("3 millis"), effect)
        const journal: Journal.Service = {
          ...inner,
          requestApproval: (request) =>
            slow(inner.requestApproval(request)) as ReturnType<typeof inner.requestApproval>,
          append: (runId, batch) => slow(inner.append(runId, batch)) as ReturnType<typeof inner.append>
        }
        for (let i = 0; i < 5; i++) {
          const pay = payment()
          const outcome = yield* Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "pay 10", runId: `slow-${i}`, tools: [pay.tool] })
            yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
            // The run's row of the call was not written yet: this was NotPending, the call waiting all the same.
            yield* handle.approve("c1", { by: "ops" })
            return yield* handle.result
          }).pipe(
            Effect.scoped,
            Effect.provideService(Journal.Journal, journal),
            Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, poll)),
            Effect.provide(model)
          )
          assert.deepStrictEqual([outcome.stopReason, pay.ledger.total], ["goal_reached", 1])
          assert.isTrue(Option.isSome(yield* inner.decision(`slow-${i}`, "c1")), "the decision is in the table")
        }
      })
  )

  it.live("R7 an approval survives a restart: decided while no process runs the run, the recovered run pays once", () =>
    Effect.gen(function* () {
      const journal = yield* store
      const pay = payment()
      const faulty = FaultyJournal.make(journal, {})
      const fiber = yield* Run.run({ goal: "pay 10", runId: "r1", tools: [pay.tool] }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal),
        Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(faulty.journal, poll)),
        Effect.provide(model),
        Effect.forkChild
      )
      const ui = JournalApprovals.make(journal, poll)
      yield* pendingOn(ui, 1)
      // The process dies while the run waits: nothing it does afterwards reaches the journal.
      faulty.crash()
      yield* Fiber.interrupt(fiber)
      // Nobody runs r1 now; a person decides through the journal.
      assert.lengthOf(yield* ui.pending, 1)
      yield* ui.decide("r1", "c1", Approval.approved("ops"))
      const [result] = yield* Run.recover({ tools: [pay.tool] }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, poll)),
        Effect.provide(model)
      )
      assert.isTrue(result !== undefined && result._tag === "Success")
      if (result?._tag === "Success") assert.strictEqual(result.success.status, "completed")
      assert.strictEqual(pay.ledger.total, 1)
    }).pipe(Effect.scoped)
  )

  it.live(
    "R7 R9 an approval recorded in time is no expiry: the run recovered after the expiry, or whose read of the table is slow, pays",
    () =>
      Effect.gen(function* () {
        const inner = yield* store
        // A store whose reads of a decision take 80 ms, as a loaded database's may.
        const journal: Journal.Service = {
          ...inner,
          decision: (runId, callId) => Effect.andThen(Effect.sleep("80 millis"), inner.decision(runId, callId))
        }
        const ui = JournalApprovals.make(inner, poll)
        // Recovered after the expiry: the process died while the call waited; it was approved in time.
        const pay = payment()
        const faulty = FaultyJournal.make(inner, {})
        const fiber = yield* Run.run({
          goal: "pay 10",
          runId: "r1",
          tools: [pay.tool],
          time: { approval: "300 millis" }
        }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(faulty.journal, poll)),
          Effect.provide(model),
          Effect.forkChild
        )
        yield* pendingOn(ui, 1)
        faulty.crash()
        yield* Fiber.interrupt(fiber)
        yield* ui.decide("r1", "c1", Approval.approved("ops"))
        yield* Effect.sleep("400 millis")
        const [recovered] = yield* Run.recover({ tools: [pay.tool] }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, poll)),
          Effect.provide(model)
        )
        assert.isTrue(recovered?._tag === "Success" && recovered.success.stopReason === "goal_reached")
        assert.strictEqual(pay.ledger.total, 1)
        // Waiting: approved from another process at once, but the gate's read comes back after the expiry.
        const slowly = payment()
        const waiting = yield* Run.run({
          goal: "pay 10",
          runId: "r2",
          tools: [slowly.tool],
          time: { approval: "100 millis" }
        }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, poll)),
          Effect.provide(model),
          Effect.forkChild
        )
        yield* pendingOn(ui, 1)
        yield* ui.decide("r2", "c1", Approval.approved("ops"))
        const result = yield* Fiber.join(waiting)
        assert.deepStrictEqual([result.stopReason, slowly.ledger.total], ["goal_reached", 1])
      }).pipe(Effect.scoped)
  )

  it.effect(
    "R7 an approval recorded in time is no expiry when the store is out of reach at the expiry: the run asks again, and pays",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(1_000_000)
        const inner = yield* store
        let down = false
        const outOfReach = JournalError.make(new JournalError.Unavailable({ operation: "decision", detail: "reset" }))
        // The decision cannot be read while the store is down, nor the call withdrawn.
        const journal: Journal.Service = {
          ...inner,
          decision: (runId, callId) =>
            Effect.suspend(() => (down ? Effect.fail(outOfReach) : inner.decision(runId, callId))),
          withdraw: (runId, callId, at) =>
            Effect.suspend(() => (down ? Effect.fail(outOfReach) : inner.withdraw(runId, callId, at)))
        }
        const pay = payment()
        const fiber = yield* Run.run({
          goal: "pay 10",
          runId: "r1",
          tools: [pay.tool],
          time: { approval: "20 seconds" }
        }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, { pollInterval: "1 second" })),
          Effect.provide(model),
          Effect.forkChild
        )
        let rows: ReadonlyArray<Journal.ApprovalRequest> = []
        while (rows.length === 0) {
          yield* TestClock.adjust(1)
          rows = yield* inner.pendingApprovals({ runId: "r1" })
        }
        const expiresAt = rows[0]?.expiresAt ?? 0
        // Approved 300 ms before the expiry, from another process; the store goes down before the run's next read.
        yield* TestClock.setTime(expiresAt - 300)
        yield* JournalApprovals.record(inner, "r1", "c1", Approval.approved("ops"))
        down = true
        yield* TestClock.setTime(expiresAt + 1_000)
        down = false
        yield* TestClock.adjust(10_000)
        const result = yield* Fiber.join(fiber)
        assert.deepStrictEqual([result.stopReason, pay.ledger.total], ["goal_reached", 1])
      })
  )

  it.live(
    "R4.2 a gate out of reach at the expiry is asked again only within the step: the run stops at its step deadline",
    () =>
      Effect.gen(function* () {
        let tries = 0
        const outOfReach: Approval.Gate = {
          request: () => Effect.never,
          decide: () => Effect.void,
          pending: Effect.succeed([]),
          expire: (runId, callId) =>
            Effect.suspend(() => {
              tries++
              return Effect.fail(new Approval.Unavailable({ runId, callId, detail: "reset" }))
            })
        }
        const pay = payment()
        const started = Date.now()
        const result = yield* Run.run({
          goal: "pay 10",
          tools: [pay.tool],
          time: { step: "400 millis", approval: "100 millis", run: "20 seconds" }
        }).pipe(Effect.provideService(Approval.ApprovalGate, outOfReach), Effect.provide(model))
        const elapsed = Date.now() - started
        assert.strictEqual(result.stopReason, "step_timeout")
        assert.isAtLeast(tries, 1)
        assert.isBelow(elapsed, 1_500)
        // It says how long the call waited in all, not when its own limit came.
        assert.match(result.detail ?? "", /waited (3\d\d|4\d\d) ms/)
        assert.strictEqual(pay.calls.count, 0)
      })
  )

  it.live("R7 an approval being recorded as the call expires is found: the run waits for it, and pays", () =>
    Effect.gen(function* () {
      const inner = yield* store
      // Another process's decision is held in the store until the run has closed its wait (a locked row).
      const held = yield* Deferred.make<void>()
      const journal: Journal.Service = {
        ...inner,
        decide: (decision) => Effect.andThen(Deferred.await(held), inner.decide(decision)),
        withdraw: (runId, callId, at) =>
          Effect.andThen(
            Effect.andThen(Deferred.await(held), Effect.sleep("20 millis")),
            inner.withdraw(runId, callId, at)
          )
      }
      const pay = payment()
      const fiber = yield* Run.run({
        goal: "pay 10",
        runId: "r1",
        tools: [pay.tool],
        time: { approval: "150 millis" }
      }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal, poll)),
        Effect.provide(model),
        Effect.forkChild
      )
      yield* pendingOn(JournalApprovals.make(inner, poll), 1)
      // Decided in time; its write lands only once the run's wait has run out.
      const deciding = yield* Effect.forkChild(JournalApprovals.record(journal, "r1", "c1", Approval.approved("ops")))
      yield* Effect.sleep("250 millis")
      yield* Deferred.succeed(held, undefined)
      yield* Fiber.join(deciding)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual([result.stopReason, pay.ledger.total], ["goal_reached", 1])
    }).pipe(Effect.scoped)
  )

  it.live("R7 a request that expires is withdrawn from the table; the run ends approval_expired", () =>
    Effect.gen(function* () {
      const journal = yield* store
      const pay = payment()
      const gate = JournalApprovals.make(journal, poll)
      const result = yield* Run.run({
        goal: "pay 10",
        runId: "r1",
        tools: [pay.tool],
        time: { approval: "30 millis" }
      }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provideService(Approval.ApprovalGate, gate),
        Effect.provide(model)
      )
      assert.strictEqual(result.stopReason, "approval_expired")
      assert.lengthOf(yield* gate.pending, 0)
      const late = yield* Effect.exit(gate.decide("r1", "c1", Approval.approved()))
      assert.isTrue(Exit.isFailure(late), "a withdrawn call cannot be decided")
      assert.strictEqual(pay.calls.count, 0)
    }).pipe(Effect.scoped)
  )

  it.live(
    "R7 R8 a run cancelled as another process approves records the approval its table holds, not withdrawn (review 144)",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        const pay = payment()
        // The run's process reads the table every 10 s; a UI's gate on the same journal approves in between.
        const runs = JournalApprovals.make(journal, { pollInterval: "10 seconds" })
        const ui = JournalApprovals.make(journal, poll)
        const result = yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "pay 10", runId: "r1", tools: [pay.tool] })
            yield* pendingOn(ui, 1)
            yield* ui.decide("r1", "c1", Approval.approved("alice"))
            return yield* handle.cancel
          })
        ).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(Approval.ApprovalGate, runs),
          Effect.provide(model)
        )
        assert.strictEqual(result.stopReason, "cancelled")
        assert.strictEqual(pay.calls.count, 0)
        assert.deepStrictEqual(
          Option.map(yield* journal.decision("r1", "c1"), (d) => [d.decision, d.by]),
          Option.some(["approve", "alice"])
        )
        // Before, the log said `withdrawn` while the table held alice's approval.
        assert.deepStrictEqual(
          result.timeline.flatMap((e) => (e._tag === "approval.decided" ? [[e.decision, e.by]] : [])),
          [["approved", "alice"]]
        )
      })
  )
})

describe("JournalApprovals: the list holds what can be decided (R7, R9.3)", () => {
  it.effect(
    "R7 a call past its expiry is no longer listed by the gate's pending: a decision on it is refused (review 170)",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        const gate = JournalApprovals.make(journal)
        const row = { runId: "r1", callId: "c1", tool: "pay", arguments: {}, sideEffect: "external" }
        yield* journal.requestApproval({ ...row, requestedAt: 0, expiresAt: 1_000 })
        assert.deepStrictEqual(
          (yield* gate.pending).map((r) => r.callId),
          ["c1"]
        )
        yield* TestClock.adjust("1 second")
        // Before: still listed, while a decision on it was NotPending (until the run woke and closed it).
        assert.deepStrictEqual(yield* gate.pending, [])
        const late = yield* Effect.exit(JournalApprovals.record(journal, "r1", "c1", Approval.approved("ops")))
        assert.isTrue(Exit.isFailure(late))
      })
  )
})

describe("JournalApprovals: a cancel while a call waits, the store hanging (R5.1, R7)", () => {
  it.live("R5.1 R7 the gate is asked within the stop grace: the call withdrawn, nothing left behind (review 148)", () =>
    Effect.gen(function* () {
      const journal = yield* store
      const pay = payment()
      // The store takes the row but never answers a withdrawal.
      const hanging: Journal.Service = { ...journal, withdraw: () => Effect.never }
      const gate = JournalApprovals.make(hanging, poll)
      const started = { at: 0 }
      const result = yield* Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* Run.start({
            goal: "pay 10",
            runId: "r1",
            tools: [pay.tool],
            time: { stopGrace: "300 millis" }
          })
          yield* pendingOn(gate, 1)
          started.at = performance.now()
          return yield* handle.cancel
        })
      ).pipe(
        Effect.provideService(Journal.Journal, hanging),
        Effect.provideService(Approval.ApprovalGate, gate),
        Effect.provide(model)
      )
      assert.strictEqual(result.stopReason, "cancelled")
      // Before, the cancel waited 2 s on the gate's close, past its 300 ms grace: "left behind".
      assert.notInclude(result.detail, "left behind")
      assert.isBelow(performance.now() - started.at, 1_000)
      assert.strictEqual(pay.calls.count, 0)
    })
  )
})

describe("JournalApprovals: a finished run's calls (R7, R5.3)", () => {
  /** A memory journal whose withdrawals take 30 ms, as a store across a network does. */
  const slowWithdraw = Layer.effect(
    Journal.Journal,
    Effect.map(Journal.Journal, (inner) => ({
      ...inner,
      withdraw: (runId: string, callId: string, at: number) =>
        Effect.andThen(Effect.sleep("30 millis"), inner.withdraw(runId, callId, at))
    }))
  ).pipe(Layer.provide(Journal.layerMemory))
  const services = Layer.merge(slowWithdraw, JournalApprovals.layer(poll).pipe(Layer.provide(slowWithdraw)))

  for (const how of ["cancel", "a sibling's rejection", "run_timeout"] as const)
    it.live(
      `R7 R5.3 once the result is out (${how}), the call left is not pending and no decision on it is taken`,
      () =>
        Effect.gen(function* () {
          const pay = payment()
          const handle = yield* Run.start({
            goal: "pay twice",
            tools: [pay.tool],
            concurrency: 2,
            time: { approval: "1 hour", run: how === "run_timeout" ? "300 millis" : "10 minutes" }
          }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ScriptedModel.toolCalls(["pay", { amount: 1 }, "a"], ["pay", { amount: 2 }, "b"]),
                ScriptedModel.finalAnswer("paid")
              ])
            )
          )
          yield* Stream.runCollect(
            Stream.take(
              Stream.filter(handle.events, (e) => e._tag === "approval.requested"),
              2
            )
          )
          if (how === "cancel") yield* handle.cancel
          else if (how === "a sibling's rejection") yield* Effect.andThen(handle.reject("a", "no"), handle.result)
          else yield* handle.result
          // Before, the gate's own withdrawal came after the result: listed, and a decision was taken.
          assert.deepStrictEqual(yield* handle.pendingApprovals, [])
          const late = yield* Effect.exit(handle.approve("b", { by: "late" }))
          assert.isTrue(Exit.isFailure(late), "a decision on a call of a finished run was taken")
          assert.isTrue(Option.isNone(yield* (yield* Journal.Journal).decision(handle.runId, "b")))
          assert.strictEqual(pay.calls.count, 0)
        }).pipe(Effect.scoped, Effect.provide(services))
    )
})

describe("JournalApprovals: the list as the run says it waits (R7, R1.3)", () => {
  /** A memory journal whose approvals table takes 50 ms to put a call up. */
  const slowPutUp = Layer.effect(
    Journal.Journal,
    Effect.map(Journal.Journal, (inner) => ({
      ...inner,
      requestApproval: (request: Parameters<typeof inner.requestApproval>[0]) =>
        Effect.andThen(Effect.sleep("50 millis"), inner.requestApproval(request))
    }))
  ).pipe(Layer.provide(Journal.layerMemory))

  it.live("R7 on approval.requested the list of waiting calls shows the call, however long the store takes", () =>
    Effect.gen(function* () {
      const pay = payment()
      const handle = yield* Run.start({ goal: "pay", tools: [pay.tool] }).pipe(Effect.provide(model))
      yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
      assert.strictEqual(yield* handle.state, "awaiting_approval")
      // Before, the list was read while the row was still being written: empty.
      assert.deepStrictEqual(
        (yield* handle.pendingApprovals).map((r) => r.callId),
        ["c1"]
      )
      yield* handle.approve("c1")
      assert.strictEqual((yield* handle.result).status, "completed")
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.merge(slowPutUp, JournalApprovals.layer(poll).pipe(Layer.provide(slowPutUp))))
    )
  )

  it.effect(
    "R7 R9.3 R12 a put-up that hangs holds the list of every run's waiting calls up for a second or so of real time, not for good",
    () =>
      Effect.gen(function* () {
        const journal = yield* store
        const hanging = Deferred.makeUnsafe<void>()
        const stalled: Journal.Service = {
          ...journal,
          requestApproval: (request) =>
            request.runId === "rA"
              ? Effect.andThen(Deferred.succeed(hanging, undefined), Effect.never)
              : journal.requestApproval(request)
        }
        const gate = JournalApprovals.make(stalled, poll)
        // Run rA's call is being put up, and its store never answers; run rB's is on the table.
        yield* Effect.forkChild(gate.request({ ...row, runId: "rA" }))
        yield* Deferred.await(hanging)
        yield* journal.requestApproval({ ...row, runId: "rB" })
        // The TestClock is never moved: the bound is in real time.
        const started = performance.now()
        const listed = yield* Effect.forkChild(gate.pending)
        const answer = yield* Effect.raceFirst(
          Effect.map(Fiber.join(listed), Option.some),
          Effect.as(RealTime.sleep(3_000), Option.none())
        )
        // Before, it waited for rA's row for good.
        assert.isTrue(Option.isSome(answer), "one run's put-up held the list of waiting calls for good")
        assert.deepStrictEqual(
          Option.getOrThrow(answer).map((r) => r.runId),
          ["rB"]
        )
        assert.isBelow(performance.now() - started, 2_500)
      })
  )
})

describe("JournalApprovals: a decision on a call whose put-up hangs (R7, R12)", () => {
  it.effect("R7 R12 waits a second or so of real time for the row, then answers: the call is not pending", () =>
    Effect.gen(function* () {
      const journal = yield* store
      const hanging = Deferred.makeUnsafe<void>()
      const stalled: Journal.Service = {
        ...journal,
        requestApproval: () => Effect.andThen(Deferred.succeed(hanging, undefined), Effect.never)
      }
      const gate = JournalApprovals.make(stalled, poll)
      yield* Effect.forkChild(gate.request({ ...row, runId: "rA" }))
      yield* Deferred.await(hanging)
      const started = performance.now()
      const decided = yield* Effect.forkChild(Effect.exit(gate.decide("rA", row.callId, Approval.approved("ops"))))
      const answer = yield* Effect.raceFirst(
        Effect.map(Fiber.join(decided), Option.some),
        Effect.as(RealTime.sleep(3_000), Option.none())
      )
      // Before, the decision waited for the row for good.
      assert.isTrue(Option.isSome(answer), "a decision waited for good on a put-up that hangs")
      const exit = Option.getOrThrow(answer)
      assert.isTrue(Exit.isFailure(exit) && Cause.squash(exit.cause) instanceof Approval.NotPending)
      assert.isBelow(performance.now() - started, 2_500)
    })
  )
})

describe("JournalApprovals: a call cut off as it is put up (R7, R5.3)", () => {
  it.live("R7 R5.3 a cancel during a row's insert that lands anyway leaves no row pending for the finished run", () =>
    Effect.gen(function* () {
      const store = yield* Journal.Journal
      // A store whose insert, once sent, completes whatever happens to its caller (as an SQL statement does).
      const slow: Journal.Service = {
        ...store,
        requestApproval: (request) =>
          Effect.uninterruptible(Effect.andThen(Effect.sleep("300 millis"), store.requestApproval(request)))
      }
      const pay = payment()
      const result = yield* Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "pay", runId: "cut", tools: [pay.tool] })
          yield* Effect.sleep("100 millis")
          return yield* handle.cancel
        })
      ).pipe(
        Effect.provideService(Journal.Journal, slow),
        Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(slow, poll)),
        Effect.provide(model)
      )
      assert.strictEqual(result.status, "cancelled")
      // The insert lands after the result: the gate withdraws it then (before, it stayed pending, and a decision on it was taken).
      yield* Effect.sleep("500 millis")
      assert.deepStrictEqual(yield* store.pendingApprovals({ runId: "cut" }), [])
      const late = yield* Effect.exit(JournalApprovals.record(store, "cut", "c1", Approval.approved("ops")))
      assert.isTrue(Exit.isFailure(late))
      assert.strictEqual(pay.calls.count, 0)
    }).pipe(Effect.provide(Journal.layerMemory))
  )
})
