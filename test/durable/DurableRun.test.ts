/**
 * DurableRun in one process, on the embedded engine over a real SQLite file (R9, R7, R5.1):
 * runs that park on approvals and wake when decided, cancels, expiries on a durable clock,
 * and bad input. Real time: the engine's timers and storage reads are real.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Schema, Stream } from "effect"
import { DurableRun } from "../../src/durable/index.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import type * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { tempFiles } from "../support/files.ts"
import { look, takeoverModel } from "../support/takeover.ts"

const fileOf = tempFiles("durable-run-")

/** A payment that needs approval; `paid` is what its handler did. */
const payments = () => {
  const paid: Array<string> = []
  const pay = Tool.make({
    name: "pay",
    description: "Pays an amount.",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.Struct({ receipt: Schema.String }),
    sideEffect: "external",
    needsApproval: true,
    handler: ({ amount }, context) =>
      Effect.sync(() => {
        paid.push(context.idempotencyKey)
        return { receipt: `r-${amount}` }
      })
  })
  return { paid, pay }
}

const payOnce = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("pay", { amount: 5 }, "c1") : ScriptedModel.finalAnswer("paid")
)

/** The engine, the journal and the runs on a fresh file, with `tools` registered. */
const runtime = <T extends Tool.Any>(tools: ReadonlyArray<T>, model = payOnce) =>
  DurableRun.layer({ tools }).pipe(
    Layer.provideMerge(DurableRun.layerEmbedded({ filename: fileOf() })),
    Layer.provide(model)
  )

/** Waits (10 s at most) until the run has a call waiting for approval; gives its call id. */
const waitingCall = (runs: DurableRun.Service, runId: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      const pending = yield* runs.pending(runId)
      if (pending[0] !== undefined) return pending[0].callId
      yield* Effect.sleep(50)
    }
    return yield* Effect.die(new Error(`run ${runId} never waited for approval`))
  })

const tagsOf = (events: ReadonlyArray<{ readonly _tag: string }>) => events.map((e) => e._tag)

/** A host of the runs of `filename`, with `pay`; its shutdown (and so a second host's wait) 200 ms. */
const hostOn = <T extends Tool.Any>(filename: string, pay: T) =>
  DurableRun.layer({ tools: [pay] }).pipe(
    Layer.provideMerge(
      DurableRun.layerEmbedded({ filename, shardingConfig: { entityTerminationTimeout: "200 millis" } })
    ),
    Layer.provide(payOnce)
  )

/**
 * A client on the engine and file of `base` whose journal is `base`'s with the operations
 * `faulty` gives in place of its own (the runner's journal is left as it is).
 */
const clientOver = <A, E>(
  base: Layer.Layer<A | Journal.Journal, E>,
  faulty: (journal: Journal.Service) => Partial<Journal.Service>
) =>
  DurableRun.layerClient.pipe(
    Layer.provide(
      Layer.merge(
        base,
        Layer.effect(
          Journal.Journal,
          Effect.map(Effect.service(Journal.Journal), (journal) => ({ ...journal, ...faulty(journal) }))
        ).pipe(Layer.provide(base))
      )
    )
  )

/** A client whose journal fails every decision with `reason` (the runner itself decides nothing). */
const clientWhoseDecisionsFail = <A, E>(base: Layer.Layer<A | Journal.Journal, E>, reason: JournalError.Reason) =>
  clientOver(base, () => ({ decide: () => Effect.fail(JournalError.make(reason)) }))

