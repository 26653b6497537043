/**
 * R2.1: answers that were paid for and never finished count toward the run's budgets. A
 * streamed answer cut off (a reset, a stall, an error event, no `[DONE]`) carries what the
 * server reported of its usage, or an estimate of what came of it; an answer the content
 * filter withheld carries its usage. Before, each counted 0 tokens and $0, and a server
 * that always cut its answers off never tripped `maxTokens` or `maxCostUsd`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Model from "../../src/model/Model.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as Run from "../../src/run/Run.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import { apiKey, failureOf, rawServer, request } from "../support/provider.ts"

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

/** The answer of one streamed response that is `body`. */
const streamedWhole = (body: string) =>
  Effect.gen(function* () {
    const server = yield* FakeOpenAiServer.make([
      FakeOpenAiServer.raw({ body, headers: { "content-type": "text/event-stream" } })
    ])
    const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "fake-model", apiKey, stream: true })
    return yield* model.generate(yield* request())
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

  it.live("R2.1 a stream cut off after more text than its last usage report covers counts that text (review 162)", () =>
    Effect.gen(function* () {
      // An early count (the prompt read, nothing generated yet), then 40 KB of text, then the cut.
      const body = [
        chunk({ role: "assistant", content: "" }),
        `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 300, completion_tokens: 0, total_tokens: 300 } })}\n\n`,
        chunk({ content: "lorem ipsum ".repeat(3_400) })
      ].join("")
      const failure = yield* streamedOnly(body, { input: 1_000, output: 1_000 })
      assert.strictEqual(failure.code, "corrupt_response")
      // Before: 300 input and 0 output tokens, as reported before the text came.
      // What came after the report, on top of it (review 163: one above the whole's estimate left it out).
      assert.strictEqual(failure.usage?.outputTokens, Math.ceil(("lorem ipsum ".length * 3_400) / 4))
      // The prompt's count stands as the server made it.
      assert.strictEqual(failure.usage?.inputTokens, 300)
      assert.isTrue(failure.usage?.estimated)
      const usage = failure.usage
      const cost = usage === undefined ? 0 : ((usage.inputTokens + usage.outputTokens) * 1_000) / 1_000_000
      assert.closeTo(usage?.costUsd ?? 0, cost, 1e-9)
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  const text = "lorem ipsum ".repeat(3_400)
  const usageChunk = (usage: object) =>
    `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [], usage })}\n\n`

  for (const [name, usage] of [
    ["without its prompt's count", { completion_tokens: 0 }],
    ["with a null prompt count", { prompt_tokens: null, completion_tokens: 0 }],
    ["with only its total", { total_tokens: 3 }]
  ] as const)
    it.live(`R2.1 an early usage report ${name}, then text, then the cut: the text is counted (review 165)`, () =>
      Effect.gen(function* () {
        const body = [chunk({ role: "assistant", content: "" }), usageChunk(usage), chunk({ content: text })].join("")
        const failure = yield* streamedOnly(body, undefined)
        // Before: 0 output tokens (2 with the total), the report's estimated prompt taken for an estimate of the whole.
        assert.isAtLeast(failure.usage?.outputTokens ?? 0, Math.ceil(text.length / 4), JSON.stringify(failure.usage))
        assert.isTrue(failure.usage?.estimated)
      }).pipe(Effect.provide(NodeTransport.layer()))
    )

  it.live("R2.1 a whole stream whose only usage report came before its text counts that text (review 165)", () =>
    Effect.gen(function* () {
      const body = [
        chunk({ role: "assistant", content: "" }),
        usageChunk({ prompt_tokens: 300, completion_tokens: 0, total_tokens: 300 }),
        chunk({ content: text }),
        chunk({}, "stop"),
        "data: [DONE]\n\n"
      ].join("")
      const response = yield* streamedWhole(body)
      assert.strictEqual(response.text, text)
      // Before: 300 + 0, as reported before the text came.
      assert.deepStrictEqual(
        [response.usage.inputTokens, response.usage.outputTokens, response.usage.estimated],
        [300, Math.ceil(text.length / 4), true]
      )
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  it.live("R2.1 a stream whose usage came with its last text counts it as reported", () =>
    Effect.gen(function* () {
      const body = [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: text }),
        chunk({}, "stop"),
        usageChunk({ prompt_tokens: 300, completion_tokens: 2_000, total_tokens: 2_300 }),
        "data: [DONE]\n\n"
      ].join("")
      const response = yield* streamedWhole(body)
      assert.deepStrictEqual(response.usage, { inputTokens: 300, outputTokens: 2_000 })
    }).pipe(Effect.provide(NodeTransport.layer()))
  )

  for (const stream of [false, true])
    it.live(
      `R2.1 an answer cut off after its 200 and before its body counts the prompt it was billed (reviews 162, 163; stream: ${stream})`,
      () =>
        Effect.gen(function* () {
          // A server that answers 200 and sends no byte of the body.
          const asked = { n: 0 }
          const baseUrl = yield* rawServer((req, res) => {
            req.resume()
            req.on("end", () => {
              asked.n++
              res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" })
              res.flushHeaders()
            })
          })
          const model = yield* OpenAiCompatible.make({
            baseUrl,
            model: "fake-model",
            apiKey,
            stream
          })
          const reported: Array<Model.Usage> = []
          const generating = yield* Effect.forkChild(
            Effect.provideService(model.generate(yield* request()), Model.CutOffUsage, (usage) => {
              reported.push(usage)
            })
          )
          while (asked.n === 0) yield* Effect.sleep(5)
          yield* Effect.sleep(100)
          yield* Fiber.interrupt(generating)
          // Before: nothing reported, the prompt uncounted.
          assert.lengthOf(reported, 1)
          assert.isAbove(reported[0]?.inputTokens ?? 0, 0)
          assert.isTrue(reported[0]?.estimated)
        }).pipe(Effect.scoped, Effect.provide(NodeTransport.layer()))
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
