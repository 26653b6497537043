/**
 * What a run records of the calls of its last batch that did not end (R5.2, R9): a call is
 * accounted for once it began, once its batch began (a run left behind), or once the run was
 * resumed after it was asked (the process that stopped may have run it).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Event from "../../../src/events/Event.ts"
import * as Explain from "../../../src/explain/Explain.ts"
import * as Journal from "../../../src/journal/Journal.ts"
import * as Run from "../../../src/run/Run.ts"
import * as Termination from "../../../src/termination/Termination.ts"
import * as FaultyJournal from "../../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as Approval from "../../../src/tools/Approval.ts"
import * as Permission from "../../../src/tools/Permission.ts"
import * as Tool from "../../../src/tools/Tool.ts"

const save = Tool.make({
  name: "save",
  description: "Saves a text.",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.String,
  sideEffect: "write",
  idempotent: true,
  handler: ({ text }) => Effect.succeed(text)
})

/** A read-only call: it leaves nothing behind. */
const look = Tool.make({
  name: "look",
  description: "Reads a text.",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.String,
  sideEffect: "read",
  handler: ({ text }) => Effect.succeed(text)
})

const twoSaves = ScriptedModel.toolCalls(["save", { text: "a" }, "A"], ["save", { text: "b" }, "B"])

/** A write that records each time it acts. */
const putTool = (idempotent: boolean, name = "put") =>
  FaultyTools.ledgered({ name, idempotent, sideEffect: "write", behaviour: () => "apply" })

/**
 * Runs until its journal dies at commit `commit` (before it is written), then resumes it
 * past its one-second deadline: the resumed run ends before its calls go on.
 */
const killedThenResumedLate = (
  runId: string,
  options: Pick<Run.Options<Tool.Any<never>>, "tools" | "concurrency">,
  commit: number
) =>
  Effect.gen(function* () {
    const store = yield* Journal.Journal
    const faulty = FaultyJournal.make(store, { crashAt: { commit, when: "before" } })
    const all = { goal: "g", time: { run: 1000 }, ...options }
    const fiber = yield* Run.run({ ...all, runId }).pipe(
      Effect.provideService(Journal.Journal, faulty.journal),
      Effect.forkChild
    )
    yield* TestClock.adjust("10 millis")
    assert.isTrue(faulty.crashed(), `killed at commit ${commit}`)
    yield* Fiber.interrupt(fiber)
    yield* TestClock.adjust("5 seconds")
    const resumed = yield* Run.resume(runId, all, "restart")
    assert.strictEqual(resumed.stopReason, "run_timeout")
    return resumed
  })

/** An external action that needs a person's approval. */
const deployTool = () =>
  FaultyTools.ledgered({
    name: "deploy",
    idempotent: false,
    sideEffect: "external",
    behaviour: () => "apply",
    needsApproval: true
  })

const interruptedOf = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.flatMap((e) => (e._tag === "tool.interrupted" ? [`${e.callId} ${e.settlement}`] : []))

