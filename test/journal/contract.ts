/**
 * The journal's contract, one suite run over every backend (memory, SQLite, PostgreSQL): what
 * is committed reads back equal, fencing, bad appends, unfinished runs, approvals, damaged rows
 * and newer formats, table prefixes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, type Schema, type Scope } from "effect"
import type * as Event from "../../src/events/Event.ts"
import type * as Journal from "../../src/journal/Journal.ts"
import type * as JournalError from "../../src/journal/JournalError.ts"

/** A payment put up for approval by run `r1`, call `c1`, pending from 5 s to 65 s. */
const payRequest = {
  runId: "r1",
  callId: "c1",
  tool: "pay",
  arguments: { amount: 42 },
  requestedAt: 5_000,
  expiresAt: 65_000
}

/** Raw access to a backend's rows, to damage them on purpose. */
export interface Raw {
  /** Replaces the JSON text (an array of events) of the commit row that starts at `seq`. */
  readonly setBody: (runId: string, seq: number, body: string) => Effect.Effect<void>
  /** Sets the event count of the commit row that starts at `seq`. */
  readonly setCount: (runId: string, seq: number, count: number) => Effect.Effect<void>
  /** Deletes the commit row that starts at `seq`. */
  readonly deleteCommit: (runId: string, seq: number) => Effect.Effect<void>
  readonly setVersion: (runId: string, version: number) => Effect.Effect<void>
  /** Replaces the JSON text of a call's arguments in its approvals row. */
  readonly setApprovalArguments: (runId: string, callId: string, text: string) => Effect.Effect<void>
  /** Writes a commit row of one event behind the journal's back: a writer that raced (SQL only). */
  readonly insertCommit: (runId: string, seq: number, event: Event.Event) => Effect.Effect<void>
  /** Puts the runs back in the first layout (one row per event), as before the second migration (SQL only). */
  readonly toFirstLayout: Effect.Effect<void>
  /** Runs the journal's migrations again (SQL only). */
  readonly migrate: Effect.Effect<void>
  /** The names of the tables the journal created (empty for memory). */
  readonly tableNames: Effect.Effect<ReadonlyArray<string>>
}

export interface Backend {
  readonly name: string
  /** A fresh, empty journal whose tables carry `prefix`, and raw access to its rows. */
  readonly make: (
    prefix: string
  ) => Effect.Effect<{ readonly journal: Journal.Service; readonly raw: Raw }, JournalError.JournalError, Scope.Scope>
  /** Whether the backend has tables to name (SQL backends). */
  readonly hasTables: boolean
}

let prefixes = 0
/** A prefix no other test of this process used, so that SQL tests on one database stay apart. */
export const freshPrefix = () => `t${process.pid}_${prefixes++}_`

export const started = (runId: string, seq = 0, at = 1_000): Event.Event => ({
  _tag: "run.started",
  runId,
  seq,
  at,
  goal: "pay the invoice",
  model: "scripted",
  tools: ["pay"],
  deadlineAt: 61_000,
  limits: { maxIterations: 10 }
})

export const changed = (runId: string, seq: number, at = 1_000 + seq): Event.Event => ({
  _tag: "state.changed",
  runId,
  seq,
  at,
  from: "created",
  to: "initializing"
})

export const succeeded = (runId: string, seq: number): Event.Event => ({
  _tag: "tool.succeeded",
  runId,
  seq,
  at: 2_000 + seq,
  callId: "c1",
  name: "pay",
  sideEffect: "external",
  observation: "paid 42",
  input: { amount: 42, to: ["acct", 7], note: null },
  output: { receipt: "r-1", nested: { ok: true, list: [1, 2.5, "x"] } }
})

/** `run.started` then `state.changed` events up to `count` events. */
export const history = (runId: string, count: number): ReadonlyArray<Event.Event> =>
  Array.from({ length: count }, (_, seq) => (seq === 0 ? started(runId) : changed(runId, seq)))

const reasonOf = <A>(exit: Exit.Exit<A, JournalError.JournalError>): JournalError.Reason => {
  if (Exit.isSuccess(exit)) throw new Error("expected a JournalError, got success")
  const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  if (error === undefined || error._tag !== "Fail") throw new Error(`expected a typed failure, got ${exit.cause}`)
  return error.error.reason
}

const failure = <A>(effect: Effect.Effect<A, JournalError.JournalError>) => Effect.map(Effect.exit(effect), reasonOf)

const readBack = (journal: Journal.Service, runId: string) =>
  Effect.flatMap(journal.read(runId), (found) =>
    Option.isSome(found) ? Effect.succeed(found.value) : Effect.die(new Error(`run ${runId} not found`))
  )

