/**
 * Recordings of the kit's own runs replay Matched with the same tools and options (R13),
 * review 175: lost attempts (R3.8), approvals decided the instant they were asked (R7).
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as Replay from "../../src/testing/Replay.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Permission from "../../src/tools/Permission.ts"

const losingPayment = () =>
  FaultyTools.ledgered({
    name: "pay",
    idempotent: false,
    sideEffect: "external",
    behaviour: () => "lose_before_apply",
    reconcile: true
  })

describe("Replay of lost attempts (R13, R3.8)", () => {
  it.effect("R13 R3.8 a payment found not applied, resent and lost again replays Matched, its code as recorded", () =>
    Effect.gen(function* () {
      const recovery = { backoff: Recovery.backoff({ jitter: false }) }
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay", tools: [losingPayment().tool], recovery })
      ).pipe(
        Effect.provide(
          ScriptedModel.layer([ScriptedModel.toolCall("pay", { amount: 5 }), ScriptedModel.finalAnswer("paid")])
        )
      )
      // Lost, found not applied, resent: each resend lost too, until its retries gave up.
      assert.strictEqual(result.stopReason, "tool_error")
      const lost = result.timeline.filter((e) => e._tag === "recovery.failed" && e.cause.startsWith("connection_lost"))
      assert.isAbove(lost.length, 0)
      const report = yield* Replay.replay(result.timeline, { tools: [losingPayment().tool], recovery })
      // Before: Diverged at recovery.failed, recorded "connection_lost: …", replayed "outcome_unknown: …".
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})

describe("Replay of approvals decided the instant they were asked (R13, R7)", () => {
  const approvedAtOnce = {
    _tag: "NeedsApproval",
    decision: "approve",
    afterMillis: 0,
    idempotent: false,
    millis: 0,
    failures: 0
  } as const
  const base: Properties.Case = {
    steps: [],
    ending: "final_answer",
    runTimeoutSeconds: 43,
    maxRecoveries: 8,
    scheduleRetries: 0,
    toolMaxRetries: 3,
    correctionBudget: 3,
    maxIterations: 4,
    maxToolCalls: 9,
    recoverErrors: true,
    jitter: false,
    seed: 1,
    concurrency: 2
  }
  const batches = {
    "an approval, then a read": [approvedAtOnce, { _tag: "Succeeds" }],
    "a read, an approval, bad arguments": [{ _tag: "Succeeds" }, approvedAtOnce, { _tag: "InvalidArgument" }]
  } as const
  for (const [name, calls] of Object.entries(batches)) {
    it.effect(`R13 R7 in a concurrent batch, ${name}: the recording replays Matched (review 175)`, () =>
      Effect.gen(function* () {
        const c: Properties.Case = { ...base, steps: [{ _tag: "CallTools", calls: [...calls] }] }
        const result = yield* Properties.runScenario(Properties.toScenario(c))
        const again = Properties.toScenario(c)
        const report = yield* Replay.replay(result.timeline, { ...again.options }).pipe(
          Effect.provide(Permission.layer(again.permission))
        )
        // Before: Diverged, the sibling's tool.started before approval.decided (decided a few steps late).
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      }).pipe(Effect.provide(NodeServices.layer))
    )
  }
})
