/**
 * Crashes at the commit barriers the resume property found wanting (R9, R3.8, R7, R4.2):
 * each a run killed where its log stopped short of a decision, an ended wait or a
 * settled attempt, and resumed to the end the live run would have reached.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Fiber, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import {
  acting,
  approvedPay,
  crashThenResume,
  dies,
  diesIn,
  layers,
  ofTag,
  pay,
  payThenAnswer
} from "../support/restart.ts"

/** A gate that approves every request `after` it was made. */
const approvesAfter = (after: Duration.Input): Approval.Gate => ({
  request: () => Effect.as(Effect.sleep(after), Approval.approved("ops")),
  decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
  pending: Effect.succeed([])
})

describe("Run.resume after a crash at any barrier (R9)", () => {
  it.effect(
    "R2.3 R9 killed right after a response its limits refuse: the resumed run stops as the live one did, running none of it",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        const lookups = FaultyTools.flaky({ name: "lookup", failures: 0 })
        const tools = [payment.tool, lookups.tool]
        const twoCalls = ScriptedModel.layerFunction(() =>
          ScriptedModel.toolCalls(["lookup", { q: "a" }, "c1"], ["pay", { amount: 10 }, "c2"])
        )
        const options = { tools, limits: { maxToolCalls: 1 } }
        const live = yield* Run.run({ goal: "pay 10", runId: "live", ...options }).pipe(Effect.provide(twoCalls))
        assert.strictEqual(live.stopReason, "max_tool_calls")
        // Commit 2: up to the response (1 is the run's start); the stop decided after it is lost with the process.
        yield* dies({ crashAt: { commit: 2, when: "after" } }, { goal: "pay 10", ...options }, twoCalls)
        const resumed = yield* Run.resume("r1", options, "restart").pipe(Effect.provide(twoCalls))
        assert.strictEqual(resumed.stopReason, "max_tool_calls")
        assert.strictEqual(payment.calls.count, 0)
        assert.strictEqual(lookups.calls.count, 0)
        assert.lengthOf(ofTag(resumed.timeline, "tool.started"), 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R4.2 R7 killed while awaiting approval bounded by the step: put back, it still expires as the step's timeout",
    () =>
      Effect.gen(function* () {
        const payment = approvedPay()
        const options = { tools: [payment.tool], time: { step: "1 second", approval: "1 minute" } } as const
        // Commit 3: the approval request, which nobody decides.
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", ...options }, payThenAnswer)
        const resumed = yield* TestClockDriver.drive(
          Run.resume("r1", options, "restart").pipe(Effect.provide(payThenAnswer))
        )
        assert.strictEqual(resumed.stopReason, "step_timeout")
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "approval.decided").map((e) => [e.decision, e.layer]),
          [["expired", "step"]]
        )
        assert.strictEqual(payment.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 R9 killed after an unknown outcome was committed, before the run's stop: it still ends unknown_outcome, the model not asked again",
    () =>
      Effect.gen(function* () {
        const payment = acting("pay", { behaviour: ["apply_then_lose"] })
        // Commits: 1 the start, 2 the response, 3 the intent, 4 the payment's unknown outcome; 5 (the stop) is lost.
        const { resumed } = yield* crashThenResume({ crashAt: { commit: 5, when: "before" } }, [payment.tool])
        assert.strictEqual(resumed.status, "unknown_outcome")
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
        assert.isFalse(resumed.timeline.slice(from).some((e) => e._tag === "model.requested"))
        assert.strictEqual(payment.calls.count, 1)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.4 R9 killed while a call waits to retry: its failure and its retry were committed, and the resumed run spends the same budget",
    () =>
      Effect.gen(function* () {
        const flakyTool = (attempts: { n: number }) =>
          Tool.make({
            name: "flaky",
            description: "always busy",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "external",
            idempotent: true,
            maxRetries: 6,
            handler: () =>
              Effect.suspend(() => {
                attempts.n++
                return Effect.fail(
                  new Failure.Retryable({
                    source: "tool",
                    category: "connection",
                    code: "busy",
                    attempts: 1,
                    hint: "busy"
                  })
                )
              })
          })
        const model = ScriptedModel.layerFunction(() => ScriptedModel.toolCall("flaky", {}, "c1"))
        // The run's budget (two retries) is what ends it, not the schedule's (six).
        const options = {
          goal: "x",
          recovery: { maxRecoveries: 2, backoff: Recovery.backoff({ retries: 6 }) }
        } as const
        const baseline = { n: 0 }
        const uncut = yield* TestClockDriver.drive(Run.run({ ...options, tools: [flakyTool(baseline)] })).pipe(
          Effect.provide(model)
        )
        assert.deepStrictEqual([uncut.stopReason, baseline.n], ["recovery_exhausted", 3])
        let inBackoff = 0
        for (let commit = 1; commit <= 20; commit++) {
          const store = yield* Effect.provide(Effect.service(Journal.Journal), Journal.layerMemory)
          const attempts = { n: 0 }
          const faulty = FaultyJournal.make(store, { crashAt: { commit, when: "after" } })
          yield* Effect.exit(
            TestClockDriver.drive(Run.run({ ...options, runId: "r1", tools: [flakyTool(attempts)] })).pipe(
              Effect.provideService(Journal.Journal, faulty.journal),
              Effect.provide(model)
            )
          )
          if (!faulty.crashed()) break
          const kept = Option.getOrThrow(yield* store.read("r1")).events
          const waiting = kept.findLast((e) => e._tag !== "state.changed")?._tag === "recovery.started"
          const resumed = yield* TestClockDriver.drive(
            Run.resume("r1", { recovery: options.recovery, tools: [flakyTool(attempts)] }, "restart")
          ).pipe(Effect.provideService(Journal.Journal, store), Effect.provide(model))
          const at = `crashed after commit ${commit}`
          assert.strictEqual(resumed.stopReason, "recovery_exhausted", at)
          assert.strictEqual(resumed.counters.recoveryAttempts, 2, at)
          // Killed in a backoff, nothing is repeated (an attempt in doubt here never began its handler: it runs again, free).
          assert.strictEqual(attempts.n, baseline.n, at)
          if (waiting) inBackoff++
        }
        assert.strictEqual(inBackoff, 2, "each retry's wait began with its failure and its retry committed")
      })
  )

  it.effect(
    "R3.4 R4.2 committing a retry before its wait takes from the wait: the next attempt starts when the log says",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        // A store that takes 200 ms to commit.
        const slow: Journal.Service = {
          ...store,
          append: (runId, append) => Effect.delay(store.append(runId, append), 200)
        }
        let n = 0
        const put = Tool.make({
          name: "put",
          description: "an idempotent write that fails once",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          idempotent: true,
          handler: () =>
            Effect.suspend(() =>
              ++n === 1
                ? Effect.fail(
                    new Failure.Retryable({
                      source: "tool",
                      category: "connection",
                      code: "reset",
                      attempts: 1,
                      hint: "reset"
                    })
                  )
                : Effect.succeed("stored")
            )
        })
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1 ? ScriptedModel.toolCall("put", {}, "c1") : ScriptedModel.finalAnswer("done")
        )
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "put",
            runId: "r1",
            tools: [put],
            recovery: { backoff: Recovery.backoff({ base: "500 millis", jitter: false }) }
          })
        ).pipe(Effect.provideService(Journal.Journal, slow), Effect.provide(model))
        assert.strictEqual(result.status, "completed")
        const [wait] = ofTag(result.timeline, "recovery.started")
        const retry = ofTag(result.timeline, "tool.started").find((e) => e.attempt === 2)
        assert.isDefined(wait)
        assert.strictEqual(retry?.at, (wait?.at ?? 0) + (wait?.delayMillis ?? 0))
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R4.1 R9 killed between creating its row and its first commit: the run starts again under its options and its deadline",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        // The process dies as the first commit is sent: the row (with its header) is there, no event is.
        const dying: Journal.Service = {
          ...store,
          append: (runId, append) => (append.expectedSeq === 0 ? Effect.interrupt : store.append(runId, append))
        }
        const answer = ScriptedModel.layerFunction(() => ScriptedModel.finalAnswer("forty-two"))
        yield* Effect.exit(
          Run.run({
            goal: "answer",
            runId: "r1",
            tools: [],
            time: { run: "3 seconds" },
            limits: { maxIterations: 1 }
          }).pipe(Effect.provideService(Journal.Journal, dying), Effect.provide(answer))
        )
        const kept = Option.getOrThrow(yield* store.read("r1"))
        assert.strictEqual(kept.events.length, 0)
        // Down for 4 s: past the run's deadline.
        yield* TestClock.adjust("4 seconds")
        const resumed = yield* Run.resume("r1", { tools: [] }, "restart").pipe(Effect.provide(answer))
        assert.strictEqual(resumed.stopReason, "run_timeout")
        const started = ofTag(resumed.timeline, "run.started")[0]
        assert.strictEqual(started?.limits?.maxIterations, 1)
        assert.strictEqual(started?.limits?.runTimeoutMillis, 3_000)
        assert.strictEqual(started?.deadlineAt, 3_000)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 killed after a final answer was committed, before the run's stop: it completes with it, asking nothing",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        const answer = ScriptedModel.layerFunction(() => ScriptedModel.finalAnswer("forty-two"))
        // Commit 2: up to the final answer; commit 3 (the decision and the result) is lost.
        const faulty = FaultyJournal.make(store, { crashAt: { commit: 3, when: "before" } })
        yield* diesIn(
          faulty,
          Run.run({ goal: "answer", runId: "r1", tools: [] }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provide(answer)
          )
        )
        const resumed = yield* Run.resume("r1", { tools: [] }, "restart").pipe(Effect.provide(answer))
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(resumed.finalAnswer, "forty-two")
        assert.strictEqual(resumed.counters.iterations, 1)
        const from = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
        assert.isFalse(resumed.timeline.slice(from).some((e) => e._tag === "model.requested"))
      }).pipe(Effect.provide(layers))
  )

  it.effect("R4.2 R9 resumed inside a step: the step keeps its deadline, measured from the step's start", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const lookup = FaultyTools.slow({ name: "lookup", millis: 5_000 })
      const tools = [lookup.tool, payment.tool]
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["lookup", { q: "a" }, "c1"], ["pay", { amount: 10 }, "c2"])
          : ScriptedModel.finalAnswer("done")
      )
      const options = { tools, time: { step: "1 second" }, concurrency: 2 } as const
      // Commit 4: the payment's result, while the lookup is still running.
      yield* dies({ crashAt: { commit: 4, when: "after" } }, { goal: "look and pay", ...options }, model)
      // The restarted process comes up 600 ms later: 400 ms are left of the step.
      yield* TestClock.adjust("600 millis")
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", options, "restart").pipe(Effect.provide(model)))
      assert.strictEqual(resumed.stopReason, "step_timeout")
      const [failed] = ofTag(resumed.timeline, "tool.failed")
      assert.strictEqual(failed?.at, 1_000)
      assert.strictEqual(payment.ledger.total, 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R5.2 R7 resumed past its deadline while awaiting approval: the request is withdrawn and the call never ran",
    () =>
      Effect.gen(function* () {
        const payment = approvedPay()
        const options = { tools: [payment.tool], time: { run: "1 minute" } } as const
        // Commit 3: the approval request.
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", ...options }, payThenAnswer)
        yield* TestClock.adjust("2 minutes")
        const resumed = yield* Run.resume("r1", options, "restart").pipe(Effect.provide(payThenAnswer))
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "approval.decided").map((e) => e.decision),
          ["withdrawn"]
        )
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "tool.interrupted").map((e) => [e.callId, e.settlement]),
          [["c1", "cancelled"]]
        )
        assert.lengthOf(yield* (yield* Approval.ApprovalGate).pending, 0)
        assert.strictEqual(payment.calls.count, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.3 R9 a resend in doubt after a restart, found applied: its retry episode is closed as the live run closes it",
    () =>
      Effect.gen(function* () {
        const payment = acting("pay", { behaviour: ["lose_before_apply", "apply"], reconcile: true })
        const tools = [payment.tool]
        const store = yield* Journal.Journal
        // Commits: 1 the start, 2 the response, 3 the intent, 4 not applied and the resend's intent; 5 (its result) is lost.
        const faulty = FaultyJournal.make(store, { crashAt: { commit: 5, when: "before" } })
        yield* diesIn(
          faulty,
          TestClockDriver.drive(
            Run.run({ goal: "pay 10", runId: "r1", tools }).pipe(Effect.provideService(Journal.Journal, faulty.journal))
          )
        )
        const resumed = yield* Run.resume("r1", { tools }, "restart")
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(payment.ledger.total, 1)
        assert.deepStrictEqual(
          resumed.timeline.flatMap((e) => (e._tag.startsWith("recovery.") && "callId" in e ? [e._tag] : [])),
          ["recovery.started", "recovery.failed"]
        )
      }).pipe(Effect.provide(payThenAnswer), Effect.provide(layers))
  )

  it.effect(
    "R1.3 R3.3 R9 killed while one call waits to retry and another for approval: the retry waits out its delay",
    () =>
      Effect.gen(function* () {
        const lookup = FaultyTools.flaky({ name: "lookup", failures: 1 })
        const payment = approvedPay()
        const tools = [lookup.tool, payment.tool]
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["lookup", { q: "a" }, "c1"], ["pay", { amount: 10 }, "c2"])
            : ScriptedModel.finalAnswer("done")
        )
        const options = { tools, concurrency: 2 } as const
        // Commit 3: the lookup's retry wait and the payment's approval request.
        yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "look and pay", ...options }, model)
        const fiber = yield* Run.resume("r1", options, "restart").pipe(Effect.provide(model), Effect.forkChild)
        const gate = yield* Approval.ApprovalGate
        while ((yield* gate.pending).length === 0) yield* Effect.yieldNow
        yield* gate.decide("r1", "c2", Approval.approved("ops"))
        yield* TestClock.adjust("10 seconds")
        const resumed = yield* Fiber.join(fiber)
        assert.strictEqual(resumed.status, "completed")
        const retry = ofTag(resumed.timeline, "recovery.started").find((e) => e.callId === "c1")
        const second = ofTag(resumed.timeline, "tool.started").find((e) => e.callId === "c1" && e.attempt === 2)
        assert.strictEqual(second?.at, (retry?.at ?? 0) + (retry?.delayMillis ?? 0))
        assert.deepStrictEqual(
          resumed.timeline.flatMap((e) =>
            e._tag.startsWith("recovery.") && "callId" in e && e.callId === "c1" ? [e._tag] : []
          ),
          ["recovery.started", "recovery.completed"]
        )
        // The run is awaiting approval until the decision, and recovering until the retry.
        const phases = ofTag(resumed.timeline, "state.changed").map((e) => e.to)
        assert.deepStrictEqual(phases.slice(phases.lastIndexOf("awaiting_approval")), [
          "awaiting_approval",
          "recovering",
          "tool_executing",
          "model_thinking",
          "validating",
          "completed"
        ])
      }).pipe(Effect.provide(layers))
  )

  it.effect("R3.8 R9 an unknown outcome committed before the restart still outranks a sibling's approval expiry", () =>
    Effect.gen(function* () {
      const lost = acting("pay", { behaviour: ["apply_then_lose"] })
      const gated = acting("wire", { needsApproval: true })
      const tools = [lost.tool, gated.tool]
      const model = ScriptedModel.layerFunction(() =>
        ScriptedModel.toolCalls(["pay", { amount: 10 }, "c1"], ["wire", { amount: 5 }, "c2"])
      )
      const options = { tools, concurrency: 2, time: { step: "1 second" } } as const
      // Commit 4: the payment's unknown outcome; the wire's approval request is lost.
      yield* dies({ crashAt: { commit: 4, when: "after" } }, { goal: "pay and wire", ...options }, model)
      // Nobody decides the wire: its approval expires with the step.
      const resumed = yield* TestClockDriver.drive(Run.resume("r1", options, "restart").pipe(Effect.provide(model)))
      assert.strictEqual(resumed.stopReason, "unknown_outcome")
      assert.deepStrictEqual(
        resumed.pendingActions.map((p) => p.callId),
        ["c1"]
      )
      assert.strictEqual(gated.calls.count, 0)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R7 R9 R13 resumed as two approvals expire together: one stops the run, the other is withdrawn; the wait said whole",
    () =>
      Effect.gen(function* () {
        const tools = [acting("wire", { needsApproval: true }).tool, acting("pay", { needsApproval: true }).tool]
        const model = ScriptedModel.layerFunction(() =>
          ScriptedModel.toolCalls(["wire", { amount: 5 }, "c1"], ["pay", { amount: 10 }, "c2"])
        )
        const options = { tools, concurrency: 2, time: { approval: "1 second" } } as const
        const store = yield* Journal.Journal
        // Commits 3 and 4: the two requests; 5, at their expiry, is lost.
        const faulty = FaultyJournal.make(store, { crashAt: { commit: 5, when: "before" } })
        yield* diesIn(
          faulty,
          TestClockDriver.drive(
            Run.run({ goal: "wire and pay", runId: "r1", ...options }).pipe(
              Effect.provideService(Journal.Journal, faulty.journal),
              Effect.provide(model)
            )
          )
        )
        const resumed = yield* Run.resume("r1", options, "restart").pipe(Effect.provide(model))
        assert.strictEqual(resumed.stopReason, "approval_expired")
        // Its whole wait, from its request in the process that stopped (review 88: it said 0 ms).
        assert.include(resumed.detail, "(c1) waited 1000 ms for approval")
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "approval.decided").map((e) => [e.callId, e.decision]),
          [
            ["c1", "expired"],
            ["c2", "withdrawn"]
          ]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R4.2 R3.8 approved with nothing left of its step: the handler never starts, so nothing is in doubt", () =>
    Effect.gen(function* () {
      const wire = approvedPay({ reconcile: false })
      const options = { tools: [wire.tool], time: { step: "1 second" } } as const
      // Commit 3: the approval request, at the step's start.
      yield* dies({ crashAt: { commit: 3, when: "after" } }, { goal: "pay 10", ...options }, payThenAnswer)
      // The restarted process comes up as the step ends, and its gate approves at once.
      yield* TestClock.adjust("1 second")
      const approving: Approval.Gate = {
        request: () => Effect.succeed(Approval.approved("ops")),
        decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
        pending: Effect.succeed([])
      }
      const resumed = yield* Run.resume("r1", options, "restart").pipe(
        Effect.provide(payThenAnswer),
        Effect.provideService(Approval.ApprovalGate, approving)
      )
      assert.strictEqual(wire.calls.count, 0)
      assert.strictEqual(resumed.stopReason, "step_timeout")
      assert.deepStrictEqual(resumed.pendingActions, [])
    }).pipe(Effect.provide(layers))
  )

  it.effect("R3.5 R9 a batch's end committed (a correction asked for) is not decided again after a restart", () =>
    Effect.gen(function* () {
      const lookup = Tool.make({
        name: "lookup",
        description: "Looks up.",
        input: Schema.Struct({ q: Schema.String }),
        output: Schema.String,
        handler: ({ q }) => Effect.succeed(`found ${q}`)
      })
      const tools = [lookup]
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1 ? ScriptedModel.toolCall("lookup", { q: 42 }, "c1") : ScriptedModel.finalAnswer("done")
      )
      // Commit 3: the end of iteration 1, with the correction asked for; 4 (the answer) is lost.
      yield* dies({ crashAt: { commit: 4, when: "before" } }, { goal: "look", tools }, model)
      const resumed = yield* Run.resume("r1", { tools }, "restart").pipe(Effect.provide(model))
      assert.strictEqual(resumed.status, "completed")
      assert.lengthOf(
        ofTag(resumed.timeline, "recovery.started").filter((e) => e.kind === "tool_argument_correction"),
        1
      )
      assert.strictEqual(resumed.counters.toolCorrectionAttempts, 1)
    }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R3.8 R9 an approved idempotent write the dead process may have run: ended before it went on, it stays unknown",
    () =>
      Effect.gen(function* () {
        const transfer = acting("pay", { idempotent: true, sideEffect: "write", needsApproval: true })
        const options = { tools: [transfer.tool], time: { run: "1 minute" } } as const
        const approving: Approval.Gate = {
          request: () => Effect.succeed(Approval.approved("ops")),
          decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
          pending: Effect.succeed([])
        }
        const store = yield* Journal.Journal
        // Commit 5: the write's attempt (after the response, the approval's request and its decision);
        // the process dies once the journal knows the write began, with its result never committed.
        const faulty = FaultyJournal.make(store, { crashAt: { commit: 5, when: "after" } })
        yield* diesIn(
          faulty,
          Run.run({ goal: "pay 10", runId: "r1", ...options }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal),
            Effect.provideService(Approval.ApprovalGate, approving),
            Effect.provide(payThenAnswer)
          )
        )
        yield* TestClock.adjust("2 minutes")
        const resumed = yield* Run.resume("r1", options, "restart").pipe(Effect.provide(payThenAnswer))
        assert.strictEqual(resumed.stopReason, "run_timeout")
        assert.deepStrictEqual(
          ofTag(resumed.timeline, "tool.interrupted").map((e) => [e.callId, e.settlement]),
          [["c1", "outcome_unknown"]]
        )
        assert.deepStrictEqual(
          resumed.pendingActions.map((p) => p.callId),
          ["c1"]
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect(
    "R9 R3.4 a read in doubt after a restart runs again even with no retries left: the restart is not its failure",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        const lookup = FaultyTools.slow({ name: "lookup", millis: 1_000 })
        const tools = [lookup.tool, payment.tool]
        const model = ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["lookup", { q: "a" }, "c1"], ["pay", { amount: 10 }, "c2"])
            : ScriptedModel.finalAnswer("done")
        )
        const options = { tools, concurrency: 2, recovery: { maxRecoveries: 0 } } as const
        // Commit 4: the payment's result, while the lookup runs.
        yield* dies({ crashAt: { commit: 4, when: "after" } }, { goal: "look and pay", ...options }, model)
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", options, "restart").pipe(Effect.provide(model)))
        assert.strictEqual(resumed.status, "completed")
        assert.strictEqual(lookup.calls.count, 2)
        assert.strictEqual(resumed.counters.recoveryAttempts, 0)
      }).pipe(Effect.provide(layers))
  )

  it.effect("R5.2 R9 a retry taken up after a restart is numbered after the attempts the log holds", () =>
    Effect.gen(function* () {
      const lookup = FaultyTools.slow({ name: "lookup", millis: 5_000, timeout: "1 second", maxRetries: 1 })
      const payment = approvedPay()
      const tools = [lookup.tool, payment.tool]
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["lookup", { q: "a" }, "c1"], ["pay", { amount: 10 }, "c2"])
          : ScriptedModel.finalAnswer("done")
      )
      // The payment is approved while the lookup waits to retry its timed-out first attempt.
      const later = approvesAfter("1001 millis")
      const options = { tools, concurrency: 2 } as const
      // Commit 4: the approval, during the lookup's retry wait.
      yield* TestClockDriver.drive(
        dies({ crashAt: { commit: 4, when: "after" } }, { goal: "look and pay", ...options }, model).pipe(
          Effect.provideService(Approval.ApprovalGate, later)
        )
      )
      const resumed = yield* TestClockDriver.drive(
        Run.resume("r1", options, "restart").pipe(
          Effect.provide(model),
          Effect.provideService(Approval.ApprovalGate, later)
        )
      )
      assert.deepStrictEqual(
        ofTag(resumed.timeline, "tool.interrupted")
          .filter((e) => e.callId === "c1")
          .map((e) => e.attempt),
        [1, 2]
      )
    }).pipe(Effect.provide(layers))
  )

  it.effect("R3.3 R9 a retry in doubt after a restart that runs again and succeeds ends its episode", () =>
    Effect.gen(function* () {
      // Attempt 1 fails at once, the retry (attempt 2) is still running when the process dies.
      let invocations = 0
      const lookup = Tool.make({
        name: "lookup",
        description: "fails once, then is slow once, then answers",
        input: Schema.Struct({ q: Schema.String }),
        output: Schema.String,
        sideEffect: "read",
        idempotent: true,
        handler: () =>
          Effect.suspend(() => {
            invocations++
            if (invocations === 1)
              return Effect.fail(FailureBoundary.connection({ source: "tool", detail: "ECONNRESET" }))
            return invocations === 2 ? Effect.as(Effect.sleep("5 seconds"), "late") : Effect.succeed("found")
          })
      })
      const payment = approvedPay()
      const tools = [lookup, payment.tool]
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["lookup", { q: "a" }, "c1"], ["pay", { amount: 10 }, "c2"])
          : ScriptedModel.finalAnswer("done")
      )
      const soon = approvesAfter("500 millis")
      const options = { tools, concurrency: 2 } as const
      // Commit 4: the approval, while the lookup's retry runs.
      yield* TestClockDriver.drive(
        dies({ crashAt: { commit: 4, when: "after" } }, { goal: "look and pay", ...options }, model).pipe(
          Effect.provideService(Approval.ApprovalGate, soon)
        )
      )
      assert.strictEqual(invocations, 2)
      const resumed = yield* TestClockDriver.drive(
        Run.resume("r1", options, "restart").pipe(
          Effect.provide(model),
          Effect.provideService(Approval.ApprovalGate, soon)
        )
      )
      assert.strictEqual(resumed.status, "completed")
      const ofCall = resumed.timeline.filter((e) => "callId" in e && e.callId === "c1").map((e) => e._tag)
      assert.deepStrictEqual(ofCall.slice(-3), ["tool.started", "recovery.completed", "tool.succeeded"])
      assert.strictEqual(
        ofCall.filter((tag) => tag === "recovery.started").length,
        ofCall.filter((tag) => tag === "recovery.completed" || tag === "recovery.failed").length
      )
    }).pipe(Effect.provide(layers))
  )
})
