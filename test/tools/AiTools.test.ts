import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Option, Ref, Schema, Stream } from "effect"
import { AiError, Tool as AiTool, Prompt, Toolkit } from "effect/ai"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as AiTools from "../../src/tools/AiTools.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"

const GetWeather = AiTool.make("get_weather", {
  description: "The weather in a city",
  parameters: Schema.Struct({ city: Schema.String, days: Schema.optional(Schema.Int) }),
  success: Schema.Struct({ city: Schema.String, celsius: Schema.Number })
})
  .annotate(AiTool.Readonly, true)
  .annotate(AiTool.Idempotent, true)

class CardDeclined extends Schema.TaggedError<CardDeclined>()("CardDeclined", { last4: Schema.String }) {}

const Pay = AiTool.make("pay", {
  description: "Pay an amount",
  parameters: Schema.Struct({ amount: Schema.Finite }),
  success: Schema.String,
  failure: CardDeclined,
  failureMode: "return"
})

/** A service the toolkit's handlers capture when their layer is built. */
class Thermometer extends Context.Service<Thermometer, { readonly read: (city: string) => number }>()("Thermometer") {}

const WeatherKit = Toolkit.make(GetWeather, Pay)

const handlers = WeatherKit.toLayer(
  Effect.gen(function* () {
    const thermometer = yield* Thermometer
    return WeatherKit.of({
      get_weather: ({ city }) => Effect.succeed({ city, celsius: thermometer.read(city) }),
      pay: ({ amount }) =>
        amount > 100 ? Effect.fail(new CardDeclined({ last4: "4242" })) : Effect.succeed(`paid ${amount}`)
    })
  })
).pipe(Layer.provide(Layer.succeed(Thermometer, { read: (city) => (city === "Lisbon" ? 21 : 9) })))

const withScript = (...script: ReadonlyArray<ScriptedModel.Step>) => ScriptedModel.layer(script)

const raw = (name: string, args: string, id: string): Model.Response =>
  Model.response({ toolCalls: [{ id, name, arguments: args }] })

/** A final answer that records what the model saw of each tool call: `[name, content]`. */
const answerSeeing =
  (seen: Array<readonly [string, string]>, text: string): ScriptedModel.Step =>
  (request) => {
    for (const m of request.messages) if (m._tag === "tool") seen.push([m.name, m.content])
    return ScriptedModel.finalAnswer(text)
  }

const ofTag = <K extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: K) =>
  timeline.filter((e): e is Event.Of<K> => e._tag === tag)

