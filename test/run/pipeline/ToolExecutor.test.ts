import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Redacted, Ref, Schema, SchemaGetter } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../../src/events/Event.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as Model from "../../../src/model/Model.ts"
import * as ToolExecutor from "../../../src/run/pipeline/ToolExecutor.ts"
import * as Run from "../../../src/run/Run.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../../src/testing/TestClockDriver.ts"
import * as Permission from "../../../src/tools/Permission.ts"
import * as Tool from "../../../src/tools/Tool.ts"
import { echo, makeStore } from "../../support/tools.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const raw = (name: string, args: string, id = "c1"): Model.Response =>
  Model.response({ toolCalls: [{ id, name, arguments: args }] })

const toolEvents = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.filter((e) => e._tag === "tool.failed" || e._tag === "tool.blocked" || e._tag === "tool.succeeded")

/** Every call the model asked for has exactly one terminal tool event with the same call id. */
const assertConsistent = (timeline: ReadonlyArray<Event.Event>) => {
  const asked = timeline.flatMap((e) => (e._tag === "model.responded" ? e.callIds : []))
  const ended = toolEvents(timeline).map((e) => e.callId)
  assert.deepStrictEqual([...ended].sort(), [...asked].sort())
  assert.strictEqual(timeline[timeline.length - 1]?._tag, "run.finished")
}

const firstFailure = (timeline: ReadonlyArray<Event.Event>) => {
  const event = timeline.find((e) => e._tag === "tool.failed")
  if (event?._tag !== "tool.failed") throw new Error("no tool.failed event")
  return event.error
}

