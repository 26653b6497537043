import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Redaction from "../../src/tools/Redaction.ts"
import * as Tool from "../../src/tools/Tool.ts"

describe("Redaction (R3.1, R12)", () => {
  it("R12 a secret that holds another is masked whole, whatever order the secrets come in", () => {
    for (const secrets of [
      ["alice", "alice-TOPSECRET-2024"],
      ["alice-TOPSECRET-2024", "alice"]
    ]) {
      assert.strictEqual(
        Redaction.maskText("pw=alice-TOPSECRET-2024 user=alice", Redaction.secrets(secrets)),
        "pw=<redacted> user=<redacted>"
      )
    }
  })

  it("R12 a secret quoted as JSON (its quote and backslash escaped) is masked too", () => {
    const secret = 'tok"TOP\\SECRET99'
    const text = `the tool failed: ${JSON.stringify({ token: secret })}`
    assert.strictEqual(Redaction.maskText(text, Redaction.secrets([secret])), 'the tool failed: {"token":"<redacted>"}')
  })

  it("R12 a text cut short in the middle of a secret does not keep the secret's beginning", () => {
    const secret = "TOPSECRET-abcdef"
    assert.strictEqual(
      Redaction.maskText(`hint: key=${secret.slice(0, 11)}…`, Redaction.secrets([secret])),
      "hint: key=<redacted>…"
    )
    assert.strictEqual(
      Redaction.maskText(
        `denied: arguments.path "/data/${secret.slice(0, 9)}…" is outside`,
        Redaction.secrets([secret])
      ),
      'denied: arguments.path "/data/<redacted>…" is outside'
    )
    // Seven characters say little of a secret, and text may share them with one: left as they are.
    assert.strictEqual(Redaction.maskText("key=TOPSECR…", Redaction.secrets([secret])), "key=TOPSECR…")
    assert.strictEqual(Redaction.maskText("see http…", Redaction.secrets(["https://user:pw@host"])), "see http…")
  })

  it("R12 a large text with many cuts and many secrets: only the cut inside a secret is masked", () => {
    const secrets = Array.from({ length: 200 }, (_, i) => `secret-${i}-${"z".repeat(40)}`)
    const text = `${"hello world…".repeat(3_000)} secret-7-${"z".repeat(20)}…`
    const masked = Redaction.maskText(text, Redaction.secrets(secrets))
    // Only the cut inside a secret is masked; the 3,000 others are text.
    assert.strictEqual(masked, `${"hello world…".repeat(3_000)} <redacted>…`)
    // Searched at a cost past the bound (the pipeline masks what it sends, at most
    // `maxObservationChars` and the longest secret), a text is masked whole.
    assert.strictEqual(Redaction.maskText("hello world…".repeat(1_000_000), Redaction.secrets(secrets)), Redaction.mask)
  })

  it.effect(
    "R3.1 R12 a Redacted struct whose password holds the user name: nothing of the password reaches the log",
    () =>
      Effect.gen(function* () {
        const login = Tool.make({
          name: "login",
          description: "Logs in.",
          input: Schema.Struct({
            creds: Schema.RedactedFromValue(Schema.Struct({ password: Schema.String, user: Schema.String }))
          }),
          output: Schema.Struct({ echoed: Schema.String }),
          sideEffect: "read",
          // A careless tool that echoes the password: the runtime masks it by value.
          handler: ({ creds }) => Effect.succeed({ echoed: `pw=${Redacted.value(creds).password}` })
        })
        const model = ScriptedModel.layer([
          ScriptedModel.toolCall("login", { creds: { password: "alice-TOPSECRET-2024", user: "alice" } }),
          ScriptedModel.finalAnswer("ok")
        ])
        const result = yield* Run.run({ goal: "log in", tools: [login] }).pipe(
          Effect.provide(Layer.merge(model, NodeServices.layer))
        )
        // The model's own message keeps what it sent; nothing the runtime derived may.
        const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
        assert.notInclude(derived, "TOPSECRET")
        assert.include(derived, "pw=<redacted>")
      })
  )
})
