import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { payingModel } from "../support/paying.ts"
import { assertRoundTrips } from "../support/schema.ts"
import { echo } from "../support/tools.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

/** A tool that waits forever, saying when it was entered and when it was interrupted. */
const makeHang = Effect.gen(function* () {
  const entered = yield* Deferred.make<void>()
  const interrupted = yield* Deferred.make<void>()
  const hang = Tool.make({
    name: "hang",
    description: "waits forever",
    input: Schema.Struct({}),
    output: Schema.String,
    handler: () =>
      Deferred.succeed(entered, undefined).pipe(
        Effect.andThen(Effect.never),
        Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
      )
  })
  return { entered, interrupted, hang }
})

/** A payment that needs approval. */
const pay = Tool.make({
  name: "pay",
  description: "Pay",
  input: Schema.Struct({}),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: () => Effect.succeed("paid")
})

/** A model that asks for `pay` (call `c1`), then answers; with the Node services. */
const payThenDone = Layer.merge(
  ScriptedModel.layerFunction((request) =>
    request.iteration === 1 ? ScriptedModel.toolCall("pay", {}, "c1") : ScriptedModel.finalAnswer("done")
  ),
  NodeServices.layer
)

describe("Run.start", () => {
  it.effect("R8 the live stream replays past events, then follows the run, and ends with run.finished", () =>
    Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [echo] })
      const streamed = yield* Stream.runCollect(handle.events)
      const result = yield* handle.result
      assert.deepStrictEqual(
        streamed.map((e) => e.seq),
        result.timeline.map((e) => e.seq)
      )
      assert.strictEqual(streamed[streamed.length - 1]?._tag, "run.finished")
      // A subscriber that arrives after the end still sees the whole timeline.
      const late = yield* Stream.runCollect(handle.events)
      assert.strictEqual(late.length, result.timeline.length)
    }).pipe(
      Effect.scoped,
      Effect.provide(withScript([ScriptedModel.toolCall("echo", { text: "a" }), ScriptedModel.finalAnswer("done")]))
    )
  )

  it.effect("R8 the handle's operations work taken off it, as values of their own", () =>
    Effect.gen(function* () {
      const { entered, hang } = yield* makeHang
      const { runId, state, cancel, result, pendingApprovals, approve } = yield* Run.start({ goal: "x", tools: [hang] })
      yield* Deferred.await(entered)
      assert.strictEqual(yield* state, "tool_executing")
      assert.deepStrictEqual(yield* pendingApprovals, [])
      assert.instanceOf(yield* Effect.flip(approve("call_1")), Approval.NotPending)
      const cancelled = yield* cancel
      assert.strictEqual(cancelled.status, "cancelled")
      assert.strictEqual((yield* result).runId, runId)
    }).pipe(Effect.scoped, Effect.provide(withScript([ScriptedModel.toolCall("hang", {})])))
  )

  it.effect("R5.1 cancel ends the run cancelled, interrupts the tool in flight, and starts no new action", () =>
    Effect.gen(function* () {
      const { entered, interrupted, hang } = yield* makeHang
      const handle = yield* Run.start({ goal: "x", tools: [hang, echo] })
      yield* Deferred.await(entered)
      assert.strictEqual(yield* handle.state, "tool_executing")
      const result = yield* handle.cancel
      assert.strictEqual(yield* handle.state, "cancelled")
      assert.strictEqual(result.status, "cancelled")
      assert.strictEqual(result.stopReason, "cancelled")
      assert.isTrue(yield* Deferred.isDone(interrupted))
      const tags = result.timeline.map((e) => e._tag)
      // The only model call is the one before the cancel; no tool starts after it.
      assert.strictEqual(tags.filter((t) => t === "model.requested").length, 1)
      assert.strictEqual(tags.filter((t) => t === "tool.started").length, 1)
      assert.strictEqual(tags[tags.length - 1], "run.finished")
    }).pipe(
      Effect.scoped,
      Effect.provide(withScript([ScriptedModel.toolCall("hang", {}), ScriptedModel.finalAnswer("never reached")]))
    )
  )

  it.effect("R2.1 R5.1 an answer a cancel cuts off is counted with what it cost so far", () =>
    Effect.gen(function* () {
      const asked = yield* Deferred.make<void>()
      // A model whose answer is coming, paid for, when the run is cancelled: it reports what it cost.
      const paying = payingModel(asked, { inputTokens: 1_000, outputTokens: 4_000, costUsd: 0.25 })
      const handle = yield* Run.start({ goal: "x", tools: [] }).pipe(Effect.provide(paying))
      yield* Deferred.await(asked)
      const result = yield* handle.cancel
      assert.strictEqual(result.stopReason, "cancelled")
      const failed = result.timeline.filter((e) => e._tag === "model.failed")
      assert.lengthOf(failed, 1)
      assert.deepStrictEqual(failed[0]?.usage, { inputTokens: 1_000, outputTokens: 4_000, costUsd: 0.25 })
      assert.strictEqual(result.counters.inputTokens, 1_000)
      assert.strictEqual(result.counters.outputTokens, 4_000)
      assert.strictEqual(result.counters.costUsd, 0.25)
      assertRoundTrips(result)
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer))
  )

  it.effect("R5.1 a cancel that cuts off an answer nothing was paid for records no failure", () =>
    Effect.gen(function* () {
      const asked = yield* Deferred.make<void>()
      const silent = Layer.succeed(Model.Model, {
        generate: () => Deferred.succeed(asked, undefined).pipe(Effect.andThen(Effect.never))
      })
      const handle = yield* Run.start({ goal: "x", tools: [] }).pipe(Effect.provide(silent))
      yield* Deferred.await(asked)
      const result = yield* handle.cancel
      assert.strictEqual(result.stopReason, "cancelled")
      assert.isFalse(result.timeline.some((e) => e._tag === "model.failed"))
      assert.strictEqual(result.counters.outputTokens, 0)
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer))
  )

  it.effect("R5.1 interrupting an inline run interrupts its tools", () =>
    Effect.gen(function* () {
      const { entered, interrupted, hang } = yield* makeHang
      const fiber = yield* Effect.forkChild(Run.run({ goal: "x", tools: [hang] }))
      yield* Deferred.await(entered)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(yield* Deferred.isDone(interrupted))
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("hang", {})])))
  )

  it.effect("R4 a model call that outlives the run deadline ends the run with run_timeout, on the TestClock", () =>
    Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [echo], time: { run: "30 seconds" } })
      yield* TestClock.adjust("31 seconds")
      const result = yield* handle.result
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.elapsedMillis, 30_000)
    }).pipe(Effect.scoped, Effect.provide(withScript([() => Effect.never])))
  )

  it.effect("R9 R8 a run whose store died at a commit: its events stream ends where the run stopped, never hangs", () =>
    Effect.gen(function* () {
      const faulty = FaultyJournal.make(yield* Journal.Journal, { crashAt: { commit: 2, when: "before" } })
      const handle = yield* Run.start({ goal: "x", tools: [], runId: "r1" }).pipe(
        Effect.provideService(Journal.Journal, faulty.journal)
      )
      // The process died: its caller is interrupted, with no result.
      const result = yield* Effect.exit(handle.result)
      assert.isTrue(faulty.crashed())
      assert.isTrue(Exit.isFailure(result))
      const events = yield* Stream.runCollect(handle.events)
      assert.isAbove(events.length, 0)
      assert.isFalse(events.some((e) => e._tag === "run.finished"))
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.mergeAll(Journal.layerMemory, ScriptedModel.layer([ScriptedModel.finalAnswer("x")])))
    )
  )

  it.effect(
    "R12 a gate whose decide or pending breaks its contract (a Promise, a throw) is a defect naming it, not a killed caller",
    () =>
      Effect.gen(function* () {
        const memory = Approval.makeMemory()
        // A gate of a caller without types: an `async` decide, a pending that is a Promise, a decide that throws.
        const broken = (decide: unknown, pending: unknown): Approval.Gate => ({
          ...memory,
          decide: decide as Approval.Gate["decide"], // as: a caller without types
          pending: pending as Approval.Gate["pending"] // as: a caller without types
        })
        const defectOf = (exit: Exit.Exit<unknown, unknown>) =>
          Exit.isFailure(exit) && Cause.hasDies(exit.cause) ? String(Cause.squash(exit.cause)) : `not a defect: ${exit}`
        for (const [gate, decided, listed] of [
          [
            broken(async () => undefined, Promise.resolve([])),
            "UserCodeDefect: the approval gate's decide returned a Promise, not an Effect",
            "UserCodeDefect: the approval gate's pending returned a Promise, not an Effect"
          ],
          [
            broken(() => {
              throw new Error("db down")
            }, memory.pending),
            "UserCodeDefect: the approval gate's decide threw Error",
            undefined
          ]
        ] as const) {
          yield* Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "pay", tools: [pay] })
            yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
            const request = (yield* memory.pending).find((r) => r.runId === handle.runId)
            assert.strictEqual(defectOf(yield* Effect.exit(handle.approve(request?.callId ?? ""))), decided)
            const pending = yield* Effect.exit(handle.pendingApprovals)
            if (listed === undefined) assert.isTrue(Exit.isSuccess(pending))
            else assert.strictEqual(defectOf(pending), listed)
            yield* handle.cancel
          }).pipe(Effect.scoped, Effect.provideService(Approval.ApprovalGate, gate))
        }
      }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("pay", {}), ScriptedModel.toolCall("pay", {})])))
  )

  it.effect(
    "R12 a gate whose pending answers no list of requests (null, 42, [null], a Proxy that throws) is a defect naming it (review 125)",
    () =>
      Effect.gen(function* () {
        const memory = Approval.makeMemory()
        const throwing = new Proxy([], {
          get: () => {
            throw new Error("no")
          }
        })
        for (const answer of [null, 42, [null], [{ runId: 5 }], throwing]) {
          // as: a gate of a caller without types
          const gate: Approval.Gate = { ...memory, pending: Effect.succeed(answer as unknown as []) }
          yield* Effect.gen(function* () {
            const handle = yield* Run.start({ goal: "pay", tools: [pay] })
            yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
            // The run waits, its call on the gate.
            assert.strictEqual(yield* handle.state, "awaiting_approval")
            const listed = yield* Effect.exit(handle.pendingApprovals)
            // Before, null, 42 and [null] died on an unnamed TypeError.
            assert.isTrue(Exit.isFailure(listed) && Cause.hasDies(listed.cause))
            if (Exit.isFailure(listed))
              assert.include(String(Cause.squash(listed.cause)), "the approval gate's pending")
            yield* handle.cancel
          }).pipe(Effect.scoped, Effect.provideService(Approval.ApprovalGate, gate))
        }
        // What a well-behaved gate lists is the run's own requests, in full.
        yield* Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "pay", tools: [pay] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          const listed = yield* handle.pendingApprovals
          assert.deepStrictEqual(
            listed,
            (yield* memory.pending).filter((r) => r.runId === handle.runId)
          )
          assert.deepStrictEqual(
            listed.map((r) => [r.tool, r.sideEffect]),
            [["pay", "external"]]
          )
          yield* handle.cancel
        }).pipe(Effect.scoped, Effect.provideService(Approval.ApprovalGate, memory))
      }).pipe(Effect.provide(payThenDone))
  )

  it.effect("R7 a handle's pendingApprovals reads only its own run's calls of a gate's list (review 196)", () =>
    Effect.gen(function* () {
      const memory = Approval.makeMemory()
      // A gate that lists other runs' calls too, a thousand of them, in a shape no handle of theirs would take.
      const others = Array.from({ length: 1_000 }, (_, k) => ({ runId: `other-${k}`, callId: 7 }))
      const listing: Approval.Gate = {
        ...memory,
        pending: Effect.map(memory.pending, (own) => [...others, ...own] as ReadonlyArray<Approval.Request>)
      }
      const handle = yield* Run.start({ goal: "pay", tools: [pay] }).pipe(
        Effect.provideService(Approval.ApprovalGate, listing)
      )
      while ((yield* memory.pending).length === 0) yield* Effect.yieldNow
      // Before, the whole list was checked first: the others' calls made it the gate's defect.
      const seen = yield* handle.pendingApprovals
      assert.deepStrictEqual(
        seen.map((request) => [request.runId, request.callId]),
        [[handle.runId, "c1"]]
      )
      yield* handle.approve("c1")
      assert.strictEqual((yield* handle.result).status, "completed")
    }).pipe(Effect.provide(payThenDone))
  )

  it.effect("R12 a gate whose pending or decide fails outside its contract is a defect naming it (review 134)", () =>
    Effect.gen(function* () {
      const memory = Approval.makeMemory()
      // A failure whose class cannot even be asked (its prototype's trap throws).
      const hostile = new Proxy(
        {},
        {
          getPrototypeOf: () => {
            throw new Error("no")
          }
        }
      )
      const unavailable = new Approval.PendingUnavailable({ detail: "store down" })
      const notNow = (runId: string, callId: string) => new Approval.Unavailable({ runId, callId, detail: "later" })
      const outcome = (exit: Exit.Exit<unknown, unknown>) =>
        Exit.isSuccess(exit)
          ? "success"
          : Cause.hasDies(exit.cause)
            ? String(Cause.squash(exit.cause))
            : Cause.squash(exit.cause)
      // as: a gate of a caller without types, whose failures are none of its errors
      const cases: ReadonlyArray<
        readonly [
          pending: Approval.Gate["pending"],
          decide: Approval.Gate["decide"],
          listed: (runId: string) => unknown,
          decided: (runId: string, callId: string) => unknown
        ]
      > = [
        [
          Effect.fail("boom" as unknown as Approval.PendingUnavailable),
          () => Effect.fail({ not: "a typed error" } as unknown as Approval.Unavailable),
          () => "UserCodeDefect: the approval gate's pending failed with a string",
          () => "UserCodeDefect: the approval gate's decide failed with a non-Error object"
        ],
        [
          Effect.fail(new Error("pool exhausted") as unknown as Approval.PendingUnavailable),
          () => Effect.fail(hostile as Approval.Unavailable),
          () => "UserCodeDefect: the approval gate's pending failed with Error",
          () => "UserCodeDefect: the approval gate's decide failed with a non-Error object"
        ],
        // The contract's own errors pass on as they are.
        [
          Effect.fail(unavailable),
          (runId, callId) => Effect.fail(notNow(runId, callId)),
          () => unavailable,
          (runId, callId) => notNow(runId, callId)
        ]
      ]
      for (const [pending, decide, listed, decided] of cases) {
        const gate: Approval.Gate = { ...memory, pending, decide }
        yield* Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "pay", tools: [pay] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          const request = (yield* memory.pending).find((r) => r.runId === handle.runId)
          const callId = request?.callId ?? ""
          assert.deepStrictEqual(outcome(yield* Effect.exit(handle.pendingApprovals)), listed(handle.runId))
          assert.deepStrictEqual(outcome(yield* Effect.exit(handle.approve(callId))), decided(handle.runId, callId))
          assert.deepStrictEqual(
            outcome(yield* Effect.exit(handle.reject(callId, "no"))),
            decided(handle.runId, callId)
          )
          // The run still waits: a broken list or decision decided nothing.
          assert.strictEqual(yield* handle.state, "awaiting_approval")
          yield* handle.cancel
        }).pipe(Effect.scoped, Effect.provideService(Approval.ApprovalGate, gate))
      }
      // A decision the gate refuses as not pending passes on too, as the gate's own error.
      yield* Effect.gen(function* () {
        const handle = yield* Run.start({ goal: "pay", tools: [pay] })
        yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
        const exit = yield* Effect.exit(handle.approve("never-asked"))
        assert.deepStrictEqual(outcome(exit), new Approval.NotPending({ runId: handle.runId, callId: "never-asked" }))
        yield* handle.cancel
      }).pipe(Effect.scoped, Effect.provideService(Approval.ApprovalGate, memory))
    }).pipe(Effect.provide(payThenDone))
  )
})