describe("DurableRun: runs as durable workflows on one SQLite file (R9)", () => {
  it.live(
    "R7 a run that waits for approval parks (no terminal event, no cancel); approving it wakes it: it pays once",
    () => {
      const { paid, pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay the invoice", runId: "a1" })
        assert.strictEqual(runId, "a1")
        const callId = yield* waitingCall(runs, runId)
        assert.isTrue(Option.isNone(yield* runs.poll(runId)))
        const waiting = tagsOf(yield* runs.events(runId))
        assert.include(waiting, "approval.requested")
        assert.notInclude(waiting, "run.finished")
        assert.deepStrictEqual(paid, [])
        // A feed from the first event: what is committed, then each commit, to run.finished.
        const feed = yield* Effect.forkChild(Stream.runCollect(runs.watch(runId, { pollInterval: "50 millis" })))
        yield* runs.approve(runId, callId, { by: "ops" })
        const result = yield* runs.result(runId)
        const fed = yield* Fiber.join(feed)
        assert.deepStrictEqual(
          fed.map((e) => e.seq),
          result.timeline.map((e) => e.seq)
        )
        // A start that is not a number, or a poll of no time, is refused at once (it read the
        // whole log again and again, or would spin).
        // Options whose getter throws too (review 88: a throw out of watch itself).
        const throwing = {
          get fromSeq(): number {
            throw new Error("x")
          }
        }
        for (const options of [
          { fromSeq: Number.NaN },
          { pollInterval: "soon" as never },
          { pollInterval: 0 },
          throwing
        ]) {
          const refused = yield* Effect.flip(Stream.runCollect(Stream.suspend(() => runs.watch(runId, options))))
          assert.strictEqual(
            refused.reason,
            "invalid",
            options === throwing ? "a getter that throws" : JSON.stringify(options)
          )
        }
        // Resumed from an event: the rest, once.
        const rest = yield* Stream.runCollect(runs.watch(runId, { fromSeq: 5 }))
        assert.deepStrictEqual(
          rest.map((e) => e.seq),
          result.timeline.slice(5).map((e) => e.seq)
        )
        assert.strictEqual(result.status, "completed", result.detail)
        assert.deepStrictEqual(paid, [`a1:${callId}`])
        assert.include(tagsOf(result.timeline), "run.resumed")
        assert.notInclude(tagsOf(result.timeline), "run.stopping")
        assert.deepStrictEqual(yield* runs.pending(runId), [])
        // A second approval of the decided call is not pending: a typed refusal, nothing paid again.
        const again = yield* Effect.flip(runs.approve(runId, callId))
        assert.strictEqual(again._tag, "NotPending")
        // Starting again under the same id starts nothing.
        yield* runs.start({ goal: "pay the invoice", runId: "a1" })
        yield* Effect.sleep(300)
        assert.deepStrictEqual(paid, [`a1:${callId}`])
        // With another goal or system prompt it is refused: it would start nothing (review 180).
        for (const other of [
          { goal: "refund INV-999", runId: "a1" },
          { goal: "pay the invoice", system: "Pay twice.", runId: "a1" }
        ]) {
          const refused = yield* Effect.flip(runs.start(other))
          assert.deepInclude(refused, { _tag: "DurableRunError", reason: "invalid", runId: "a1" })
        }
        assert.deepStrictEqual(paid, [`a1:${callId}`])
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )

  it.live(
    "R7 a rejection ends the run approval_rejected; the call never runs",
    () => {
      const { paid, pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "b1" })
        const callId = yield* waitingCall(runs, runId)
        yield* runs.reject(runId, callId, "not this month", { by: "cfo" })
        const result = yield* runs.result(runId)
        assert.strictEqual(result.stopReason, "approval_rejected", result.detail)
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )

  it.live(
    "R5.1 a cancel of a parked run ends it cancelled, the call never run and no longer pending",
    () => {
      const { paid, pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "c1" })
        yield* waitingCall(runs, runId)
        yield* runs.cancel(runId)
        const result = yield* runs.result(runId)
        assert.strictEqual(result.status, "cancelled", result.detail)
        assert.deepStrictEqual(paid, [])
        assert.deepStrictEqual(yield* runs.pending(runId), [])
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )

  it.live(
    "R5.1 R6.3 DurableRuns.cancel of a parked run lists the plan steps it completed with evidence (review 125)",
    () => {
      const { paid, pay } = payments()
      const lookup = Tool.make({
        name: "lookup",
        description: "Looks the invoice up.",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        handler: () => Effect.succeed("invoice INV-9: 5 EUR")
      })
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCall("lookup", {}, "l1")
          : request.iteration === 2
            ? ScriptedModel.toolCall("pay", { amount: 5 }, "p1")
            : ScriptedModel.finalAnswer("paid")
      )
      const plan = [
        Validation.step("lookup", "look the invoice up", [Criterion.toolSucceeded("lookup")]),
        Validation.step("pay", "pay it", [Criterion.toolSucceeded("pay")])
      ]
      const host = DurableRun.layer({ tools: [lookup, pay], validation: { plan } }).pipe(
        Layer.provideMerge(DurableRun.layerEmbedded({ filename: fileOf() })),
        Layer.provide(model)
      )
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay INV-9", runId: "c2", time: { approval: "30 minutes" } })
        yield* waitingCall(runs, runId)
        // Parked by now: its call is on the table and nothing else of it goes on.
        yield* Effect.sleep("1 second")
        yield* runs.cancel(runId)
        const result = yield* runs.result(runId)
        assert.deepStrictEqual([result.status, result.stopReason], ["cancelled", "cancelled"], result.detail)
        assert.deepStrictEqual(
          result.completed.map((item) => item.id),
          ["lookup"]
        )
        assert.deepStrictEqual(
          result.unfinished.map((item) => item.id),
          ["pay"]
        )
        // Judged once its wait had ended: validating, from tool_executing, never from awaiting_approval.
        const moves = result.timeline.flatMap((e) => (e._tag === "state.changed" ? [`${e.from}->${e.to}`] : []))
        assert.deepStrictEqual(moves.slice(-3), [
          "awaiting_approval->tool_executing",
          "tool_executing->validating",
          "validating->cancelled"
        ])
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide(host))
    },
    30_000
  )

  it.live(
    "R5.1 a cancel of a running run reaches its handler: the run ends cancelled",
    () =>
      Effect.gen(function* () {
        const entered = yield* Deferred.make<void>()
        const wait = Tool.make({
          name: "wait",
          description: "Waits for ever.",
          input: Schema.Struct({}),
          output: Schema.Struct({}),
          sideEffect: "read",
          idempotent: true,
          handler: () => Effect.andThen(Deferred.succeed(entered, undefined), Effect.never)
        })
        const model = ScriptedModel.layerFunction(() => ScriptedModel.toolCall("wait", {}, "w1"))
        return yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          const runId = yield* runs.start({ goal: "wait", runId: "d1" })
          yield* Deferred.await(entered)
          yield* runs.cancel(runId)
          const result = yield* runs.result(runId)
          assert.strictEqual(result.status, "cancelled", result.detail)
          assert.strictEqual(tagsOf(result.timeline).filter((t) => t === "run.finished").length, 1)
        }).pipe(Effect.provide(runtime([wait], model)))
      }),
    30_000
  )

  it.live(
    "R7 an approval nobody decides expires on its durable clock: approval_expired, never paid",
    () => {
      const { paid, pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "e1", time: { approval: "2 seconds" } })
        yield* waitingCall(runs, runId)
        const result = yield* runs.result(runId)
        assert.strictEqual(result.stopReason, "approval_expired", result.detail)
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )

  it.live(
    "R12 bad input gets typed errors: invalid options, unknown runs, a call that is not waiting",
    () => {
      const { pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const invalid = yield* Effect.flip(runs.start({ goal: "x", limits: { maxIterations: -1 } }))
        assert.strictEqual(invalid._tag, "InvalidRunOptions")
        const badTime = yield* Effect.flip(runs.start({ goal: "x", time: { run: "soon" } }))
        assert.strictEqual(badTime._tag, "InvalidRunOptions")
        // From JavaScript, or data off the wire: no start at all, tools not a list of names.
        // A time given as `Run.Options` takes it (a Duration, a tuple, a bigint) is no start's data (review 123: a defect).
        for (const hostile of [
          null,
          "go",
          { goal: "x", tools: "pay" },
          { goal: "x", tools: [7] },
          { goal: "x", time: { run: Duration.seconds(30) } },
          { goal: "x", time: { run: [30, 0] } },
          { goal: "x", time: { step: 30_000_000_000n } },
          { goal: "x", time: "30 seconds" }
        ]) {
          // Boundary: what a caller without types may pass.
          const refused = yield* Effect.flip(runs.start(hostile as unknown as DurableRun.StartOptions))
          assert.strictEqual(refused._tag, "InvalidRunOptions", String(hostile))
        }
        // Getters: one that throws, deep or not, and a run id that answers a checked value, then
        // another (review 89: a throw out of start, and a workflow started under "x\u0000y").
        const throwing = (field: string) =>
          Object.defineProperty({}, field, {
            enumerable: true,
            get() {
              throw new Error("x")
            }
          })
        let reads = 0
        const shifty = {
          goal: "x",
          get runId(): string {
            reads += 1
            return reads === 1 ? "shifty-1" : "x\u0000y"
          }
        }
        for (const [what, options] of [
          ["goal", throwing("goal")],
          ["limits.maxIterations", { goal: "x", limits: throwing("maxIterations") }],
          ["tools", { goal: "x", tools: throwing("0") }]
        ] as const) {
          const refused = yield* Effect.flip(Effect.suspend(() => runs.start(options as DurableRun.StartOptions)))
          assert.strictEqual(refused._tag, "InvalidRunOptions", what)
        }
        assert.strictEqual(yield* runs.start(shifty), "shifty-1")
        assert.strictEqual(reads, 1)
        for (const op of [
          runs.poll("nope"),
          runs.events("nope"),
          runs.cancel("nope"),
          runs.approve("nope", "c1"),
          runs.reject("nope", "c1", "no"),
          runs.pending("nope")
        ]) {
          const e = yield* Effect.flip(op)
          assert.strictEqual(e._tag === "DurableRunError" ? e.reason : e._tag, "not_found")
        }
        const runId = yield* runs.start({ goal: "pay", runId: "f1" })
        yield* waitingCall(runs, runId)
        const notWaiting = yield* Effect.flip(runs.approve(runId, "no-such-call"))
        assert.strictEqual(notWaiting._tag, "NotPending")
        // Text no store keeps whole is refused before anything is decided: the call still waits.
        const callId = yield* waitingCall(runs, runId)
        const nul = yield* Effect.flip(runs.reject(runId, callId, "no\u0000reason", { by: "ops" }))
        assert.strictEqual(nul._tag, "InvalidDecision")
        assert.strictEqual(nul._tag === "InvalidDecision" ? nul.field : "", "reason")
        const byNul = yield* Effect.flip(runs.approve(runId, callId, { by: "a\u0000b" }))
        assert.strictEqual(byNul._tag === "InvalidDecision" ? byNul.field : byNul._tag, "by")
        // Options with a getter that throws are a typed refusal, not a throw out of the call (review 88).
        const hostile = {
          get by(): string {
            throw new Error("x")
          }
        }
        for (const refused of [runs.approve(runId, callId, hostile), runs.reject(runId, callId, "no", hostile)]) {
          const e = yield* Effect.flip(refused)
          assert.strictEqual(e._tag === "InvalidDecision" ? e.field : e._tag, "by")
        }
        assert.strictEqual((yield* runs.pending(runId)).length, 1)
        const journal = yield* Journal.Journal
        assert.isTrue(Option.isSome(yield* journal.read(runId)))
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )
})