describe("ToolExecutor", () => {
  it.effect("R3.5 an unknown tool name is a correctable failure naming the real tools", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "unknown_tool")
      assert.isTrue(error.correctable)
      assert.include(error.message, "echo")
      assert.strictEqual(result.status, "completed")
      assertConsistent(result.timeline)
    }).pipe(Effect.provide(withScript([raw("ech0", "{}"), ScriptedModel.finalAnswer("ok")])))
  )

  it.effect("R3.5 arguments that are not JSON are a correctable invalid_arguments result", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "invalid_arguments")
      assert.include(error.message, "not valid JSON")
      assertConsistent(result.timeline)
    }).pipe(Effect.provide(withScript([raw("echo", '{"text": "unterminated'), ScriptedModel.finalAnswer("ok")])))
  )

  it.effect("R3.5 arguments that are a JSON array, number or null are refused as not an object", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      const messages = result.timeline.flatMap((e) => (e._tag === "tool.failed" ? [e.error.message] : []))
      assert.deepStrictEqual(messages, [
        "arguments must be a JSON object, got an array",
        "arguments must be a JSON object, got a number",
        "arguments must be a JSON object, got null"
      ])
      assertConsistent(result.timeline)
    }).pipe(
      Effect.provide(
        withScript([
          raw("echo", "[1,2]", "a"),
          raw("echo", "42", "b"),
          raw("echo", "null", "c"),
          ScriptedModel.finalAnswer("ok")
        ])
      )
    )
  )

  it.effect("R3.5 a __proto__ key anywhere is refused and pollutes nothing", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "invalid_arguments")
      assert.include(error.message, "arguments.nested.__proto__")
      assert.isUndefined(({} as Record<string, unknown>).polluted)
      assertConsistent(result.timeline)
    }).pipe(
      Effect.provide(
        withScript([
          raw("echo", '{"text":"a","nested":{"__proto__":{"polluted":true}}}'),
          ScriptedModel.finalAnswer("ok")
        ])
      )
    )
  )

  it.effect("R3.5 huge arguments are refused with their size and the limit, before parsing", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo], limits: { maxArgumentChars: 1000 } })
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "invalid_arguments")
      assert.include(error.message, "over the limit of 1000")
      assertConsistent(result.timeline)
    }).pipe(
      Effect.provide(
        withScript([raw("echo", JSON.stringify({ text: "x".repeat(5000) })), ScriptedModel.finalAnswer("ok")])
      )
    )
  )

  it.effect("R3.5 schema errors name every field path", () =>
    Effect.gen(function* () {
      const store = makeStore()
      const result = yield* Run.run({ goal: "x", tools: [store.write] })
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "input_validation_failed")
      assert.deepStrictEqual(error.fieldPaths, ["arguments.artifact_name", "arguments.content"])
      assert.strictEqual(
        error.message,
        "arguments.artifact_name: Expected string; arguments.content: field is required"
      )
    }).pipe(
      Effect.provide(withScript([raw("write_json_file", '{"artifact_name":42}'), ScriptedModel.finalAnswer("ok")]))
    )
  )

  it.effect("R3.6 a permission denial is a blocked result: not retried, no correction spent", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      const counted = Tool.make({
        name: "counted",
        description: "counts calls",
        input: Schema.Struct({}),
        output: Schema.Int,
        handler: () => Ref.updateAndGet(calls, (n) => n + 1)
      })
      const result = yield* Run.run({ goal: "x", tools: [counted, echo] }).pipe(
        Effect.provide(Permission.layer({ allowTools: ["echo"] }))
      )
      const blocked = result.timeline.find((e) => e._tag === "tool.blocked")
      assert.strictEqual(blocked?._tag, "tool.blocked")
      if (blocked?._tag === "tool.blocked") {
        assert.strictEqual(blocked.error.code, "permission_denied")
        assert.isFalse(blocked.error.correctable)
        assert.include(blocked.error.message, "tool_not_allowed")
      }
      assert.strictEqual(yield* Ref.get(calls), 0)
      assert.strictEqual(result.counters.toolCorrectionAttempts, 0)
      assert.strictEqual(result.counters.recoveryAttempts, 0)
      assert.strictEqual(result.status, "completed")
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("counted", {}), ScriptedModel.finalAnswer("ok")])))
  )

  it.effect("a tool whose output breaks its own schema fails with output_validation_failed", () =>
    Effect.gen(function* () {
      const liar = Tool.make({
        name: "liar",
        description: "returns the wrong type",
        input: Schema.Struct({}),
        output: Schema.Int,
        recoverErrors: true,
        handler: () => Effect.succeed("not a number" as unknown as number)
      })
      const result = yield* Run.run({ goal: "x", tools: [liar] })
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "output_validation_failed")
      assert.isFalse(error.correctable)
      assertConsistent(result.timeline)
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("liar", {}), ScriptedModel.finalAnswer("ok")])))
  )

  it.effect(
    "R3.7 output that fails its schema is a tool execution error: fail fast, or to the model with recoverErrors",
    () =>
      Effect.gen(function* () {
        const liar = (recoverErrors: boolean) =>
          Tool.make({
            name: "liar",
            description: "returns the wrong type",
            input: Schema.Struct({}),
            output: Schema.Int,
            recoverErrors,
            handler: () => Effect.succeed("not a number" as unknown as number)
          })
        const script = [ScriptedModel.toolCall("liar", {}), ScriptedModel.finalAnswer("ok")]
        const fast = yield* Run.run({ goal: "x", tools: [liar(false)] }).pipe(Effect.provide(withScript(script)))
        assert.strictEqual(fast.stopReason, "tool_error")
        assert.include(fast.detail, "output_validation_failed")
        assert.include(firstFailure(fast.timeline).message, "does not match its output schema (output: Expected")
        const recovered = yield* Run.run({ goal: "x", tools: [liar(true)] }).pipe(Effect.provide(withScript(script)))
        assert.strictEqual(recovered.status, "completed")
        assert.strictEqual(firstFailure(recovered.timeline).failure?.code, "output_validation_failed")
      })
  )

  it.effect("R3.1 a thrown error's message never reaches an event or the model; a safeMessage does", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const leaky = Tool.make({
        name: "leaky",
        description: "throws with a key in its message",
        input: Schema.Struct({ kind: Schema.String }),
        output: Schema.String,
        recoverErrors: true,
        handler: ({ kind }) => {
          if (kind === "safe") {
            throw Object.assign(new Error("sk-live-0123456789abcdef"), { safeMessage: "the card was declined" })
          }
          throw new TypeError("upstream said: key sk-live-0123456789abcdef is over quota")
        }
      })
      const result = yield* Run.run({ goal: "x", tools: [leaky] }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCall("leaky", { kind: "raw" }),
            ScriptedModel.toolCall("leaky", { kind: "safe" }),
            (request) => {
              seen.push(JSON.stringify(request.messages))
              return ScriptedModel.finalAnswer("ok")
            }
          ])
        )
      )
      assert.notInclude(JSON.stringify(result), "sk-live")
      assert.notInclude(seen.join(""), "sk-live")
      const hints = result.timeline.flatMap((e) => (e._tag === "tool.failed" ? [e.error.failure?.hint] : []))
      assert.deepStrictEqual(hints, ["TypeError", "Error: the card was declined"])
    })
  )

  it.effect("R3.1 a Redacted input never reaches a signature, an event, an approval or an observation", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const login = Tool.make({
        name: "login",
        description: "logs in with a token",
        input: Schema.Struct({ user: Schema.String, token: Schema.RedactedFromValue(Schema.String) }),
        output: Schema.Struct({ user: Schema.String, echoed: Schema.String }),
        sideEffect: "read",
        // A careless tool that echoes the token back in its output.
        handler: ({ user, token }) => Effect.succeed({ user, echoed: `logged in with ${Redacted.value(token)}` })
      })
      const result = yield* Run.run({ goal: "x", tools: [login] }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCall("login", { user: "ada", token: "tok-SECRET-42" }),
            (request) => {
              seen.push(JSON.stringify(request.messages.slice(-1)))
              return ScriptedModel.finalAnswer("ok")
            }
          ])
        )
      )
      assert.strictEqual(result.status, "completed")
      // What the model sent is kept as sent; nothing derived from it copies the token.
      const derived = result.timeline.filter((e) => e._tag !== "model.responded")
      assert.notInclude(JSON.stringify(derived), "tok-SECRET")
      const responded = result.timeline.find((e) => e._tag === "model.responded")
      assert.isTrue(responded?._tag === "model.responded" && !responded.signatures.join("").includes("tok-SECRET"))
      assert.notInclude(seen.join(""), "tok-SECRET")
      assert.include(seen.join(""), "<redacted>")
      const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
      assert.deepStrictEqual(succeeded?._tag === "tool.succeeded" ? succeeded.input : undefined, {
        user: "ada",
        token: "<redacted>"
      })
    })
  )

  it.effect("R3.1 a Redacted struct, a transformed secret and arguments that do not decode are masked too", () =>
    Effect.gen(function* () {
      const upper = Schema.String.pipe(
        Schema.decodeTo(Schema.String, {
          decode: SchemaGetter.transform((s: string) => s.toUpperCase()),
          encode: SchemaGetter.transform((s: string) => s.toLowerCase())
        })
      )
      const login = Tool.make({
        name: "login",
        description: "logs in",
        input: Schema.Struct({
          user: Schema.String,
          credentials: Schema.RedactedFromValue(Schema.Struct({ password: Schema.String })),
          code: Schema.RedactedFromValue(upper),
          attempt: Schema.Int
        }),
        output: Schema.String,
        sideEffect: "read",
        recoverErrors: true,
        handler: () => Effect.succeed("ok")
      })
      const good = { user: "ada", credentials: { password: "pw-SECRET-1" }, code: "otp-secret-2", attempt: 1 }
      const bad = { user: "ada", credentials: { password: "pw-SECRET-3" }, code: "otp-secret-4", attempt: "one" }
      const result = yield* Run.run({ goal: "x", tools: [login] }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCall("login", good),
            ScriptedModel.toolCall("login", bad),
            ScriptedModel.finalAnswer("ok")
          ])
        )
      )
      const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
      for (const secret of ["pw-SECRET-1", "otp-secret-2", "OTP-SECRET-2", "pw-SECRET-3", "otp-secret-4"]) {
        assert.notInclude(derived, secret)
      }
      const responded = result.timeline.filter((e) => e._tag === "model.responded")
      assert.notInclude(JSON.stringify(responded.map((e) => e._tag === "model.responded" && e.signatures)), "SECRET")
      assert.strictEqual(firstFailure(result.timeline).code, "input_validation_failed")
    })
  )

  it.effect(
    "R3.1 R12 a secret quoted by a postcondition's failure, a status query's answer or a handler's settlement is masked",
    () =>
      Effect.gen(function* () {
        const key = (input: { readonly key: Redacted.Redacted<string> }) => Redacted.value(input.key)
        const paying = (over: Partial<Tool.Options<{ readonly key: Redacted.Redacted<string> }, string, never>>) =>
          Tool.make({
            name: "pay",
            description: "Pays with a key.",
            input: Schema.Struct({ key: Schema.RedactedFromValue(Schema.String) }),
            output: Schema.String,
            sideEffect: "external",
            idempotent: false,
            handler: () => Effect.succeed("ok"),
            ...over
          })
        const tools = {
          postcondition: paying({
            postcondition: (input) =>
              Effect.fail(
                new Failure.Permanent({
                  source: "tool",
                  category: "io",
                  code: "x",
                  attempts: 1,
                  hint: `balance check with ${key(input)} failed`
                })
              )
          }),
          reconcile: paying({
            handler: () =>
              Effect.fail(
                new Failure.UnknownOutcome({
                  source: "tool",
                  category: "connection",
                  code: "lost",
                  attempts: 1,
                  hint: "lost"
                })
              ),
            reconcile: (input) =>
              Effect.succeed({ _tag: "Undecidable", detail: `no record under ${key(input)}` } as const)
          }),
          settle: paying({
            handler: (input, context) =>
              Effect.suspend(() => {
                context.settle("cancelled", `gave up with ${key(input)}`)
                return Effect.never
              }),
            timeout: "1 second"
          })
        }
        for (const [name, tool] of Object.entries(tools)) {
          const result = yield* Run.run({ goal: "x", tools: [tool], time: { run: "5 seconds" } }).pipe(
            Effect.provide(
              withScript([ScriptedModel.toolCall("pay", { key: "sk-live-SECRET-9" }), ScriptedModel.finalAnswer("ok")])
            ),
            TestClockDriver.drive
          )
          const derived = result.timeline.filter((e) => e._tag !== "model.responded")
          assert.notInclude(JSON.stringify(derived), "sk-live", name)
          assert.notInclude(JSON.stringify({ ...result, timeline: derived }), "sk-live", name)
          assert.include(JSON.stringify(derived), "<redacted>", name)
        }
      })
  )

  it.effect(
    "R3.5 arguments decode from the JSON form the model is told: a Date as its ISO text, a bigint as its digits; a number must be finite",
    () =>
      Effect.gen(function* () {
        const book = Tool.make({
          name: "book",
          description: "Books a day.",
          input: Schema.Struct({ day: Schema.Date, seats: Schema.BigInt, price: Schema.Number }),
          output: Schema.String,
          sideEffect: "none",
          handler: ({ day, seats, price }) => Effect.succeed(`${day.toISOString()} ${seats + 1n} ${price}`)
        })
        assert.deepStrictEqual(book.definition.parameters, {
          type: "object",
          properties: {
            day: { type: "string" },
            seats: { type: "string", pattern: "^-?\\d+$" },
            price: { type: "number" }
          },
          required: ["day", "seats", "price"],
          additionalProperties: true
        })
        const result = yield* Run.run({ goal: "x", tools: [book] }).pipe(
          Effect.provide(
            withScript([
              ScriptedModel.toolCall("book", { day: "2026-12-04T00:00:00.000Z", seats: "2", price: 10 }, "A"),
              ScriptedModel.toolCall("book", { day: "2026-12-04T00:00:00.000Z", seats: "2", price: "NaN" }, "B"),
              ScriptedModel.finalAnswer("ok")
            ])
          )
        )
        const succeeded = result.timeline.flatMap((e) => (e._tag === "tool.succeeded" ? [e.output] : []))
        assert.deepStrictEqual(succeeded, ["2026-12-04T00:00:00.000Z 3 10"])
        assert.deepStrictEqual(firstFailure(result.timeline), {
          ...firstFailure(result.timeline),
          code: "input_validation_failed",
          message: "arguments.price: Expected a finite number"
        })
      })
  )

  it.effect(
    'R3.5 arguments the schema reads as they are stay as they were: a number-or-text field keeps the text "NaN"; a number in a Set is finite',
    () =>
      Effect.gen(function* () {
        const search = Tool.make({
          name: "search",
          description: "Searches.",
          input: Schema.Struct({ q: Schema.Union([Schema.Number, Schema.String]) }),
          output: Schema.String,
          sideEffect: "none",
          handler: ({ q }) => Effect.succeed(`${typeof q} ${q}`)
        })
        const score = Tool.make({
          name: "score",
          description: "Scores.",
          input: Schema.Struct({ scores: Schema.ReadonlySet(Schema.Number) }),
          output: Schema.String,
          sideEffect: "none",
          handler: ({ scores }) => Effect.succeed([...scores].join(","))
        })
        const result = yield* Run.run({ goal: "x", tools: [search, score] }).pipe(
          Effect.provide(
            withScript([
              ScriptedModel.toolCalls(
                ["search", { q: "NaN" }, "A"],
                ["score", { scores: [1, 2] }, "B"],
                ["score", { scores: [1, "Infinity"] }, "C"]
              ),
              ScriptedModel.finalAnswer("ok")
            ])
          )
        )
        const succeeded = result.timeline.flatMap((e) => (e._tag === "tool.succeeded" ? [e.output] : []))
        assert.deepStrictEqual(succeeded, ["string NaN", "1,2"])
        assert.strictEqual(firstFailure(result.timeline).message, "arguments.scores[1]: Expected a finite number")
      })
  )

  it.effect("R3.5 a refusal names only the fields that are wrong, not those sent in their JSON form", () =>
    Effect.gen(function* () {
      const book = Tool.make({
        name: "book",
        description: "Books a day.",
        input: Schema.Struct({ day: Schema.Date, seats: Schema.Number }),
        output: Schema.String,
        sideEffect: "none",
        handler: () => Effect.succeed("ok")
      })
      const result = yield* Run.run({ goal: "x", tools: [book] }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCall("book", { day: "2026-12-04T00:00:00.000Z", seats: "two" }),
            ScriptedModel.finalAnswer("ok")
          ])
        )
      )
      // In the schema's words: the JSON form's number would also read "NaN", no advice to give.
      assert.deepStrictEqual(firstFailure(result.timeline).fieldPaths, ["arguments.seats"])
      assert.strictEqual(firstFailure(result.timeline).message, "arguments.seats: Expected number")
    })
  )

  it.effect("R12 an input schema that breaks is the tool's failure, not the model's: no correction is asked", () =>
    Effect.gen(function* () {
      const needsFiber = Schema.String.pipe(
        Schema.decodeTo(Schema.String, {
          decode: SchemaGetter.transformEffect((s: string) => Effect.as(Effect.sleep("1 millis"), s)),
          encode: SchemaGetter.transform((s: string) => s)
        })
      )
      const lookup = Tool.make({
        name: "lookup",
        description: "Looks up a city.",
        input: Schema.Struct({ city: needsFiber }),
        output: Schema.String,
        sideEffect: "none",
        handler: ({ city }) => Effect.succeed(city)
      })
      const result = yield* Run.run({ goal: "x", tools: [lookup] }).pipe(
        Effect.provide(
          withScript([ScriptedModel.toolCall("lookup", { city: "Oslo" }), ScriptedModel.finalAnswer("ok")])
        )
      )
      const error = firstFailure(result.timeline)
      assert.strictEqual(error.code, "tool_failed")
      assert.strictEqual(error.correctable, false)
      assert.include(error.message, "input schema")
      assert.strictEqual(result.counters.toolCorrectionAttempts, 0)
    })
  )

  it.effect("R6.4 a success its postcondition contradicts stops the run with inconsistent_result", () =>
    Effect.gen(function* () {
      const flaky = Tool.make({
        name: "publish",
        description: "claims to publish",
        input: Schema.Struct({}),
        output: Schema.String,
        handler: () => Effect.succeed("published"),
        postcondition: () => Effect.succeed(false)
      })
      const result = yield* Run.run({ goal: "x", tools: [flaky] })
      assert.strictEqual(result.stopReason, "inconsistent_result")
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(firstFailure(result.timeline).code, "inconsistent_result")
    }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("publish", {}), ScriptedModel.finalAnswer("ok")])))
  )

  it.live(
    "a batch runs with the configured concurrency and returns results in call order",
    () =>
      Effect.gen(function* () {
        const slow = Tool.make({
          name: "slow",
          description: "sleeps then answers",
          input: Schema.Struct({ ms: Schema.Int }),
          output: Schema.Int,
          sideEffect: "none",
          handler: ({ ms }) => Effect.sleep(ms).pipe(Effect.as(ms))
        })
        const seen: Array<ReadonlyArray<Model.Message>> = []
        const layer = Layer.mergeAll(
          ScriptedModel.layer([
            ScriptedModel.toolCalls(["slow", { ms: 30 }, "a"], ["slow", { ms: 1 }, "b"], ["slow", { ms: 10 }, "c"]),
            (request) => {
              seen.push(request.messages.slice())
              return ScriptedModel.finalAnswer("ok")
            }
          ]),
          NodeServices.layer
        )
        const result = yield* Run.run({ goal: "x", tools: [slow], concurrency: 3 }).pipe(Effect.provide(layer))
        const toolMessages = (seen[0] ?? []).flatMap((m) => (m._tag === "tool" ? [m.toolCallId] : []))
        assert.deepStrictEqual(toolMessages, ["a", "b", "c"])
        const finished = result.timeline.flatMap((e) => (e._tag === "tool.succeeded" ? [e.callId] : []))
        assert.deepStrictEqual(finished, ["b", "c", "a"])
      }),
    { timeout: 10_000 }
  )

  it.effect(
    "R4.3 R3.8 a non-idempotent write cut off by its own timeout is an unknown outcome naming the tool layer",
    () =>
      Effect.gen(function* () {
        const pay = Tool.make({
          name: "pay",
          description: "a payment that hangs",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          idempotent: false,
          timeout: "2 seconds",
          handler: () => Effect.never
        })
        const fiber = yield* Effect.forkChild(Run.run({ goal: "x", tools: [pay], time: { run: "1 minute" } }))
        yield* TestClock.adjust("3 seconds")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.status, "unknown_outcome")
        assert.strictEqual(result.stopReason, "unknown_outcome")
        const error = firstFailure(result.timeline)
        assert.strictEqual(error.failure?.classification, "unknown")
        assert.strictEqual(error.failure?.code, "tool_timeout")
        assert.include(error.message, "cut off by the tool timeout after 2000 ms")
        assert.strictEqual(result.elapsedMillis, 2000)
      }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("pay", {})])))
  )

  it("R4.1 a tool timeout that is not a positive duration is refused at definition", () => {
    assert.throws(
      () =>
        Tool.make({
          name: "t",
          description: "",
          input: Schema.Struct({}),
          output: Schema.String,
          timeout: "-1 seconds",
          handler: () => Effect.succeed("")
        }),
      /timeout must be a positive, finite duration/
    )
  })

  it.effect("R3.1 a value the tool marks Redacted never reaches an observation, an event or the model", () =>
    Effect.gen(function* () {
      const creds = Tool.make({
        name: "creds",
        description: "returns a token",
        input: Schema.Struct({}),
        output: Schema.Struct({ user: Schema.String, token: Schema.Redacted(Schema.String) }),
        sideEffect: "read",
        handler: () => Effect.succeed({ user: "ada", token: Redacted.make("sk-SECRET-123") })
      })
      const seen: Array<string> = []
      const layer = Layer.mergeAll(
        ScriptedModel.layer([
          ScriptedModel.toolCall("creds", {}),
          (request) => {
            seen.push(JSON.stringify(request.messages))
            return ScriptedModel.finalAnswer("ok")
          }
        ]),
        NodeServices.layer
      )
      const result = yield* Run.run({ goal: "x", tools: [creds] }).pipe(Effect.provide(layer))
      assert.strictEqual(result.status, "completed")
      assert.notInclude(JSON.stringify(result), "sk-SECRET")
      assert.notInclude(seen.join(""), "sk-SECRET")
      assert.include(seen.join(""), "<redacted>")
    })
  )

  it("parseArguments treats empty text as an empty object and keeps objects as given", () => {
    assert.deepStrictEqual(ToolExecutor.parseArguments(""), { _tag: "Ok", value: {} })
    assert.deepStrictEqual(ToolExecutor.parseArguments({ a: 1 }), { _tag: "Ok", value: { a: 1 } })
  })
})