describe("the calls a run leaves behind", () => {
  it.effect(
    "R9 an idempotent write that ran in the process that stopped, its result never committed, is unknown when the resumed run ends first",
    () => {
      const put = putTool(true)
      const deploy = deployTool()
      // put's permission check ends after deploy's approval request is committed; then put runs.
      const slowPut: Permission.PermissionService = {
        check: (request) =>
          request.tool.name === "put"
            ? Effect.as(Effect.sleep("50 millis"), Permission.allow)
            : Effect.succeed(Permission.allow)
      }
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["put", { k: 1 }, "P"], ["deploy", {}, "D"])
          : ScriptedModel.finalAnswer("done")
      )
      const options = { goal: "g", tools: [deploy.tool, put.tool], concurrency: 2, time: { run: 1000 } } as const
      return Effect.gen(function* () {
        const store = yield* Journal.Journal
        // The store is out of reach from once put has run: its result, committed at once while
        // deploy waits for a person (a park keeps what is committed), never gets through.
        const faulty = FaultyJournal.make(store, { unavailableOn: () => put.ledger.entries.length > 0 })
        const fiber = yield* Run.run({ ...options, runId: "r1" }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.forkChild
        )
        yield* TestClock.adjust("100 millis")
        assert.strictEqual(put.ledger.entries.length, 1, "put ran before the crash")
        faulty.crash()
        yield* Fiber.interrupt(fiber)
        const kept = Option.getOrThrow(yield* Effect.orDie(store.read("r1")))
        // The attempt is committed before the write runs (R9.2); its result never was.
        const tags = kept.events.flatMap((e) => (e._tag === "tool.started" || Event.isResult(e) ? [e._tag] : []))
        assert.deepStrictEqual(tags, ["tool.started"], "put's attempt, and no result")
        // Resumed past its deadline: the run ends before put goes on.
        yield* TestClock.adjust("5 seconds")
        const resumed = yield* Run.resume("r1", options, "restart")
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.includeMembers(interruptedOf(resumed.timeline), ["P outcome_unknown", "D cancelled"])
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["P"]
        )
      }).pipe(
        Effect.provideService(Permission.Permission, slowPut),
        Effect.provide(model),
        Effect.provide(Journal.layerMemory),
        Effect.provide(Approval.layerMemory)
      )
    }
  )

  it.effect(
    "R9 R3.8 an idempotent write runs only once its attempt is committed: killed at that commit it never ran; killed after it ran, it is unknown when the resumed run ends first",
    () => {
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1 ? ScriptedModel.toolCalls(["put", { k: 1 }, "P"]) : ScriptedModel.finalAnswer("done")
      )
      return Effect.gen(function* () {
        // Commit 1 is the run's start, 2 holds the response, 3 put's attempt; 4 ends the iteration.
        for (const [commit, ran] of [
          [3, 0],
          [4, 1]
        ] as const) {
          const put = putTool(true)
          const resumed = yield* killedThenResumedLate(`r-${commit}`, { tools: [put.tool] }, commit)
          assert.strictEqual(put.ledger.entries.length, ran, `killed at commit ${commit}`)
          // Killed at its attempt's commit, the call was never taken up as far as the log knows: nothing to record.
          assert.deepStrictEqual(interruptedOf(resumed.timeline), ran === 1 ? ["P outcome_unknown"] : [])
          assert.deepStrictEqual(
            resumed.pendingActions.map((p) => p.callId),
            ran === 1 ? ["P"] : []
          )
        }
      }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
    }
  )

  it.effect(
    "R9 each write's attempt commits what came before it: killed at the iteration's end, only the last write is unknown when the resumed run ends first, the earlier ones keep their results",
    () => {
      const put = putTool(true)
      const pay = putTool(false, "pay")
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(
              ["pay", { k: 0 }, "A"],
              ["put", { k: 1 }, "P1"],
              ["look", { text: "r" }, "R"],
              ["put", { k: 2 }, "P2"]
            )
          : ScriptedModel.finalAnswer("done")
      )
      return Effect.gen(function* () {
        // Commits: the start, the response, pay's attempt and result, each put's attempt; killed at the iteration's end.
        const resumed = yield* killedThenResumedLate("r2", { tools: [pay.tool, put.tool, look], concurrency: 1 }, 7)
        assert.deepStrictEqual([pay.ledger.entries.length, put.ledger.entries.length], [1, 2])
        assert.deepStrictEqual(interruptedOf(resumed.timeline), ["P2 outcome_unknown"])
        assert.deepStrictEqual(
          resumed.timeline.flatMap((e) => (e._tag === "tool.succeeded" ? [e.callId] : [])),
          ["A", "P1", "R"]
        )
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["P2"]
        )
      }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
    }
  )

  it.effect(
    "R9 a write whose result commits at once holds its place: the idempotent write queued behind it never ran, and is not called unknown",
    () => {
      const put = putTool(true)
      const pay = putTool(false, "pay")
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["pay", { k: 0 }, "A"], ["put", { k: 1 }, "P"])
          : ScriptedModel.finalAnswer("done")
      )
      return Effect.gen(function* () {
        // Commits: the start, the response, pay's attempt; killed committing pay's result.
        const resumed = yield* killedThenResumedLate("r3", { tools: [pay.tool, put.tool], concurrency: 1 }, 4)
        assert.deepStrictEqual([pay.ledger.entries.length, put.ledger.entries.length], [1, 0])
        assert.notInclude(interruptedOf(resumed.timeline), "P outcome_unknown")
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["A"]
        )
      }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory))
    }
  )

  it.effect("R5.2 a defect before the batch began records nothing of its calls: they were never taken up", () => {
    const throwing = Termination.make("throws_after_response", (c) => {
      if (c.counters.iterations >= 1) throw new Error("boom")
      return Termination.continue_
    })
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "g", tools: [save], policies: (d) => [...d, throwing] })
      assert.strictEqual(result.stopReason, "internal_error")
      assert.deepStrictEqual(interruptedOf(result.timeline), [])
    }).pipe(Effect.provide(ScriptedModel.layer([twoSaves, ScriptedModel.finalAnswer("x")])))
  })

  it.live(
    "R5.2 R8 the run deadline during a permission check, one call queued: the call in its check is in flight and cancelled, the queued one untouched",
    () => {
      const slow: Permission.PermissionService = {
        check: () => Effect.as(Effect.sleep("10 seconds"), Permission.allow)
      }
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "g", tools: [save], concurrency: 1, time: { run: 200 } })
        assert.strictEqual(result.stopReason, "run_timeout")
        assert.deepStrictEqual(interruptedOf(result.timeline), ["A cancelled"])
        const explained = Explain.explain(result.timeline)
        const inFlight = explained.deadline?.inFlight ?? []
        assert.deepStrictEqual(
          inFlight.map((w) => [w.kind, w.callId, w.became]),
          [["tool_call", "A", "cancelled"]]
        )
      }).pipe(
        Effect.provideService(Permission.Permission, slow),
        Effect.provide(ScriptedModel.layer([twoSaves, ScriptedModel.finalAnswer("x")]))
      )
    }
  )

  it.effect(
    "R9 R7 a rejection after a resume stops the batch: a write queued behind the approval never ran, and the run ends approval_rejected",
    () => {
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["deploy", {}, "D"], ["put", { k: 1 }, "P"])
          : ScriptedModel.finalAnswer("done")
      )
      return Effect.gen(function* () {
        for (const idempotent of [false, true]) {
          const put = putTool(idempotent)
          const deploy = deployTool()
          const runId = `r-${idempotent}`
          const options = { goal: "g", tools: [deploy.tool, put.tool], concurrency: 1, time: { run: 10_000 } } as const
          const store = yield* Journal.Journal
          const gate = yield* Approval.ApprovalGate
          const faulty = FaultyJournal.make(store, {})
          const fiber = yield* Run.run({ ...options, runId }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.forkChild
          )
          yield* TestClock.adjust("10 millis")
          faulty.crash()
          yield* Fiber.interrupt(fiber)
          const resumed = yield* Effect.forkChild(Run.resume(runId, options, "restart"))
          yield* TestClock.adjust("10 millis")
          yield* gate.decide(runId, "D", Approval.rejected("no"))
          const result = yield* Fiber.join(resumed)
          assert.strictEqual(put.ledger.entries.length, 0)
          assert.deepStrictEqual(
            [result.status, result.stopReason],
            ["failed", "approval_rejected"],
            `idempotent ${idempotent}`
          )
          assert.deepStrictEqual(result.pendingActions, [])
          assert.notInclude(interruptedOf(result.timeline), "P outcome_unknown")
        }
      }).pipe(Effect.provide(model), Effect.provide(Journal.layerMemory), Effect.provide(Approval.layerMemory))
    }
  )
})
