/**
 * The tool pipeline against a hostile model and careless tool code: arguments wrong in a
 * million places, thousands of secrets, handlers that change their input or return what
 * their schema refuses after acting.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema } from "effect"
import * as AiTool from "effect/ai/Tool"
import * as AiToolkit from "effect/ai/Toolkit"
import type * as Event from "../../../src/events/Event.ts"
import * as Explain from "../../../src/explain/Explain.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as SchemaIssues from "../../../src/failure/SchemaIssues.ts"
import * as Journal from "../../../src/journal/Journal.ts"
import * as Model from "../../../src/model/Model.ts"
import { maskedObservation } from "../../../src/run/pipeline/internal/ToolCall.ts"
import * as Run from "../../../src/run/Run.ts"
import * as RunResult from "../../../src/run/RunResult.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"
import * as AiTools from "../../../src/tools/AiTools.ts"
import * as Redaction from "../../../src/tools/Redaction.ts"
import * as Tool from "../../../src/tools/Tool.ts"

const script = (...steps: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(steps), NodeServices.layer)

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Extract<Event.Event, { readonly _tag: T }> => e._tag === tag)

/** A payment tool that recovers its errors, whose handler returns what `handler` gives. */
const paying = (handler: (input: { readonly amount: number }) => Effect.Effect<{ readonly receipt: string }>) =>
  Tool.make({
    name: "pay",
    description: "Pays.",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.Struct({ receipt: Schema.String }),
    sideEffect: "external",
    recoverErrors: true,
    handler
  })