describe("DurableRun: one live host per file (R9.4)", () => {
  it.live(
    "R9.4 R7 a second host on a live host's file is refused, naming clientOnly; a client-only process approves, the host pays once",
    () =>
      Effect.gen(function* () {
        const filename = fileOf()
        const { paid, pay } = payments()
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          yield* runs.start({ goal: "pay", runId: "o1" })
          const callId = yield* waitingCall(runs, "o1")
          // A second host while this one lives: it would take over the run and pay again.
          const second = yield* Effect.exit(Layer.build(hostOn(filename, pay)).pipe(Effect.scoped))
          assert.isTrue(second._tag === "Failure", "a second host was built")
          const error = second._tag === "Failure" ? String(Cause.squash(second.cause)) : ""
          assert.include(error, "hosted by another live process")
          assert.include(error, "clientOnly: true")
          // Nor through another name of the file: a symbolic link to it.
          const link = path.join(path.dirname(filename), "link.db")
          fs.symlinkSync(filename, link)
          const linked = yield* Effect.exit(Layer.build(hostOn(link, pay)).pipe(Effect.scoped))
          assert.isTrue(linked._tag === "Failure", "a second host was built through a link")
          // A process beside the host, on the file: it approves, and the host runs the call.
          const result = yield* Effect.gen(function* () {
            const client = yield* DurableRun.DurableRuns
            yield* client.approve("o1", callId, { by: "ops" })
            return yield* client.result("o1")
          }).pipe(
            Effect.provide(
              DurableRun.layerClient.pipe(Layer.provideMerge(DurableRun.layerEmbedded({ filename, clientOnly: true })))
            )
          )
          assert.deepStrictEqual([result.status, paid], ["completed", ["o1:c1"]])
        }).pipe(Effect.provide(hostOn(filename, pay)))
        // The host gone, another hosts the file at once.
        const again = yield* Effect.flatMap(DurableRun.DurableRuns, (runs) => runs.result("o1")).pipe(
          Effect.provide(hostOn(filename, pay))
        )
        assert.deepStrictEqual([again.status, paid.length], ["completed", 1])
      }),
    60_000
  )

  it.live(
    "R12 R5.1 a start from a process beside the host that the host's code refuses (a limit its policies ignore) ends the run internal_error naming the field, recorded (review 136)",
    () =>
      Effect.gen(function* () {
        const filename = fileOf()
        const { paid, pay } = payments()
        // The host's policies are a fixed list, which a start's own limits cannot change.
        const host = DurableRun.layer({ tools: [pay], policies: Termination.defaults() }).pipe(
          Layer.provideMerge(DurableRun.layerEmbedded({ filename })),
          Layer.provide(payOnce)
        )
        // An API server beside the host cannot check a start against the host's code.
        yield* Effect.flatMap(DurableRun.DurableRuns, (runs) =>
          runs.start({ goal: "pay", runId: "api-1", limits: { maxIterations: 5 } })
        ).pipe(
          Effect.provide(
            DurableRun.layerClient.pipe(Layer.provideMerge(DurableRun.layerEmbedded({ filename, clientOnly: true })))
          )
        )
        // Before, its workflow died on the options and suspended: no result, and a cancel changed nothing.
        const result = yield* Effect.flatMap(DurableRun.DurableRuns, (runs) => runs.result("api-1")).pipe(
          Effect.timeout("20 seconds"),
          Effect.provide(host)
        )
        assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"])
        assert.include(result.detail, "limits.maxIterations")
        assert.deepStrictEqual(paid, [])
      }),
    60_000
  )

  it.live(
    "R9.4 a link to a database not made yet locks the file it leads to: a host on the file itself is refused",
    () =>
      Effect.gen(function* () {
        const { pay } = payments()
        const target = fileOf()
        const link = path.join(path.dirname(target), "link.db")
        fs.symlinkSync(target, link)
        yield* Effect.gen(function* () {
          const second = yield* Effect.exit(Layer.build(hostOn(target, pay)).pipe(Effect.scoped))
          assert.isTrue(second._tag === "Failure", "two hosts on one database")
        }).pipe(Effect.provide(hostOn(link, pay)))
      }),
    60_000
  )

  it.live(
    "R12 an embedded engine on no file (empty, :memory:), or with a duration that is none, is refused with StoreFailed",
    () =>
      Effect.gen(function* () {
        const bad = [
          { filename: "" },
          { filename: "  " },
          { filename: ":memory:" },
          { filename: fileOf(), shardingConfig: { entityTerminationTimeout: "soon" } }
        ]
        for (const options of bad) {
          // Boundary: a duration a caller without types may give.
          const layer = Effect.sync(() => DurableRun.layerEmbedded(options as DurableRun.EmbeddedOptions))
          const exit = yield* Effect.exit(Effect.flatMap(layer, (built) => Layer.build(built).pipe(Effect.scoped)))
          const reason = exit._tag === "Failure" ? Cause.squash(exit.cause) : undefined
          assert.isTrue(
            reason instanceof JournalError.JournalError && reason.reason._tag === "StoreFailed",
            `${JSON.stringify(options)}: ${String(reason)}`
          )
        }
        // A plain journal on an empty name or a durability it does not know is refused too.
        for (const options of [{ filename: "" }, { filename: fileOf(), synchronous: "full" }]) {
          const exit = yield* Effect.exit(
            // Boundary: a JavaScript caller's options, which the types would refuse.
            Layer.build(Journal.layerSqlite(options as Journal.SqliteOptions)).pipe(Effect.scoped)
          )
          const reason = exit._tag === "Failure" ? Cause.squash(exit.cause) : undefined
          assert.instanceOf(reason, JournalError.JournalError, JSON.stringify(options))
        }
      })
  )
})

