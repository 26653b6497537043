import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Exit, Fiber, Layer, Option, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../src/events/Event.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { drive } from "../support/clock.ts"
import { assertRoundTrips } from "../support/schema.ts"

/** A payment tool that needs approval, with a ledger of what it really did. */
const makePay = () => {
  const ledger: Array<{ readonly amount: number; readonly to: string; readonly callId: string; readonly key: string }> =
    []
  const pay = Tool.make({
    name: "pay",
    description: "Pay an amount",
    input: Schema.Struct({ amount: Schema.Finite, to: Schema.String }),
    output: Schema.String,
    sideEffect: "external",
    needsApproval: true,
    handler: ({ amount, to }, context) =>
      Effect.sync(() => {
        ledger.push({ amount, to, callId: context.callId, key: context.idempotencyKey })
        return `paid ${amount} to ${to}`
      })
  })
  return { pay, ledger }
}

const script = [
  ScriptedModel.toolCall("pay", { amount: 42, to: "acme" }, "call_pay"),
  ScriptedModel.finalAnswer("paid")
]

const layers = Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer, Approval.layerMemory)

/** Starts a run and waits until it asks for approval. */
const startWaiting = (tools: ReadonlyArray<Tool.Any<never>>, time?: Run.Options<Tool.Any<never>>["time"]) =>
  Effect.gen(function* () {
    const handle = yield* Run.start({ goal: "pay acme", tools, ...(time === undefined ? {} : { time }) })
    const requested = yield* Stream.runHead(
      Stream.filter(handle.events, (e): e is Event.Of<"approval.requested"> => e._tag === "approval.requested")
    )
    return { handle, requested: Option.getOrThrow(requested) }
  })

const tags = (result: RunResult.RunResult) => result.timeline.map((e) => e._tag)

/** A memory journal whose commits take the time `delay` gives for their events. */
const slowCommits = (delay: (events: ReadonlyArray<Event.Event>) => Duration.Input) =>
  Layer.effect(
    Journal.Journal,
    Effect.map(Journal.Journal, (inner) => ({
      ...inner,
      append: (runId: string, batch: Parameters<typeof inner.append>[1]) =>
        Effect.andThen(Effect.sleep(delay(batch.events)), inner.append(runId, batch))
    }))
  ).pipe(Layer.provide(Journal.layerMemory))

