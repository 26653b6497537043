/**
 * Where user values enter recovery (R3.4, R3.7, R12; review 25): a failure's attempt count
 * below 1, and a backoff schedule that throws.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule, Schema } from "effect"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import type * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"

const script = (steps: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(steps), NodeServices.layer)

/** An idempotent read, without arguments, that fails with `failure` every time. */
const failingRead = (name: string, failure: Failure.Failure) =>
  Tool.make({
    name,
    description: "Reads a service that fails.",
    input: Schema.Struct({}),
    output: Schema.Struct({ ok: Schema.Boolean }),
    sideEffect: "read",
    idempotent: true,
    handler: () => Effect.fail(failure)
  })

describe("R3.4 R3.7 an attempt count below 1", () => {
  for (const attempts of [0, -3]) {
    it.effect(`R3.7 a status-query resend holds maxRetries when the tool's failure says attempts: ${attempts}`, () =>
      Effect.gen(function* () {
        let sends = 0
        const pay = Tool.make({
          name: "pay",
          description: "Charges the card.",
          input: Schema.Struct({ amount: Schema.Number }),
          output: Schema.Struct({ receipt: Schema.String }),
          sideEffect: "external",
          idempotent: false,
          maxRetries: 1,
          handler: () =>
            Effect.suspend(() => {
              sends++
              return Effect.fail(
                new Failure.UnknownOutcome({
                  source: "tool",
                  category: "connection",
                  code: "lost",
                  attempts,
                  hint: "lost"
                })
              )
            }),
          reconcile: () => Effect.succeed({ _tag: "NotApplied" as const })
        })
        const result = yield* drive(
          Run.run({ goal: "pay", tools: [pay], recovery: { maxRecoveries: 50 } }).pipe(
            Effect.provide(script([ScriptedModel.toolCall("pay", { amount: 1 }), ScriptedModel.finalAnswer("done")]))
          )
        )
        // The first send and one resend (maxRetries: 1); before, each resend started the count again: 51 sends.
        assert.strictEqual(sends, 2)
        assert.isAtMost(result.counters.recoveryAttempts, 1)
      })
    )
  }
})

describe("R12 a recovery schedule that throws", () => {
  const throwing = Schedule.spaced("10 millis").pipe(
    Schedule.modifyDelay(() => {
      throw new Error("a bug in the schedule")
    })
  ) as unknown as Recovery.Backoff

  it.effect("R12 R3.9 is the run's defect (internal_error naming it), not a provider failure that falls back", () =>
    Effect.gen(function* () {
      const backup = { name: "backup", model: ScriptedModel.make([ScriptedModel.finalAnswer("from the backup")]) }
      const result = yield* drive(
        Run.run({ goal: "g", tools: [], recovery: { backoff: throwing, fallbackModels: [backup] } }).pipe(
          Effect.provide(
            script([FailureBoundary.http({ status: 503, now: 0 }), ScriptedModel.finalAnswer("from the primary")])
          )
        )
      )
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "the recovery schedule threw")
      assert.lengthOf(result.fallbacks, 0)
    })
  )

  it.effect("R12 is the run's defect for a tool's retry too, not the tool's failure", () =>
    Effect.gen(function* () {
      const flaky = failingRead(
        "read",
        new Failure.Retryable({ source: "tool", category: "connection", code: "reset", attempts: 1, hint: "reset" })
      )
      const result = yield* drive(
        Run.run({ goal: "g", tools: [flaky], recovery: { backoff: throwing } }).pipe(
          Effect.provide(script([ScriptedModel.toolCall("read", {}), ScriptedModel.finalAnswer("done")]))
        )
      )
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "the recovery schedule threw")
    })
  )

  it.effect("R12 R3.9 a schedule whose delay is no Duration is the run's defect too, naming it (review 76)", () =>
    Effect.gen(function* () {
      // A hand-made step that breaks the type: what a caller without types can build.
      const step: unknown = Effect.succeed(() => Effect.succeed(["soon", "soon"]))
      const soon = Schedule.fromStep(step as Parameters<typeof Schedule.fromStep>[0]) as unknown as Recovery.Backoff
      const backup = { name: "backup", model: ScriptedModel.make([ScriptedModel.finalAnswer("from the backup")]) }
      const result = yield* drive(
        Run.run({ goal: "g", tools: [], recovery: { backoff: soon, fallbackModels: [backup] } }).pipe(
          Effect.provide(
            script([FailureBoundary.http({ status: 503, now: 0 }), ScriptedModel.finalAnswer("from the primary")])
          )
        )
      )
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "the recovery schedule gave a delay that is no Duration")
      assert.lengthOf(result.fallbacks, 0)
    })
  )
})