describe("AiTools.fromTool", () => {
  it("R3.7 effect/ai annotations map onto the metadata, with effect/ai's defaults when unannotated", () => {
    const handler = () => Effect.void
    const plain = AiTool.make("plain")
    const metadataOf = (tool: typeof plain) => {
      const { idempotent, sideEffect, destructive, needsApproval, recoverErrors } = AiTools.fromTool(tool, {
        handler
      }).metadata
      return { idempotent, sideEffect, destructive, needsApproval, recoverErrors }
    }
    const base = { idempotent: false, destructive: true, needsApproval: false, recoverErrors: false }
    const table: ReadonlyArray<readonly [string, typeof plain, ReturnType<typeof metadataOf>]> = [
      ["unannotated: open world, destructive", plain, { ...base, sideEffect: "external" }],
      ["Readonly", plain.annotate(AiTool.Readonly, true), { ...base, sideEffect: "read", destructive: false }],
      ["OpenWorld false", plain.annotate(AiTool.OpenWorld, false), { ...base, sideEffect: "write" }],
      [
        "Destructive false",
        plain.annotate(AiTool.OpenWorld, false).annotate(AiTool.Destructive, false),
        { ...base, sideEffect: "write", destructive: false }
      ],
      ["Idempotent", plain.annotate(AiTool.Idempotent, true), { ...base, sideEffect: "external", idempotent: true }],
      ["needsApproval", plain.setNeedsApproval(true), { ...base, sideEffect: "external", needsApproval: true }],
      [
        "needsApproval as a function asks every time",
        plain.setNeedsApproval(() => false),
        { ...base, sideEffect: "external", needsApproval: true }
      ]
    ]
    for (const [what, tool, expected] of table) assert.deepStrictEqual(metadataOf(tool), expected, what)
    const returning = AiTool.make("returning", { failureMode: "return" })
    assert.isTrue(AiTools.fromTool(returning, { handler }).metadata.recoverErrors)
  })

  it("R3.7 the runtime's own options come beside what the effect/ai tool declares", () => {
    const tool = AiTools.fromTool(GetWeather, {
      handler: ({ city }) => Effect.succeed({ city, celsius: 1 }),
      maxRetries: 5,
      timeout: "2 seconds"
    })
    assert.strictEqual(tool.name, "get_weather")
    assert.strictEqual(tool.description, "The weather in a city")
    assert.strictEqual(tool.metadata.maxRetries, 5)
    // Read once, as a Duration: the caller's value is not kept.
    assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(tool.metadata.timeout ?? 0)), 2_000)
    assert.deepInclude(tool.definition.parameters, { type: "object", required: ["city"] })
  })

  it("R12 a tool the runtime cannot run, or a name chat APIs refuse, is an InvalidToolDefinition", () => {
    const dynamic = AiTool.dynamic("mcp_tool", { parameters: { type: "object", properties: {} } })
    assert.throws(() => AiTools.fromTool(dynamic, { handler: () => Effect.void }), /JSON Schema/)
    assert.throws(
      () => AiTools.fromTool(AiTool.make("no spaces"), { handler: () => Effect.void }),
      Tool.InvalidToolDefinition
    )
    // A handler that is not a function is refused here, not found out at the first call.
    const noHandler = { handler: undefined } as unknown as Parameters<typeof AiTools.fromTool<typeof GetWeather>>[1]
    assert.throws(
      () => AiTools.fromTool(GetWeather, noHandler),
      Tool.InvalidToolDefinition,
      "handler must be a function"
    )
  })

  const observed: Array<readonly [string, string]> = []
  it.effect("R3.5 arguments are decoded with the parameters schema; bad ones are the model's to correct", () =>
    Effect.gen(function* () {
      const seen: Array<unknown> = []
      const weather = AiTools.fromTool(GetWeather, {
        handler: (params, context) => {
          seen.push({ params, callId: context.callId, toolCallId: context.toolCallId })
          return Effect.succeed({ city: params.city, celsius: 20 })
        }
      })
      const result = yield* Run.run({ goal: "weather", tools: [weather] })
      assert.strictEqual(result.status, "completed")
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "input_validation_failed")
      assert.isTrue(failed?.error.correctable)
      assert.deepStrictEqual(failed?.error.fieldPaths, ["arguments.city"])
      const [notJson] = ofTag(result.timeline, "tool.failed").slice(1)
      assert.strictEqual(notJson?.error.code, "invalid_arguments")
      assert.deepStrictEqual(seen, [{ params: { city: "Lisbon" }, callId: "c3", toolCallId: "c3" }])
      assert.deepStrictEqual(observed[2], ["get_weather", '{"city":"Lisbon","celsius":20}'])
    }).pipe(
      Effect.provide(
        withScript(
          raw("get_weather", '{"city":7}', "c1"),
          raw("get_weather", '{"city":', "c2"),
          raw("get_weather", '{"city":"Lisbon"}', "c3"),
          answerSeeing(observed, "20 degrees")
        )
      )
    )
  )

  it.effect("R6.4 output that breaks the success schema is a tool execution error", () =>
    Effect.gen(function* () {
      const weather = AiTools.fromTool(GetWeather, {
        handler: ({ city }) => Effect.succeed({ city, celsius: "warm" as unknown as number })
      })
      const result = yield* Run.run({ goal: "weather", tools: [weather] })
      assert.strictEqual(result.stopReason, "tool_error")
      assert.strictEqual(ofTag(result.timeline, "tool.failed")[0]?.error.code, "output_validation_failed")
    }).pipe(
      Effect.provide(
        withScript(ScriptedModel.toolCall("get_weather", { city: "Oslo" }), ScriptedModel.finalAnswer("?"))
      )
    )
  )

  it.effect('R3.1 a declared failure of a failureMode: "return" tool goes back to the model as its JSON', () =>
    Effect.gen(function* () {
      const pay = AiTools.fromTool(Pay, {
        handler: ({ amount }) =>
          amount > 100 ? Effect.fail(new CardDeclined({ last4: "4242" })) : Effect.succeed(`paid ${amount}`)
      })
      const result = yield* Run.run({ goal: "pay", tools: [pay] })
      assert.strictEqual(result.status, "completed")
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.failure?.classification, "permanent")
      assert.strictEqual(failed?.error.failure?.code, "card_declined")
      assert.include(failed?.error.message ?? "", '{"_tag":"CardDeclined","last4":"4242"}')
      assert.lengthOf(ofTag(result.timeline, "tool.succeeded"), 1)
    }).pipe(
      Effect.provide(
        withScript(
          ScriptedModel.toolCall("pay", { amount: 500 }),
          ScriptedModel.toolCall("pay", { amount: 50 }),
          ScriptedModel.finalAnswer("paid 50")
        )
      )
    )
  )

  it.effect('R3.7 a failure of a failureMode: "error" tool fails the run fast (tool_error)', () =>
    Effect.gen(function* () {
      const strict = AiTool.make("charge", { parameters: Schema.Struct({}), failure: CardDeclined })
      const charge = AiTools.fromTool(strict, { handler: () => Effect.fail(new CardDeclined({ last4: "0000" })) })
      const result = yield* Run.run({ goal: "charge", tools: [charge] })
      assert.strictEqual(result.stopReason, "tool_error")
      assert.strictEqual(result.status, "failed")
    }).pipe(Effect.provide(withScript(ScriptedModel.toolCall("charge", {}), ScriptedModel.finalAnswer("?"))))
  )

  it.effect("R3.7 a retryable AiError of an idempotent tool is retried", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      const flaky = AiTools.fromTool(GetWeather, {
        handler: ({ city }) =>
          Effect.flatMap(
            Ref.getAndUpdate(calls, (n) => n + 1),
            (n) =>
              n === 0
                ? Effect.fail(
                    new AiError.NetworkError({
                      reason: "TransportError",
                      method: "GET",
                      url: "https://weather.test",
                      description: "reset"
                    })
                  )
                : Effect.succeed({ city, celsius: 3 })
          )
      })
      const result = yield* drive(Run.run({ goal: "weather", tools: [flaky] }))
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(yield* Ref.get(calls), 2)
      const [recovery] = ofTag(result.timeline, "recovery.started")
      assert.strictEqual(recovery?.kind, "tool_retry")
      assert.include(recovery?.cause ?? "", "network_error")
    }).pipe(
      Effect.provide(
        withScript(ScriptedModel.toolCall("get_weather", { city: "Oslo" }), ScriptedModel.finalAnswer("3 degrees"))
      )
    )
  )

  it.effect(
    "R3.8 a non-idempotent tool whose remote call broke is an unknown outcome, reconciled, never repeated",
    () =>
      Effect.gen(function* () {
        const calls = yield* Ref.make(0)
        const asked = yield* Ref.make(0)
        const broken = new AiError.NetworkError({
          reason: "TransportError",
          method: "POST",
          url: "https://bank.test",
          description: "socket hang up"
        })
        const pay = (reconcile: boolean) =>
          AiTools.fromTool(Pay, {
            handler: () =>
              Effect.andThen(
                Ref.update(calls, (n) => n + 1),
                Effect.fail(broken)
              ),
            ...(reconcile
              ? {
                  reconcile: () =>
                    Effect.as(
                      Ref.update(asked, (n) => n + 1),
                      { _tag: "Applied", output: "paid 1" } as const
                    )
                }
              : {})
          })
        const unreconciled = yield* drive(Run.run({ goal: "pay", tools: [pay(false)] }))
        assert.strictEqual(unreconciled.stopReason, "unknown_outcome")
        assert.strictEqual(yield* Ref.get(calls), 1)
        const failed = ofTag(unreconciled.timeline, "tool.failed")[0]?.error.failure
        assert.strictEqual(failed?.classification, "unknown")
        assert.strictEqual(failed?.code, "network_error")
        const reconciled = yield* drive(Run.run({ goal: "pay", tools: [pay(true)] }))
        assert.strictEqual(reconciled.status, "completed")
        assert.strictEqual(yield* Ref.get(calls), 2)
        assert.strictEqual(yield* Ref.get(asked), 1)
      }).pipe(
        Effect.provide(
          ScriptedModel.layerFunction((request) =>
            request.messages.some((m) => m._tag === "tool")
              ? ScriptedModel.finalAnswer("done")
              : ScriptedModel.toolCall("pay", { amount: 1 })
          )
        )
      )
  )

  it.effect("R3.2 a rate limit's wait is kept, whether the handler fails with the AiError or its bare reason", () =>
    Effect.gen(function* () {
      for (const wrapped of [false, true]) {
        const limited = new AiError.RateLimitError({ retryAfter: Duration.seconds(5) })
        const error = wrapped ? AiError.make({ module: "Weather", method: "get", reason: limited }) : limited
        const tries = yield* Ref.make(0)
        const weather = AiTools.fromTool(GetWeather, {
          handler: ({ city }) =>
            Effect.flatMap(
              Ref.getAndUpdate(tries, (n) => n + 1),
              (n) => (n === 0 ? Effect.fail(error) : Effect.succeed({ city, celsius: 3 }))
            )
        })
        const result = yield* drive(
          Run.run({ goal: "weather", tools: [weather] }).pipe(
            Effect.provide(
              withScript(ScriptedModel.toolCall("get_weather", { city: "Oslo" }), ScriptedModel.finalAnswer("3"))
            )
          )
        )
        assert.strictEqual(result.status, "completed", String(wrapped))
        assert.strictEqual(ofTag(result.timeline, "recovery.started")[0]?.delayMillis, 5000, String(wrapped))
      }
    })
  )

  it.effect(
    "R3.2 a rate limit without end is a retryable failure whose wait the run cannot give, not a defect (review 183)",
    () =>
      Effect.gen(function* () {
        let tries = 0
        const weather = AiTools.fromTool(GetWeather, {
          handler: () =>
            Effect.suspend(() => {
              tries++
              return Effect.fail(new AiError.RateLimitError({ retryAfter: Duration.infinity }))
            })
        })
        const result = yield* drive(
          Run.run({ goal: "weather", tools: [weather] }).pipe(
            Effect.provide(
              withScript(ScriptedModel.toolCall("get_weather", { city: "Oslo" }), ScriptedModel.finalAnswer("3"))
            )
          )
        )
        const [failed] = ofTag(result.timeline, "tool.failed")
        assert.deepInclude(failed?.error.failure, { classification: "retryable", code: "rate_limit_error" })
        assert.strictEqual(failed?.error.notRetriedFor, "deadline")
        // Its wait passes the run's deadline: the run ends there, as for any wait it cannot give.
        assert.strictEqual(result.stopReason, "run_timeout")
        // Waiting forever is no retry: the call is tried once.
        assert.strictEqual(tries, 1)
      })
  )

  it("R11 effect/ai's Strict annotation false hands the tool over in its plain schema only", () => {
    const plain = AiTools.fromTool(GetWeather.annotate(AiTool.Strict, false), {
      handler: ({ city }) => Effect.succeed({ city, celsius: 1 })
    })
    const strict = AiTools.fromTool(GetWeather, { handler: ({ city }) => Effect.succeed({ city, celsius: 1 }) })
    assert.isUndefined(plain.definition.strict)
    assert.isDefined(strict.definition.strict)
  })

  it.effect("R3.1 classify decides what a handler's failure is", () =>
    Effect.gen(function* () {
      const pay = AiTools.fromTool(Pay, {
        handler: () => Effect.fail(new CardDeclined({ last4: "1111" })),
        classify: () =>
          new Failure.UnknownOutcome({
            source: "tool",
            category: "other",
            code: "bank_silent",
            attempts: 1,
            hint: "ask"
          })
      })
      const result = yield* Run.run({ goal: "pay", tools: [pay] })
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.strictEqual(ofTag(result.timeline, "tool.failed")[0]?.error.failure?.code, "bank_silent")
    }).pipe(Effect.provide(withScript(ScriptedModel.toolCall("pay", { amount: 1 }), ScriptedModel.finalAnswer("?"))))
  )

  it.effect("R7 a tool that needs approval waits for a person before its handler runs", () =>
    Effect.gen(function* () {
      const ran = yield* Ref.make(0)
      const pay = AiTools.fromTool(Pay.setNeedsApproval(true), {
        handler: ({ amount }) =>
          Effect.as(
            Ref.update(ran, (n) => n + 1),
            `paid ${amount}`
          )
      })
      const handle = yield* Run.start({ goal: "pay", tools: [pay] })
      const requested = yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
      assert.isTrue(Option.isSome(requested))
      assert.strictEqual(yield* Ref.get(ran), 0)
      yield* handle.approve("call_pay")
      const result = yield* handle.result
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(yield* Ref.get(ran), 1)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Layer.mergeAll(
          withScript(ScriptedModel.toolCall("pay", { amount: 5 }, "call_pay"), ScriptedModel.finalAnswer("paid")),
          Approval.layerMemory
        )
      )
    )
  )

  it("R11 toModelOutput renders the observation, as effect/ai renders it for text-only providers", () => {
    const shot = AiTool.make("screenshot", {
      success: Schema.String,
      toModelOutput: (name) => [
        Prompt.textPart({ text: `shot of ${name}` }),
        Prompt.filePart({ mediaType: "image/png", fileName: `${name}.png`, data: "iVBORw0KGgo=" })
      ]
    })
    const tool = AiTools.fromTool(shot, { handler: () => Effect.succeed("home") })
    assert.strictEqual(tool.observe?.("home"), "shot of home\n[image/png home.png omitted]")
  })
})

