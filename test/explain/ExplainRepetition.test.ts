/**
 * What repeated, as a stop by `repeated_tool_failure` and its explanation name it (R2.3,
 * R13): the failure that went past its tool's retry limit, which need not be the one that
 * occurred most, and never a refusal (review 111).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Explain from "../../src/explain/Explain.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"

/** A read tool whose every call fails the same way, `maxRetries` allowed, handed back to the model. */
const failing = (name: string, maxRetries: number, code: string) =>
  Tool.make({
    name,
    description: "Always fails",
    input: Schema.Struct({ q: Schema.String }),
    output: Schema.String,
    sideEffect: "read",
    recoverErrors: true,
    maxRetries,
    handler: () =>
      Effect.fail(
        new Failure.Permanent({ source: "tool", category: "other", code, attempts: 1, hint: `${name} failed` })
      )
  })

const calls = (...calls: ReadonlyArray<readonly [string, string]>) =>
  ScriptedModel.layer([
    ...calls.map(([name, q]) => ScriptedModel.toolCall(name, { q })),
    ScriptedModel.finalAnswer("done")
  ])

describe("what repeated (R2.3, R13)", () => {
  it.effect("R2.3 R13 the failure past its limit is named, not the one that occurred most within its own", () =>
    Effect.gen(function* () {
      // alpha may fail 5 times and fails 4; beta may fail once and fails twice: beta stops the run.
      const result = yield* Run.run({
        goal: "g",
        tools: [failing("alpha", 5, "busy"), failing("beta", 1, "gone")],
        limits: { maxToolErrors: 100 }
      }).pipe(
        Effect.provide(
          calls(["alpha", "1"], ["alpha", "2"], ["alpha", "3"], ["alpha", "4"], ["beta", "1"], ["beta", "2"])
        )
      )
      assert.strictEqual(result.stopReason, "repeated_tool_failure")
      // Before, "occurred 4 times" (alpha's count), and Explain named alpha "(its retry limit is 5)".
      assert.strictEqual(
        result.detail,
        "the same failure of beta (gone) occurred 2 times, past the tool's retry limit of 1"
      )
      const repeated = Explain.explain(result.timeline).repetition
      assert.deepStrictEqual(repeated?._tag === "failure" ? [repeated.name, repeated.count, repeated.maxRetries] : [], [
        "beta",
        2,
        1
      ])
    })
  )

  it.effect("R2.3 R13 refusals counted more often than the failure are not the repetition", () =>
    Effect.gen(function* () {
      const danger = Tool.make({
        name: "danger",
        description: "Refused",
        input: Schema.Struct({ q: Schema.String }),
        output: Schema.String,
        sideEffect: "read",
        handler: () => Effect.succeed("x")
      })
      const result = yield* Run.run({
        goal: "g",
        tools: [danger, failing("beta", 1, "gone")],
        limits: { maxToolErrors: 100 }
      }).pipe(
        Effect.provideService(Permission.Permission, {
          check: (request) =>
            Effect.succeed(
              request.tool.name === "danger" ? Permission.deny("tool_not_allowed", "no") : Permission.allow
            )
        }),
        Effect.provide(calls(["danger", "1"], ["danger", "2"], ["danger", "3"], ["beta", "1"], ["beta", "2"]))
      )
      assert.strictEqual(result.stopReason, "repeated_tool_failure")
      assert.include(result.detail, "of beta (gone) occurred 2 times")
      // Before, Explain found the refusals most frequent, no tool.failed of theirs, and said nothing repeated.
      const repeated = Explain.explain(result.timeline).repetition
      assert.deepStrictEqual(repeated?._tag === "failure" ? [repeated.name, repeated.count] : [], ["beta", 2])
    })
  )
})
