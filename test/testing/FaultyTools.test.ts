import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import type * as Model from "../../src/model/Model.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"
import { echo } from "../support/tools.ts"

const exact = Recovery.backoff({ jitter: false })
const final = FaultyModel.respond(ScriptedModel.finalAnswer("done"))
const call = (name: string, args: unknown, id: string) => FaultyModel.respond(ScriptedModel.toolCall(name, args, id))

const runWith = (
  model: Layer.Layer<Model.Model>,
  options: Omit<Run.Options<Tool.Any<never>>, "goal" | "runId">,
  permission?: Permission.Options
) =>
  drive(Run.run({ goal: "x", runId: "run-1", ...options })).pipe(
    Effect.provide(
      permission === undefined
        ? Layer.mergeAll(model, NodeServices.layer)
        : Layer.mergeAll(model, NodeServices.layer, Layer.provide(Permission.layer(permission), NodeServices.layer))
    )
  )

/** A retryable failure whose message differs per call, so the repeated-failure policy does not fire first. */
const distinctFailure = (c: FaultyTools.Call) =>
  new Failure.Retryable({
    source: "tool",
    category: "unavailable",
    code: "unavailable",
    attempts: 1,
    hint: `the service is busy (call ${c.n})`
  })

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

describe("FaultyTools", () => {
  it("R10 a fault that cannot be injected as written is a RangeError naming it", () => {
    const ledgered = (behaviour: unknown) => () =>
      FaultyTools.ledgered({
        name: "pay",
        idempotent: false,
        sideEffect: "external",
        behaviour: behaviour as ReadonlyArray<FaultyTools.Behaviour>
      })
    assert.throws(ledgered(["apply", "aply"]), RangeError, 'behaviour[1] "aply" is not a behaviour')
    assert.throws(ledgered("apply"), RangeError, "behaviour must be an array or a function")
    for (const attempts of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => FaultyModel.alreadyRetried(503, attempts), RangeError, "attempts", String(attempts))
    }
    for (const status of [0, 42, 1000, 503.5]) {
      assert.throws(() => FaultyModel.httpError(status), RangeError, "status", String(status))
    }
    // A function's answer is checked as it is given: the handler fails naming it, the run goes on to say so.
    assert.doesNotThrow(ledgered(() => "hang"))
    for (const usage of [{ inputTokens: -1, outputTokens: 0 }, { inputTokens: 1.5, outputTokens: 0 }, {}]) {
      assert.throws(() => FaultyModel.unfinished(usage as Model.Usage), RangeError, "usage", JSON.stringify(usage))
    }
  })

  it.effect(
    "R10 R2.1 an unfinished answer that was paid for: retried, and charged to the budget that stops the run",
    () =>
      Effect.gen(function* () {
        const model = FaultyModel.make([
          FaultyModel.unfinished({ inputTokens: 300, outputTokens: 20 }),
          FaultyModel.unfinished({ inputTokens: 300, outputTokens: 20 }),
          FaultyModel.respond(ScriptedModel.finalAnswer("never asked"))
        ])
        const result = yield* drive(Run.run({ goal: "x", tools: [echo], limits: { maxTokens: 500 } })).pipe(
          Effect.provide(Layer.mergeAll(FaultyModel.layer(model), NodeServices.layer))
        )
        // The first (320 tokens) is retried; the second passes the budget (640): no third call.
        assert.deepStrictEqual(
          [result.stopReason, model.calls.length, result.counters.inputTokens],
          ["budget_exhausted", 2, 600]
        )
      })
  )

  describe("R3.8 unknown outcomes and the side-effect ledger", () => {
    it.effect("R3.8 a payment that applies then loses its answer is reconciled: the real receipt, applied once", () =>
      Effect.gen(function* () {
        const pay = FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          behaviour: ["apply_then_lose"],
          reconcile: true
        })
        const model = FaultyModel.make([call("pay", { amount: 10 }, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [pay.tool] })
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(pay.ledger.total, 1)
        assert.strictEqual(pay.ledger.count("run-1:c1"), 1)
        assert.strictEqual(pay.calls.count, 1)
        assert.deepStrictEqual(pay.reconciled, ["run-1:c1"])
        const succeeded = ofTag(result.timeline, "tool.succeeded")
        assert.deepStrictEqual(succeeded[0]?.output, { receipt: "pay-1", idempotencyKey: "run-1:c1" })
        assert.deepStrictEqual(
          ofTag(result.timeline, "tool.reconciled").map((e) => [e.verdict, e.idempotencyKey]),
          [["applied", "run-1:c1"]]
        )
        assert.strictEqual(result.counters.recoveryAttempts, 0)
        assert.deepStrictEqual(
          result.sideEffects.map((s) => s.callId),
          ["c1"]
        )
      })
    )

    it.effect("R3.8 without reconcile the run ends unknown_outcome and the payment is still applied exactly once", () =>
      Effect.gen(function* () {
        const pay = FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          behaviour: ["apply_then_lose"],
          recoverErrors: true
        })
        const model = FaultyModel.make([call("pay", { amount: 10 }, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [pay.tool], recovery: { backoff: exact } })
        assert.strictEqual(result.status, "unknown_outcome")
        assert.strictEqual(result.stopReason, "unknown_outcome")
        assert.strictEqual(pay.ledger.total, 1)
        assert.strictEqual(pay.ledger.count("run-1:c1"), 1)
        // Never retried blindly: one handler invocation, no retry started, the model not asked again.
        assert.strictEqual(pay.calls.count, 1)
        assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
        assert.strictEqual(model.calls.length, 1)
        assert.strictEqual(ofTag(result.timeline, "tool.failed")[0]?.error.failure?.classification, "unknown")
        assert.include(result.detail, "pay (c1)")
      })
    )

    it.effect("R3.8 even an idempotent tool's unknown outcome is not retried: one application, one invocation", () =>
      Effect.gen(function* () {
        const pay = FaultyTools.ledgered({
          name: "pay",
          idempotent: true,
          sideEffect: "external",
          behaviour: ["apply_then_lose"],
          maxRetries: 4
        })
        const model = FaultyModel.make([call("pay", { amount: 10 }, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [pay.tool], recovery: { backoff: exact } })
        assert.strictEqual(result.stopReason, "unknown_outcome")
        assert.strictEqual(pay.calls.count, 1)
        assert.strictEqual(pay.ledger.total, 1)
      })
    )

    it.effect("R3.8 R3.3 resends after NotApplied keep the tool's maxRetries and the growing backoff", () =>
      Effect.gen(function* () {
        const pay = FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          maxRetries: 2,
          behaviour: () => "lose_before_apply",
          reconcile: true
        })
        const model = FaultyModel.make([call("pay", { amount: 10 }, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [pay.tool], recovery: { backoff: exact } })
        // One call plus maxRetries resends, never more, and nothing applied.
        assert.strictEqual(pay.calls.forKey("run-1:c1").length, 3)
        assert.strictEqual(pay.ledger.total, 0)
        const retries = ofTag(result.timeline, "recovery.started")
        assert.deepStrictEqual(
          retries.map((e) => [e.attempt, e.delayMillis]),
          [
            [1, 50],
            [2, 100]
          ]
        )
        assert.strictEqual(result.stopReason, "tool_error")
      })
    )

    it.effect(
      "R3.8 a status query answering NotApplied: the runtime sends it again under the same key, applied once",
      () =>
        Effect.gen(function* () {
          const pay = FaultyTools.ledgered({
            name: "pay",
            idempotent: false,
            sideEffect: "external",
            behaviour: ["lose_before_apply", "apply"],
            reconcile: true
          })
          const model = FaultyModel.make([call("pay", { amount: 10 }, "c1"), final])
          const result = yield* runWith(FaultyModel.layer(model), { tools: [pay.tool], recovery: { backoff: exact } })
          assert.strictEqual(result.status, "completed")
          assert.lengthOf(ofTag(result.timeline, "tool.failed"), 0)
          assert.deepStrictEqual(
            ofTag(result.timeline, "tool.reconciled").map((e) => e.verdict),
            ["not_applied"]
          )
          // Sent twice under one key: lost before applying, then applied by the runtime's resend.
          assert.strictEqual(pay.calls.forKey("run-1:c1").length, 2)
          assert.strictEqual(pay.ledger.count("run-1:c1"), 1)
          assert.strictEqual(pay.ledger.total, 1)
          const [resend] = ofTag(result.timeline, "recovery.started")
          assert.strictEqual(resend?.kind, "tool_retry")
          assert.strictEqual(resend?.cause, "not_applied")
          assert.strictEqual(resend?.callId, "c1")
          // The model was asked once more only for its final answer: it never had to resend.
          assert.strictEqual(model.calls.length, 2)
        })
    )

    it.effect("R3.8 an undecidable status query ends the run unknown_outcome with the action applied once", () =>
      Effect.gen(function* () {
        const pay = FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          behaviour: ["apply_then_lose"],
          reconcile: () => ({ _tag: "Undecidable", detail: "the bank has no record yet" }),
          recoverErrors: true
        })
        const model = FaultyModel.make([call("pay", { amount: 10 }, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [pay.tool] })
        assert.strictEqual(result.stopReason, "unknown_outcome")
        assert.include(result.detail, "the bank has no record yet")
        assert.strictEqual(pay.ledger.total, 1)
        assert.strictEqual(pay.calls.count, 1)
      })
    )

    it.effect("R3.8 idempotency keys are stable across retries: a flaky tool retried twice sees one key", () =>
      Effect.gen(function* () {
        const lookup = FaultyTools.flaky({ name: "lookup", failures: 2 })
        const model = FaultyModel.make([call("lookup", { q: "a" }, "c1"), call("lookup", { q: "b" }, "c2"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [lookup.tool], recovery: { backoff: exact } })
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(
          lookup.calls.forCall("c1").map((c) => [c.idempotencyKey, c.attempt, c.at]),
          [
            ["run-1:c1", 1, 0],
            ["run-1:c1", 2, 50],
            ["run-1:c1", 3, 150]
          ]
        )
        // A new call gets a new key.
        assert.deepStrictEqual(lookup.calls.keys, ["run-1:c1", "run-1:c2"])
        assert.deepStrictEqual(
          ofTag(result.timeline, "recovery.started").map((e) => [e.kind, e.attempt, e.cause]),
          [
            ["tool_retry", 1, "connection_error"],
            ["tool_retry", 2, "connection_error"]
          ]
        )
      })
    )

    it.effect("R3.8 an idempotent ledgered write retried after refusals applies once under its one key", () =>
      Effect.gen(function* () {
        const save = FaultyTools.ledgered({
          name: "save",
          idempotent: true,
          sideEffect: "write",
          behaviour: ["fail_before_apply", "fail_before_apply", "apply"]
        })
        const model = FaultyModel.make([call("save", { doc: 1 }, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [save.tool], recovery: { backoff: exact } })
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(
          save.calls.all.map((c) => c.idempotencyKey),
          ["run-1:c1", "run-1:c1", "run-1:c1"]
        )
        assert.strictEqual(save.ledger.count("run-1:c1"), 1)
        assert.strictEqual(save.ledger.total, 1)
      })
    )

    it.effect("R3.8 a ledgered idempotent tool deduplicates by key, a non-idempotent one does not", () =>
      Effect.gen(function* () {
        const context: Tool.CallContext = { runId: "r", callId: "c", idempotencyKey: "r:c", settle: () => {} }
        const dedupe = FaultyTools.ledgered({ name: "a", idempotent: true, sideEffect: "write", behaviour: [] })
        const twice = FaultyTools.ledgered({ name: "b", idempotent: false, sideEffect: "write", behaviour: [] })
        for (const t of [dedupe, twice]) {
          yield* t.tool.handler({}, context)
          yield* t.tool.handler({}, context)
        }
        assert.strictEqual(dedupe.ledger.count("r:c"), 1)
        assert.strictEqual(twice.ledger.count("r:c"), 2)
        assert.deepStrictEqual(
          twice.calls.all.map((c) => c.attempt),
          [1, 2]
        )
      })
    )
  })

  describe("R3.11 hard stops no recovery path can bypass", () => {
    it.effect("R3.11 R3.6 a permission denial is never retried and never spends the correction budget", () =>
      Effect.gen(function* () {
        const lookup = FaultyTools.flaky({ name: "lookup", failures: 0, maxRetries: 4 })
        const model = FaultyModel.make([
          call("lookup", { q: "a" }, "c1"),
          call("lookup", { q: "b" }, "c2"),
          call("echo", { text: "hi" }, "c3"),
          final
        ])
        const result = yield* runWith(
          FaultyModel.layer(model),
          { tools: [lookup.tool, echo], recovery: { backoff: exact, correctionBudget: 0, maxRecoveries: 0 } },
          { allowTools: ["echo"] }
        )
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(lookup.calls.count, 0)
        assert.deepStrictEqual(
          ofTag(result.timeline, "tool.blocked").map((e) => [e.callId, e.error.code]),
          [
            ["c1", "permission_denied"],
            ["c2", "permission_denied"]
          ]
        )
        assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
        assert.strictEqual(ofTag(result.timeline, "recovery.failed").length, 0)
        assert.strictEqual(result.counters.toolCorrectionAttempts, 0)
        assert.strictEqual(result.counters.recoveryAttempts, 0)
      })
    )

    it.effect("R3.11 max iterations stop the run while a retryable tool failure is pending", () =>
      Effect.gen(function* () {
        // Not idempotent, so never retried in the call: every failure goes back to the model.
        const lookup = FaultyTools.flaky({
          name: "lookup",
          failures: 100,
          idempotent: false,
          failure: distinctFailure,
          recoverErrors: true
        })
        const model = FaultyModel.make([
          call("lookup", { q: "a" }, "c1"),
          call("lookup", { q: "b" }, "c2"),
          call("lookup", { q: "c" }, "c3"),
          final
        ])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [lookup.tool],
          limits: { maxIterations: 2 },
          recovery: { backoff: exact }
        })
        assert.strictEqual(result.stopReason, "max_iterations")
        // The second response is the last one allowed: the stop comes before its batch runs.
        assert.strictEqual(model.calls.length, 2)
        assert.strictEqual(lookup.calls.count, 1)
        const failed = ofTag(result.timeline, "tool.failed")
        assert.deepStrictEqual(
          failed.map((e) => [e.callId, e.error.failure?.classification]),
          [["c1", "retryable"]]
        )
        assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
      })
    )

    it.effect("R3.11 max iterations stop provider retries too: a run at its last iteration does not ask again", () =>
      Effect.gen(function* () {
        const lookup = FaultyTools.flaky({ name: "lookup", failures: 0 })
        const model = FaultyModel.make([call("lookup", {}, "c1"), FaultyModel.rateLimited(), final])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [lookup.tool],
          limits: { maxIterations: 1 },
          recovery: { backoff: exact }
        })
        assert.strictEqual(result.stopReason, "max_iterations")
        assert.strictEqual(model.calls.length, 1)
        assert.strictEqual(result.counters.recoveryAttempts, 0)
      })
    )

    it.effect("R3.11 max tool calls reject a batch whole, even one retrying a failed call", () =>
      Effect.gen(function* () {
        const lookup = FaultyTools.flaky({
          name: "lookup",
          failures: 100,
          idempotent: false,
          failure: distinctFailure,
          recoverErrors: true
        })
        const model = FaultyModel.make([
          call("lookup", { q: "a" }, "c1"),
          FaultyModel.respond(ScriptedModel.toolCalls(["lookup", { q: "a" }, "c2"], ["lookup", { q: "b" }, "c3"])),
          final
        ])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [lookup.tool],
          limits: { maxToolCalls: 2 },
          recovery: { backoff: exact }
        })
        assert.strictEqual(result.stopReason, "max_tool_calls")
        assert.strictEqual(lookup.calls.count, 1)
        assert.deepStrictEqual(
          ofTag(result.timeline, "tool.started").map((e) => e.callId),
          ["c1"]
        )
      })
    )

    it.effect("R3.11 R3.3 the run deadline stops provider retries: a retry that would sleep past it is not taken", () =>
      Effect.gen(function* () {
        const model = FaultyModel.make([
          FaultyModel.httpError(503),
          FaultyModel.httpError(503),
          FaultyModel.httpError(503),
          final
        ])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [echo],
          time: { run: "1 second" },
          recovery: { backoff: Recovery.backoff({ base: "300 millis", retries: 4, jitter: false }) }
        })
        // 300 ms fits (t=300), 600 ms fits (t=900), 1200 ms would end past the deadline at 1000.
        assert.deepStrictEqual(model.calls, [0, 300, 900])
        assert.strictEqual(result.stopReason, "run_timeout")
        assert.include(result.detail, "would wait 1200 ms but only 100 ms of the run are left")
        assert.isAtMost(result.elapsedMillis, 1000)
      })
    )

    it.effect("R3.11 R3.3 the run deadline stops tool retries: the flaky tool is not called past it", () =>
      Effect.gen(function* () {
        const lookup = FaultyTools.flaky({ name: "lookup", failures: 100, maxRetries: 4 })
        const model = FaultyModel.make([call("lookup", {}, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [lookup.tool],
          time: { run: "1 second" },
          recovery: { backoff: Recovery.backoff({ base: "300 millis", retries: 4, jitter: false }) }
        })
        assert.deepStrictEqual(
          lookup.calls.all.map((c) => c.at),
          [0, 300, 900]
        )
        const failed = ofTag(result.timeline, "recovery.failed")
        assert.strictEqual(failed.length, 1)
        assert.include(failed[0]?.cause ?? "", "would wait 1200 ms but only 100 ms of the run are left")
        assert.notStrictEqual(result.status, "completed")
        assert.isAtMost(result.elapsedMillis, 1000)
      })
    )

    it.effect("R3.11 a Retry-After longer than the time left is not waited for, even for an idempotent tool", () =>
      Effect.gen(function* () {
        const busy = new Failure.Retryable({
          source: "tool",
          category: "transient_http",
          code: "http_429",
          attempts: 1,
          hint: "rate limited",
          retryAfterMillis: 5_000
        })
        const lookup = FaultyTools.flaky({ name: "lookup", failures: 1, failure: busy, recoverErrors: true })
        const model = FaultyModel.make([call("lookup", {}, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [lookup.tool],
          time: { run: "2 seconds" }
        })
        assert.strictEqual(lookup.calls.count, 1)
        assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
        assert.include(ofTag(result.timeline, "recovery.failed")[0]?.cause ?? "", "would wait 5000 ms")
        assert.isBelow(result.elapsedMillis, 2000)
      })
    )
  })

  describe("R3.10 business conflicts re-observe", () => {
    it.effect("R3.10 a version conflict goes back to the model, which re-reads and then writes", () =>
      Effect.gen(function* () {
        let version = 2
        const reads: Array<number> = []
        const read = Tool.make({
          name: "read_doc",
          description: "read the document and its version",
          input: Schema.Struct({}),
          output: Schema.Struct({ version: Schema.Int }),
          sideEffect: "read",
          idempotent: true,
          handler: () =>
            Effect.sync(() => {
              reads.push(version)
              return { version }
            })
        })
        const conflicts: Array<number> = []
        const update = Tool.make({
          name: "update_doc",
          description: "write the document if it is still at `version`",
          input: Schema.Struct({ version: Schema.Int, text: Schema.String }),
          output: Schema.Struct({ version: Schema.Int }),
          sideEffect: "write",
          idempotent: false,
          recoverErrors: true,
          handler: (input) => {
            if (input.version !== version) {
              conflicts.push(input.version)
              return Effect.fail(
                new Failure.Retryable({
                  source: "tool",
                  category: "conflict",
                  code: "version_conflict",
                  attempts: 1,
                  hint: `the document is at version ${version}, not ${input.version}: re-read it before writing`
                })
              )
            }
            return Effect.sync(() => {
              version += 1
              return { version }
            })
          }
        })
        const requests: Array<ReadonlyArray<Model.Message>> = []
        const capture =
          (response: Model.Response) =>
          (request: Model.Request): Model.Response => {
            requests.push(request.messages.slice())
            return response
          }
        const script: ReadonlyArray<ScriptedModel.Step> = [
          capture(ScriptedModel.toolCall("update_doc", { version: 1, text: "new" }, "c1")),
          capture(ScriptedModel.toolCall("read_doc", {}, "c2")),
          capture(ScriptedModel.toolCall("update_doc", { version: 2, text: "new" }, "c3")),
          capture(ScriptedModel.finalAnswer("updated"))
        ]
        const result = yield* runWith(ScriptedModel.layer(script), { tools: [read, update] })
        assert.strictEqual(result.status, "completed")
        // The request after the conflict carries it as the observation of call c1.
        const observation = requests[1]?.find((m) => m._tag === "tool" && m.toolCallId === "c1")
        assert.strictEqual(observation?._tag, "tool")
        assert.include(observation?._tag === "tool" ? observation.content : "", "version 2, not 1: re-read it")
        const failed = ofTag(result.timeline, "tool.failed")
        assert.deepStrictEqual(
          failed.map((e) => [e.callId, e.error.failure?.category, e.error.failure?.code]),
          [["c1", "conflict", "version_conflict"]]
        )
        // Not retried blindly: the stale write ran once, then the re-read, then the write with the fresh version.
        assert.deepStrictEqual(conflicts, [1])
        assert.deepStrictEqual(reads, [2])
        assert.strictEqual(version, 3)
        assert.strictEqual(ofTag(result.timeline, "recovery.started").length, 0)
        assert.deepStrictEqual(
          ofTag(result.timeline, "tool.succeeded").map((e) => e.callId),
          ["c2", "c3"]
        )
      })
    )
  })

  describe("R10 slow tools", () => {
    it.effect("R10 a slow tool answers after its delay on the TestClock", () =>
      Effect.gen(function* () {
        const wait = FaultyTools.slow({ name: "wait", millis: 250 })
        const model = FaultyModel.make([call("wait", {}, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), { tools: [wait.tool] })
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(wait.finished, [250])
        assert.deepStrictEqual(model.calls, [0, 250])
      })
    )

    it.effect("R10 R4.2 a slow tool is cut off at the run deadline and never answers past it", () =>
      Effect.gen(function* () {
        const wait = FaultyTools.slow({ name: "wait", millis: 5_000, sideEffect: "external", idempotent: false })
        const model = FaultyModel.make([call("wait", {}, "c1"), final])
        const result = yield* runWith(FaultyModel.layer(model), {
          tools: [wait.tool],
          time: { run: "1 second" }
        })
        assert.deepStrictEqual(wait.finished, [])
        assert.strictEqual(wait.calls.count, 1)
        assert.strictEqual(result.stopReason, "run_timeout")
        assert.strictEqual(result.elapsedMillis, 1000)
        // An external action cut off by the deadline may have happened: it is left pending, not guessed.
        assert.deepStrictEqual(
          result.pendingActions.map((a) => [a.callId, a.idempotencyKey]),
          [["c1", "run-1:c1"]]
        )
      })
    )

    it.effect(
      "R10 R5.1 R5.2 a slow tool that ignores cancellation is waited for the stop grace, then left behind, its attempt named",
      () =>
        Effect.gen(function* () {
          const deaf = FaultyTools.slow({ name: "deaf", millis: 60_000, ignoresCancellation: true })
          const model = FaultyModel.make([call("deaf", {}, "c1"), final])
          // The public driver holds the clock still through the stop grace (a wait in real time).
          const result = yield* TestClockDriver.drive(
            Run.run({ goal: "x", tools: [deaf.tool], time: { run: "1 second", stopGrace: "50 millis" } })
          ).pipe(Effect.provide(Layer.mergeAll(FaultyModel.layer(model), NodeServices.layer)))
          assert.deepStrictEqual([result.status, result.stopReason], ["failed", "run_timeout"])
          assert.include(result.detail, "left behind")
          // Still running when the run gave its result: it never answered.
          assert.deepStrictEqual(deaf.finished, [])
          assert.strictEqual(result.elapsedMillis, 1000)
          // The record names the attempt left running (review 86: it said 0, "none was running").
          const left = result.timeline.find((e) => e._tag === "tool.interrupted")
          assert.deepStrictEqual(left?._tag === "tool.interrupted" ? [left.attempt, left.settlement] : left, [
            1,
            "outcome_unknown"
          ])
        })
    )

    it.effect(
      "R10 R5.2 R4.2 a slow tool that ignores cancellation ignores its signal as an Abortable promise does: its timeout and the step cut it off after the grace, outcome_unknown",
      () =>
        Effect.gen(function* () {
          for (const [layer, time, timeout, budget] of [
            ["tool", { run: "1 minute" }, "2 seconds", { toolTimeoutMillis: { deaf: 2_000 } }],
            ["step", { run: "1 minute", step: "5 seconds" }, undefined, { stepTimeoutMillis: 5_000 }]
          ] as const) {
            const deaf = FaultyTools.slow({
              name: "deaf",
              millis: 10_000,
              ignoresCancellation: true,
              timeout,
              maxRetries: 0
            })
            const model = FaultyModel.make([call("deaf", {}, "c1"), final])
            const result = yield* TestClockDriver.drive(Run.run({ goal: "x", tools: [deaf.tool], time })).pipe(
              Effect.provide(Layer.mergeAll(FaultyModel.layer(model), NodeServices.layer))
            )
            // Each run starts where the clock stands.
            const cutAt = (result.timeline[0]?.at ?? 0) + (layer === "tool" ? 2_000 : 5_000)
            // Cut off at its layer's time, not held until it ends: nothing it would have answered is seen.
            assert.deepStrictEqual(deaf.finished, [])
            const interrupted = ofTag(result.timeline, "tool.interrupted")
            assert.deepStrictEqual(
              interrupted.map((e) => [e.at, e.attempt, e.settlement]),
              [[cutAt, 1, "outcome_unknown"]]
            )
            assert.include(interrupted[0]?.detail, "ignored its abort signal for the 100 ms grace period")
            const failed = ofTag(result.timeline, "tool.failed")
            assert.deepStrictEqual(
              failed.map((e) => [e.at, e.error.failure?.timeout?.layer, e.error.failure?.timeout?.elapsedMillis]),
              [[cutAt, layer, layer === "tool" ? 2_000 : 5_000]]
            )
            assert.notInclude(result.detail, "left behind")
            const found = Properties.check(result, {
              runTimeoutMillis: 60_000,
              maxRecoveries: 8,
              scheduleRetries: 2,
              ...budget
            })
            assert.deepStrictEqual(found, [])
          }
          // A cancel with the default stop grace (5 s) waits the 100 ms of the ignored signal, and leaves nothing behind.
          const deaf = FaultyTools.slow({ name: "deaf", millis: 60_000, ignoresCancellation: true })
          const model = FaultyModel.make([call("deaf", {}, "c1"), final])
          const result = yield* TestClockDriver.drive(
            Effect.gen(function* () {
              const handle = yield* Run.start({ goal: "x", tools: [deaf.tool], time: { run: "1 minute" } })
              yield* Effect.sleep("1 second")
              yield* handle.cancel
              return yield* handle.result
            }).pipe(Effect.scoped)
          ).pipe(Effect.provide(Layer.mergeAll(FaultyModel.layer(model), NodeServices.layer)))
          assert.deepStrictEqual([result.status, result.elapsedMillis], ["cancelled", 1_000])
          assert.strictEqual(deaf.calls.count, 1)
          assert.notInclude(result.detail, "left behind")
          assert.deepStrictEqual(
            ofTag(result.timeline, "tool.interrupted").map((e) => e.settlement),
            ["outcome_unknown"]
          )
          assert.deepStrictEqual(
            result.pendingActions.map((a) => a.callId),
            ["c1"]
          )
        })
    )

    it("R10 a hand-made http fault with a status no client fails on (200, 102) is refused as httpError refuses it", () => {
      const hostile = (value: unknown) => value as never
      for (const status of [200, 102, 204, 600]) {
        assert.throws(
          () => FaultyModel.make([hostile({ _tag: "Fault", fault: { kind: "http", status } })]),
          new RegExp(
            `step 0 is an http fault whose status must be an HTTP status a client fails on \\(300 to 599\\), got ${status}`
          )
        )
        assert.throws(
          () => FaultyModel.make([hostile({ _tag: "Fault", fault: { kind: "already_retried", status, attempts: 2 } })]),
          /already_retried fault whose status must be an HTTP status a client fails on/
        )
      }
      // What httpError makes passes.
      assert.doesNotThrow(() => FaultyModel.make([hostile({ _tag: "Fault", fault: { kind: "http", status: 503 } })]))
    })

    it("R10 R3.2 FaultyModel.rateLimited refuses a Retry-After the provider boundary cannot read, naming it", () => {
      const hostile = (value: unknown) => value as never
      // A number died in the run (`header.trim`); "soon" or "" was a 429 with no Retry-After at all.
      for (const [given, shown] of [
        [2, "got 2"],
        ["soon", 'got "soon"'],
        ["", 'got ""'],
        ["-5", 'got "-5"'],
        [null, "got null"]
      ] as const) {
        assert.throws(() => FaultyModel.rateLimited(hostile(given)), RangeError, `retryAfter must be a Retry-After`)
        assert.throws(() => FaultyModel.rateLimited(hostile(given)), RangeError, shown)
        assert.throws(
          () => FaultyModel.make([hostile({ _tag: "Fault", fault: { kind: "http", status: 429, retryAfter: given } })]),
          /step 0 is an http fault whose retryAfter must be a Retry-After header value/
        )
      }
      // What the boundary reads passes: delay-seconds, an HTTP-date, or none.
      for (const given of ["2", "0.5", "Wed, 21 Oct 2015 07:28:00 GMT", undefined]) {
        assert.doesNotThrow(() => FaultyModel.make([FaultyModel.rateLimited(given)]))
      }
    })

    it("R10 FaultyTools.slow refuses options that are no object, or an option of the wrong type, naming it", () => {
      const hostile = (value: unknown) => value as never
      assert.throws(() => FaultyTools.slow(hostile(null)), RangeError, "FaultyTools.slow: options must be an object")
      assert.throws(
        () => FaultyTools.slow({ name: "s", millis: 1, ignoresCancellation: hostile("yes") }),
        RangeError,
        'ignoresCancellation must be a boolean, got "yes"'
      )
      assert.throws(
        () => FaultyTools.slow({ name: "s", millis: 1, output: hostile(5) }),
        RangeError,
        "output must be a string, got 5"
      )
      assert.doesNotThrow(() => FaultyTools.slow({ name: "s", millis: 1, ignoresCancellation: false, output: "x" }))
    })

    it("R10 the constructors refuse nonsense", () => {
      assert.throws(() => FaultyTools.flaky({ name: "x", failures: -1 }), /failures must be an integer >= 0/)
      assert.throws(() => FaultyTools.slow({ name: "x", millis: Number.NaN }), /millis must be a finite number/)
      const hostile = (value: unknown) => value as never
      assert.throws(() => FaultyTools.slow({ name: "x", millis: hostile("100") }), 'got "100"')
      // Each was a crash later, a run ending internal_error, or a silent default.
      assert.throws(() => FaultyModel.make(hostile(null)), /script must be an array of steps, got object/)
      assert.throws(() => FaultyModel.make([hostile({ _tag: "Bogus" })]), /step 0 is not a step/)
      assert.throws(
        () => FaultyModel.make([], { keyedBy: hostile("iterations") }),
        /keyedBy must be "call" or "iteration"/
      )
      assert.throws(() => FaultyModel.httpError(200), /a client fails on \(300 to 599\), got 200/)
      assert.throws(() => ScriptedModel.make(hostile(null)), /script must be an array of steps/)
      // A step that is none, or a hole in the script, is said so when the script is made.
      assert.throws(() => ScriptedModel.make([hostile(null)]), /step 0 is not a step/)
      const holed: Array<ScriptedModel.Step> = []
      holed[0] = ScriptedModel.finalAnswer("a")
      holed[2] = ScriptedModel.finalAnswer("b")
      assert.throws(() => ScriptedModel.make(holed), /step 1 is not a step/)
      assert.throws(
        () => FaultyModel.make([hostile({ _tag: "Fault", fault: { kind: "bogus" } })]),
        /a fault of no kind there is/
      )
      assert.throws(
        () => FaultyModel.make([hostile({ _tag: "Fault", fault: { kind: "http" } })]),
        /without an HTTP status/
      )
      assert.throws(() => FaultyModel.make([hostile({ _tag: "Respond" })]), /a Respond without a response/)
      assert.throws(
        () =>
          FaultyTools.ledgered({
            name: "x",
            idempotent: false,
            sideEffect: "write",
            behaviour: ["apply"],
            reconcile: hostile("yes")
          }),
        /reconcile must be a boolean or a function/
      )
      assert.throws(() => FaultyTools.ledgered(hostile(undefined)), /ledgered: options must be an object/)
      assert.throws(
        () => FaultyTools.flaky({ name: "x", failures: 1, failure: hostile("nope") }),
        /failure must be a Failure/
      )
    })
  })
})
