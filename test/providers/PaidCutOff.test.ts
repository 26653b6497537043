/**
 * R2.1: answers that were paid for and never finished count toward the run's budgets. A
 * streamed answer cut off (a reset, a stall, an error event, no `[DONE]`) carries what the
 * server reported of its usage, or an estimate of what came of it; an answer the content
 * filter withheld carries its usage. Before, each counted 0 tokens and $0, and a server
 * that always cut its answers off never tripped `maxTokens` or `maxCostUsd`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as Run from "../../src/run/Run.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import { apiKey, failureOf, request } from "../support/provider.ts"

const failed = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.filter((e): e is Event.Of<"model.failed"> => e._tag === "model.failed")

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

const reported = { prompt_tokens: 50, completion_tokens: 500, total_tokens: 550 }

/** The failure of one streamed answer that is `body` and no more (no `[DONE]`), priced at `prices`. */
const streamedOnly = (body: string, prices: OpenAiCompatible.Options["costPerMillionTokens"]) =>
  Effect.gen(function* () {
    const server = yield* FakeOpenAiServer.make([
      FakeOpenAiServer.raw({ body, headers: { "content-type": "text/event-stream" } })
    ])
    const model = yield* OpenAiCompatible.make({
      baseUrl: server.url,
      model: "fake-model",
      apiKey,
      stream: true,
      costPerMillionTokens: prices
    })
    return failureOf(yield* Effect.exit(model.generate(yield* request())))
  })

describe("answers paid for and cut off (R2.1)", () => {
  it.live("R2.1 a stream cut off after its usage came carries that usage, priced", () =>
    Effect.gen(function* () {
      const body = [
        chunk({ role: "assistant", content: "word ".repeat(100) }),
        chunk({}, "stop"),
        `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [], usage: reported })}\n\n`
      ].join("")
      const failure = yield* streamedOnly(body, { input: 1_000, output: 1_000 })
      assert.strictEqual(failure.code, "corrupt_response")
      assert.deepStrictEqual(failure.usage, { inputTokens: 50, outputTokens: 500, costUsd: 0.55 })
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live(
    "R2.1 a run whose provider cuts every answer off stops budget_exhausted after the first, its tokens estimated",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make(
          Array.from({ length: 6 }, () => FakeOpenAiServer.reset({ afterChunks: 3 }))
        )
        const result = yield* Run.run({ goal: "Answer.", tools: [], limits: { maxTokens: 5 } }).pipe(
          Effect.provide(OpenAiCompatible.layer({ baseUrl: server.url, model: "fake-model", apiKey, stream: true }))
        )
        assert.strictEqual(result.stopReason, "budget_exhausted", result.detail)
        const [first, ...rest] = failed(result.timeline)
        assert.lengthOf(rest, 0, "a retry was paid for after the budget was spent")
        assert.strictEqual(first?.usage?.estimated, true)
        assert.isAbove(result.counters.inputTokens + result.counters.outputTokens, 5)
        // A reset before any of the answer came costs nothing: no answer began.
        const early = yield* FakeOpenAiServer.make([FakeOpenAiServer.reset()])
        const model = yield* OpenAiCompatible.make({ baseUrl: early.url, model: "fake-model", apiKey, stream: true })
        assert.isUndefined(failureOf(yield* Effect.exit(model.generate(yield* request()))).usage)
      }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live("R2.1 a plain body cut off, or whole and making no response, carries what it cost", () =>
    Effect.gen(function* () {
      const nameless = JSON.stringify({
        id: "c1",
        object: "chat.completion",
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "t1", type: "function", function: { name: "", arguments: "{}" } }]
            },
            finish_reason: "tool_calls"
          }
        ],
        usage: reported
      })
      const server = yield* FakeOpenAiServer.make([
        FakeOpenAiServer.reset({ afterChunks: 1 }),
        FakeOpenAiServer.raw({ body: nameless, headers: { "content-type": "application/json" } })
      ])
      const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "fake-model", apiKey })
      // Cut off half way: an estimate of what came.
      const cut = failureOf(yield* Effect.exit(model.generate(yield* request())))
      assert.strictEqual(cut.usage?.estimated, true, JSON.stringify(cut))
      assert.isAbove(cut.usage?.outputTokens ?? 0, 0)
      // Whole, with a tool call of no name: the usage it reported.
      const corrupt = failureOf(yield* Effect.exit(model.generate(yield* request())))
      assert.strictEqual(corrupt.code, "corrupt_response")
      assert.deepStrictEqual(corrupt.usage, { inputTokens: 50, outputTokens: 500 })
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live("R2.1 R12 a usage whose cost no budget could hold is counted at the largest cost, not refused", () =>
    Effect.gen(function* () {
      const huge = {
        prompt_tokens: Number.MAX_SAFE_INTEGER,
        completion_tokens: 0,
        total_tokens: Number.MAX_SAFE_INTEGER
      }
      const body = [
        chunk({ role: "assistant", content: "word" }),
        `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [], usage: huge })}\n\n`
      ].join("")
      // The stream ended without [DONE]: retryable as ever, carrying the usage at the largest cost.
      const failure = yield* streamedOnly(body, { input: OpenAiCompatible.maxPricePerMillionTokens, output: 1 })
      assert.deepStrictEqual([failure._tag, failure.usage?.costUsd], ["Retryable", 1e15])
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  for (const layer of ["attempt", "step"] as const) {
    it.live(`R2.1 R4.2 an answer the ${layer} timeout cuts off as it comes is counted, and trips the budget`, () =>
      Effect.gen(function* () {
        const usage = { input: 1_000, output: 4_000 }
        const server = yield* FakeOpenAiServer.make(
          Array.from({ length: 3 }, () =>
            FakeOpenAiServer.stall({
              afterChunks: 3,
              millis: 60_000,
              next: FakeOpenAiServer.reply({ text: "word ".repeat(50), usage })
            })
          )
        )
        const result = yield* Run.run({
          goal: "Answer.",
          tools: [],
          limits: { maxTokens: 5 },
          time: { [layer]: "300 millis" }
        }).pipe(
          Effect.provide(OpenAiCompatible.layer({ baseUrl: server.url, model: "fake-model", apiKey, stream: true }))
        )
        assert.strictEqual(result.stopReason, "budget_exhausted", result.detail)
        const [first, ...rest] = failed(result.timeline)
        assert.strictEqual(first?.failure.code, `${layer}_timeout`)
        assert.lengthOf(rest, 0, "a retry was paid for after the budget was spent")
        assert.isAbove(result.counters.inputTokens + result.counters.outputTokens, 5)
        assert.lengthOf(yield* server.requests, 1)
      }).pipe(Effect.provide(NodeTransport.layer()))
    )
  }

  for (const stream of [false, true]) {
    it.live(`R2.1 an answer the content filter withheld is counted (stream: ${stream})`, () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([
          FakeOpenAiServer.reply({
            text: "partial",
            finishReason: "content_filter",
            usage: { input: 100, output: 1_000 }
          })
        ])
        const result = yield* Run.run({ goal: "Answer.", tools: [] }).pipe(
          Effect.provide(OpenAiCompatible.layer({ baseUrl: server.url, model: "fake-model", apiKey, stream }))
        )
        assert.strictEqual(result.stopReason, "content_filtered")
        assert.deepStrictEqual([result.counters.inputTokens, result.counters.outputTokens], [100, 1_000])
      }).pipe(Effect.provide(NodeTransport.layer()))
    )
  }
})