describe("AiTools.fromToolkit", () => {
  const seen: Array<readonly [string, string]> = []
  it.effect("R3.7 a Toolkit's tools run with the handlers its layer provides, through Run.run", () =>
    Effect.gen(function* () {
      const tools = yield* AiTools.fromToolkit(WeatherKit, { pay: { maxRetries: 4 } })
      assert.deepStrictEqual(
        tools.map((tool) => [tool.name, tool.metadata.sideEffect, tool.metadata.idempotent, tool.metadata.maxRetries]),
        [
          ["get_weather", "read", true, Tool.defaultMaxRetries],
          ["pay", "external", false, 4]
        ]
      )
      const result = yield* Run.run({ goal: "weather, then pay", tools })
      assert.strictEqual(result.status, "completed")
      const [declined] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(declined?.error.failure?.code, "card_declined")
      assert.strictEqual(seen[0]?.[1], '{"city":"Lisbon","celsius":21}')
      assert.include(seen[1]?.[1] ?? "", "CardDeclined")
      assert.deepStrictEqual(seen[2], ["pay", '"paid 10"'])
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          handlers,
          withScript(
            ScriptedModel.toolCalls(["get_weather", { city: "Lisbon" }], ["pay", { amount: 1000 }]),
            ScriptedModel.toolCall("pay", { amount: 10 }),
            answerSeeing(seen, "done")
          )
        )
      )
    )
  )

  it.effect("R12 a tool of the toolkit without a handler in the context is a defect naming it", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        // A context without the toolkit's handlers, as a layer built by hand could leave it.
        AiTools.fromToolkit(WeatherKit).pipe(
          Effect.provideContext(
            Context.empty() as Context.Context<AiTool.HandlersFor<Toolkit.Tools<typeof WeatherKit>>>
          )
        )
      )
      assert.strictEqual(exit._tag, "Failure")
      assert.include(String(exit), "no handler")
    })
  )
})
