import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Result } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { afterAll } from "vitest"
import type * as Event from "../../src/events/Event.ts"
import * as SqliteClient from "../../src/journal/internal/SqliteClient.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import * as Run from "../../src/run/Run.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { diesIn } from "../support/restart.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "resume-bad-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
let files = 0

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("pay", { amount: 10 }, "c1") : ScriptedModel.finalAnswer("paid")
)

/**
 * A SQLite journal holding run `r1` cut off after its payment's intent record, and raw
 * SQL on its tables; `damage` spoils it, then `Run.resume` must refuse it with a typed
 * `ResumeError` and write nothing.
 */
const refused = (damage: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function* () {
    const filename = path.join(dir, `journal-${files++}.db`)
    const context = yield* Layer.build(
      Layer.merge(
        Journal.layerSqlite({ filename }),
        Layer.effect(SqlClient.SqlClient, Effect.orDie(SqliteClient.make({ filename }))).pipe(
          Layer.provide(Reactivity.layer)
        )
      )
    )
    const journal = Context.get(context, Journal.Journal)
    const sql = Context.get(context, SqlClient.SqlClient)
    const payment = FaultyTools.ledgered({
      name: "pay",
      idempotent: false,
      sideEffect: "external",
      behaviour: () => "apply",
      reconcile: true
    })
    // Killed after the payment's intent record (commit 3, after the start and the response).
    const faulty = FaultyJournal.make(journal, { crashAt: { commit: 3, when: "after" } })
    yield* diesIn(
      faulty,
      Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal)
      )
    )
    yield* Effect.orDie(damage(sql))
    const rows = () =>
      Effect.orDie(sql`SELECT seq, body FROM agent_commits WHERE run_id = 'r1' ORDER BY seq`).pipe(
        Effect.map((all) => JSON.stringify(all))
      )
    const before = yield* rows()
    const error = yield* Effect.flip(
      Run.resume("r1", { tools: [payment.tool] }).pipe(Effect.provideService(Journal.Journal, journal))
    )
    // Nothing was written, nothing ran.
    assert.strictEqual(yield* rows(), before)
    assert.strictEqual(payment.calls.count, 0)
    return { error }
  }).pipe(Effect.scoped, Effect.provide(model))

describe("Run.resume refuses a journal it cannot trust (R9, R3.1)", () => {
  it.effect("R9 a truncated row is a ResumeError (corrupt) naming the run, nothing written", () =>
    Effect.gen(function* () {
      const { error } = yield* refused(
        (sql) =>
          sql`UPDATE agent_commits SET body = substr(body, 1, length(body) / 2)
            WHERE run_id = 'r1' AND seq = (SELECT max(seq) FROM agent_commits WHERE run_id = 'r1')`
      )
      assert.strictEqual(error._tag, "ResumeError")
      assert.strictEqual(error.reason, "corrupt")
      assert.strictEqual(error.runId, "r1")
      assert.match(error.message, /seq [1-9]\d*/)
    })
  )

  it.effect("R9 a run written in a newer journal format is a ResumeError (incompatible)", () =>
    Effect.gen(function* () {
      const { error } = yield* refused((sql) => sql`UPDATE agent_runs SET version = 99 WHERE run_id = 'r1'`)
      assert.strictEqual(error.reason, "incompatible")
      assert.include(error.message, "99")
    })
  )

  it.effect(
    "R9 an event of a kind this code does not know is a ResumeError (incompatible) naming it, not corrupt",
    () =>
      Effect.gen(function* () {
        // A newer version's event (review 88: it was `corrupt`, as damage is).
        const { error } = yield* refused(
          (sql) =>
            sql`UPDATE agent_commits SET body = replace(body, '"tool.started"', '"tool.levitated"') WHERE run_id = 'r1'`
        )
        assert.strictEqual(error.reason, "incompatible")
        assert.include(error.detail, '"tool.levitated"')
        assert.include(error.detail, "a newer version wrote it")
      })
  )

  it.effect("R9 a row of another run's log is a ResumeError (corrupt)", () =>
    Effect.gen(function* () {
      const { error } = yield* refused(
        (sql) =>
          sql`UPDATE agent_commits SET body = replace(body, '"runId":"r1"', '"runId":"r9"') WHERE run_id = 'r1' AND seq > 0`
      )
      assert.strictEqual(error.reason, "corrupt")
    })
  )

  it.effect("R9 a log that does not begin with run.started is a ResumeError (corrupt)", () =>
    Effect.gen(function* () {
      const { error } = yield* refused(
        (sql) =>
          // The first event becomes a copy of the second, numbered 0.
          sql`UPDATE agent_commits SET body = json_set(body, '$[0]', json_set(json_extract(body, '$[1]'), '$.seq', 0))
            WHERE run_id = 'r1' AND seq = 0`
      )
      assert.strictEqual(error.reason, "corrupt")
    })
  )

  it.effect("R9 a log that holds run.finished but no result is a ResumeError (corrupt), at once", () =>
    Effect.gen(function* () {
      const { error } = yield* refused(
        (sql) =>
          // The last event becomes a well-formed ending; the run's row keeps no result.
          sql`UPDATE agent_commits SET body = json_set(body, '$[#-1]', json_object(
              '_tag', 'run.finished', 'runId', 'r1', 'at', json_extract(body, '$[#-1].at'),
              'seq', json_extract(body, '$[#-1].seq'), 'status', 'completed', 'stopReason', 'goal_reached'))
            WHERE run_id = 'r1' AND seq = (SELECT max(seq) FROM agent_commits WHERE run_id = 'r1')`
      )
      assert.strictEqual(error.reason, "corrupt")
      assert.include(error.detail, "holds run.finished")
    })
  )
})