export const contract = (backend: Backend) =>
  describe(`Journal contract on ${backend.name}`, () => {
    const withJournal = <A, E>(
      body: (journal: Journal.Service, raw: Raw, prefix: string) => Effect.Effect<A, E>
    ): Effect.Effect<A, E | JournalError.JournalError> =>
      Effect.scoped(
        Effect.suspend(() => {
          const prefix = freshPrefix()
          return Effect.flatMap(backend.make(prefix), ({ journal, raw }) => body(journal, raw, prefix))
        })
      )

    it.effect("R9 create, append, read back: the decoded events equal what was appended", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          const header: Schema.Json = { goal: "pay the invoice", tools: [{ name: "pay", fingerprint: "abc" }] }
          yield* journal.create({ runId: "r1", header, state: "created" })
          const fresh = yield* readBack(journal, "r1")
          assert.deepStrictEqual(fresh.header, header)
          assert.strictEqual(fresh.nextSeq, 0)
          assert.deepStrictEqual(fresh.events, [])
          assert.isTrue(Option.isNone(fresh.result))

          const first = [started("r1"), changed("r1", 1)]
          yield* journal.append("r1", { expectedSeq: 0, events: first, state: "initializing" })
          yield* journal.append("r1", { expectedSeq: 2, events: [succeeded("r1", 2)], state: "tool_executing" })
          const result: Schema.Json = { status: "completed", stopReason: "goal_reached", counters: { steps: 3 } }
          yield* journal.append("r1", { expectedSeq: 3, events: [changed("r1", 3)], state: "completed", result })

          const stored = yield* readBack(journal, "r1")
          assert.strictEqual(stored.version, 2)
          assert.strictEqual(stored.state, "completed")
          assert.strictEqual(stored.nextSeq, 4)
          assert.deepStrictEqual(stored.events, [...first, succeeded("r1", 2), changed("r1", 3)])
          assert.deepStrictEqual(stored.result, Option.some(result))
          assert.isTrue(Option.isNone(yield* journal.read("nobody")))
        })
      )
    )

    it.effect("R9 R13 a read from a sequence number holds the events from it on, with the run's whole standing", () =>
      withJournal((journal, raw) =>
        Effect.gen(function* () {
          const header: Schema.Json = { goal: "pay the invoice" }
          yield* journal.create({ runId: "w", header, state: "created" })
          // Commits of 2, 1 and 3 events: seq 0-1, 2, 3-5.
          const all = [started("w"), changed("w", 1), succeeded("w", 2), changed("w", 3), changed("w", 4)]
          yield* journal.append("w", { expectedSeq: 0, events: all.slice(0, 2), state: "initializing" })
          yield* journal.append("w", { expectedSeq: 2, events: all.slice(2, 3), state: "tool_executing" })
          const read = (fromSeq: number) =>
            Effect.map(journal.read("w", { fromSeq }), (found) => Option.getOrThrow(found))
          // Inside a commit, at a commit's start, at the end, past it.
          for (const from of [0, 1, 2, 3, 7, 2 ** 40]) {
            const stored = yield* read(from)
            assert.deepStrictEqual(stored.events, all.slice(from, 3), `from ${from}`)
            assert.strictEqual(stored.nextSeq, 3, `from ${from}`)
            assert.strictEqual(stored.state, "tool_executing", `from ${from}`)
            assert.deepStrictEqual(stored.header, header, `from ${from}`)
            assert.isTrue(Option.isNone(stored.result))
          }
          const result: Schema.Json = { status: "completed" }
          yield* journal.append("w", { expectedSeq: 3, events: all.slice(3), state: "completed", result })
          const ended = yield* read(99)
          assert.deepStrictEqual(ended.events, [])
          assert.strictEqual(ended.nextSeq, 5)
          assert.strictEqual(ended.state, "completed")
          assert.deepStrictEqual(ended.result, Option.some(result))
          assert.deepStrictEqual((yield* read(4)).events, all.slice(4))
          assert.deepStrictEqual((yield* read(0)).events, all)

          // A bad start is a typed error naming it, never a read of something else.
          for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "2", null]) {
            const reason = yield* failure(journal.read("w", { fromSeq: bad as number }))
            assert.strictEqual(reason._tag, "InvalidAppend")
            assert.include(reason.message, "fromSeq must be a non-negative integer")
          }
          // Options whose getter throws too (review 89: a defect).
          const throwing = {
            get fromSeq(): number {
              throw new Error("x")
            }
          }
          const unreadable = yield* failure(journal.read("w", throwing))
          assert.strictEqual(unreadable._tag, "InvalidAppend")
          assert.include(unreadable.message, "cannot be read")
          assert.isTrue(Option.isNone(yield* journal.read("nobody", { fromSeq: 3 })))

          // The log's start missing is seen from any point before the next commit that is there.
          yield* raw.deleteCommit("w", 0)
          for (const from of [0, 1]) {
            const reason = yield* failure(journal.read("w", { fromSeq: from }))
            assert.strictEqual(reason._tag, "Corrupt", `from ${from}`)
            assert.include(reason.message, "seq 0 is missing")
          }
        })
      )
    )

    // Live: a pool's connections are waited for on the real clock.
    it.live(
      "R9 a read racing the commit that ends the run sees it unfinished or ended, never half of each (one snapshot)",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            const result: Schema.Json = { status: "completed" }
            // Each round, readers read while the run's last commit lands; every read is whole.
            for (let round = 0; round < 20; round++) {
              const runId = `race${round}`
              yield* journal.create({ runId, header: { round }, state: "created" })
              yield* journal.append(runId, { expectedSeq: 0, events: history(runId, 3), state: "planning" })
              const ends = journal.append(runId, {
                expectedSeq: 3,
                events: [changed(runId, 3)],
                state: "completed",
                result
              })
              const reads = Effect.all(
                Array.from({ length: 8 }, () => Effect.repeat(journal.read(runId), { times: 4 })),
                { concurrency: "unbounded" }
              )
              yield* Effect.all([reads, ends], { concurrency: "unbounded", discard: true })
              assert.deepStrictEqual((yield* readBack(journal, runId)).result, Option.some(result))
            }
          })
        ),
      30_000
    )

    it.effect("R9 a duplicate run id is a Conflict and leaves the first run as it was", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          yield* journal.create({ runId: "r1", header: { n: 1 }, state: "created" })
          yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 1), state: "initializing" })
          const reason = yield* failure(journal.create({ runId: "r1", header: { n: 2 }, state: "created" }))
          assert.strictEqual(reason._tag, "Conflict")
          const stored = yield* readBack(journal, "r1")
          assert.deepStrictEqual(stored.header, { n: 1 })
          assert.strictEqual(stored.nextSeq, 1)
        })
      )
    )

    it.effect(
      "R9 the same create or append made again is a Conflict: the store cannot tell a lost reply from another writer (the run does)",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            const run = { runId: "r1", header: { n: 1 }, state: "created" } as const
            yield* journal.create(run)
            assert.strictEqual((yield* failure(journal.create(run)))._tag, "Conflict")
            const append = { expectedSeq: 0, events: history("r1", 2), state: "initializing" } as const
            yield* journal.append("r1", append)
            assert.strictEqual((yield* failure(journal.append("r1", append)))._tag, "Conflict")
            assert.strictEqual((yield* readBack(journal, "r1")).nextSeq, 2)
          })
        )
    )

    it.effect("R9 fencing: two writers with the same expectedSeq, exactly one wins and the other writes nothing", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          yield* journal.create({ runId: "r1", header: {}, state: "created" })
          yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 2), state: "initializing" })
          const writerA = journal.append("r1", { expectedSeq: 2, events: [changed("r1", 2)], state: "planning" })
          const writerB = journal.append("r1", {
            expectedSeq: 2,
            events: [succeeded("r1", 2), changed("r1", 3)],
            state: "tool_executing"
          })
          const [a, b] = yield* Effect.all([Effect.exit(writerA), Effect.exit(writerB)], { concurrency: 2 })
          assert.strictEqual([a, b].filter(Exit.isSuccess).length, 1)
          const lost = reasonOf(Exit.isSuccess(a) ? b : a)
          assert.strictEqual(lost._tag, "Conflict")
          if (lost._tag === "Conflict") {
            assert.strictEqual(lost.runId, "r1")
            assert.strictEqual(lost.expectedSeq, 2)
          }
          const stored = yield* readBack(journal, "r1")
          if (Exit.isSuccess(a)) {
            assert.deepStrictEqual(stored.events.slice(2), [changed("r1", 2)])
            assert.strictEqual(stored.state, "planning")
          } else {
            assert.deepStrictEqual(stored.events.slice(2), [succeeded("r1", 2), changed("r1", 3)])
            assert.strictEqual(stored.state, "tool_executing")
          }
          assert.strictEqual(stored.nextSeq, stored.events.length)

          const stale = yield* failure(
            journal.append("r1", { expectedSeq: 1, events: [changed("r1", 1)], state: "failed", result: { x: 1 } })
          )
          assert.strictEqual(stale._tag, "Conflict")
          if (stale._tag === "Conflict") assert.strictEqual(stale.actualSeq, stored.nextSeq)
          const after = yield* readBack(journal, "r1")
          assert.deepStrictEqual(after, stored)
        })
      )
    )

    it.effect(
      "R9 a malformed request (events off expectedSeq or of another run, values not JSON, not an object) is InvalidAppend and writes nothing",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            yield* journal.create({ runId: "r1", header: {}, state: "created" })
            yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 1), state: "initializing" })
            const cases = [
              { expectedSeq: 1, events: [changed("r1", 2)], state: "planning" as const },
              { expectedSeq: 1, events: [changed("r1", 1), changed("r1", 3)], state: "planning" as const },
              { expectedSeq: 1, events: [changed("other", 1)], state: "planning" as const },
              { expectedSeq: -1, events: [], state: "planning" as const },
              { expectedSeq: 2 ** 31 - 1, events: [changed("r1", 2 ** 31 - 1)], state: "planning" as const },
              { expectedSeq: 1, events: [changed("r1", 1)], state: "dancing" as never },
              { expectedSeq: 1, events: [changed("r1", 1)], state: "completed" as const, result: Number.NaN },
              { expectedSeq: 1, events: [null] as never, state: "planning" as const },
              { expectedSeq: 1, events: "not an array" as never, state: "planning" as const },
              { expectedSeq: 1, events: [{ ...changed("r1", 1), to: "nowhere" }] as never, state: "planning" as const }
            ]
            for (const append of cases) {
              const reason = yield* failure(journal.append("r1", append))
              assert.strictEqual(reason._tag, "InvalidAppend", JSON.stringify(append))
            }
            for (const bad of [
              journal.create(null as never),
              journal.create({ runId: "", header: {}, state: "created" }),
              journal.create({ runId: "r2", header: { n: Number.POSITIVE_INFINITY }, state: "created" }),
              journal.append("r1", null as never),
              journal.requestApproval(undefined as never),
              // A time past those a number holds exactly, which a store could not give back (review 182).
              journal.requestApproval({ ...payRequest, expiresAt: 8.64e17 }),
              journal.requestApproval({ ...payRequest, requestedAt: -(2 ** 60) }),
              journal.decide({ runId: "r1", callId: "c1", decision: "maybe" as never, at: 1 }),
              journal.decide({ runId: "r1", callId: "c1", decision: "approve", by: "ops", at: 2 ** 60 }),
              // What a run waiting on the call would refuse to read, and end on (review 182).
              journal.decide({ runId: "r1", callId: "c1", decision: "reject", reason: "x".repeat(5000), at: 1 }),
              journal.decide({ runId: "r1", callId: "c1", decision: "approve", by: "o".repeat(300), at: 1 }),
              journal.decide({ runId: "r1", callId: "c1", decision: "approve", by: " \u200b ", at: 1 })
            ]) {
              assert.strictEqual((yield* failure(bad))._tag, "InvalidAppend")
            }
            const unknownRun = yield* failure(journal.append("ghost", { expectedSeq: 0, events: [], state: "created" }))
            assert.strictEqual(unknownRun._tag, "InvalidAppend")
            const stored = yield* readBack(journal, "r1")
            assert.strictEqual(stored.nextSeq, 1)
            assert.strictEqual(stored.state, "initializing")
            assert.strictEqual(stored.events.length, 1)
          })
        )
    )

    it.effect("R7 R9.3 times are kept in whole milliseconds, the fraction cut, by every store alike (review 184)", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          yield* journal.requestApproval({ ...payRequest, requestedAt: 5_000.5, expiresAt: 65_000.75 })
          assert.deepInclude((yield* journal.pendingApprovals({ runId: "r1" }))[0], {
            requestedAt: 5_000,
            expiresAt: 65_000
          })
          yield* journal.decide({ runId: "r1", callId: "c1", decision: "approve", by: "ops", at: 7_000.9 })
          assert.strictEqual(Option.getOrUndefined(yield* journal.decision("r1", "c1"))?.at, 7_000)
        })
      )
    )

    it.effect("R9 unfinished lists the runs without a result, oldest first", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          for (const runId of ["a", "b", "c"]) yield* journal.create({ runId, header: {}, state: "created" })
          yield* journal.append("b", { expectedSeq: 0, events: history("b", 1), state: "completed", result: "done" })
          yield* journal.append("c", { expectedSeq: 0, events: history("c", 2), state: "awaiting_approval" })
          assert.deepStrictEqual(yield* journal.unfinished, ["a", "c"])
        })
      )
    )

    it.effect("R7 approvals: requested calls are listed, decided once; a second decision is NotPending", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          const request = payRequest
          yield* journal.requestApproval(request)
          yield* journal.requestApproval({ ...request, runId: "r2", callId: "c9", requestedAt: 6_000 })
          const duplicate = yield* failure(journal.requestApproval(request))
          assert.strictEqual(duplicate._tag, "Conflict")
          assert.deepStrictEqual(
            (yield* journal.pendingApprovals()).map((p) => [p.runId, p.callId]),
            [
              ["r1", "c1"],
              ["r2", "c9"]
            ]
          )
          assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r1" }), [request])
          assert.isTrue(Option.isNone(yield* journal.decision("r1", "c1")))

          const decision = { runId: "r1", callId: "c1", decision: "approve" as const, by: "ana", at: 7_000 }
          yield* journal.decide(decision)
          assert.deepStrictEqual(yield* journal.decision("r1", "c1"), Option.some(decision))
          assert.deepStrictEqual(
            (yield* journal.pendingApprovals()).map((p) => p.callId),
            ["c9"]
          )
          const twice = yield* failure(journal.decide({ ...decision, decision: "reject", reason: "no" }))
          assert.strictEqual(twice._tag, "NotPending")
          assert.deepStrictEqual(yield* journal.decision("r1", "c1"), Option.some(decision))
          const never = yield* failure(journal.decide({ runId: "r1", callId: "nope", decision: "reject", at: 1 }))
          assert.strictEqual(never._tag, "NotPending")
          // A decision at or after the call's expiry is refused, even while the run has not seen the expiry yet.
          yield* journal.requestApproval({ ...request, callId: "c3" })
          const late = yield* failure(journal.decide({ runId: "r1", callId: "c3", decision: "approve", at: 65_000 }))
          assert.strictEqual(late._tag, "NotPending")
          assert.isTrue(Option.isNone(yield* journal.decision("r1", "c3")))
          yield* journal.withdraw("r1", "c3", 65_001)

          yield* journal.requestApproval({ ...request, callId: "c2" })
          const racing = yield* Effect.all(
            ["ana", "bo"].map((by) =>
              Effect.exit(journal.decide({ runId: "r1", callId: "c2", decision: "approve", by, at: 7_500 }))
            ),
            { concurrency: 2 }
          )
          assert.strictEqual(racing.filter(Exit.isSuccess).length, 1, "one of two racing decisions wins")
          assert.strictEqual(reasonOf(racing.find(Exit.isFailure) ?? Exit.void)._tag, "NotPending")

          const rejection = { runId: "r2", callId: "c9", decision: "reject" as const, reason: "too much", at: 8_000 }
          yield* journal.decide(rejection)
          assert.deepStrictEqual(yield* journal.decision("r2", "c9"), Option.some(rejection))
          assert.deepStrictEqual(yield* journal.pendingApprovals(), [])
        })
      )
    )

    it.effect(
      "R7 approvals: a pending call requested with another expiry takes it in one step; a decision then stands (review 168)",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            const request = { ...payRequest, expiresAt: 3_605_000 }
            yield* journal.requestApproval(request)
            // A resume whose deadline came closer asks again: the row takes the closer expiry, pending all along.
            const closer = { ...request, requestedAt: 6_000, expiresAt: 60_000 }
            yield* journal.requestApproval(closer)
            assert.deepStrictEqual(yield* journal.pendingApprovals(), [closer])
            // The same request again is still a Conflict (a lost reply cannot be told from another writer).
            assert.strictEqual((yield* failure(journal.requestApproval(closer)))._tag, "Conflict")
            // Past the new expiry, a decision is refused; before it, taken.
            const late = yield* failure(journal.decide({ runId: "r1", callId: "c1", decision: "approve", at: 60_000 }))
            assert.strictEqual(late._tag, "NotPending")
            yield* journal.decide({ runId: "r1", callId: "c1", decision: "approve", by: "ana", at: 59_000 })
            // Decided, it is not renewed.
            assert.strictEqual(
              (yield* failure(journal.requestApproval({ ...closer, expiresAt: 30_000 })))._tag,
              "Conflict"
            )
            assert.strictEqual(Option.getOrThrow(yield* journal.decision("r1", "c1")).decision, "approve")
          })
        )
    )

    it.effect("R7 approvals: a withdrawn call is not pending nor decidable; requested again, it is pending again", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          const request = { ...payRequest, sideEffect: "external" }
          yield* journal.requestApproval(request)
          assert.deepStrictEqual(yield* journal.pendingApprovals(), [request], "the side-effect class is kept")
          yield* journal.withdraw("r1", "c1", 6_000)
          assert.deepStrictEqual(yield* journal.pendingApprovals(), [])
          assert.isTrue(Option.isNone(yield* journal.decision("r1", "c1")))
          const late = yield* failure(journal.decide({ runId: "r1", callId: "c1", decision: "approve", at: 7_000 }))
          assert.strictEqual(late._tag, "NotPending")
          // Withdrawing twice, or a call never requested, changes nothing.
          yield* journal.withdraw("r1", "c1", 7_000)
          yield* journal.withdraw("r1", "nope", 7_000)
          // The run resumed: the call is put up again, with its new times.
          const again = { ...request, requestedAt: 8_000, expiresAt: 68_000 }
          yield* journal.requestApproval(again)
          assert.deepStrictEqual(yield* journal.pendingApprovals(), [again])
          yield* journal.decide({ runId: "r1", callId: "c1", decision: "approve", at: 9_000 })
          // A decided call is not reopened: asking again is a Conflict.
          const decided = yield* failure(journal.requestApproval(again))
          assert.strictEqual(decided._tag, "Conflict")
        })
      )
    )

    it.effect(
      "R7 R9 a run's ending closes its calls still pending, with its last commit: they are no longer listed, and a decision on them, or on a call put up after the ending, is NotPending",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            const request = { tool: "pay", arguments: { amount: 1 }, requestedAt: 5_000, expiresAt: 65_000 }
            yield* journal.create({ runId: "r1", header: {}, state: "created" })
            yield* journal.create({ runId: "r2", header: {}, state: "created" })
            yield* journal.requestApproval({ ...request, runId: "r1", callId: "c1" })
            yield* journal.requestApproval({ ...request, runId: "r1", callId: "c2" })
            yield* journal.decide({ runId: "r1", callId: "c2", decision: "approve", by: "ana", at: 6_000 })
            yield* journal.requestApproval({ ...request, runId: "r2", callId: "c9" })
            yield* journal.append("r1", {
              expectedSeq: 0,
              events: history("r1", 2),
              state: "cancelled",
              result: "cancelled"
            })
            assert.deepStrictEqual(
              (yield* journal.pendingApprovals()).map((p) => [p.runId, p.callId]),
              [["r2", "c9"]],
              "the ended run's call is not listed; the other run's is"
            )
            assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r1" }), [])
            const late = yield* failure(journal.decide({ runId: "r1", callId: "c1", decision: "approve", at: 7_000 }))
            assert.strictEqual(late._tag, "NotPending")
            assert.isTrue(Option.isNone(yield* journal.decision("r1", "c1")), "withdrawn: no decision")
            // A decision given before the ending stands.
            assert.strictEqual(Option.getOrUndefined(yield* journal.decision("r1", "c2"))?.by, "ana")
            // A process the ending fenced off puts a call up after it: nobody can decide it.
            yield* Effect.ignore(journal.requestApproval({ ...request, runId: "r1", callId: "c3" }))
            assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r1" }), [])
            const stale = yield* failure(journal.decide({ runId: "r1", callId: "c3", decision: "approve", at: 7_000 }))
            assert.strictEqual(stale._tag, "NotPending")
            assert.isTrue(Option.isNone(yield* journal.decision("r1", "c3")))
            // The other run's call is decided as before.
            yield* journal.decide({ runId: "r2", callId: "c9", decision: "reject", reason: "no", at: 7_000 })
          })
        )
    )

    it.effect(
      "R7 R12 an approvals row that cannot be read fails its run's list (Corrupt); the list of every run goes on without it",
      () =>
        withJournal((journal, raw) =>
          Effect.gen(function* () {
            const request = { tool: "pay", arguments: { amount: 1 }, requestedAt: 5_000, expiresAt: 65_000 }
            yield* journal.requestApproval({ ...request, runId: "damaged", callId: "c1" })
            yield* journal.requestApproval({ ...request, runId: "healthy", callId: "c2", requestedAt: 6_000 })
            yield* raw.setApprovalArguments("damaged", "c1", "{not json")
            assert.deepStrictEqual(
              (yield* journal.pendingApprovals()).map((p) => [p.runId, p.callId]),
              [["healthy", "c2"]]
            )
            assert.strictEqual((yield* journal.pendingApprovals({ runId: "healthy" })).length, 1)
            const broken = yield* failure(journal.pendingApprovals({ runId: "damaged" }))
            assert.strictEqual(broken._tag, "Corrupt")
          })
        )
    )

    it.effect(
      "R9 a commit row whose body is not JSON, truncated, not an array, short of its count, another run's event, or a gap before it is Corrupt naming the seq; an unknown kind of event is Incompatible naming it",
      () =>
        withJournal((journal, raw) =>
          Effect.gen(function* () {
            const cases: ReadonlyArray<readonly [string, number, (runId: string) => Effect.Effect<void>]> = [
              ["garbage", 1, (runId) => raw.setBody(runId, 1, "{not json")],
              [
                "truncated",
                1,
                (runId) => raw.setBody(runId, 1, JSON.stringify(history(runId, 3).slice(1)).slice(0, 40))
              ],
              ["object", 1, (runId) => raw.setBody(runId, 1, JSON.stringify(changed(runId, 1)))],
              ["short", 1, (runId) => raw.setBody(runId, 1, JSON.stringify([changed(runId, 1)]))],
              [
                "foreign",
                1,
                (runId) => raw.setBody(runId, 1, JSON.stringify([changed("someone-else", 1), changed(runId, 2)]))
              ],
              [
                "renumbered",
                2,
                (runId) => raw.setBody(runId, 1, JSON.stringify([changed(runId, 1), changed(runId, 7)]))
              ],
              ["gap", 1, (runId) => raw.deleteCommit(runId, 1)],
              ["empty", 1, (runId) => Effect.andThen(raw.setBody(runId, 1, "[]"), raw.setCount(runId, 1, 0))]
            ]
            for (const [runId, seq, damage] of cases) {
              // Three commits: [0], [1, 2], [3].
              const events = history(runId, 4)
              yield* journal.create({ runId, header: {}, state: "created" })
              yield* journal.append(runId, { expectedSeq: 0, events: events.slice(0, 1), state: "initializing" })
              yield* journal.append(runId, { expectedSeq: 1, events: events.slice(1, 3), state: "planning" })
              yield* journal.append(runId, { expectedSeq: 3, events: events.slice(3), state: "planning" })
              yield* damage(runId)
              const reason = yield* failure(journal.read(runId))
              assert.strictEqual(reason._tag, "Corrupt", runId)
              if (reason._tag === "Corrupt") {
                assert.strictEqual(reason.runId, runId)
                assert.strictEqual(reason.seq, seq, `${runId}: ${reason.detail}`)
              }
            }
            // A kind of event a newer version writes is no damage: the run needs that version.
            const events = history("tag", 3)
            yield* journal.create({ runId: "tag", header: {}, state: "created" })
            yield* journal.append("tag", { expectedSeq: 0, events, state: "planning" })
            yield* raw.setBody(
              "tag",
              0,
              JSON.stringify([...events.slice(0, 2), { ...events[2], _tag: "run.teleported" }])
            )
            const newer = yield* failure(journal.read("tag"))
            assert.deepStrictEqual(newer._tag === "Incompatible" ? newer.eventTag : newer._tag, "run.teleported")
          })
        )
    )

    it.effect(
      "R9 an append without events writes nothing and only checks the fence; a result without its events is InvalidAppend",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            yield* journal.create({ runId: "r1", header: {}, state: "created" })
            yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 2), state: "initializing" })
            const before = yield* readBack(journal, "r1")
            yield* journal.append("r1", { expectedSeq: 2, events: [], state: "planning" })
            const stale = yield* failure(journal.append("r1", { expectedSeq: 1, events: [], state: "planning" }))
            assert.strictEqual(stale._tag, "Conflict")
            const alone = yield* failure(
              journal.append("r1", { expectedSeq: 2, events: [], state: "completed", result: { ok: true } })
            )
            assert.strictEqual(alone._tag, "InvalidAppend")
            assert.deepStrictEqual(yield* readBack(journal, "r1"), before)
            // The next events still go where the log ends.
            yield* journal.append("r1", { expectedSeq: 2, events: [changed("r1", 2)], state: "planning" })
            assert.strictEqual((yield* readBack(journal, "r1")).nextSeq, 3)
          })
        )
    )

    it.effect("R9 an event or a result nested too deeply for the stack is InvalidAppend, not a crash", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          yield* journal.create({ runId: "r1", header: {}, state: "created" })
          yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 1), state: "initializing" })
          let deep: Schema.Json = 1
          for (let i = 0; i < 20_000; i++) deep = { d: deep }
          const event = { ...succeeded("r1", 1), input: deep }
          const tooDeep = yield* failure(journal.append("r1", { expectedSeq: 1, events: [event], state: "planning" }))
          assert.strictEqual(tooDeep._tag, "InvalidAppend")
          const result = yield* failure(
            journal.append("r1", { expectedSeq: 1, events: [changed("r1", 1)], state: "completed", result: deep })
          )
          assert.strictEqual(result._tag, "InvalidAppend")
          assert.strictEqual((yield* readBack(journal, "r1")).nextSeq, 1)
        })
      )
    )

    it.effect("R9 a run that has ended takes no more events: an append after its result is InvalidAppend", () =>
      withJournal((journal) =>
        Effect.gen(function* () {
          yield* journal.create({ runId: "r1", header: {}, state: "created" })
          yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 2), state: "completed", result: "done" })
          const before = yield* readBack(journal, "r1")
          const late = yield* failure(
            journal.append("r1", { expectedSeq: 2, events: [changed("r1", 2)], state: "planning" })
          )
          assert.strictEqual(late._tag, "InvalidAppend")
          assert.deepStrictEqual(yield* readBack(journal, "r1"), before)
          assert.deepStrictEqual(yield* journal.unfinished, [])
        })
      )
    )

    it.effect(
      "R9 a writer whose commit starts where another's, committed meanwhile, ends gets a Conflict, never a success that wrote nothing",
      () =>
        withJournal((journal) =>
          Effect.gen(function* () {
            for (let round = 0; round < 30; round++) {
              const runId = `ahead-${round}`
              yield* journal.create({ runId, header: {}, state: "created" })
              yield* journal.append(runId, { expectedSeq: 0, events: history(runId, 3), state: "initializing" })
              const a = journal.append(runId, {
                expectedSeq: 3,
                events: [changed(runId, 3), changed(runId, 4)],
                state: "planning"
              })
              const b = journal.append(runId, { expectedSeq: 5, events: [succeeded(runId, 5)], state: "planning" })
              const [ea, eb] = yield* Effect.all([Effect.exit(a), Effect.exit(b)], { concurrency: 2 })
              const stored = yield* readBack(journal, runId)
              assert.isTrue(Exit.isSuccess(ea), runId)
              // B wrote its event, or it was told it did not.
              assert.strictEqual(stored.nextSeq, Exit.isSuccess(eb) ? 6 : 5, runId)
              if (Exit.isFailure(eb)) assert.strictEqual(reasonOf(eb)._tag, "Conflict")
            }
          })
        )
    )

    it.effect(
      "R9 a run written in a newer journal format, or in format 1 whose events this code no longer reads, is Incompatible",
      () =>
        withJournal((journal, raw) =>
          Effect.gen(function* () {
            for (const [version, says] of [
              [99, "reads up to 2"],
              [1, "no longer reads"]
            ] as const) {
              const runId = `r${version}`
              yield* journal.create({ runId, header: {}, state: "created" })
              yield* raw.setVersion(runId, version)
              const reason = yield* failure(journal.read(runId))
              assert.strictEqual(reason._tag, "Incompatible")
              if (reason._tag === "Incompatible") {
                assert.deepStrictEqual([reason.version, reason.supported], [version, 2])
                assert.include(reason.message, says)
              }
            }
          })
        )
    )

    if (!backend.hasTables) return

    it.effect(
      "R9 a commit behind a writer that raced in first (its row written behind the journal's back) is a Conflict and writes nothing",
      () =>
        withJournal((journal, raw) =>
          Effect.gen(function* () {
            yield* journal.create({ runId: "r1", header: {}, state: "created" })
            yield* journal.append("r1", { expectedSeq: 0, events: history("r1", 1), state: "initializing" })
            const theirs = succeeded("r1", 1)
            yield* raw.insertCommit("r1", 1, theirs)
            const reason = yield* failure(
              journal.append("r1", { expectedSeq: 1, events: [changed("r1", 1), changed("r1", 2)], state: "planning" })
            )
            assert.strictEqual(reason._tag, "Conflict")
            if (reason._tag === "Conflict") assert.strictEqual(reason.actualSeq, 2)
            const stored = yield* readBack(journal, "r1")
            assert.deepStrictEqual(stored.events, [...history("r1", 1), theirs])
            assert.strictEqual(stored.nextSeq, 2)
          })
        )
    )

    it.effect(
      "R9 runs of the first layout (one row per event) are moved to one row per commit by the second migration: they read back as they were and go on",
      () =>
        withJournal((journal, raw) =>
          Effect.gen(function* () {
            const events = history("open", 4)
            yield* journal.create({ runId: "open", header: { goal: "g" }, state: "created" })
            yield* journal.append("open", { expectedSeq: 0, events: events.slice(0, 1), state: "initializing" })
            yield* journal.append("open", { expectedSeq: 1, events: events.slice(1, 3), state: "planning" })
            yield* journal.create({ runId: "done", header: {}, state: "created" })
            yield* journal.append("done", {
              expectedSeq: 0,
              events: [...history("done", 1), succeeded("done", 1)],
              state: "completed",
              result: { ok: 1 }
            })
            yield* journal.create({ runId: "new", header: {}, state: "created" })
            const read = Effect.all([
              journal.read("open"),
              journal.read("done"),
              journal.read("new"),
              journal.unfinished
            ])
            const before = yield* read
            yield* raw.toFirstLayout
            yield* raw.migrate
            assert.deepStrictEqual(yield* read, before)
            yield* journal.append("open", { expectedSeq: 3, events: events.slice(3), state: "planning" })
            assert.deepStrictEqual((yield* readBack(journal, "open")).events, events)
          })
        )
    )

    it.effect("R9 the table prefix names every table the journal creates", () =>
      withJournal((journal, raw, prefix) =>
        Effect.gen(function* () {
          yield* journal.create({ runId: "r1", header: {}, state: "created" })
          const names = yield* raw.tableNames
          assert.deepStrictEqual(
            [...names].sort(),
            ["approvals", "commits", "migrations", "runs"].map((table) => `${prefix}${table}`)
          )
        })
      )
    )
  })
