/**
 * R2.1, R2.3: a provider that reports no usage. Its calls count estimated tokens (about four
 * characters a token, marked `estimated` on the timeline), so a token or cost budget still
 * trips; before, such a server counted 0 tokens and $0, and the budget never did.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { type AiError, LanguageModel, type Response } from "effect/ai"
import type * as Event from "../../src/events/Event.ts"
import * as Model from "../../src/model/Model.ts"
import * as LanguageModelAdapter from "../../src/providers/LanguageModelAdapter.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as OpenAiWireEncode from "../../src/providers/OpenAiWireEncode.ts"
import * as Run from "../../src/run/Run.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { apiKey, request } from "../support/provider.ts"

const lookup = Tool.make({
  name: "lookup",
  description: "Looks a record up.",
  input: Schema.Struct({ id: Schema.Number }),
  output: Schema.Struct({ found: Schema.Boolean }),
  sideEffect: "none",
  handler: () => Effect.succeed({ found: false })
})

/** A server that never reports usage: it asks for a lookup with a new id each time. */
const script = (n: number, usage: FakeOpenAiServer.ReplyUsage | "unreported") =>
  Array.from({ length: n }, (_, i) =>
    FakeOpenAiServer.reply({
      text: "Still looking. ".repeat(40),
      toolCalls: [{ name: "lookup", arguments: JSON.stringify({ id: i }) }],
      usage
    })
  )

const responded = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.filter((e): e is Event.Of<"model.responded"> => e._tag === "model.responded")

const runAgainst = (
  steps: ReadonlyArray<FakeOpenAiServer.Step>,
  limits: Run.Limits,
  options: Partial<OpenAiCompatible.Options> = {}
) =>
  Effect.gen(function* () {
    const server = yield* FakeOpenAiServer.make(steps)
    return yield* Run.run({ goal: "Find the record.", tools: [lookup], limits, time: { run: "20 seconds" } }).pipe(
      Effect.provide(OpenAiCompatible.layer({ baseUrl: server.url, model: "fake-model", apiKey, ...options }))
    )
  }).pipe(Effect.provide(NodeTransport.layer()))