describe("DurableRun: a run whose model has not answered yet (R9)", () => {
  it.live(
    "R9 a run whose model has not answered yet is known: poll says not finished, a cancel reaches it",
    () =>
      Effect.gen(function* () {
        const slow = ScriptedModel.layerFunction(() =>
          Effect.as(Effect.sleep("2 seconds"), ScriptedModel.finalAnswer("late"))
        )
        const { pay } = payments()
        return yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          const runId = yield* runs.start({ goal: "think", runId: "g1" })
          yield* Effect.sleep(300)
          assert.isTrue(Option.isNone(yield* runs.poll(runId)))
          // Its start is in the journal before the model is asked: no response yet.
          assert.deepStrictEqual(
            (yield* runs.events(runId)).map((e) => e._tag),
            ["run.started", "state.changed", "state.changed"]
          )
          yield* runs.cancel(runId)
          const result = yield* runs.result(runId)
          assert.strictEqual(result.status, "cancelled", result.detail)
        }).pipe(Effect.provide(runtime([pay], slow)))
      }),
    30_000
  )
})

describe("DurableRun: rolling upgrades (R9)", () => {
  it.live(
    "R9 a runner that cannot go on with a run (its tool changed) leaves it waiting, not failed; a runner with the code finishes it",
    () =>
      Effect.gen(function* () {
        const filename = fileOf()
        const { paid, pay } = payments()
        const changed = Tool.make({
          name: "pay",
          description: "Pays an amount in a currency.",
          input: Schema.Struct({ amount: Schema.Number, currency: Schema.String }),
          output: Schema.Struct({ receipt: Schema.String }),
          sideEffect: "external",
          needsApproval: true,
          handler: () => Effect.die(new Error("the changed tool must never run for the old run"))
        })
        const on = <T extends Tool.Any>(tools: ReadonlyArray<T>) =>
          DurableRun.layer({ tools }).pipe(
            Layer.provideMerge(DurableRun.layerEmbedded({ filename })),
            Layer.provide(payOnce)
          )
        // The old code parks the run on its approval.
        const callId = yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          yield* runs.start({ goal: "pay", runId: "u1" })
          return yield* waitingCall(runs, "u1")
        }).pipe(Effect.provide(on([pay])))
        // New code whose `pay` changed: approving wakes the run, which cannot go on here and waits.
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          yield* runs.approve("u1", callId, { by: "ops" })
          for (let i = 0; i < 100; i++) {
            const polled = yield* DurableRun.RunWorkflow.poll(
              yield* DurableRun.RunWorkflow.executionId({ runId: "u1", goal: "" })
            )
            if (Option.isSome(polled) && polled.value._tag === "Suspended" && polled.value.failed === true) break
            yield* Effect.sleep(50)
          }
          assert.isTrue(Option.isNone(yield* runs.poll("u1")), "the run ended on a runner that could not go on with it")
          assert.notInclude(tagsOf(yield* runs.events("u1")), "run.finished")
        }).pipe(Effect.provide(on([changed])))
        assert.deepStrictEqual(paid, [])
        // A runner with the code the run needs takes it up when it starts, and finishes it.
        const result = yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          return yield* runs.result("u1")
        }).pipe(Effect.provide(on([pay])))
        assert.strictEqual(result.status, "completed", result.detail)
        assert.deepStrictEqual(paid, [`u1:${callId}`])
      }),
    60_000
  )
})