describe("R7 approvals", () => {
  it.effect("R7 a call that needs approval puts the run in awaiting_approval with the pending call and an expiry", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { handle, requested } = yield* startWaiting([pay])
      assert.strictEqual(yield* handle.state, "awaiting_approval")
      assert.deepStrictEqual(requested.arguments, { amount: 42, to: "acme" })
      const [pending] = yield* handle.pendingApprovals
      assert.strictEqual(pending?.callId, "call_pay")
      assert.strictEqual(pending?.tool, "pay")
      assert.strictEqual(pending?.sideEffect, "external")
      assert.strictEqual(pending?.expiresAt, requested.expiresAt)
      // Bounded by the run deadline (10 minutes by default) when no approval timeout is set.
      assert.strictEqual(requested.expiresAt - requested.at, 10 * 60 * 1000)
      assert.lengthOf(ledger, 0)
      yield* handle.cancel
    }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect(
    "R7 R9.3 an expiry is in whole milliseconds, as every store keeps it: the table's is the log's (review 184)",
    () =>
      Effect.gen(function* () {
        const { pay } = makePay()
        const { handle, requested } = yield* startWaiting([pay], { approval: "60000.5 millis" })
        assert.strictEqual(requested.expiresAt, requested.at + 60_000)
        assert.strictEqual((yield* handle.pendingApprovals)[0]?.expiresAt, requested.expiresAt)
        yield* handle.cancel
      }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R7 approve resumes the exact pending call: same arguments, call id and idempotency key, once", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { handle } = yield* startWaiting([pay])
      yield* handle.approve("call_pay", { by: "alice" })
      const result = yield* handle.result
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(ledger, [{ amount: 42, to: "acme", callId: "call_pay", key: `${result.runId}:call_pay` }])
      const decided = result.timeline.find((e): e is Event.Of<"approval.decided"> => e._tag === "approval.decided")
      assert.strictEqual(decided?.decision, "approved")
      assert.strictEqual(decided?.by, "alice")
      const states = result.timeline.flatMap((e) => (e._tag === "state.changed" ? [`${e.from}>${e.to}`] : []))
      assert.includeMembers(states, ["tool_executing>awaiting_approval", "awaiting_approval>tool_executing"])
      const t = tags(result)
      assert.isBelow(t.indexOf("approval.decided"), t.indexOf("tool.succeeded"))
      assertRoundTrips(result)
    }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R7 reject ends the run approval_rejected; the tool never runs and the model is never asked again", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { handle } = yield* startWaiting([pay])
      yield* handle.reject("call_pay", "not this vendor", { by: "bob" })
      const result = yield* handle.result
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "approval_rejected")
      assert.include(result.detail, "not this vendor")
      assert.lengthOf(ledger, 0)
      assert.lengthOf(
        result.timeline.filter((e) => e._tag === "model.requested"),
        1
      )
      const blocked = result.timeline.find((e): e is Event.Of<"tool.blocked"> => e._tag === "tool.blocked")
      assert.strictEqual(blocked?.error.code, "approval_rejected")
    }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect(
    "R7 R12 a decision whose by or reason cannot be kept is a typed InvalidDecision at the handle; the call still waits",
    () =>
      Effect.gen(function* () {
        const { pay, ledger } = makePay()
        const { handle } = yield* startWaiting([pay])
        // What code without types may pass.
        const notText = { by: 42 } as unknown as { readonly by: string }
        const byNumber = yield* Effect.flip(handle.reject("call_pay", "no", notText))
        assert.deepStrictEqual(
          [byNumber._tag, byNumber._tag === "InvalidDecision" && byNumber.field],
          ["InvalidDecision", "by"]
        )
        const nul = yield* Effect.flip(handle.approve("call_pay", { by: "eve\u0000" }))
        assert.strictEqual(nul._tag, "InvalidDecision")
        // Half of a surrogate pair: a SQL store would give back "no\uFFFD", not what was decided.
        const lone = yield* Effect.flip(handle.reject("call_pay", "no\ud800"))
        assert.strictEqual(lone._tag === "InvalidDecision" && lone.field, "reason")
        assert.include(lone.message, "half of a surrogate pair")
        // A reason no person wrote: 100,000 characters are not kept in the log or the journal.
        const long = yield* Effect.flip(handle.reject("call_pay", "x".repeat(100_000)))
        assert.strictEqual(long.message.includes("over the limit of 4096"), true, long.message)
        const longName = yield* Effect.flip(handle.approve("call_pay", { by: "a".repeat(257) }))
        assert.strictEqual(longName._tag === "InvalidDecision" && longName.field, "by")
        // Options whose `by` getter throws: a typed refusal, not a throw out of approve (review 89).
        const throwing = {
          get by(): string {
            throw new Error("x")
          }
        }
        for (const refused of [
          Effect.suspend(() => handle.approve("call_pay", throwing)),
          Effect.suspend(() => handle.reject("call_pay", "no", throwing))
        ]) {
          const e = yield* Effect.flip(refused)
          assert.strictEqual(e._tag === "InvalidDecision" && e.field, "by")
        }
        // A call id that is no string names no waiting call: a typed NotPending, never a throw or a defect.
        const untyped = handle as unknown as {
          readonly approve: (
            ...args: ReadonlyArray<unknown>
          ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision>
          readonly reject: (
            ...args: ReadonlyArray<unknown>
          ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision>
        }
        for (const attempt of [
          untyped.approve(5, { by: 5 }),
          untyped.approve(),
          untyped.approve(null, null),
          untyped.reject(undefined, "r")
        ]) {
          const refused = yield* Effect.flip(attempt)
          assert.strictEqual(refused._tag, "NotPending")
        }
        // The gate itself, asked by code without types.
        const gate = yield* Approval.ApprovalGate
        const notADecision = yield* Effect.flip(
          gate.decide(handle.runId, "call_pay", null as unknown as Approval.Decision)
        )
        assert.deepStrictEqual(
          [notADecision._tag, notADecision._tag === "InvalidDecision" && notADecision.field],
          ["InvalidDecision", "decision"]
        )
        const noRun = yield* Effect.flip(gate.decide(7 as unknown as string, "call_pay", Approval.approved()))
        assert.strictEqual(noRun._tag, "NotPending")
        const unreadable = Object.defineProperty({ _tag: "Approved" }, "by", {
          get: () => {
            throw new Error("boom")
          }
        }) as Approval.Decision
        const thrown = yield* Effect.flip(gate.decide(handle.runId, "call_pay", unreadable))
        assert.deepStrictEqual(
          [thrown._tag, thrown._tag === "InvalidDecision" && thrown.field],
          ["InvalidDecision", "decision"]
        )
        assert.lengthOf(yield* handle.pendingApprovals, 1)
        yield* handle.approve("call_pay", { by: "alice" })
        const result = yield* handle.result
        assert.strictEqual(result.status, "completed")
        assert.lengthOf(ledger, 1)
      }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect(
    "R7 R12 a blank by (empty, spaces, zero-width) names nobody: a typed InvalidDecision; the call still waits",
    () =>
      Effect.gen(function* () {
        const { pay, ledger } = makePay()
        const { handle } = yield* startWaiting([pay])
        for (const by of ["", "   ", "\u200b"]) {
          const rejected = yield* Effect.flip(handle.reject("call_pay", "no", { by }))
          assert.deepInclude(rejected, { _tag: "InvalidDecision", field: "by", detail: "is blank: it names nobody" })
          const approved = yield* Effect.flip(handle.approve("call_pay", { by }))
          assert.deepInclude(approved, { _tag: "InvalidDecision", field: "by" })
        }
        // The gate itself, asked by run id and call id (a UI), refuses it too.
        const gate = yield* Approval.ApprovalGate
        const atGate = yield* Effect.flip(gate.decide(handle.runId, "call_pay", Approval.rejected("no", " ")))
        assert.deepInclude(atGate, { _tag: "InvalidDecision", field: "by" })
        assert.lengthOf(yield* handle.pendingApprovals, 1)
        // No `by` at all is no one named, as before.
        yield* handle.approve("call_pay")
        assert.strictEqual((yield* handle.result).status, "completed")
        assert.lengthOf(ledger, 1)
      }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R7 R5.3 cancel while waiting ends the run cancelled and withdraws the request", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { handle } = yield* startWaiting([pay])
      const result = yield* handle.cancel
      assert.strictEqual(result.status, "cancelled")
      assert.strictEqual(result.stopReason, "cancelled")
      assert.lengthOf(yield* handle.pendingApprovals, 0)
      const late = yield* Effect.exit(handle.approve("call_pay"))
      assert.isTrue(Exit.isFailure(late))
      assert.lengthOf(ledger, 0)
      const decided = result.timeline.find((e): e is Event.Of<"approval.decided"> => e._tag === "approval.decided")
      assert.strictEqual(decided?.decision, "withdrawn")
    }).pipe(Effect.scoped, Effect.provide(layers))
  )

  describe("a gate's own decisions (R7, R12)", () => {
    /** A sensitive payment that needs approval, decided by `request`. */
    const decidedBy = (request: Approval.Gate["request"]) => {
      const ran: Array<string> = []
      const login = Tool.make({
        name: "login",
        description: "Logs in",
        input: Schema.Struct({ password: Schema.RedactedFromValue(Schema.String) }),
        output: Schema.String,
        sideEffect: "external",
        needsApproval: true,
        handler: () => Effect.sync(() => ran.push("ran")).pipe(Effect.as("in"))
      })
      const gate: Approval.Gate = {
        request,
        decide: () => Effect.void,
        expire: () => Effect.succeed(Option.none()),
        pending: Effect.succeed([])
      }
      const run = Run.run({ goal: "log in", tools: [login], time: { approval: "300 millis" } }).pipe(
        Effect.provide(
          Layer.mergeAll(
            ScriptedModel.layer([ScriptedModel.toolCall("login", { password: "hunter2-TOPSECRET" }, "c1")]),
            NodeServices.layer,
            Layer.succeed(Approval.ApprovalGate, gate)
          )
        )
      )
      return { run, ran }
    }

    it.effect(
      "R12 R3.1 a reviewer's reason or name that quotes the call's secret is masked in the result and the log",
      () =>
        Effect.gen(function* () {
          const { run, ran } = decidedBy(() =>
            Effect.succeed(Approval.rejected("hunter2-TOPSECRET is the shared one", "hunter2-TOPSECRET"))
          )
          const result = yield* run
          assert.strictEqual(result.stopReason, "approval_rejected")
          assert.deepStrictEqual(ran, [])
          const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
          assert.notInclude(derived, "TOPSECRET")
          assert.notInclude(result.detail, "TOPSECRET")
          assert.include(result.detail, "<redacted> is the shared one")
        })
    )

    it.effect(
      "R7 R12 a gate's decision past a handle's limits (a 2 MB reason, a NUL) ends the run, the call never run",
      () =>
        Effect.gen(function* () {
          for (const decision of [Approval.rejected("r".repeat(2_000_000)), Approval.approved("ops\u0000")]) {
            const { run, ran } = decidedBy(() => Effect.succeed(decision))
            const result = yield* run
            assert.strictEqual(result.stopReason, "internal_error")
            assert.include(result.detail, "the approval gate's decision")
            assert.isBelow(result.detail.length, 2_000)
            assert.deepStrictEqual(ran, [])
          }
        })
    )

    it.effect(
      "R12 R7 a gate whose expire answers no Option (null, a Proxy that throws, {}, 42) ends the run internal_error naming it (review 125)",
      () =>
        Effect.gen(function* () {
          const throwing = new Proxy(
            {},
            {
              get: () => {
                throw new Error("hunter2-TOPSECRET")
              },
              has: () => {
                throw new Error("hunter2-TOPSECRET")
              }
            }
          )
          for (const answer of [null, undefined, throwing, {}, 42, "None"]) {
            const ran: Array<string> = []
            const pay = Tool.make({
              name: "pay",
              description: "Pay",
              input: Schema.Struct({}),
              output: Schema.String,
              sideEffect: "external",
              needsApproval: true,
              handler: () => Effect.sync(() => ran.push("ran")).pipe(Effect.as("paid"))
            })
            const gate: Approval.Gate = {
              ...Approval.makeMemory(),
              // as: a gate of a caller without types
              expire: () => Effect.succeed(answer as unknown as Option.Option<Approval.Decision>)
            }
            const result = yield* TestClockDriver.drive(
              Run.run({ goal: "pay", tools: [pay], time: { approval: "300 millis" } }).pipe(
                Effect.provide(
                  Layer.mergeAll(
                    ScriptedModel.layer([ScriptedModel.toolCall("pay", {}, "c1")]),
                    NodeServices.layer,
                    Layer.succeed(Approval.ApprovalGate, gate)
                  )
                )
              )
            )
            // Before, null and the Proxy ended the run on an unnamed defect: "a defect (TypeError)".
            assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"], result.detail)
            assert.include(result.detail, "the approval gate's expire")
            assert.notInclude(result.detail, "TOPSECRET")
            assert.deepStrictEqual(ran, [])
            // The call never ran, and its wait is closed on the log.
            const decided = result.timeline.filter((e) => e._tag === "approval.decided").map((e) => e.decision)
            assert.deepStrictEqual(decided, ["withdrawn"])
            assertRoundTrips(result)
          }
        })
    )

    it.effect("R4.1 R7 a gate that cannot be interrupted does not hold the run past its approval timeout", () =>
      Effect.gen(function* () {
        const { run, ran } = decidedBy(() => Effect.uninterruptible(Effect.never))
        const result = yield* TestClockDriver.drive(run)
        assert.strictEqual(result.stopReason, "approval_expired")
        assert.strictEqual(result.elapsedMillis, 300)
        assert.deepStrictEqual(ran, [])
      })
    )

    it.effect(
      "R4.1 R5.3 R7 gates that cannot be interrupted hold no batch of concurrent calls past the timeout or a cancel",
      () =>
        Effect.gen(function* () {
          const ran: Array<string> = []
          const tools = ["a", "b"].map((name) =>
            Tool.make({
              name,
              description: name,
              input: Schema.Struct({}),
              output: Schema.String,
              sideEffect: "external",
              needsApproval: true,
              handler: () => Effect.sync(() => ran.push(name)).pipe(Effect.as("ok"))
            })
          )
          const gate: Approval.Gate = {
            request: () => Effect.uninterruptible(Effect.never),
            decide: () => Effect.void,
            expire: () => Effect.succeed(Option.none()),
            pending: Effect.succeed([])
          }
          const services = Layer.mergeAll(
            ScriptedModel.layer([ScriptedModel.toolCalls(["a", {}, "c1"], ["b", {}, "c2"])]),
            NodeServices.layer,
            Layer.succeed(Approval.ApprovalGate, gate)
          )
          const options = {
            goal: "g",
            tools,
            concurrency: 2,
            time: { approval: "300 millis", stopGrace: "2 seconds" }
          } as const
          const expired = yield* TestClockDriver.drive(Run.run(options).pipe(Effect.provide(services)))
          assert.strictEqual(expired.stopReason, "approval_expired")
          assert.strictEqual(expired.elapsedMillis, 300)
          const cancelled = yield* TestClockDriver.drive(
            Effect.gen(function* () {
              const handle = yield* Run.start(options)
              yield* Effect.sleep("100 millis")
              return yield* handle.cancel
            }).pipe(Effect.scoped, Effect.provide(services))
          )
          assert.strictEqual(cancelled.stopReason, "cancelled")
          assert.strictEqual(cancelled.elapsedMillis, 100)
          assert.notInclude(cancelled.detail, "left behind")
          assert.deepStrictEqual(ran, [])
        })
    )
  })

  it.effect("R7 deciding a call that is not waiting is a typed NotPending error with a clear message", () =>
    Effect.gen(function* () {
      const gate = Approval.makeMemory()
      const error = yield* Effect.flip(gate.decide("run-1", "call-9", Approval.approved()))
      assert.instanceOf(error, Approval.NotPending)
      assert.strictEqual(
        error.message,
        "No call call-9 of run run-1 is waiting for approval (never requested, already decided, or withdrawn)"
      )
    })
  )

  it.effect(
    "R7 the in-memory gate refuses a decision made at or after the call's expiry, even before the run withdraws it",
    () =>
      Effect.gen(function* () {
        const gate = Approval.makeMemory()
        const request: Approval.Request = {
          runId: "r",
          callId: "c",
          tool: "pay",
          arguments: {},
          sideEffect: "external",
          requestedAt: 0,
          expiresAt: 100
        }
        const waiting = yield* Effect.forkChild(gate.request(request))
        yield* Effect.yieldNow
        yield* TestClock.adjust(99)
        assert.lengthOf(yield* gate.pending, 1)
        yield* TestClock.adjust(1)
        const late = yield* Effect.flip(gate.decide("r", "c", Approval.approved("alice")))
        assert.strictEqual(late._tag, "NotPending")
        // The request still waits for its run to withdraw it: the decision reached nobody.
        assert.isUndefined(waiting.pollUnsafe())
        yield* Fiber.interrupt(waiting)
        assert.lengthOf(yield* gate.pending, 0)
      })
  )

  it.effect("R7 a decision made on the gate by run id and call id (a UI, not the handle) resumes the run", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { handle } = yield* startWaiting([pay])
      const gate = yield* Approval.ApprovalGate
      const [pending] = yield* gate.pending
      assert.strictEqual(pending?.runId, handle.runId)
      yield* gate.decide(handle.runId, "call_pay", Approval.approved("ops"))
      assert.strictEqual((yield* handle.result).status, "completed")
      assert.lengthOf(ledger, 1)
      // Decided once: a second decision finds nothing pending.
      assert.isTrue(Exit.isFailure(yield* Effect.exit(gate.decide(handle.runId, "call_pay", Approval.approved()))))
    }).pipe(Effect.scoped, Effect.provide(layers))
  )

  it.effect("R7 a rejection in a concurrent batch interrupts the rest of the batch", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const twoPayments = ScriptedModel.toolCalls(
        ["pay", { amount: 1, to: "a" }, "call_a"],
        ["pay", { amount: 2, to: "b" }, "call_b"]
      )
      const handle = yield* Run.start({ goal: "pay", tools: [pay], concurrency: 2 }).pipe(
        Effect.provide(ScriptedModel.layer([twoPayments, ScriptedModel.finalAnswer("paid")]))
      )
      const both = yield* Stream.runCollect(
        Stream.take(
          Stream.filter(handle.events, (e) => e._tag === "approval.requested"),
          2
        )
      )
      assert.lengthOf(both, 2)
      yield* handle.reject("call_a", "no")
      const result = yield* handle.result
      assert.strictEqual(result.stopReason, "approval_rejected")
      const withdrawn = result.timeline.filter(
        (e): e is Event.Of<"approval.decided"> => e._tag === "approval.decided" && e.decision === "withdrawn"
      )
      assert.deepStrictEqual(
        withdrawn.map((e) => e.callId),
        ["call_b"]
      )
      assert.lengthOf(ledger, 0)
      assert.lengthOf(yield* handle.pendingApprovals, 0)
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )
})

