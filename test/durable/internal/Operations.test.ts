/**
 * The operations of `DurableRuns` against a store that does not answer, or whose engine
 * storage is out of reach (R3.1, R9): each is a typed `unavailable`, in bounded time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option, Stream } from "effect"
import { ClusterError, type MessageStorage, type Sharding } from "effect/cluster"
import { TestClock } from "effect/testing"
import { Workflow, type WorkflowEngine } from "effect/workflow"
import { DurableRunError } from "../../../src/durable/DurableRuns.ts"
import * as Operations from "../../../src/durable/internal/Operations.ts"
import * as Journal from "../../../src/journal/Journal.ts"
import * as RunHeader from "../../../src/run/journal/internal/RunHeader.ts"
import { changed, started } from "../../journal/contract.ts"

const memory = Effect.map(Layer.build(Journal.layerMemory), (context) => Context.get(context, Journal.Journal))

/** Services whose engine and storage the test never reaches, or whose engine fails as a storage out of reach does. */
const servicesOf = (journal: Journal.Service, engine: Partial<WorkflowEngine.WorkflowEngine["Service"]> = {}) =>
  ({
    journal,
    // Erased boundary: stubs of the engine's services, with only what the operation under test calls.
    engine: engine as WorkflowEngine.WorkflowEngine["Service"],
    sharding: {} as Sharding.Sharding["Service"],
    storage: {} as MessageStorage.MessageStorage["Service"]
  }) satisfies Operations.Services

