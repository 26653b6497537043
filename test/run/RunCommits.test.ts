import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { deaf } from "../support/tools.ts"

const echo = Tool.make({
  name: "echo",
  description: "Returns its input.",
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Struct({ n: Schema.Number }),
  sideEffect: "read",
  idempotent: true,
  handler: ({ n }) => Effect.succeed({ n })
})

/** A payment that is no idempotent action, and how many times it ran. */
const ledger = () => {
  let paid = 0
  const pay = Tool.make({
    name: "pay",
    description: "Pays.",
    input: Schema.Struct({ n: Schema.Number }),
    output: Schema.Struct({ paid: Schema.Boolean }),
    sideEffect: "external",
    handler: () =>
      Effect.sync(() => {
        paid++
        return { paid: true }
      })
  })
  return { pay, payments: () => paid }
}

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("echo", { n: 1 }) : ScriptedModel.finalAnswer("done")
)

describe("Durable runs: what a run commits (R9)", () => {
  it.effect(
    "R9 a typed output that is not JSON (a bigint) still leaves the run finished in the journal, without it",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        const answer = ScriptedModel.layerFunction(() => ScriptedModel.finalAnswer('{"n":"12"}'))
        const first = yield* Run.run({
          goal: "count",
          runId: "big",
          tools: [echo],
          output: Schema.Struct({ n: Schema.BigIntFromString })
        }).pipe(Effect.provide(answer))
        assert.strictEqual(first.status, "completed")
        assert.deepStrictEqual(first.output, { n: 12n })
        const stored = Option.getOrThrow(yield* journal.read("big"))
        assert.isTrue(Option.isSome(stored.result), "the run is finished in the journal")
        assert.deepStrictEqual(yield* journal.unfinished, [])
        const again = yield* Run.resume("big", { tools: [echo] }).pipe(Effect.provide(answer))
        assert.strictEqual(again.status, "completed")
        assert.strictEqual(again.finalAnswer, first.finalAnswer)
        assert.isUndefined(again.output)
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R9 the result is committed without a second copy of its log, and a resumed run gives the whole result back",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        const first = yield* Run.run({ goal: "echo", runId: "r1", tools: [echo] }).pipe(Effect.provide(model))
        const stored = Option.getOrThrow(yield* journal.read("r1"))
        const result = Option.getOrThrow(stored.result) as { readonly timeline: ReadonlyArray<unknown> }
        assert.deepStrictEqual(result.timeline, [])
        assert.strictEqual(stored.events.length, first.timeline.length)
        const again = yield* Run.resume("r1", { tools: [echo] }).pipe(Effect.provide(model))
        assert.deepStrictEqual(again, first)
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R9 the first commit's append unreachable once after its row was created: the retry only appends, the run completes",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n === 1 })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "echo", runId: "r1", tools: [echo] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(model)
          )
        )
        assert.strictEqual(result.status, "completed")
        const stored = Option.getOrThrow(yield* store.read("r1"))
        assert.strictEqual(stored.events.length, result.timeline.length)
        assert.isTrue(Option.isSome(stored.result))
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R9 commits written but their replies lost (a connection cut after the commit): each retry finds its own, the payment runs once",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const { pay, payments } = ledger()
        // Every other try loses its reply (the retry of each is the next try), and four in a row
        // once, so the barrier gives up and the next one sends that commit again with more.
        const faulty = FaultyJournal.make(store, { lostReplyOn: (n) => n % 2 === 1 || (n >= 4 && n <= 8) })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "pay", runId: "r1", tools: [pay] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("pay", { n: 1 }), ScriptedModel.finalAnswer("paid")])
            )
          )
        )
        assert.strictEqual(result.status, "completed", result.detail)
        assert.strictEqual(payments(), 1)
        const stored = Option.getOrThrow(yield* store.read("r1"))
        assert.strictEqual(stored.events.length, result.timeline.length)
        assert.isTrue(Option.isSome(stored.result))
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R9 two processes starting one run id with identical events (TestClock, a scripted model): one owns it, the payment runs once",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        // Each call of the store yields, so the two runs' commits interleave.
        const interleaved: Journal.Service = {
          ...store,
          create: (run) => Effect.andThen(Effect.yieldNow, store.create(run)),
          append: (runId, batch) => Effect.andThen(Effect.yieldNow, store.append(runId, batch)),
          read: (runId) => Effect.andThen(Effect.yieldNow, store.read(runId))
        }
        const { pay, payments } = ledger()
        const once = () =>
          Run.run({ goal: "pay", runId: "r1", tools: [pay] }).pipe(
            Effect.provideService(Journal.Journal, interleaved),
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("pay", { n: 1 }), ScriptedModel.finalAnswer("paid")])
            )
          )
        const results = yield* TestClockDriver.drive(Effect.all([once(), once()], { concurrency: 2 }))
        assert.strictEqual(payments(), 1)
        assert.deepStrictEqual(results.map((r) => r.status).toSorted(), ["completed", "failed"])
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R9 the run's row created but the reply lost: the retry finds it, the run goes on", () =>
    Effect.gen(function* () {
      const store = yield* Journal.Journal
      let creates = 0
      const lostCreate: Journal.Service = {
        ...store,
        create: (run) =>
          Effect.andThen(
            store.create(run),
            ++creates === 1
              ? Effect.fail(
                  JournalError.make(
                    new JournalError.Unavailable({ operation: "create", detail: "reply lost (the test)" })
                  )
                )
              : Effect.void
          )
      }
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "echo", runId: "r1", tools: [echo] }).pipe(
          Effect.provideService(Journal.Journal, lostCreate),
          Effect.provide(model)
        )
      )
      assert.strictEqual(result.status, "completed", result.detail)
      assert.strictEqual(creates, 2)
      assert.strictEqual(Option.getOrThrow(yield* store.read("r1")).events.length, result.timeline.length)
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R9 a store out of reach at the final commit of a run that ended by itself is waited for: the journal holds the result its caller got",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const runOn = (journal: Journal.Service, runId: string) =>
          TestClockDriver.drive(
            Run.run({ goal: "echo", runId, tools: [echo] }).pipe(
              Effect.provideService(Journal.Journal, journal),
              Effect.provide(model)
            )
          )
        // How many commits the run makes: the last is its final one.
        const counted = FaultyJournal.make(store, {})
        yield* runOn(counted.journal, "r0")
        const last = counted.commits()
        // The first eight tries of the final commit find the store down (a brief retry gives up after five).
        const faulty = FaultyJournal.make(store, { unavailableOn: (n) => n >= last && n < last + 8 })
        const result = yield* runOn(faulty.journal, "r1")
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(faulty.commits(), last + 8)
        const stored = Option.getOrThrow(yield* store.read("r1"))
        assert.isTrue(Option.isSome(stored.result), "the journal holds the run's result")
        assert.strictEqual(stored.events.length, result.timeline.length)
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  /** A store whose appends wait `millis` of real time, as a PostgreSQL round trip does. */
  const slow = (store: Journal.Service, millis: number): Journal.Service => ({
    ...store,
    append: (runId, batch) => Effect.andThen(Effect.sleep(millis), store.append(runId, batch))
  })

  it.live("R9 R5.1 a cancel that comes during a slow commit stops the run cancelled, its ending in the journal", () =>
    Effect.gen(function* () {
      const store = yield* Journal.Journal
      const handle = yield* Run.start({ goal: "echo", runId: "r1", tools: [echo] }).pipe(
        Effect.provideService(Journal.Journal, slow(store, 200)),
        Effect.provide(model)
      )
      yield* Effect.sleep("50 millis") // inside the first commit
      const result = yield* handle.cancel
      assert.strictEqual(result.stopReason, "cancelled")
      const stored = Option.getOrThrow(yield* store.read("r1"))
      assert.isTrue(Option.isSome(stored.result), "the ending is committed: the run is not left to be resumed")
      assert.deepStrictEqual(yield* store.unfinished, [])
    }).pipe(Effect.scoped, Effect.provide(Journal.layerMemory))
  )

  it.live(
    "R9 R12 a commit the store holds past the stop grace: the left-behind detail names the store, not user code",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const handle = yield* Run.start({
          goal: "echo",
          runId: "r1",
          tools: [echo],
          time: { stopGrace: "100 millis" }
        }).pipe(Effect.provideService(Journal.Journal, slow(store, 600)), Effect.provide(model))
        yield* Effect.sleep("50 millis") // inside the first commit
        const result = yield* handle.cancel
        assert.strictEqual(result.stopReason, "cancelled")
        assert.include(result.detail, "its journal's store held a commit past the stop grace of 100 ms")
        assert.notInclude(result.detail, "what it interrupted")
      }).pipe(Effect.scoped, Effect.provide(Journal.layerMemory))
  )

  it.live(
    "R9.2 R5.2 a call whose intent record the store holds past the stop grace never ran: cancelled, not in doubt",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        let ran = 0
        let holding = false
        // The store holds the commit of the payment's intent record for 1.5 s; every other is quick.
        const holdsIntent: Journal.Service = {
          ...store,
          append: (runId, batch) => {
            const intent = batch.events.some((e) => e._tag === "tool.started")
            if (!intent || holding) return store.append(runId, batch)
            holding = true
            return Effect.andThen(Effect.sleep("1500 millis"), store.append(runId, batch))
          }
        }
        const pay = Tool.make({
          name: "pay",
          description: "Pays",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          handler: () =>
            Effect.sync(() => {
              ran++
              return "paid"
            })
        })
        const handle = yield* Run.start({
          goal: "pay",
          runId: "r1",
          tools: [pay],
          time: { stopGrace: "200 millis" }
        }).pipe(
          Effect.provideService(Journal.Journal, holdsIntent),
          Effect.provide(
            ScriptedModel.layer([ScriptedModel.toolCall("pay", {}, "c1"), ScriptedModel.finalAnswer("done")])
          )
        )
        while (!holding) yield* Effect.sleep("5 millis")
        const result = yield* handle.cancel
        assert.strictEqual(ran, 0)
        assert.strictEqual(result.stopReason, "cancelled")
        const [interrupted] = result.timeline.filter((e) => e._tag === "tool.interrupted")
        assert.strictEqual(interrupted?._tag === "tool.interrupted" ? interrupted.settlement : undefined, "cancelled")
        assert.include(interrupted?._tag === "tool.interrupted" ? interrupted.detail : "", "it never ran")
        assert.deepStrictEqual(result.pendingActions, [])
      }).pipe(Effect.scoped, Effect.provide(Journal.layerMemory))
  )

  it.live("R9 R3.11 the run deadline during a slow commit: run_timeout, not a dead process", () =>
    Effect.gen(function* () {
      const store = yield* Journal.Journal
      const result = yield* Run.run({ goal: "echo", runId: "r1", tools: [echo], time: { run: "100 millis" } }).pipe(
        Effect.provideService(Journal.Journal, slow(store, 300)),
        Effect.provide(model)
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.isTrue(Option.isSome(Option.getOrThrow(yield* store.read("r1")).result))
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.live(
    "R9 R12 left behind, then the stuck handler ends while the ending is committed: the result comes once it is in the journal",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        // Every commit is quick but the last, with the result.
        const lastSlow: Journal.Service = {
          ...store,
          append: (runId, batch) =>
            Effect.andThen(Effect.sleep(batch.result === undefined ? 0 : 400), store.append(runId, batch))
        }
        // A handler that ignores interruption for a while, then ends: past the grace, while the ending is committed.
        const late = deaf("late", 400)
        const result = yield* Run.run({
          goal: "x",
          runId: "r1",
          tools: [late],
          time: { run: "200 millis", stopGrace: "100 millis" }
        }).pipe(
          Effect.provideService(Journal.Journal, lastSlow),
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("late", {}), ScriptedModel.finalAnswer("done")]))
        )
        assert.strictEqual(result.stopReason, "run_timeout")
        const stored = Option.getOrThrow(yield* store.read("r1"))
        assert.isTrue(Option.isSome(stored.result), "R9: the journal holds the ending the caller was given")
      }).pipe(Effect.provide(Journal.layerMemory))
  )
})