describe("DurableRun: a run whose log cannot be read (R9)", () => {
  const damages = [
    // A commit before the last one no longer reads (review 180).
    "UPDATE agent_commits SET body = '[not json' WHERE run_id = 'd1' AND seq = (SELECT MIN(seq) FROM agent_commits WHERE run_id = 'd1' AND seq > 0)",
    // Every row reads, but the header is no run's (review 184).
    "UPDATE agent_runs SET header = '{}' WHERE run_id = 'd1'"
  ]
  for (const damage of damages) {
    it.live(
      `R9 a run whose log is damaged: poll and result fail corrupt, not wait forever (reviews 180, 184): ${damage.slice(0, 40)}`,
      () =>
        Effect.gen(function* () {
          const filename = fileOf()
          const { paid, pay } = payments()
          const result = yield* Effect.gen(function* () {
            const runs = yield* DurableRun.DurableRuns
            yield* runs.start({ goal: "pay", runId: "d1" })
            const callId = yield* waitingCall(runs, "d1")
            // The runner cannot go on with the run once it reads it again.
            const { DatabaseSync } = yield* Effect.promise(() => import("node:sqlite"))
            const db = new DatabaseSync(filename)
            const damaged = db.prepare(damage).run()
            db.close()
            assert.strictEqual(damaged.changes, 1)
            // Before the runner tried it, the run is not finished: its last commit reads.
            assert.isTrue(Option.isNone(yield* runs.poll("d1")))
            yield* runs.approve("d1", callId, { by: "ops" })
            return yield* Effect.result(runs.result("d1").pipe(Effect.timeout("20 seconds")))
          }).pipe(Effect.provide(hostOn(filename, pay)))
          assert.strictEqual(result._tag, "Failure")
          if (result._tag === "Failure") {
            assert.strictEqual(result.failure._tag, "DurableRunError", String(result.failure))
            assert.strictEqual((result.failure as DurableRun.DurableRunError).reason, "corrupt", String(result.failure))
          }
          assert.deepStrictEqual(paid, [])
        }),
      60_000
    )
  }
})