describe("a provider that reports no usage", () => {
  it("R2.1 Model.estimatedUsage counts about four characters a token, of the request and of the response", () => {
    const usage = Model.estimatedUsage(
      {
        messages: [
          { _tag: "system", content: "s".repeat(40) },
          { _tag: "user", content: "u".repeat(40) },
          { _tag: "tool", toolCallId: "c1", name: "t", content: "o".repeat(37) }
        ],
        tools: [{ name: "t", description: "d".repeat(19), parameters: "p".repeat(20) }]
      },
      { text: "a".repeat(10), reasoning: "r".repeat(9), toolCalls: [{ id: "c2", name: "t", arguments: { x: 1 } }] }
    )
    // Sent: 40 + 40 + (2 + 1 + 37) + (1 + 19 + 20) = 160 characters; received: 10 + 9 + (2 + 1 + 7) = 29.
    assert.deepStrictEqual(usage, { inputTokens: 40, outputTokens: 8, reasoningTokens: 3, estimated: true })
  })

  it("R12 arguments JSON cannot write count nothing, and do not throw", () => {
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    const usage = Model.estimatedUsage(
      { messages: [], tools: [] },
      { text: "", toolCalls: [{ id: "", name: "", arguments: cyclic }] }
    )
    assert.deepStrictEqual(usage, { inputTokens: 0, outputTokens: 0, estimated: true })
  })

  for (const stream of [false, true]) {
    it.live(
      `R2.3 maxTokens trips on estimated counts (stream: ${stream}), and each response says it is an estimate`,
      () =>
        Effect.gen(function* () {
          const result = yield* runAgainst(script(12, "unreported"), { maxTokens: 1_500 }, { stream })
          assert.strictEqual(result.stopReason, "budget_exhausted")
          const responses = responded(result.timeline)
          assert.isAbove(responses.length, 1)
          assert.isBelow(responses.length, 12)
          for (const event of responses) {
            assert.strictEqual(event.usage.estimated, true)
            // 600 characters of text a response, and a growing conversation sent.
            assert.isAtLeast(event.usage.outputTokens, 150)
            assert.isAbove(event.usage.inputTokens, 0)
          }
          assert.isAbove(result.counters.inputTokens + result.counters.outputTokens, 1_500)
        })
    )
  }

  it.live("R2.3 maxCostUsd trips on estimated counts priced as the provider's prices say", () =>
    Effect.gen(function* () {
      const result = yield* runAgainst(
        script(12, "unreported"),
        { maxCostUsd: 0.01 },
        { costPerMillionTokens: { input: 5, output: 15 } }
      )
      assert.strictEqual(result.stopReason, "budget_exhausted")
      const first = responded(result.timeline)[0]
      assert.isDefined(first)
      if (first === undefined) return
      assert.strictEqual(first.usage.costUsd, (first.usage.inputTokens * 5 + first.usage.outputTokens * 15) / 1e6)
    })
  )

  it.live("R2.1 a usage the server reports is taken as it is, a reported 0 included: no estimate", () =>
    Effect.gen(function* () {
      const result = yield* runAgainst(script(3, { input: 0, output: 0 }), { maxIterations: 3 })
      assert.strictEqual(result.stopReason, "max_iterations")
      for (const event of responded(result.timeline)) {
        assert.isUndefined(event.usage.estimated)
        assert.strictEqual(event.usage.inputTokens + event.usage.outputTokens, 0)
      }
      assert.strictEqual(result.counters.inputTokens + result.counters.outputTokens, 0)
    })
  )

  it.effect("R11 the request the estimate reads is the one sent: a longer conversation costs more", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reply({ text: "ok", usage: "unreported" }),
        FakeOpenAiServer.reply({ text: "ok", usage: "unreported" })
      ])
      const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "fake-model", apiKey })
      const short = yield* model.generate(yield* request({ messages: [{ _tag: "user", content: "hi" }] }))
      const long = yield* model.generate(yield* request({ messages: [{ _tag: "user", content: "x".repeat(4_000) }] }))
      assert.deepStrictEqual(short.usage, { inputTokens: 1, outputTokens: 1, estimated: true })
      assert.deepStrictEqual(long.usage, { inputTokens: 1_000, outputTokens: 1, estimated: true })
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.effect("R12 a Model of your own that says estimated: false is taken as reporting its usage", () =>
    Effect.gen(function* () {
      const own: Model.Model["Service"] = {
        generate: () =>
          Effect.succeed(Model.response({ text: "done", usage: { inputTokens: 3, outputTokens: 1, estimated: false } }))
      }
      const result = yield* Run.run({ goal: "g", tools: [] }).pipe(Effect.provideService(Model.Model, own))
      assert.strictEqual(result.status, "completed")
      const [event] = responded(result.timeline)
      assert.deepStrictEqual(event?.usage, { inputTokens: 3, outputTokens: 1 })
    })
  )

  it("R10 OpenAiWireEncode sends no usage for an estimated or absent one", () => {
    const base = { text: "ok", toolCalls: [] }
    for (const usage of [undefined, { inputTokens: 3, outputTokens: 1, estimated: true as const }]) {
      const body = OpenAiWireEncode.completionBody({ ...base, usage }, { model: "m" })
      assert.isFalse("usage" in body)
      const chunks = OpenAiWireEncode.chunkData({ ...base, usage }, { model: "m" }).slice(0, -1)
      assert.isTrue(chunks.every((data) => (JSON.parse(data) as { usage: unknown }).usage === null))
    }
    const reported = OpenAiWireEncode.completionBody(
      { ...base, usage: { inputTokens: 3, outputTokens: 1 } },
      { model: "m" }
    )
    assert.isTrue("usage" in reported)
  })
})

describe("LanguageModelAdapter with a provider that reports no usage", () => {
  const noTotals: Response.PartEncoded = {
    type: "finish",
    reason: "stop",
    usage: {
      inputTokens: { uncached: undefined, total: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined }
    }
  }
  const layerAnswering = (parts: Array<Response.PartEncoded>) =>
    LanguageModelAdapter.layer({ costPerMillionTokens: { input: 1, output: 2 } }).pipe(
      Layer.provide(
        Layer.effect(
          LanguageModel.LanguageModel,
          LanguageModel.make({
            generateText: (): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError> => Effect.succeed(parts),
            streamText: () => Stream.die("not used")
          })
        )
      )
    )

  it.effect("R2.1 a response with no totals counts estimated tokens, priced", () =>
    Effect.gen(function* () {
      const model = yield* Model.Model
      const response = yield* model.generate(yield* request({ messages: [{ _tag: "user", content: "x".repeat(400) }] }))
      assert.deepStrictEqual(response.usage, {
        inputTokens: 100,
        outputTokens: 2,
        estimated: true,
        costUsd: (100 * 1 + 2 * 2) / 1e6
      })
    }).pipe(Effect.provide(layerAnswering([{ type: "text", text: "answered" }, noTotals])))
  )
})