/** An idempotent read that fails once with a connection reset, then succeeds: its retry sleeps 50 ms. */
const makeFlaky = () => {
  let calls = 0
  const flaky = Tool.make({
    name: "flaky",
    description: "a read that fails once",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "read",
    idempotent: true,
    handler: () =>
      Effect.suspend(() =>
        ++calls === 1
          ? Effect.fail(FailureBoundary.connection({ source: "tool", detail: "reset" }))
          : Effect.succeed("fine")
      )
  })
  return { flaky, calls: () => calls }
}

const transitions = (result: RunResult.RunResult) =>
  result.timeline.flatMap((e) => (e._tag === "state.changed" ? [`${e.from}>${e.to}`] : []))

/** Starts a batch of `calls` (concurrency 2), waits for its approval request, lets the retry sleep pass, approves. */
const concurrentBatch = (calls: ScriptedModel.Step) =>
  Effect.gen(function* () {
    const { pay, ledger } = makePay()
    const { flaky, calls: flakyCalls } = makeFlaky()
    const handle = yield* Run.start({
      goal: "x",
      tools: [pay, flaky],
      concurrency: 2,
      recovery: { backoff: Recovery.backoff({ jitter: false }) }
    }).pipe(Effect.provide(ScriptedModel.layer([calls, ScriptedModel.finalAnswer("done")])))
    yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
    yield* TestClock.adjust("1 second")
    // The retry has slept and succeeded; the approval still waits, and the run says so.
    assert.strictEqual(flakyCalls(), 2)
    assert.strictEqual(yield* handle.state, "awaiting_approval")
    yield* handle.approve("call_pay")
    const result = yield* handle.result
    return { result, ledger }
  }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))