describe("DurableRun: a run another process took over (R9.4)", () => {
  /** A runner on `filename` that takes back a run another process took over once it is quiet for a second. */
  const runnerOn = <T extends Tool.Any>(filename: string, tools: ReadonlyArray<T>, model: Layer.Layer<Model.Model>) =>
    DurableRun.layer({ tools }, { takeBackAfter: "1 second" }).pipe(
      Layer.provideMerge(DurableRun.layerEmbedded({ filename })),
      Layer.provide(model)
    )

  /** The run's workflow once it has completed (10 s at most): its status. */
  const completed = (runId: string) =>
    Effect.gen(function* () {
      const executionId = yield* DurableRun.RunWorkflow.executionId({ runId, goal: "" })
      for (let i = 0; i < 200; i++) {
        const polled = yield* DurableRun.RunWorkflow.poll(executionId)
        if (Option.isSome(polled) && polled.value._tag === "Complete") return polled.value.exit
        yield* Effect.sleep(50)
      }
      return yield* Effect.die(new Error(`the workflow of ${runId} never completed`))
    })

  /**
   * Starts `runId` on the runner and, while the runner's second model call is slow, resumes it
   * in another process on the same file (whose journal is `faults`'s): that process's run.
   */
  const startThenTakeOver = <T extends Tool.Any>(
    runId: string,
    tools: ReadonlyArray<T>,
    taken: ReturnType<typeof takeoverModel>,
    faults: FaultyJournal.Faults
  ) =>
    Effect.gen(function* () {
      const journal = yield* Journal.Journal
      yield* (yield* DurableRun.DurableRuns).start({ goal: "pay", runId })
      while (taken.secondAsked() === 0) yield* Effect.sleep(5)
      const otherProcess = FaultyJournal.make(journal, faults)
      const resumed = Run.resume(runId, { tools }).pipe(
        Effect.provide(Layer.merge(taken.layer, JournalApprovals.layer())),
        Effect.provideService(Journal.Journal, otherProcess.journal)
      )
      return { journal, otherProcess, resumed }
    })

  it.live(
    "R9.4 a runner fenced off by a process that goes on with the run leaves it to that process, and its workflow ends with that process's ending (reviews 134, 137)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = payments()
        // The runner's second model call is slow; meanwhile another process resumes the run, and
        // its model asks for a payment, which waits there for a person.
        const taken = takeoverModel()
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          const { journal, resumed } = yield* startThenTakeOver("t1", [look, pay], taken, {})
          const owner = yield* Effect.forkChild(resumed)
          while ((yield* journal.pendingApprovals({ runId: "t1" })).length === 0) yield* Effect.sleep(5)
          // Past the take-back time: the owner's call waits for a person, so the run is still the owner's.
          yield* Effect.sleep("2500 millis")
          // Before, the workflow drove the run again on `running` and took it back from its owner.
          const resumes = (yield* runs.events("t1")).filter((e) => e._tag === "run.resumed")
          assert.strictEqual(resumes.length, 1)
          yield* JournalApprovals.make(journal).decide("t1", "c2", Approval.approved("ops"))
          const owned = yield* Fiber.join(owner)
          assert.strictEqual(owned.stopReason, "goal_reached", owned.detail)
          // The runner's workflow ends with the run (it was left suspended for good: review 137).
          assert.deepStrictEqual(yield* completed("t1"), Exit.succeed("completed"))
        }).pipe(Effect.provide(runnerOn(fileOf(), [look, pay], taken.layer)))
        assert.deepStrictEqual(paid, ["t1:c2"])
      }),
    30_000
  )

  it.live(
    "R9.4 a run taken over by a process that then died is taken back once its log goes quiet, and finished (review 137)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = payments()
        const taken = takeoverModel()
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          // Another process takes the run over (its run.resumed is committed) and dies at once.
          const dying = yield* startThenTakeOver("t2", [look, pay], taken, { crashAt: { commit: 1, when: "after" } })
          yield* Effect.exit(dying.resumed)
          assert.isTrue(dying.otherProcess.crashed())
          // The runner, fenced off, takes the run back once it is quiet: its call is put up again.
          const callId = yield* waitingCall(runs, "t2")
          yield* runs.approve("t2", callId, { by: "ops" })
          const result = yield* runs.result("t2")
          assert.strictEqual(result.status, "completed", result.detail)
          assert.deepStrictEqual(yield* completed("t2"), Exit.succeed("completed"))
        }).pipe(Effect.provide(runnerOn(fileOf(), [look, pay], taken.layer)))
        assert.deepStrictEqual(paid, ["t2:c2"])
      }),
    30_000
  )

  it.live(
    "R9.4 R3.8 a live owner in a call longer than the take-back time keeps the run: the payment is made once (review 139)",
    () =>
      Effect.gen(function* () {
        const paid: Array<string> = []
        // A payment (no approval) whose bank takes 3 s; its status query says truly whether it went out.
        const slowPay = Tool.make({
          name: "pay",
          description: "Pays an amount; the bank takes 3 s.",
          input: Schema.Struct({ amount: Schema.Number }),
          output: Schema.Struct({ receipt: Schema.String }),
          sideEffect: "external",
          handler: ({ amount }, context) =>
            Effect.as(
              Effect.andThen(
                Effect.sleep("3 seconds"),
                Effect.sync(() => paid.push(context.idempotencyKey))
              ),
              { receipt: `r-${amount}` }
            ),
          reconcile: (_input, context) =>
            Effect.sync(() =>
              paid.includes(context.idempotencyKey)
                ? { _tag: "Applied" as const, output: { receipt: "r-5" } }
                : { _tag: "NotApplied" as const }
            )
        })
        const taken = takeoverModel()
        yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          const { resumed } = yield* startThenTakeOver("s1", [look, slowPay], taken, {})
          const owned = yield* resumed
          // Before, the runner took the run back after 1 s of quiet, found the call in doubt, was told
          // it had not gone out (it had not, yet), and paid again; the owner was fenced off.
          assert.strictEqual(owned.stopReason, "goal_reached", owned.detail)
          const result = yield* runs.result("s1")
          assert.strictEqual(result.status, "completed", result.detail)
          assert.deepStrictEqual(yield* completed("s1"), Exit.succeed("completed"))
        }).pipe(Effect.provide(runnerOn(fileOf(), [look, slowPay], taken.layer)))
        assert.deepStrictEqual(paid, ["s1:c2"])
      }),
    30_000
  )

  it.effect("R12 a take-back time that is not a positive, finite duration fails the layer, naming it", () =>
    Effect.gen(function* () {
      for (const takeBackAfter of [0, -1, "forever", Number.POSITIVE_INFINITY]) {
        const refused = yield* Effect.flip(
          Layer.build(
            DurableRun.layer({ tools: [] }, { takeBackAfter: takeBackAfter as Duration.Input }).pipe(
              Layer.provide(DurableRun.layerEmbedded({ filename: fileOf() })),
              Layer.provide(payOnce)
            )
          ).pipe(Effect.scoped)
        )
        assert.strictEqual(refused._tag, "InvalidRunOptions")
        assert.include(refused.message, "takeBackAfter")
      }
    })
  )
})