describe("DurableRuns operations (R9)", () => {
  it.effect("R9 R12 a store that does not answer is unavailable after 10 s, not a wait as long as the outage", () =>
    Effect.gen(function* () {
      const inner = yield* memory
      const hung: Journal.Service = { ...inner, read: () => Effect.never, pendingApprovals: () => Effect.never }
      const runs = Operations.make(servicesOf(hung), () => Effect.void)
      const operations: ReadonlyArray<Effect.Effect<unknown, unknown>> = [
        runs.poll("r1"),
        runs.pending("r1"),
        runs.events("r1")
      ]
      for (const operation of operations) {
        const fiber = yield* Effect.forkChild(Effect.flip(operation))
        yield* TestClock.adjust("10 seconds")
        const error = yield* Fiber.join(fiber)
        assert.instanceOf(error, DurableRunError)
        assert.strictEqual(error instanceof DurableRunError ? error.reason : undefined, "unavailable")
        assert.include(error instanceof DurableRunError ? error.message : "", "did not answer within 10 s")
      }
    })
  )

  it.effect(
    "R9 R13 a watcher reads what is new at each poll, and a poll reads the last commit alone, not the whole log",
    () =>
      Effect.gen(function* () {
        const inner = yield* memory
        const reads: Array<{ readonly fromSeq: number | undefined; readonly events: number }> = []
        const counted: Journal.Service = {
          ...inner,
          read: (runId, options) =>
            Effect.tap(inner.read(runId, options), (found) =>
              Effect.sync(() => {
                reads.push({ fromSeq: options?.fromSeq, events: Option.isSome(found) ? found.value.events.length : 0 })
              })
            )
        }
        // An engine whose workflow of the run goes on (not suspended on a failure).
        const runs = Operations.make(
          servicesOf(counted, { poll: () => Effect.succeed(Option.none()) }),
          () => Effect.void
        )
        const all = Array.from({ length: 40 }, (_, seq) => (seq === 0 ? started("w") : changed("w", seq)))
        yield* inner.create({ runId: "w", header: {}, state: "created" })
        yield* inner.append("w", { expectedSeq: 0, events: all.slice(0, 10), state: "initializing" })
        const watched = yield* Effect.forkChild(Stream.runCollect(runs.watch("w", { pollInterval: "1 second" })))
        // Ten polls with nothing new, then the rest of the log in three commits, the last ending the run.
        yield* TestClock.adjust("10 seconds")
        yield* inner.append("w", { expectedSeq: 10, events: all.slice(10, 20), state: "tool_executing" })
        yield* TestClock.adjust("1 second")
        yield* inner.append("w", { expectedSeq: 20, events: all.slice(20, 30), state: "tool_executing" })
        yield* TestClock.adjust("1 second")
        assert.isTrue(Option.isNone(yield* runs.poll("w")))
        yield* inner.append("w", {
          expectedSeq: 30,
          events: all.slice(30),
          state: "completed",
          result: { status: "x" }
        })
        yield* TestClock.adjust("1 second")
        const seen = yield* Fiber.join(watched)
        assert.deepStrictEqual(seen, all, "every event once, in order")
        const watcherReads = reads.filter((read) => read.fromSeq !== Number.MAX_SAFE_INTEGER)
        assert.isAbove(watcherReads.length, 12)
        // Each event was read once: no read brought back what an earlier one had.
        assert.strictEqual(
          watcherReads.reduce((sum, read) => sum + read.events, 0),
          all.length
        )
        // The poll read from past the end: no event of the log.
        assert.deepStrictEqual(
          reads.filter((read) => read.fromSeq === Number.MAX_SAFE_INTEGER),
          [{ fromSeq: Number.MAX_SAFE_INTEGER, events: 0 }]
        )
      })
  )

  it.effect(
    "R9 a journal service of the user's that passes no fromSeq on: each event is watched once, in order, waiting between reads",
    () =>
      Effect.gen(function* () {
        const inner = yield* memory
        let reads = 0
        // Type-checks: a function of fewer parameters is one of more.
        const careless: Journal.Service = {
          ...inner,
          read: (runId) => Effect.tap(inner.read(runId), () => Effect.sync(() => reads++))
        }
        const runs = Operations.make(servicesOf(careless), () => Effect.void)
        const all = Array.from({ length: 12 }, (_, seq) => (seq === 0 ? started("w") : changed("w", seq)))
        yield* inner.create({ runId: "w", header: {}, state: "created" })
        yield* inner.append("w", { expectedSeq: 0, events: all.slice(0, 6), state: "initializing" })
        const watched = yield* Effect.forkChild(Stream.runCollect(runs.watch("w", { pollInterval: "1 second" })))
        yield* TestClock.adjust("3 seconds")
        yield* inner.append("w", { expectedSeq: 6, events: all.slice(6), state: "completed", result: { status: "x" } })
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* Fiber.join(watched), all)
        // One read a poll (and one after each read that brought something): no spin.
        assert.isAtMost(reads, 8)
      })
  )

  it.effect(
    "R9 a run suspended on a failure: its log is read whole once while it stays as it is; a damaged one is corrupt at each poll (review 184)",
    () =>
      Effect.gen(function* () {
        const inner = yield* memory
        let wholeReads = 0
        const counted: Journal.Service = {
          ...inner,
          read: (runId, options) =>
            Effect.tap(inner.read(runId, options), () =>
              Effect.sync(() => {
                if ((options?.fromSeq ?? 0) === 0) wholeReads++
              })
            )
        }
        // An engine whose workflow of every run is suspended on a failure.
        const engine = { poll: () => Effect.succeed(Option.some(new Workflow.Suspended({ failed: true }))) }
        const runs = Operations.make(servicesOf(counted, engine), () => Effect.void)
        const log = Array.from({ length: 50 }, (_, seq) => (seq === 0 ? started("w") : changed("w", seq)))
        // A run waiting for a runner with the code it needs: its log reads, it is not finished.
        yield* inner.create({ runId: "w", header: RunHeader.make(log[0], new Map(), "0".repeat(64)), state: "created" })
        yield* inner.append("w", { expectedSeq: 0, events: log.slice(0, 40), state: "tool_executing" })
        for (let i = 0; i < 10; i++) assert.isTrue(Option.isNone(yield* runs.poll("w")))
        assert.strictEqual(wholeReads, 1)
        // The log moved on: read whole again, once.
        yield* inner.append("w", { expectedSeq: 40, events: log.slice(40), state: "tool_executing" })
        for (let i = 0; i < 10; i++) assert.isTrue(Option.isNone(yield* runs.poll("w")))
        assert.strictEqual(wholeReads, 2)
        // A header that is no run's: corrupt, at every poll, read once.
        yield* inner.create({ runId: "d", header: {}, state: "created" })
        yield* inner.append("d", { expectedSeq: 0, events: [started("d")], state: "tool_executing" })
        for (let i = 0; i < 10; i++) {
          const error = yield* Effect.flip(runs.poll("d"))
          assert.strictEqual(error.reason, "corrupt")
        }
        assert.strictEqual(wholeReads, 3)
      })
  )

  it.effect("R3.1 a start whose engine storage is out of reach is a typed unavailable, not a defect", () =>
    Effect.gen(function* () {
      const journal = yield* memory
      const engine = {
        execute: () => Effect.die(new ClusterError.PersistenceError({ cause: new Error("connection refused") }))
      } as unknown as Partial<WorkflowEngine.WorkflowEngine["Service"]>
      const runs = Operations.make(servicesOf(journal, engine), () => Effect.void)
      const error = yield* Effect.flip(runs.start({ goal: "g", runId: "r1" }))
      assert.strictEqual(error._tag === "DurableRunError" ? error.reason : undefined, "unavailable")
    })
  )
})
