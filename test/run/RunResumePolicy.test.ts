/**
 * A run resumed under a policy that now refuses a call its process had begun (R3.6, R9):
 * recovery never sends it again. Before (review 77), a payment found not applied after a
 * restart was resent although the policy in force denied `pay`: the one time it really
 * happened was under a policy that forbade it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as Run from "../../src/run/Run.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { acting, approvedPay, dies, layers, ofTag, pay, payThenAnswer } from "../support/restart.ts"

/** A policy that now refuses `name`. */
const refusing = (name: string) =>
  Layer.succeed(Permission.Permission, {
    check: (request) =>
      Effect.succeed(
        request.tool.name === name
          ? Permission.deny("tool_not_allowed", `${name}: no longer allowed`)
          : Permission.allow
      )
  })

const resumedUnder = (tools: ReadonlyArray<Tool.Any<never>>, model: typeof payThenAnswer) =>
  TestClockDriver.drive(Run.resume("r1", { tools }, "restart")).pipe(
    Effect.provide(refusing(tools[0]?.name ?? "")),
    Effect.provide(model)
  )

const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2, correctionBudget: 3 }

describe("a run resumed under a policy that now refuses a call it had begun (R3.6)", () => {
  it.effect(
    "R5.2 R3.8 a call that ran, cut off by the deadline while the policy decides again, is not said never to have run",
    () =>
      Effect.gen(function* () {
        const payment = pay(false)
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        // A policy that never answers: the run's deadline comes first.
        const silent = Layer.succeed(Permission.Permission, { check: () => Effect.never })
        const resumed = yield* TestClockDriver.drive(
          Run.resume("r1", { tools: [payment.tool], time: { run: "1 second" } }, "restart")
        ).pipe(Effect.provide(silent), Effect.provide(payThenAnswer))
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.isFalse(
          ofTag(resumed.timeline, "tool.interrupted").some((e) => e.callId === "c1" && /never ran/.test(e.detail)),
          "a call whose handler ran recorded as never run"
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.6 R3.8 a payment found not applied is blocked, never resent", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      // Commit 3 holds the payment's intent; the process dies before the handler runs.
      yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
      const resumed = yield* resumedUnder([payment.tool], payThenAnswer)
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
        ["not_applied"]
      )
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.blocked").map((e) => [e.callId, e.error.code]),
        [["c1", "permission_denied"]]
      )
      assert.strictEqual(payment.ledger.total, 0)
    }).pipe(Effect.provide(layers))
  )

  it.effect("R3.6 R3.8 a payment found applied keeps its result: a policy does not undo what happened", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      // Commit 4, the payment's result, is lost: it paid, and is in doubt.
      yield* dies({ crashAt: { commit: 4, when: "before" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
      const resumed = yield* resumedUnder([payment.tool], payThenAnswer)
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.reconciled").map((e) => e.verdict),
        ["applied"]
      )
      assert.lengthOf(ofTag(resumed.timeline, "tool.blocked"), 0)
      assert.deepStrictEqual([resumed.status, payment.ledger.total], ["completed", 1])
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.6 R3.8 an idempotent write in doubt is not run again: without a status query its outcome stays unknown",
    () =>
      Effect.gen(function* () {
        const put = acting("put", { idempotent: true, sideEffect: "write" })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCall("put", { amount: 10 }, "c1")
            : ScriptedModel.finalAnswer("put")
        )
        // Commit 3 holds the write's intent; the process dies then.
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "put", tools: [put.tool] }, model)
        const resumed = yield* resumedUnder([put.tool], model)
        assert.deepStrictEqual([resumed.stopReason, put.ledger.total], ["unknown_outcome", 0])
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.6 R3.3 a call waiting to retry when its process died is blocked, not retried", () =>
    Effect.gen(function* () {
      // An idempotent write whose first attempt the service refuses before doing anything.
      const put = acting("put", { idempotent: true, sideEffect: "write", behaviour: ["fail_before_apply", "apply"] })
      const flaky = put.tool
      const attempts = () => put.calls.count
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCall("put", { amount: 1 }, "c1")
          : ScriptedModel.finalAnswer("stored")
      )
      // The failure and its wait are committed before the wait (an idempotent write); the process dies in it.
      yield* dies({ crashAt: { commit: 4, when: "after" } }, { goal: "put", tools: [flaky] }, model)
      assert.strictEqual(attempts(), 1)
      const resumed = yield* resumedUnder([flaky], model)
      assert.strictEqual(attempts(), 1, "retried under a policy that refuses it")
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.blocked").map((e) => e.callId),
        ["c1"]
      )
      assert.notStrictEqual(resumed.status, "failed")
      // Its retry episode ends, given up (review 78), and the property kit finds nothing wrong.
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "recovery.failed").map((e) => [e.callId, e.kind]),
        [["c1", "tool_retry"]]
      )
      assert.deepStrictEqual(Properties.check(resumed, budget), [])
    }).pipe(Effect.provide(layers))
  )
})