describe("R7 a decision given as soon as the run asks", () => {
  it.live(
    "R7 approving right on approval.requested is taken, after a model retry too: never NotPending for a call the run asked about",
    () =>
      Effect.gen(function* () {
        // After a model retry the run's fiber went on past the event before the gate held the call:
        // 40 of 60 such approvals failed NotPending while the run waited in awaiting_approval.
        for (let i = 0; i < 20; i++) {
          const { pay, ledger } = makePay()
          const failing = FailureBoundary.http({ status: 503, now: Date.now() })
          const decided = yield* Effect.gen(function* () {
            const handle = yield* Run.start({
              goal: "pay acme",
              tools: [pay],
              recovery: { backoff: Recovery.backoff({ base: "1 millis", jitter: false }) }
            }).pipe(
              Effect.provide(ScriptedModel.layer(i % 2 === 0 ? [failing, ...script] : [failing, failing, ...script]))
            )
            yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
            yield* handle.approve("call_pay", { by: "ops" })
            // Taken once: a second decision is refused.
            const again = yield* Effect.flip(handle.reject("call_pay", "too late"))
            assert.strictEqual(again._tag, "NotPending")
            return yield* handle.result
          }).pipe(Effect.scoped)
          assert.deepStrictEqual([decided.status, decided.stopReason], ["completed", "goal_reached"])
          const verdict = decided.timeline.find((e) => e._tag === "approval.decided")
          assert.deepInclude(verdict, { decision: "approved", by: "ops" })
          assert.lengthOf(ledger, 1)
        }
      }).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )

  it.live(
    "R7 a decision given before the gate is asked still goes to the gate: a gate that refuses the call is obeyed",
    () =>
      Effect.gen(function* () {
        // Commits that take 30 ms: a wide moment between approval.requested and the gate being asked.
        const slowJournal = slowCommits(() => "30 millis")
        // A gate that refuses every payment by policy, and holds no call anyone could decide.
        const asked: Array<string> = []
        const policy: Approval.Gate = {
          request: (request) =>
            Effect.sync(() => {
              asked.push(request.callId)
              return Approval.rejected("policy: no payments", "policy")
            }),
          decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
          pending: Effect.succeed([])
        }
        const { pay, ledger } = makePay()
        const outcome = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "pay acme", tools: [pay] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          const approved = yield* Effect.flip(handle.approve("call_pay", { by: "mallory" }))
          return { approved, result: yield* handle.result }
        }).pipe(
          Effect.scoped,
          Effect.provide(
            Layer.mergeAll(ScriptedModel.layer(script), slowJournal, Layer.succeed(Approval.ApprovalGate, policy))
          )
        )
        // The handle's decision overrode the gate: the payment ran, "approved by mallory".
        assert.strictEqual(outcome.approved._tag, "NotPending")
        assert.deepStrictEqual(
          [outcome.result.stopReason, ledger.length, asked],
          ["approval_rejected", 0, ["call_pay"]]
        )
      })
  )

  it.live(
    "R7 R8 a decision taken while the run commits its request, the deadline then passing: the log keeps the decision",
    () =>
      Effect.gen(function* () {
        // The commit of approval.requested takes 400 ms; the run's deadline comes at 250 ms.
        const slowJournal = slowCommits((events) =>
          events.some((e) => e._tag === "approval.requested") ? "400 millis" : "0 millis"
        )
        const { pay, ledger } = makePay()
        const result = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "pay acme", tools: [pay], time: { run: "250 millis" } })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          yield* handle.approve("call_pay", { by: "ops" })
          return yield* handle.result
        }).pipe(
          Effect.scoped,
          Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), slowJournal, Approval.layerMemory))
        )
        assert.deepStrictEqual([result.stopReason, ledger.length], ["run_timeout", 0])
        // It said "withdrawn", while the gate had taken the approval and told the caller so.
        const decided = result.timeline.find((e) => e._tag === "approval.decided")
        assert.deepInclude(decided, { decision: "approved", by: "ops" })
        assert.isTrue(result.timeline.some((e) => e._tag === "tool.interrupted" || e._tag === "tool.blocked"))
      })
  )

  it.effect("R7 R4.2 an approval expires at its recorded expiry, however long the request's commit takes", () =>
    Effect.gen(function* () {
      // The commit of approval.requested takes 200 ms of the 300 ms the call has to be decided.
      const slowJournal = slowCommits((events) =>
        events.some((e) => e._tag === "approval.requested") ? "200 millis" : "0 millis"
      )
      const { pay, ledger } = makePay()
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay acme", tools: [pay], time: { approval: "300 millis" } })
      ).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), slowJournal, Approval.layerMemory)))
      const requested = result.timeline.find((e) => e._tag === "approval.requested")
      const expired = result.timeline.find((e) => e._tag === "approval.decided")
      assert.deepStrictEqual([result.stopReason, ledger.length], ["approval_expired", 0])
      // It expired 500 ms after the request: the limit counted from the end of the commit.
      assert.strictEqual((expired?.at ?? 0) - (requested?.at ?? 0), 300)
      assert.strictEqual(requested?._tag === "approval.requested" ? requested.expiresAt : undefined, expired?.at)
    })
  )

  it.effect("R7 a decision for a call the run stopped asking about is NotPending, even before the gate held it", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { handle } = yield* startWaiting([pay])
      const result = yield* handle.cancel
      assert.strictEqual(result.status, "cancelled")
      const refused = yield* Effect.flip(handle.approve("call_pay"))
      assert.strictEqual(refused._tag, "NotPending")
      assert.lengthOf(ledger, 0)
    }).pipe(Effect.scoped, Effect.provide(layers))
  )
})