describe("R3.3 a tool retry the run's own limits refuse", () => {
  const busy = (retryAfterMillis: number) =>
    failingRead(
      "get",
      new Failure.Retryable({
        source: "tool",
        category: "rate_limited",
        code: "busy",
        attempts: 1,
        hint: "busy",
        retryAfterMillis
      })
    )
  const cases = [
    ["its wait would end past the run deadline", 60_000, { time: { run: "10 seconds" } }, "run_timeout", "deadline"],
    [
      "its wait would end past the step deadline",
      5_000,
      { time: { run: "1 minute", step: "2 seconds" } },
      "step_timeout",
      "step_deadline"
    ],
    ["the run's recovery budget is spent", 0, { recovery: { maxRecoveries: 1 } }, "recovery_exhausted", "run_budget"]
  ] as const
  it.effect(
    "R2.5 R3.3 R3.11 a batch stops for the first call that stops the run, whatever the calls' order: the deadline's before a later tool error",
    () =>
      Effect.gen(function* () {
        // Refused a second later: by then the other call has given up for the deadline, which stopped the batch.
        const broken = Tool.make({
          name: "put",
          description: "Writes to a service that refuses, after a second.",
          input: Schema.Struct({}),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect: "read",
          idempotent: true,
          handler: () =>
            Effect.andThen(
              Effect.sleep("1 second"),
              Effect.fail(
                new Failure.Permanent({ source: "tool", category: "rejected", code: "no", attempts: 1, hint: "no" })
              )
            )
        })
        const stops: Array<string> = []
        for (const order of [
          [
            ["put", {}],
            ["get", {}]
          ],
          [
            ["get", {}],
            ["put", {}]
          ]
        ] as const) {
          const result = yield* drive(
            Run.run({ goal: "g", tools: [busy(60_000), broken], concurrency: 2, time: { run: "10 seconds" } }).pipe(
              Effect.provide(script([ScriptedModel.toolCalls(...order), ScriptedModel.finalAnswer("done")]))
            )
          )
          stops.push(result.stopReason)
        }
        assert.deepStrictEqual(stops, ["run_timeout", "run_timeout"])
      })
  )

  for (const [why, retryAfter, options, stop, recorded] of cases) {
    it.effect(`R3.3 ${why}: the run stops ${stop}, not tool_error, and the tool's result says why`, () =>
      Effect.gen(function* () {
        const result = yield* drive(
          Run.run({ goal: "g", tools: [busy(retryAfter)], ...options }).pipe(
            Effect.provide(script([ScriptedModel.toolCall("get", {}), ScriptedModel.finalAnswer("done")]))
          )
        )
        assert.strictEqual(result.stopReason, stop)
        // Nothing fired: Explain says no deadline layer did.
        if (recorded === "deadline") assert.isUndefined(RunResult.explain(result).deadline)
        const failed = result.timeline.find((e) => e._tag === "tool.failed")
        assert.strictEqual(failed?._tag === "tool.failed" ? failed.error.notRetriedFor : undefined, recorded)
        assert.include(result.detail, "get (")
      })
    )
  }
})

describe("R3.8 R6.2 an answer while an action is in doubt", () => {
  /** A payment cut off by its timeout (it may have paid), handed to the model as a failure. */
  const payment = (idempotent: boolean) =>
    Tool.make({
      name: "pay",
      description: "Pays",
      input: Schema.Struct({}),
      output: Schema.Struct({ ok: Schema.Boolean }),
      sideEffect: "external",
      idempotent,
      maxRetries: 0,
      recoverErrors: true,
      timeout: "100 millis",
      handler: () => Effect.as(Effect.sleep("1 second"), { ok: true })
    })
  const answered = (idempotent: boolean) =>
    drive(Run.run({ goal: "pay", tools: [payment(idempotent)] })).pipe(
      Effect.provide(script([ScriptedModel.toolCall("pay", {}, "c1"), ScriptedModel.finalAnswer("it failed")]))
    )

  it.effect("R3.8 R6.2 a final answer while a call that may not be sent twice is in doubt: unknown_outcome", () =>
    Effect.gen(function* () {
      const result = yield* answered(false)
      assert.strictEqual(result.stopReason, "unknown_outcome", result.detail)
      assert.strictEqual(result.status, "unknown_outcome")
      assert.deepStrictEqual(
        result.pendingActions.map((a) => a.callId),
        ["c1"]
      )
      const explained = RunResult.explain(result)
      assert.strictEqual(explained.stopReason, "unknown_outcome")
      assert.strictEqual(explained.next.kind, "reconcile")
    })
  )

  it.effect("R3.7 R6.2 an idempotent call in doubt is safe to send again: the answer completes, the call listed", () =>
    Effect.gen(function* () {
      const result = yield* answered(true)
      assert.strictEqual(result.stopReason, "goal_reached", result.detail)
      assert.deepStrictEqual(
        result.pendingActions.map((a) => a.callId),
        ["c1"]
      )
    })
  )
})