describe("a run resumed while a call waits for approval, under a policy that now refuses it (R3.6, R7)", () => {
  /** The events of call c1 from its request on, as `tag decision/code`. */
  const storyOf = (timeline: ReadonlyArray<{ readonly _tag: string }>) =>
    timeline.flatMap((e) =>
      e._tag === "approval.requested" || e._tag === "run.resumed"
        ? [e._tag]
        : e._tag === "approval.decided" && "decision" in e
          ? [`${e._tag} ${String(e.decision)}`]
          : e._tag === "tool.blocked" && "error" in e
            ? [`${e._tag} ${(e.error as { readonly code: string }).code}`]
            : []
    )
  const silent = Layer.succeed(Permission.Permission, { check: () => Effect.never })

  for (const [name, policy] of [
    ["refuses it", refusing("pay")],
    ["does not answer within the tool's timeout", silent]
  ] as const)
    it.effect(
      `R3.6 R7 R1.3 a policy that ${name}: the request is let go, the model is told, the run goes on (was internal_error)`,
      () =>
        Effect.gen(function* () {
          const payment = acting("pay", { reconcile: true, needsApproval: true, timeout: "2 seconds" })
          // Commit 3: the approval request; the process dies waiting for a person.
          yield* dies(
            { crashAt: { commit: 3, when: "after" } },
            { goal: "pay 10", tools: [payment.tool] },
            payThenAnswer
          )
          const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
            Effect.provide(policy),
            Effect.provide(payThenAnswer)
          )
          assert.strictEqual(resumed.stopReason, "goal_reached", resumed.detail)
          assert.deepStrictEqual(storyOf(resumed.timeline), [
            "approval.requested",
            "run.resumed",
            "approval.decided withdrawn",
            "tool.blocked permission_denied"
          ])
          assert.strictEqual(payment.calls.count, 0)
          assert.deepStrictEqual(yield* (yield* Approval.ApprovalGate).pending, [])
          // The property kit took the withdrawal for the run's stop, and the model asked after it for a guess.
          assert.deepStrictEqual(Properties.check(resumed, budget), [])
        }).pipe(Effect.provide(layers))
    )

  it.effect("R3.6 R7 a decision given while the process was down is recorded, and the refusal stands after it", () =>
    Effect.gen(function* () {
      const journal = yield* Journal.Journal
      const gate = JournalApprovals.make(journal)
      const payment = approvedPay()
      // The call is on the journal's table when the process dies (a kill leaves it there).
      const killed = JournalApprovals.make(journal, { keepOnInterrupt: () => true })
      yield* dies(
        { crashAt: { commit: 3, when: "after" } },
        { goal: "pay 10", tools: [payment.tool] },
        payThenAnswer
      ).pipe(Effect.provideService(Approval.ApprovalGate, killed))
      yield* JournalApprovals.record(journal, "r1", "c1", Approval.approved("ops"))
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
        Effect.provide(refusing("pay")),
        Effect.provide(payThenAnswer),
        Effect.provideService(Approval.ApprovalGate, gate)
      )
      assert.strictEqual(resumed.stopReason, "goal_reached", resumed.detail)
      assert.deepStrictEqual(storyOf(resumed.timeline), [
        "approval.requested",
        "run.resumed",
        "approval.decided approved",
        "tool.blocked permission_denied"
      ])
      assert.strictEqual(payment.calls.count, 0)
      assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r1" }), [])
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R7 R2.5 a rejection given while the process was down is the run's stop, whatever the policy says now",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        const payment = approvedPay()
        const killed = JournalApprovals.make(journal, { keepOnInterrupt: () => true })
        yield* dies(
          { crashAt: { commit: 3, when: "after" } },
          { goal: "pay 10", tools: [payment.tool] },
          payThenAnswer
        ).pipe(Effect.provideService(Approval.ApprovalGate, killed))
        yield* JournalApprovals.record(journal, "r1", "c1", Approval.rejected("too much", "ops"))
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
          Effect.provide(refusing("pay")),
          Effect.provide(payThenAnswer),
          Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(journal))
        )
        // Before, the rejection was recorded, then the call blocked as a refusal and the run completed.
        assert.strictEqual(resumed.stopReason, "approval_rejected", resumed.detail)
        assert.deepStrictEqual(storyOf(resumed.timeline), [
          "approval.requested",
          "run.resumed",
          "approval.decided rejected",
          "tool.blocked approval_rejected"
        ])
        assert.strictEqual(payment.calls.count, 0)
        assert.deepStrictEqual(Properties.check(resumed, budget), [])
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R5.2 R7 a call put back, cut off in its policy check by another call's stop: the batch's stop, withdrawn",
    () =>
      Effect.gen(function* () {
        const payment = approvedPay()
        const broken = Tool.make({
          name: "broken",
          description: "Fails",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          handler: () => Effect.die(new Error("boom"))
        })
        const tools = [payment.tool, broken]
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["pay", { amount: 1 }, "c1"], ["broken", {}, "c2"])
            : ScriptedModel.finalAnswer("done")
        )
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay", tools }, model)
        // A policy that takes a second on a payment: the other call's failure stops the batch meanwhile.
        const slowOnPay = Layer.succeed(Permission.Permission, {
          check: (request) =>
            request.tool.name === "pay"
              ? Effect.as(Effect.sleep("1 second"), Permission.allow)
              : Effect.succeed(Permission.allow)
        })
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools, concurrency: 2 }, "restart")).pipe(
          Effect.provide(slowOnPay),
          Effect.provide(model)
        )
        assert.strictEqual(resumed.stopReason, "tool_error", resumed.detail)
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "approval.decided").map((e) => [e.callId, e.decision]),
          [["c1", "withdrawn"]]
        )
        assert.strictEqual(payment.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect("R7 R4.2 a gate out of reach holds a refused call's let-go a few seconds at most, not the run", () =>
    Effect.gen(function* () {
      const payment = approvedPay()
      yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
      const unreachable: Approval.Gate = {
        ...Approval.makeMemory(),
        expire: (runId, callId) => Effect.fail(new Approval.Unavailable({ runId, callId, detail: "store down" }))
      }
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
        Effect.provide(refusing("pay")),
        Effect.provide(payThenAnswer),
        Effect.provideService(Approval.ApprovalGate, unreachable)
      )
      // Before, the gate was asked until the run deadline (10 minutes): run_timeout.
      assert.strictEqual(resumed.stopReason, "goal_reached", resumed.detail)
      const [again] = ofTag(resumed.timeline, "run.resumed")
      const [finished] = ofTag(resumed.timeline, "run.finished")
      assert.isAtMost((finished?.at ?? 0) - (again?.at ?? 0), 5_500)
      assert.strictEqual(payment.calls.count, 0)
    }).pipe(Effect.provide(layers))
  )
})
