/**
 * Replay of calls whose attempts were lost (R13, R3.8), review 175: a recording made by the
 * kit's own tools replays Matched with the same tools and options.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Replay from "../../src/testing/Replay.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"

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