describe("hostile calls (R12)", () => {
  it.effect("R12 arguments wrong in 4,000 places: the refusal names the first 20 and counts the rest", () =>
    Effect.gen(function* () {
      const list = Tool.make({
        name: "list",
        description: "Takes names.",
        input: Schema.Struct({ items: Schema.Array(Schema.String) }),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "read",
        handler: () => Effect.succeed({ ok: true })
      })
      const args = `{"items":[${"0,".repeat(3_999)}0]}`
      const result = yield* Run.run({ goal: "list", tools: [list], limits: { maxObservationChars: 4096 } }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("list", args), ScriptedModel.finalAnswer("done")))
      )
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "input_validation_failed")
      assert.strictEqual(failed?.error.fieldPaths?.length, SchemaIssues.maxFields)
      assert.strictEqual(failed?.error.fieldPaths?.[0], "arguments.items[0]")
      assert.include(failed?.error.message, `and ${4_000 - SchemaIssues.maxFields} more problems`)
      assert.isAtMost(failed?.error.message.length ?? Infinity, 4096)
    })
  )

  it("R12 an issue description is cut at its first fields, whatever the schema nests", () => {
    const schema = Schema.Struct({ a: Schema.Number, rows: Schema.Array(Schema.Struct({ n: Schema.Number })) })
    const exit = Schema.decodeUnknownExit(schema, { errors: "all" })({
      a: "x",
      rows: Array.from({ length: 50 }, () => ({ n: "y" }))
    })
    assert.isTrue(exit._tag === "Failure")
    if (exit._tag !== "Failure") return
    const error = exit.cause.reasons[0]
    assert.isTrue(error?._tag === "Fail" && Schema.isSchemaError(error.error))
    if (error?._tag !== "Fail" || !Schema.isSchemaError(error.error)) return
    const described = SchemaIssues.describe(error.error.issue)
    assert.deepStrictEqual(described.fieldPaths.slice(0, 3), [
      "arguments.a",
      "arguments.rows[0].n",
      "arguments.rows[1].n"
    ])
    assert.strictEqual(described.fieldPaths.length, SchemaIssues.maxFields)
    assert.isTrue(described.message.endsWith(`and ${51 - SchemaIssues.maxFields} more problems`))
  })

  it("R12 with more secrets than can be searched for, text derived from the call is masked whole", () => {
    const many = Redaction.secrets(Array.from({ length: 5_000 }, (_, i) => `secret-${i}`))
    assert.strictEqual(Redaction.maskText("secret-42", many), Redaction.mask)
    assert.strictEqual(Redaction.maskText("the value secret-4999 was wrong", many), Redaction.mask)
    // Shorter than any secret that is searched for in text, and equal to none: kept.
    assert.strictEqual(Redaction.maskText("ok", many), "ok")
    const few = Redaction.secrets(["secret-1", "secret-2"])
    assert.strictEqual(Redaction.maskText("the value secret-2 was wrong", few), "the value <redacted> was wrong")
    assert.deepStrictEqual(Redaction.maskValue({ a: ["secret-1", 7, "other"] }, few), {
      a: [Redaction.mask, 7, "other"]
    })
    assert.deepStrictEqual(
      Redaction.maskSummary(
        {
          source: "tool",
          classification: "permanent",
          category: "tool_failure",
          code: "bad_key_secret-1",
          attempts: 1,
          hint: "secret-2"
        },
        few
      ),
      {
        source: "tool",
        classification: "permanent",
        category: "tool_failure",
        code: "bad_key_secret-1",
        attempts: 1,
        hint: Redaction.mask
      }
    )
  })

  it.effect("R12 a sensitive tool given 20,000 strings that do not decode: none of them is in the log", () =>
    Effect.gen(function* () {
      const login = Tool.make({
        name: "login",
        description: "Logs in.",
        input: Schema.Struct({ passwords: Schema.Array(Schema.RedactedFromValue(Schema.String)) }),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "read",
        handler: () => Effect.succeed({ ok: true })
      })
      const values = Array.from({ length: 20_000 }, (_, i) => `pw-${i}-${"k".repeat(8)}`)
      const args = JSON.stringify({ passwords: [...values, 42] })
      const result = yield* Run.run({ goal: "log in", tools: [login] }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("login", args), ScriptedModel.finalAnswer("done")))
      )
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "input_validation_failed")
      const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
      assert.isFalse(values.some((v) => derived.includes(v)))
    })
  )

  it.effect(
    "R2.3 R12 calls of a sensitive tool with different secrets are different calls; the same secret repeats",
    () =>
      Effect.gen(function* () {
        const login = Tool.make({
          name: "login",
          description: "Logs in.",
          input: Schema.Struct({ password: Schema.RedactedFromValue(Schema.String) }),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect: "read",
          handler: ({ password }) => Effect.succeed({ ok: Redacted.value(password) === "correct-horse-battery" })
        })
        const guesses = ["guess-one-aaaa", "guess-two-bbbb", "guess-three-cc", "correct-horse-battery"]
        const result = yield* Run.run({ goal: "log in", tools: [login] }).pipe(
          Effect.provide(
            script(
              ...guesses.map((password) => ScriptedModel.toolCall("login", { password })),
              ScriptedModel.finalAnswer("in")
            )
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(ofTag(result.timeline, "tool.succeeded").length, 4)
        const signatures = ofTag(result.timeline, "model.responded").flatMap((e) => e.signatures)
        assert.strictEqual(new Set(signatures).size, 4)
        // No secret, and no digest a guess could be checked against without the run's key.
        assert.isFalse(guesses.some((g) => signatures.some((s) => s.includes(g))))
        const same = yield* Run.run({ goal: "log in", tools: [login], limits: { repeatedToolCall: 2 } }).pipe(
          Effect.provide(
            script(...Array.from({ length: 4 }, () => ScriptedModel.toolCall("login", { password: "guess-one-aaaa" })))
          )
        )
        assert.strictEqual(same.stopReason, "repeated_tool_call")
      })
  )

  // Live: the retry waits its backoff.
  it.live(
    "R3.8 R12 a handler that changes its input before a retry: the retry and the postcondition get the arguments the log holds",
    () =>
      Effect.gen(function* () {
        const executed: Array<string> = []
        const transfer = Tool.make({
          name: "transfer",
          description: "Transfers.",
          input: Schema.Struct({ to: Schema.String, amount: Schema.Number }),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect: "external",
          idempotent: true,
          maxRetries: 2,
          handler: (input) =>
            Effect.suspend(() => {
              executed.push(`${input.to}:${input.amount}`)
              if (executed.length > 1) return Effect.succeed({ ok: true })
              // Careless code: it changes the object it was handed, then fails retryably.
              Object.assign(input, { to: "mallory", amount: 500 })
              return Effect.fail(
                new Failure.Retryable({
                  source: "tool",
                  category: "connection",
                  code: "reset",
                  attempts: 1,
                  hint: "reset"
                })
              )
            }),
          postcondition: (input) =>
            Effect.sync(() => {
              executed.push(`checked ${input.to}:${input.amount}`)
              return true
            })
        })
        const result = yield* Run.run({ goal: "pay bob", tools: [transfer] }).pipe(
          Effect.provide(
            script(ScriptedModel.toolCall("transfer", { to: "bob", amount: 5 }), ScriptedModel.finalAnswer("paid"))
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(executed, ["bob:5", "bob:5", "checked bob:5"])
      })
  )

  it.effect("R6.3 a write whose handler returned is a side effect, even when its output then breaks its schema", () =>
    Effect.gen(function* () {
      const world: Array<string> = []
      // Erased on purpose: the handler returns what its schema refuses, after acting.
      const pay = paying(({ amount }) =>
        Effect.sync(() => {
          world.push(`paid ${amount}`)
          return { receipt: 42 } as unknown as { receipt: string }
        })
      )
      const result = yield* Run.run({ goal: "pay", tools: [pay] }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("pay", { amount: 10 }), ScriptedModel.finalAnswer("done")))
      )
      assert.deepStrictEqual(world, ["paid 10"])
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "output_validation_failed")
      assert.strictEqual(failed?.sideEffect, "external")
      assert.include(failed?.error.message, "do not repeat it")
      assert.deepStrictEqual(
        result.sideEffects.map((s) => [s.name, s.sideEffect]),
        [["pay", "external"]]
      )
    })
  )

  it.effect(
    "R12 R6.3 a handler that returns a revoked Proxy: its output is refused, the run goes on, the side effect stays",
    () =>
      Effect.gen(function* () {
        // Every read of a revoked Proxy throws, even the schema's `Array.isArray`.
        const pay = paying(() =>
          Effect.sync(() => {
            const revocable = Proxy.revocable<{ receipt: string }>({ receipt: "r" }, {})
            revocable.revoke()
            return revocable.proxy
          })
        )
        const result = yield* Run.run({ goal: "pay", tools: [pay] }).pipe(
          Effect.provide(script(ScriptedModel.toolCall("pay", { amount: 10 }), ScriptedModel.finalAnswer("done")))
        )
        assert.strictEqual(result.stopReason, "goal_reached")
        const [failed] = ofTag(result.timeline, "tool.failed")
        assert.strictEqual(failed?.error.code, "output_validation_failed")
        assert.include(failed?.error.message, "could not be encoded by its output schema (TypeError)")
        assert.strictEqual(failed?.sideEffect, "external")
      })
  )

  it.effect(
    "R4.2 R12 a tool's timeout is read once, as checked: the object it was given, changed later, changes nothing",
    () =>
      Effect.gen(function* () {
        const timeout = { seconds: 1 }
        const slow = Tool.make({
          name: "slow",
          description: "Never answers.",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          timeout,
          handler: () => Effect.never
        })
        const model = ScriptedModel.layerFunction((request) => {
          // The caller's object changes while the run goes on.
          timeout.seconds = request.iteration === 1 ? 100 : Number.NaN
          return request.iteration === 1 ? ScriptedModel.toolCall("slow", {}) : ScriptedModel.finalAnswer("done")
        })
        const result = yield* TestClockDriver.drive(Run.run({ goal: "wait", tools: [slow] })).pipe(
          Effect.provide(Layer.merge(model, NodeServices.layer))
        )
        const [failed] = ofTag(result.timeline, "tool.failed")
        assert.strictEqual(failed?.at, 1_000)
        assert.strictEqual(failed?.error.failure?.code, "tool_timeout")
      })
  )

  it.effect("R12 a secret in an effect/ai tool's declared failure is masked in what the run derives", () =>
    Effect.gen(function* () {
      class Denied extends Schema.TaggedError<Denied>()("Denied", {
        apiKey: Schema.RedactedFromValue(Schema.String)
      }) {}
      const call = AiTool.make("call_api", {
        description: "Calls the API.",
        parameters: Schema.Struct({ path: Schema.String }),
        success: Schema.String,
        failure: Denied,
        failureMode: "return"
      })
      const toolkit = AiToolkit.make(call)
      const handlers = toolkit.toLayer({
        call_api: () => Effect.fail(new Denied({ apiKey: Redacted.make("sk-server-SIDE-KEY-999") }))
      })
      const tools = yield* AiTools.fromToolkit(toolkit).pipe(Effect.provide(handlers))
      const result = yield* Run.run({ goal: "call", tools }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("call_api", { path: "/x" }), ScriptedModel.finalAnswer("done")))
      )
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.include(failed?.error.message, "Denied")
      assert.notInclude(JSON.stringify(result), "sk-server-SIDE-KEY-999")
    })
  )

  it.effect("R2.3 R12 sensitive calls with the same secrets in other fields are other calls", () =>
    Effect.gen(function* () {
      const change = Tool.make({
        name: "change_password",
        description: "Changes a password.",
        input: Schema.Struct({
          old: Schema.RedactedFromValue(Schema.String),
          new: Schema.RedactedFromValue(Schema.String),
          confirm: Schema.RedactedFromValue(Schema.String)
        }),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "read",
        handler: () => Effect.succeed({ ok: false })
      })
      const [a, b] = ["alpha-secret-1", "bravo-secret-2"]
      const result = yield* Run.run({ goal: "change it", tools: [change], limits: { repeatedToolCall: 2 } }).pipe(
        Effect.provide(
          script(
            ScriptedModel.toolCall("change_password", { old: a, new: b, confirm: a }),
            ScriptedModel.toolCall("change_password", { old: b, new: b, confirm: a }),
            ScriptedModel.toolCall("change_password", { old: b, new: a, confirm: a }),
            ScriptedModel.finalAnswer("gave up")
          )
        )
      )
      assert.strictEqual(result.stopReason, "goal_reached")
      const signatures = ofTag(result.timeline, "model.responded").flatMap((e) => e.signatures)
      assert.strictEqual(new Set(signatures).size, 3)
    })
  )

  it.effect("R12 a secret the output quotes where its schema refuses it stays masked in the refusal", () =>
    Effect.gen(function* () {
      const echo = Tool.make({
        name: "echo",
        description: "Echoes.",
        input: Schema.Struct({ password: Schema.RedactedFromValue(Schema.String) }),
        output: Schema.Struct({
          note: Schema.String.check(
            Schema.makeFilter((s) => s.length < 3 || `the note ${JSON.stringify(s)} is too long`)
          )
        }),
        sideEffect: "read",
        recoverErrors: true,
        handler: ({ password }) => Effect.succeed({ note: Redacted.value(password) })
      })
      const result = yield* Run.run({ goal: "echo", tools: [echo] }).pipe(
        Effect.provide(
          script(ScriptedModel.toolCall("echo", { password: "hunter22-secret" }), ScriptedModel.finalAnswer("done"))
        )
      )
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "output_validation_failed")
      const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
      assert.notInclude(derived, "hunter22-secret")
    })
  )

  it.effect("R12 a union input wrong in 3,000 places is described by 20 fields too", () =>
    Effect.gen(function* () {
      const either = Tool.make({
        name: "either",
        description: "Takes names or numbers.",
        input: Schema.Union([
          Schema.Struct({ names: Schema.Array(Schema.String) }),
          Schema.Struct({ numbers: Schema.Array(Schema.Number) })
        ]),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "read",
        handler: () => Effect.succeed({ ok: true })
      })
      const args = `{"names":[${"0,".repeat(2_999)}0]}`
      const result = yield* Run.run({ goal: "x", tools: [either] }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("either", args), ScriptedModel.finalAnswer("done")))
      )
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "input_validation_failed")
      assert.isAtMost(failed?.error.fieldPaths?.length ?? Infinity, SchemaIssues.maxFields)
      assert.include(failed?.error.message, "more problems")
    })
  )

  it.effect(
    "R12 R3.5 arguments matching none of a union's eight structs in 120,000 places are named by the first",
    () =>
      Effect.gen(function* () {
        const struct = (tag: string) =>
          Schema.Struct({ [`${tag}1`]: Schema.String, [`${tag}2`]: Schema.Number, [`${tag}3`]: Schema.Boolean })
        const shapes = Tool.make({
          name: "shapes",
          description: "Takes shapes.",
          input: Schema.Struct({
            items: Schema.Array(Schema.Union(["a", "b", "c", "d", "e", "f", "g", "h"].map(struct)))
          }),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect: "read",
          handler: () => Effect.succeed({ ok: true })
        })
        const args = `{"items":[${"{},".repeat(119_999)}{}]}`
        const result = yield* Run.run({ goal: "x", tools: [shapes] }).pipe(
          Effect.provide(script(ScriptedModel.toolCall("shapes", args), ScriptedModel.finalAnswer("done")))
        )
        const [failed] = ofTag(result.timeline, "tool.failed")
        assert.strictEqual(failed?.error.code, "input_validation_failed")
        // Every problem of each of 120,000 values against eight members was 1.6 GB and 13 s to hold.
        assert.include(failed?.error.message, "checked only up to their first problem")
        assert.notInclude(failed?.error.message, "more problems")
      })
  )

  it.effect(
    "R12 R4.1 8 KB of arguments against a union of 50 structs of 50 fields are named by the first problem",
    () =>
      Effect.gen(function* () {
        const wide = (m: number) =>
          Schema.Struct(Object.fromEntries(Array.from({ length: 50 }, (_, f) => [`m${m}f${f}`, Schema.String])))
        const shapes = Tool.make({
          name: "wide",
          description: "Takes wide shapes.",
          input: Schema.Struct({ items: Schema.Array(Schema.Union(Array.from({ length: 50 }, (_, m) => wide(m)))) }),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect: "read",
          handler: () => Effect.succeed({ ok: true })
        })
        // 4,000 values, under the count bound, yet ten million issues by the schema's shape (13.5 s).
        assert.strictEqual(SchemaIssues.issuesPerValue(shapes.input.ast), 2_500)
        const args = `{"items":[${"{},".repeat(3_999)}{}]}`
        const result = yield* Run.run({ goal: "x", tools: [shapes] }).pipe(
          Effect.provide(script(ScriptedModel.toolCall("wide", args), ScriptedModel.finalAnswer("done")))
        )
        const [failed] = ofTag(result.timeline, "tool.failed")
        assert.strictEqual(failed?.error.code, "input_validation_failed")
        // Named by the first item's problems (a union member's first each), not 4,000 items' ten million.
        assert.notInclude(failed?.error.message, "items[1]")
        assert.match(failed?.error.message ?? "", /and \d{1,3} more problems/)
      })
  )

  it.effect("R12 Explain does not show a repeated sensitive call's arguments", () =>
    Effect.gen(function* () {
      const login = Tool.make({
        name: "login",
        description: "Logs in.",
        input: Schema.Struct({ password: Schema.RedactedFromValue(Schema.String) }),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "read",
        handler: () => Effect.succeed({ ok: false })
      })
      const result = yield* Run.run({ goal: "log in", tools: [login], limits: { repeatedToolCall: 2 } }).pipe(
        Effect.provide(
          script(...Array.from({ length: 3 }, () => ScriptedModel.toolCall("login", { password: "hunter22-secret" })))
        )
      )
      assert.strictEqual(result.stopReason, "repeated_tool_call")
      const text = Explain.format(Explain.explain(result.timeline))
      assert.include(text, "login")
      assert.notInclude(text, "hunter22-secret")
      // Arguments that do not even parse are signed under the run's key, and hidden, too.
      const unparsed = yield* Run.run({ goal: "log in", tools: [login], limits: { repeatedToolCall: 2 } }).pipe(
        Effect.provide(
          script(
            ...Array.from({ length: 3 }, () =>
              ScriptedModel.toolCall("login", '{"user":"ada","password":"hunter22-secret"')
            )
          )
        )
      )
      assert.strictEqual(unparsed.stopReason, "repeated_tool_call")
      assert.notInclude(Explain.format(Explain.explain(unparsed.timeline)), "hunter22-secret")
    })
  )

  it.effect("R6.3 a write whose handler returned and whose postcondition the deadline cut off is a side effect", () =>
    Effect.gen(function* () {
      const pay = Tool.make({
        name: "pay",
        description: "Pays.",
        input: Schema.Struct({ amount: Schema.Number }),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "external",
        handler: () => Effect.succeed({ ok: true }),
        postcondition: () => Effect.never
      })
      const result = yield* TestClockDriver.drive(
        Run.run({ goal: "pay", tools: [pay], time: { run: "1 second" } }).pipe(
          Effect.provide(script(ScriptedModel.toolCall("pay", { amount: 10 }), ScriptedModel.finalAnswer("done")))
        )
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.deepStrictEqual(
        result.sideEffects.map((e) => e.name),
        ["pay"]
      )
    })
  )

  it("R12 masks that shorten an observation bring no part of a secret into view at the cut", () => {
    const key = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"
    const secrets = Redaction.secrets([key])
    const text = Array.from({ length: 2_000 }, (_, i) => `GET /v1/items/${i} Authorization: Bearer ${key} -> 200`).join(
      "\n"
    )
    for (const max of [100, 1_000, 32_768]) {
      const shown = maskedObservation(text, secrets, max)
      assert.notInclude(shown, key.slice(0, 8), `max ${max}`)
      assert.include(shown, "[observation cut:", `max ${max}`)
    }
  })

  it.effect(
    "R12 a sensitive tool handed arguments that are no JSON (a bigint, a cycle) refuses them, as any tool does",
    () =>
      Effect.gen(function* () {
        const login = Tool.make({
          name: "login",
          description: "Logs in.",
          input: Schema.Struct({ password: Schema.RedactedFromValue(Schema.String) }),
          output: Schema.Struct({ ok: Schema.Boolean }),
          sideEffect: "read",
          recoverErrors: true,
          handler: () => Effect.succeed({ ok: true })
        })
        const cycle: Record<string, unknown> = { password: "hunter22-secret" }
        cycle.self = cycle
        let shared: Record<string, unknown> = { v: "hunter22-secret" }
        // Shared at every level: a walk without a bound would visit 2^40 values.
        for (let i = 0; i < 40; i++) shared = { a: shared, b: shared }
        for (const args of [{ password: "hunter22-secret", n: 10n }, cycle, { password: shared }]) {
          // As a model adapter may hand arguments over: parsed already.
          const parsed = Model.response({ toolCalls: [{ id: "c1", name: "login", arguments: args }] })
          const result = yield* Run.run({ goal: "log in", tools: [login] }).pipe(
            Effect.provide(script(parsed, ScriptedModel.finalAnswer("done")))
          )
          assert.strictEqual(result.stopReason, "goal_reached")
          assert.strictEqual(ofTag(result.timeline, "tool.failed")[0]?.error.code, "invalid_arguments")
        }
      })
  )

  it("R12 an observation is masked, then cut: a secret the cut would split is masked whole, a long text costs what is sent", () => {
    const secrets = Redaction.secrets(["hunter22"])
    const text = `${"x".repeat(95)}hunter22${"y".repeat(5_000_000)}`
    const shown = maskedObservation(text, secrets, 100)
    assert.isTrue(shown.startsWith(`${"x".repeat(95)}<reda…`))
    assert.notInclude(shown, "hunt")
    assert.include(shown, `[observation cut: ${text.length - 100} more characters]`)
  })

  it.effect(
    "R12 R9 a call the model sent without arguments is recorded as one with none: the log encodes, a journal keeps it (review 145)",
    () =>
      Effect.gen(function* () {
        const writes: Array<number> = []
        const save = Tool.make({
          name: "save",
          description: "Saves.",
          input: Schema.Struct({ v: Schema.optional(Schema.Number) }),
          output: Schema.String,
          sideEffect: "write",
          handler: ({ v }) =>
            Effect.sync(() => {
              writes.push(v ?? 0)
              return "saved"
            })
        })
        // A model of the user's own may leave `arguments` out, as the scripted one does for `undefined`.
        const bare = { text: "", toolCalls: [{ id: "c1", name: "save" }], usage: { inputTokens: 1, outputTokens: 1 } }
        const result = yield* Run.run({ goal: "save twice", runId: "no-args", tools: [save] }).pipe(
          Effect.provide(
            script(
              bare as unknown as ScriptedModel.Step,
              ScriptedModel.toolCall("save", undefined),
              ScriptedModel.toolCall("save", { v: 2 }),
              ScriptedModel.finalAnswer("done")
            )
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.isUndefined(result.unrecorded)
        assert.deepStrictEqual(writes, [0, 0, 2])
        const calls = ofTag(result.timeline, "model.responded").flatMap((e) => e.toolCalls)
        assert.deepStrictEqual(
          calls.map((call) => call.arguments),
          [{}, {}, '{"v":2}']
        )
        // The result round-trips through JSON, and the journal holds the run's whole log.
        const encoded = JSON.parse(JSON.stringify(Schema.encodeUnknownSync(RunResult.RunResult)(result)))
        assert.deepStrictEqual(
          Schema.decodeUnknownSync(RunResult.RunResult)(encoded).timeline.length,
          result.timeline.length
        )
        const stored = yield* (yield* Journal.Journal).read("no-args")
        assert.strictEqual(stored._tag === "Some" ? stored.value.events.length : 0, result.timeline.length)
      }).pipe(Effect.provide(Journal.layerMemory))
  )
})