describe("Run.resume says whether a store that refuses may answer later (R9, R3.1)", () => {
  it.effect("R9 R3.1 a store out of reach is unavailable; one that refuses for good (a table gone) is failed", () =>
    Effect.gen(function* () {
      const journal = yield* Journal.Journal
      const refusing = (reason: JournalError.Reason): Journal.Service => ({
        ...journal,
        read: () => Effect.fail(JournalError.make(reason))
      })
      const cases = [
        [new JournalError.Unavailable({ operation: "read", detail: "connection reset" }), "unavailable"],
        // It said "resuming later may work" (review 88), and a durable run retried it every 30 s, forever.
        [new JournalError.StoreFailed({ operation: "read", detail: "no such table: agent_commits" }), "failed"]
      ] as const
      for (const [reason, expected] of cases) {
        const error = yield* Effect.flip(
          Run.resume("r1", { tools: [] }).pipe(Effect.provideService(Journal.Journal, refusing(reason)))
        )
        assert.strictEqual(error.reason, expected, reason._tag)
        assert.include(error.detail, reason.detail)
      }
    }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
  )
})

describe("Run.resume and Run.recover refuse arguments they cannot read (R12)", () => {
  const unreadable: ReadonlyArray<readonly [string, unknown, unknown]> = [
    ["no options", undefined, "manual"],
    ["null options", null, "manual"],
    [
      "a tools getter that throws",
      {
        get tools(): never {
          throw new Error("boom")
        }
      },
      "manual"
    ],
    ["a reason that is none", { tools: [] }, "bogus"]
  ]

  it.effect(
    "R12 R9 each is a typed invalid ResumeError, and the run is not left held: a correct resume and recover follow",
    () =>
      Effect.gen(function* () {
        // An unfinished run: its process died after its first commits.
        const journal = yield* Journal.Journal
        const faulty = FaultyJournal.make(journal, { crashAt: { commit: 2, when: "after" } })
        yield* diesIn(
          faulty,
          Run.run({ goal: "g", tools: [], runId: "r1" }).pipe(Effect.provideService(Journal.Journal, faulty.journal))
        )
        for (const [what, options, reason] of unreadable) {
          // Erased on purpose: a JavaScript caller, or one that casts.
          const error = yield* Effect.flip(Run.resume("r1", options as Run.ResumeOptions<never>, reason as "manual"))
          assert.strictEqual(error.reason, "invalid", what)
        }
        const recovered = yield* Effect.flip(Run.recover(null as unknown as Run.ResumeOptions<never>))
        assert.strictEqual(recovered.reason, "invalid")
        const [resumed] = yield* Run.recover({ tools: [] })
        assert.isTrue(resumed !== undefined && Result.isSuccess(resumed))
      }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R12 R9 R3.8 options that cannot work are a typed invalid ResumeError naming the field: nothing written, the call in doubt still there",
    () =>
      Effect.gen(function* () {
        // Killed after the payment: the call is in doubt, and no status query can tell.
        const journal = yield* Journal.Journal
        const payment = FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          behaviour: () => "apply"
        })
        const faulty = FaultyJournal.make(journal, { crashAt: { commit: 4, when: "before" } })
        yield* diesIn(
          faulty,
          Run.run({ goal: "pay 10", runId: "r1", tools: [payment.tool] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal)
          )
        )
        const before = yield* journal.read("r1")
        const bad: ReadonlyArray<readonly [string, Run.ResumeOptions<typeof payment.tool>]> = [
          ["limits.maxToolCalls", { tools: [payment.tool], limits: { maxToolCalls: 0 } }],
          ["concurrency", { tools: [payment.tool], concurrency: 0 }],
          ["limits.maxIterations", { tools: [payment.tool], limits: { maxIterations: 1.5 } }]
        ]
        for (const [field, options] of bad) {
          // It ended internal_error with a result its journal did not hold, the call dropped (review 88).
          const error = yield* Effect.flip(Run.resume("r1", options))
          assert.strictEqual(error.reason, "invalid", field)
          assert.include(error.detail, field)
          assert.deepStrictEqual(yield* journal.read("r1"), before, field)
        }
        const recovered = yield* Run.recover(bad[0]?.[1] ?? { tools: [] })
        assert.deepStrictEqual(
          recovered.map((r) => (Result.isFailure(r) ? r.failure.reason : r.success.status)),
          ["invalid"]
        )
        // A getter deep in the options that throws, and a policy of the caller's whose limit conflicts with the
        // one the run started with: the caller's to fix too (review 89: a defect, and `corrupt`).
        const throwing = Object.defineProperty({}, "maxIterations", {
          enumerable: true,
          get() {
            throw new Error("boom")
          }
        })
        const mine = Termination.make("mine", () => Termination.continue_, { maxToolCalls: 99 })
        for (const [what, options] of [
          ["a getter that throws", { tools: [payment.tool], limits: throwing }],
          ["a conflicting policy", { tools: [payment.tool], policies: (d) => [...d, mine] }]
        ] as const satisfies ReadonlyArray<readonly [string, Run.ResumeOptions<typeof payment.tool>]>) {
          const error = yield* Effect.flip(Run.resume("r1", options))
          assert.strictEqual(error.reason, "invalid", `${what}: ${error.detail}`)
          assert.deepStrictEqual(yield* journal.read("r1"), before, what)
        }
        // Corrected, the resume finds the call in doubt, as it was.
        const resumed = yield* Run.resume("r1", { tools: [payment.tool] })
        assert.strictEqual(resumed.stopReason, "unknown_outcome")
        assert.deepStrictEqual(
          resumed.pendingActions.map((a) => a.callId),
          ["c1"]
        )
        assert.strictEqual(payment.calls.count, 1)
      }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
  )

  it.effect("R9.1 a log with a second run.started, or an approval decided but never requested, is corrupt", () =>
    Effect.gen(function* () {
      const store = yield* Journal.Journal
      const pay = FaultyTools.ledgered({
        name: "pay",
        idempotent: false,
        sideEffect: "external",
        reconcile: true,
        needsApproval: true,
        behaviour: () => "apply"
      })
      // Commit 2 holds the model's response (pay c1), before any approval was asked.
      const faulty = FaultyJournal.make(store, { crashAt: { commit: 2, when: "after" } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "pay", runId: "r1", tools: [pay.tool] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal)
        )
      )
      const stored = yield* Effect.orDie(store.read("r1"))
      const { header, events } = Option.getOrThrow(stored)
      const started = events[0]
      const last = events[events.length - 1]
      if (started?._tag !== "run.started" || last === undefined) return assert.fail("no log")
      const forgeries: ReadonlyArray<readonly [string, ReadonlyArray<Event.Event>]> = [
        // Its deadline would replace the run's: a payment made after the run's own deadline.
        ["f1", [...events, { ...started, deadlineAt: started.deadlineAt + 3_600_000 }]],
        // A call run with nobody asked.
        [
          "f2",
          [
            ...events,
            {
              _tag: "approval.decided",
              callId: "c1",
              name: "pay",
              decision: "approved",
              runId: "r1",
              seq: 0,
              at: last.at
            }
          ]
        ]
      ]
      for (const [runId, forged] of forgeries) {
        yield* Effect.orDie(store.create({ runId, header, state: "tool_executing" }))
        yield* Effect.orDie(
          store.append(runId, {
            expectedSeq: 0,
            events: forged.map((e, seq) => ({ ...e, runId, seq })),
            state: "tool_executing"
          })
        )
        // Before, both were taken: the second deadline stood, and the call ran unasked.
        const error = yield* Effect.flip(Run.resume(runId, { tools: [pay.tool] }))
        assert.strictEqual(error.reason, "corrupt", runId)
      }
      assert.strictEqual(pay.ledger.total, 0)
    }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
  )
})
