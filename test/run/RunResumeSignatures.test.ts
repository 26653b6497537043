/**
 * A sensitive tool's calls are signed under a key of the run's own (HMACs, so that the log
 * cannot be searched for a guessed secret). A resumed run signs them under the same key,
 * kept in the journal beside the log: before (review 193), each resume drew a new key, and a
 * call repeated across a restart (or a park for approval) was never counted as repeated.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Schema } from "effect"
import * as Journal from "../../src/journal/Journal.ts"
import * as RunHeader from "../../src/run/journal/internal/RunHeader.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { dies, layers, ofTag } from "../support/restart.ts"

/** A tool whose input holds a secret, counting its calls. */
const makeLogin = () => {
  let calls = 0
  const tool = Tool.make({
    name: "login",
    description: "logs in",
    input: Schema.Struct({ user: Schema.String, password: Schema.RedactedFromValue(Schema.String) }),
    output: Schema.String,
    sideEffect: "read",
    idempotent: true,
    handler: () => Effect.sync(() => `session ${++calls}`)
  })
  return { tool, calls: () => calls }
}

/** A model that asks for the same login at every step. */
const loginAgain = ScriptedModel.layerFunction(() =>
  ScriptedModel.toolCall("login", { user: "u", password: "hunter2" })
)

describe("a sensitive tool's call signatures across a resume (R2.3, R9.1, R12)", () => {
  it.effect(
    "R2.3 R9.1 an identical sensitive call repeated across a crash stops repeated_tool_call as in one process (review 193)",
    () =>
      Effect.gen(function* () {
        const live = makeLogin()
        const whole = yield* Run.run({ goal: "log in", runId: "whole", tools: [live.tool] }).pipe(
          Effect.provide(loginAgain)
        )
        assert.strictEqual(whole.stopReason, "repeated_tool_call")
        for (const commit of [3, 4, 5]) {
          const login = makeLogin()
          const { resumed, key } = yield* Effect.gen(function* () {
            yield* dies({ crashAt: { commit, when: "after" } }, { goal: "log in", tools: [login.tool] }, loginAgain)
            const resumed = yield* Run.resume("r1", { tools: [login.tool] }, "restart").pipe(Effect.provide(loginAgain))
            const stored = Option.getOrThrow(yield* (yield* Journal.Journal).read("r1"))
            return { resumed, key: (stored.header as { readonly secretKey?: string }).secretKey ?? "" }
          }).pipe(Effect.provide(layers))
          assert.strictEqual(ofTag(resumed.timeline, "run.resumed").length, 1, `commit ${commit}`)
          // Before, the signatures before and after the restart differed: 4 or 5 requests, 3 or 4 logins.
          assert.strictEqual(resumed.stopReason, "repeated_tool_call", `commit ${commit}: ${resumed.detail}`)
          assert.strictEqual(login.calls(), live.calls(), `commit ${commit}`)
          const signatures = ofTag(resumed.timeline, "model.responded").flatMap((e) => e.signatures)
          assert.strictEqual(new Set(signatures).size, 1, `commit ${commit}`)
          // The key is beside the log, never in it: no event holds it.
          assert.match(key, /^[0-9a-f]{64}$/)
          assert.notInclude(JSON.stringify(resumed.timeline), key)
        }
      })
  )

  it("R9 a header whose key is no key (another version's, edited) still decodes: its run signs under a new one (review 195)", () => {
    const header = { goal: "g", model: "m", tools: {} }
    for (const secretKey of [42, null, { alg: "x" }, "not a key", "A".repeat(64)]) {
      const decoded = RunHeader.decode({ ...header, secretKey })
      // Before, a key that was no string failed the resume corrupt.
      assert.isTrue(Exit.isSuccess(decoded), JSON.stringify(secretKey))
      assert.isUndefined(Exit.isSuccess(decoded) ? RunHeader.secretKeyIn(decoded.value) : "", JSON.stringify(secretKey))
    }
    const key = "0123456789abcdef".repeat(4)
    const kept = RunHeader.decode({ ...header, secretKey: key })
    assert.strictEqual(Exit.isSuccess(kept) ? RunHeader.secretKeyIn(kept.value) : undefined, key)
  })
})