describe("DurableRun: hostile input and edges (R5, R7, R12)", () => {
  it.live(
    "R5.2 a cancel while a non-idempotent handler runs ends the run cancelled, the call's outcome said unknown",
    () =>
      Effect.gen(function* () {
        const entered = yield* Deferred.make<void>()
        const send = Tool.make({
          name: "send",
          description: "Sends a wire transfer; never answers.",
          input: Schema.Struct({}),
          output: Schema.Struct({}),
          sideEffect: "external",
          handler: () => Effect.andThen(Deferred.succeed(entered, undefined), Effect.never)
        })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1 ? ScriptedModel.toolCall("send", {}, "s1") : ScriptedModel.finalAnswer("sent")
        )
        return yield* Effect.gen(function* () {
          const runs = yield* DurableRun.DurableRuns
          const runId = yield* runs.start({ goal: "send", runId: "h1" })
          yield* Deferred.await(entered)
          yield* runs.cancel(runId)
          const result = yield* runs.result(runId)
          assert.strictEqual(result.status, "cancelled", result.detail)
          assert.strictEqual(result.stopReason, "cancelled")
          const tags = tagsOf(result.timeline)
          assert.strictEqual(tags.filter((t) => t === "run.finished").length, 1)
          assert.include(tags, "run.stopping")
          // The transfer may have gone out: it is pending, to reconcile, not said undone.
          assert.deepStrictEqual(
            result.pendingActions.map((a) => a.callId),
            ["s1"]
          )
        }).pipe(Effect.provide(runtime([send], model)))
      }),
    30_000
  )

  it.live(
    "R7 an approval that expires in under a second can still be approved from the runs' service",
    () => {
      const { paid, pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "i1", time: { approval: "900 millis" } })
        const callId = yield* waitingCall(runs, runId)
        yield* runs.approve(runId, callId, { by: "ops" })
        const result = yield* runs.result(runId)
        assert.strictEqual(result.status, "completed", result.detail)
        assert.deepStrictEqual(paid, [`i1:${callId}`])
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )

  it.live(
    "R12 a run id that no store can hold (a NUL, a control character) is refused at start; nothing is started",
    () => {
      const { pay } = payments()
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        for (const runId of ["a\u0000b", "line\nbreak", "x".repeat(300)]) {
          const refused = yield* Effect.flip(runs.start({ goal: "pay", runId }))
          assert.strictEqual(refused._tag, "InvalidRunOptions")
          assert.include(refused.message, "runId")
        }
        assert.deepStrictEqual(yield* runs.pending(), [])
        const unknown = yield* Effect.flip(runs.poll("a\u0000b"))
        assert.strictEqual(unknown._tag === "DurableRunError" ? unknown.reason : unknown._tag, "not_found")
      }).pipe(Effect.provide(runtime([pay])))
    },
    30_000
  )

  it.live(
    "R12 a decision the store cannot take now is a typed `unavailable`, not a defect; the call stays pending",
    () => {
      const { pay } = payments()
      // A client whose journal cannot write decisions, on the same engine and file.
      const client = clientWhoseDecisionsFail(
        runtime([pay]),
        new JournalError.Unavailable({ operation: "decide", detail: "unreachable (by the test)" })
      )
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "j1" })
        const callId = yield* waitingCall(runs, runId)
        const failed = yield* Effect.flip(runs.approve(runId, callId))
        assert.strictEqual(failed._tag, "DurableRunError")
        assert.strictEqual(failed._tag === "DurableRunError" ? failed.reason : "", "unavailable")
        const rejected = yield* Effect.flip(runs.reject(runId, callId, "no"))
        assert.strictEqual(rejected._tag === "DurableRunError" ? rejected.reason : rejected._tag, "unavailable")
        assert.deepStrictEqual(
          (yield* runs.pending(runId)).map((r) => r.callId),
          [callId]
        )
      }).pipe(Effect.provide(client))
    },
    30_000
  )

  it.live(
    "R9 a store out of reach for a moment while result() and watch wait: they wait on, and give the run's end",
    () => {
      const { paid, pay } = payments()
      const base = runtime([pay])
      let failing = 0
      // A client whose journal reads fail while `failing` lasts, on the same engine and file.
      const client = clientOver(base, (journal) => ({
        read: (runId: string) =>
          Effect.suspend(() =>
            failing-- > 0
              ? Effect.fail(
                  JournalError.make(
                    new JournalError.Unavailable({ operation: "read", detail: "connection closed (the test)" })
                  )
                )
              : journal.read(runId)
          )
      }))
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "w1" })
        const callId = yield* waitingCall(runs, runId)
        const result = yield* Effect.forkChild(runs.result(runId))
        const watched = yield* Effect.forkChild(Stream.runCollect(runs.watch(runId, { pollInterval: "50 millis" })))
        yield* Effect.sleep(300)
        failing = 3
        yield* runs.approve(runId, callId, { by: "ops" })
        assert.strictEqual((yield* Fiber.join(result)).status, "completed")
        assert.strictEqual(tagsOf(yield* Fiber.join(watched)).at(-1), "run.finished")
        assert.lengthOf(paid, 1)
      }).pipe(Effect.provide(client))
    },
    30_000
  )

  it.live(
    "R12 runner settings that cannot work fail the layer when it is built, with a typed InvalidRunOptions",
    () => {
      const { pay } = payments()
      const broken = DurableRun.layer({ tools: [pay] }, { pollInterval: "soon" as never }).pipe(
        Layer.provideMerge(DurableRun.layerEmbedded({ filename: fileOf() })),
        Layer.provide(payOnce)
      )
      return Effect.gen(function* () {
        const refused = yield* Effect.flip(Effect.provide(Effect.service(DurableRun.DurableRuns), broken))
        assert.strictEqual(refused._tag, "InvalidRunOptions")
        if (refused._tag === "InvalidRunOptions") assert.deepStrictEqual(refused.path, ["pollInterval"])
      })
    }
  )

  it.live(
    "R12 a store that refuses a decision (neither out of reach nor unreadable) is `failed`; the call stays pending",
    () => {
      const { pay } = payments()
      const client = clientWhoseDecisionsFail(
        runtime([pay]),
        new JournalError.StoreFailed({ operation: "decide", detail: "refused (by the test)" })
      )
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "j2" })
        const callId = yield* waitingCall(runs, runId)
        const failed = yield* Effect.flip(runs.approve(runId, callId))
        assert.strictEqual(failed._tag === "DurableRunError" ? failed.reason : failed._tag, "failed")
        assert.deepStrictEqual(
          (yield* runs.pending(runId)).map((r) => r.callId),
          [callId]
        )
      }).pipe(Effect.provide(client))
    },
    30_000
  )

  it.live(
    "R9 a store out of reach when a run is woken is waited for: the run goes on once it answers, it is not left suspended",
    () => {
      const { paid, pay } = payments()
      // The runner's journal: `failReads` reads fail as a store out of reach would.
      let failReads = 0
      const flaky = Layer.effect(
        Journal.Journal,
        Effect.map(Effect.service(Journal.Journal), (journal) => ({
          ...journal,
          read: (runId: string) =>
            Effect.suspend(() => {
              if (failReads === 0) return journal.read(runId)
              failReads--
              return Effect.fail(
                JournalError.make(
                  new JournalError.Unavailable({ operation: "read", detail: "unreachable (by the test)" })
                )
              )
            })
        }))
      )
      const engine = DurableRun.layerEmbedded({ filename: fileOf() })
      const layer = DurableRun.layer({ tools: [pay] }).pipe(
        Layer.provide(flaky),
        Layer.provideMerge(engine),
        Layer.provide(payOnce)
      )
      return Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        const runId = yield* runs.start({ goal: "pay", runId: "k1" })
        const callId = yield* waitingCall(runs, runId)
        failReads = 3
        yield* runs.approve(runId, callId, { by: "ops" })
        while (failReads > 0) yield* Effect.sleep(50)
        const result = yield* runs.result(runId)
        assert.strictEqual(result.status, "completed", result.detail)
        assert.deepStrictEqual(paid, [`k1:${callId}`])
      }).pipe(Effect.provide(layer))
    },
    30_000
  )
})
