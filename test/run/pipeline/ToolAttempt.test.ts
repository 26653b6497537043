import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type * as Event from "../../../src/events/Event.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as Recovery from "../../../src/recovery/Recovery.ts"
import * as Run from "../../../src/run/Run.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"
import * as Tool from "../../../src/tools/Tool.ts"

describe("ToolExecutor: the handler run once per attempt", () => {
  it.effect(
    "R3.3 R4.2 each attempt is recorded with its number and the deadline it was given; the handler runs once each",
    () =>
      Effect.gen(function* () {
        let runs = 0
        const flaky = Tool.make({
          name: "lookup",
          description: "Fails twice, then answers.",
          input: Schema.Struct({ q: Schema.String }),
          output: Schema.String,
          sideEffect: "read",
          idempotent: true,
          timeout: "500 millis",
          handler: () =>
            Effect.suspend(() => {
              runs++
              return runs < 3
                ? Effect.fail(
                    new Failure.Retryable({
                      source: "tool",
                      category: "connection",
                      code: "reset",
                      attempts: 1,
                      hint: "reset"
                    })
                  )
                : Effect.succeed("found")
            })
        })
        const result = yield* TestClockDriver.drive(
          Run.run({
            goal: "look it up",
            tools: [flaky],
            recovery: { backoff: Recovery.backoff({ base: "100 millis", retries: 5, jitter: false }) }
          }).pipe(
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("lookup", { q: "x" }), ScriptedModel.finalAnswer("found")])
            )
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(runs, 3)
        const attempts = result.timeline.filter((e): e is Event.Of<"tool.started"> => e._tag === "tool.started")
        assert.deepStrictEqual(
          attempts.map((e) => [e.attempt, e.layer, e.deadlineAt - e.at]),
          [
            [1, "tool", 500],
            [2, "tool", 500],
            [3, "tool", 500]
          ]
        )
        // One call: every attempt names it.
        assert.deepStrictEqual(new Set(attempts.map((e) => e.callId)).size, 1)
        // Each retry's wait ends at the next attempt, and the fold says nothing sleeps any more.
        const sleeps = result.timeline.filter((e) => e._tag === "recovery.started").map((e) => e.at)
        assert.deepStrictEqual(
          sleeps.map((at, i) => (attempts[i + 1]?.at ?? 0) - at),
          [100, 200]
        )
      })
  )
})