describe("R7 approvals in concurrent batches and at deadlines", () => {
  it.effect("R7 R1 an approval waits while a sibling's retry sleeps: awaiting_approval wins, no illegal move", () =>
    Effect.gen(function* () {
      const { result, ledger } = yield* concurrentBatch(
        ScriptedModel.toolCalls(["pay", { amount: 1, to: "a" }, "call_pay"], ["flaky", {}, "call_flaky"])
      )
      assert.strictEqual(result.status, "completed")
      assert.lengthOf(ledger, 1)
      assert.notInclude(transitions(result), "awaiting_approval>recovering")
    })
  )

  it.effect("R7 R1 a sibling's retry sleeps first, then an approval is requested: recovering → awaiting_approval", () =>
    Effect.gen(function* () {
      const { result, ledger } = yield* concurrentBatch(
        ScriptedModel.toolCalls(["flaky", {}, "call_flaky"], ["pay", { amount: 1, to: "a" }, "call_pay"])
      )
      assert.strictEqual(result.status, "completed")
      assert.lengthOf(ledger, 1)
      assert.include(transitions(result), "recovering>awaiting_approval")
    })
  )

  it.effect("R7 R4.2 two approvals in one batch, the step deadline passes: step_timeout, the other is withdrawn", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const result = yield* drive(
        Run.run({
          goal: "x",
          tools: [pay],
          concurrency: 2,
          time: { run: "10 seconds", step: "1 second", approval: "3 seconds" }
        })
      ).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCalls(
              ["pay", { amount: 1, to: "a" }, "call_a"],
              ["pay", { amount: 2, to: "b" }, "call_b"]
            )
          ])
        )
      )
      assert.strictEqual(result.stopReason, "step_timeout")
      const decisions = result.timeline.flatMap((e) => (e._tag === "approval.decided" ? [e.decision] : []))
      assert.sameMembers(decisions, ["expired", "withdrawn"])
      assertRoundTrips(result)
      assert.lengthOf(ledger, 0)
    }).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )

  it.effect("R7 R3.8 a rejection that cuts off a running write in its batch ends the run unknown_outcome", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const send = Tool.make({
        name: "send",
        description: "send an e-mail (never answers)",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "external",
        handler: () => Effect.never
      })
      const handle = yield* Run.start({ goal: "x", tools: [pay, send], concurrency: 2 }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCalls(["pay", { amount: 1, to: "a" }, "call_pay"], ["send", {}, "call_send"])
          ])
        )
      )
      yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
      yield* handle.reject("call_pay", "no")
      const result = yield* handle.result
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.strictEqual(result.status, "unknown_outcome")
      assert.deepStrictEqual(
        result.pendingActions.map((a) => a.callId),
        ["call_send"]
      )
      assert.lengthOf(ledger, 0)
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )

  it.effect("R5.2 R3.8 a rejection that stops the batch as a handler returns never loses the call's record", () =>
    Effect.gen(function* () {
      const pay = Tool.make({
        name: "pay",
        description: "pays, once a person approves",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "external",
        needsApproval: true,
        handler: () => Effect.succeed("paid")
      })
      const rejecting: Approval.Gate = {
        request: () => Effect.succeed(Approval.rejected("no", "ops")),
        decide: () => Effect.void,
        expire: () => Effect.succeed(Option.none()),
        pending: Effect.succeed([])
      }
      // The write acts, then works on: at some amount of work the scheduler hands over to the
      // rejection right as the handler returns, before its result is recorded.
      for (let work = 1900; work < 2150; work += 3) {
        const acted: Array<string> = []
        const write = Tool.make({
          name: "write",
          description: "writes, then works on",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "write",
          handler: () =>
            Effect.sync(() => acted.push("acted")).pipe(
              Effect.andThen(
                Effect.forEach(
                  Array.from({ length: work }, (_, i) => i),
                  Effect.succeed,
                  { discard: true }
                )
              ),
              Effect.as("written")
            )
        })
        const result = yield* TestClockDriver.drive(
          Run.run({ goal: "x", tools: [write, pay], concurrency: 2 }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ScriptedModel.toolCalls(["write", {}], ["pay", {}]),
                ScriptedModel.finalAnswer("done")
              ])
            ),
            Effect.provideService(Approval.ApprovalGate, rejecting)
          )
        )
        const ends = result.timeline.filter(
          (e) => (e._tag === "tool.succeeded" || e._tag === "tool.interrupted") && e.callId === "call_1"
        )
        if (acted.length > 0) {
          assert.lengthOf(ends, 1, `work ${work}: the write acted; its call has one end`)
          // It acted: listed as done, or as in doubt, never as nothing.
          const listed = [...result.sideEffects, ...result.pendingActions].map((a) => a.callId)
          assert.include(listed, "call_1", `work ${work}`)
        }
      }
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("R7 R6.3 a rejection after plan steps were done ends the run partial, listing what was done", () =>
    Effect.gen(function* () {
      const { pay, ledger } = makePay()
      const { flaky } = makeFlaky()
      const handle = yield* Run.start({
        goal: "x",
        tools: [pay, flaky],
        recovery: { backoff: Recovery.backoff({ jitter: false }) },
        validation: { plan: [Validation.step("read", "read it", [Criterion.toolSucceeded("flaky")])] }
      }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCall("flaky", {}, "call_flaky"),
            ScriptedModel.toolCall("pay", { amount: 1, to: "a" }, "call_pay")
          ])
        )
      )
      const requested = Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
      const waiting = yield* Effect.forkChild(requested)
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(waiting)
      yield* handle.reject("call_pay", "no")
      const result = yield* handle.result
      assert.strictEqual(result.stopReason, "approval_rejected")
      assert.strictEqual(result.status, "partial")
      assert.deepStrictEqual(
        result.completed.map((item) => item.id),
        ["read"]
      )
      assert.lengthOf(ledger, 0)
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )

  it.effect("R7 R6.3 the run deadline while a call awaits approval: plan steps already done make it partial", () =>
    Effect.gen(function* () {
      const { pay } = makePay()
      const { flaky } = makeFlaky()
      const result = yield* drive(
        Run.run({
          goal: "x",
          tools: [pay, flaky],
          time: { run: "2 seconds" },
          recovery: { backoff: Recovery.backoff({ jitter: false }) },
          validation: { plan: [Validation.step("read", "read it", [Criterion.toolSucceeded("flaky")])] }
        })
      ).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCall("flaky", {}, "call_flaky"),
            ScriptedModel.toolCall("pay", { amount: 1, to: "a" }, "call_pay")
          ])
        )
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(result.status, "partial")
      assert.deepStrictEqual(
        result.completed.map((item) => item.id),
        ["read"]
      )
    }).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, Approval.layerMemory)))
  )

  it.effect("R7 R3.1 an approval shows a Redacted argument masked: to the person, in the events, in the result", () =>
    Effect.gen(function* () {
      const transfer = Tool.make({
        name: "transfer",
        description: "Transfer with a one-time code",
        input: Schema.Struct({ to: Schema.String, code: Schema.RedactedFromValue(Schema.String) }),
        output: Schema.String,
        sideEffect: "external",
        needsApproval: true,
        handler: ({ to }) => Effect.succeed(`sent to ${to}`)
      })
      const handle = yield* Run.start({ goal: "transfer", tools: [transfer] })
      const requested = yield* Stream.runHead(
        Stream.filter(handle.events, (e): e is Event.Of<"approval.requested"> => e._tag === "approval.requested")
      )
      const request = Option.getOrThrow(requested)
      assert.deepStrictEqual(request.arguments, { to: "acme", code: "<redacted>" })
      const pending = yield* handle.pendingApprovals
      assert.deepStrictEqual(pending[0]?.arguments, { to: "acme", code: "<redacted>" })
      yield* handle.approve(request.callId)
      const result = yield* handle.result
      assert.strictEqual(result.status, "completed")
      assert.notInclude(JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded")), "otp-98765")
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Layer.mergeAll(
          ScriptedModel.layer([
            ScriptedModel.toolCall("transfer", { to: "acme", code: "otp-98765" }),
            ScriptedModel.finalAnswer("sent")
          ]),
          NodeServices.layer,
          Approval.layerMemory
        )
      )
    )
  )
  it.effect(
    "R7 R12 two live runs under one id: the second cannot put up its call, a decision acts in one run only",
    () =>
      Effect.gen(function* () {
        const { pay, ledger } = makePay()
        const first = yield* startWaiting([pay])
        const second = yield* Run.start({ goal: "pay acme", runId: first.handle.runId, tools: [pay] })
        const refused = yield* second.result
        assert.strictEqual(refused.stopReason, "internal_error")
        assert.include(refused.detail, `two live runs share the run id ${first.handle.runId} (run ids must be unique)`)
        assert.lengthOf(yield* first.handle.pendingApprovals, 1)
        yield* first.handle.approve(first.requested.callId, { by: "ops" })
        const result = yield* first.handle.result
        assert.strictEqual(result.status, "completed", result.detail)
        assert.lengthOf(ledger, 1, "the payment ran once, for the run that asked first")
      }).pipe(
        Effect.scoped,
        Effect.provide(
          Layer.mergeAll(
            // Each run's model asks for the same call (same id) at its first iteration.
            ScriptedModel.layerFunction((request) =>
              request.iteration === 1
                ? ScriptedModel.toolCall("pay", { amount: 42, to: "acme" }, "call_pay")
                : ScriptedModel.finalAnswer("paid")
            ),
            NodeServices.layer,
            Approval.layerMemory
          )
        )
      )
  )
})
