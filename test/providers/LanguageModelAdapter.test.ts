import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Schema, Stream } from "effect"
import { AiError, LanguageModel, type Prompt, type Response, Tool } from "effect/ai"
import { TestClock } from "effect/testing"
import * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as LanguageModelAdapter from "../../src/providers/LanguageModelAdapter.ts"
import * as Run from "../../src/run/Run.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as AgentTool from "../../src/tools/Tool.ts"
import { echo } from "../support/tools.ts"

type Answer = Effect.Effect<Array<Response.PartEncoded>, AiError.AiError>

const finish = (input: number, output: number): Response.PartEncoded => ({
  type: "finish",
  reason: "stop",
  usage: {
    inputTokens: { uncached: undefined, total: input, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: undefined, reasoning: undefined }
  }
})

/** A hand-made `LanguageModel` playing one answer per call and recording what it was asked. */
const scripted = (
  answers: ReadonlyArray<Answer>,
  costPerMillionTokens: LanguageModelAdapter.Options["costPerMillionTokens"] = { input: 1, output: 2 }
) => {
  const calls: Array<LanguageModel.ProviderOptions> = []
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (options) => {
        calls.push(options)
        return answers[calls.length - 1] ?? Effect.die(`no answer ${calls.length}`)
      },
      streamText: () => Stream.die("streamText is not used by the adapter")
    })
  )
  return {
    calls,
    layer: LanguageModelAdapter.layer({ costPerMillionTokens }).pipe(Layer.provide(layer))
  }
}

const request = (options: Partial<Model.Request> = {}): Model.Request => ({
  runId: "r",
  iteration: 1,
  messages: [{ _tag: "user", content: "hi" }],
  tools: [],
  deadlineAt: Number.MAX_SAFE_INTEGER,
  ...options
})

const generate = (req: Model.Request) => Effect.flatMap(Model.Model, (model) => model.generate(req))

const fail = (reason: AiError.AiErrorReason): Answer =>
  Effect.fail(AiError.make({ module: "FakeProvider", method: "generateText", reason }))

const failureOf = (exit: Exit.Exit<unknown, Failure.Failure>): Failure.Failure => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const failure = Cause.squash(exit.cause)
  if (!Failure.isFailure(failure)) throw new Error(`expected a Failure, got ${String(failure)}`)
  return failure
}

const echoDefinition: Model.ToolDefinition = {
  name: "echo",
  description: "Echo the text back",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] }
}

describe("LanguageModelAdapter", () => {
  it.effect("R11 converts the conversation to a Prompt and the tools to dynamic tools with their JSON Schema", () => {
    const { calls, layer } = scripted([Effect.succeed([{ type: "text", text: "ok" }, finish(3, 1)])])
    return Effect.gen(function* () {
      yield* generate(
        request({
          messages: [
            { _tag: "system", content: "be brief" },
            { _tag: "user", content: "echo hi" },
            { _tag: "assistant", content: "", toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
            { _tag: "tool", toolCallId: "c1", name: "echo", content: "hi" }
          ],
          tools: [echoDefinition]
        })
      )
      const options = calls[0]
      const content: ReadonlyArray<Prompt.Message> = options?.prompt.content ?? []
      assert.deepStrictEqual(
        content.map((m) => m.role),
        ["system", "user", "assistant", "tool"]
      )
      const assistant = content[2]
      const toolCall = assistant?.role === "assistant" ? assistant.content[0] : undefined
      assert.deepInclude(toolCall, { type: "tool-call", id: "c1", name: "echo", params: { text: "hi" } })
      const tool = content[3]
      const result = tool?.role === "tool" ? tool.content[0] : undefined
      assert.deepInclude(result, { type: "tool-result", id: "c1", name: "echo", result: "hi" })
      assert.deepStrictEqual(
        options?.tools.map((t) => [t.name, Tool.getDescription(t), Tool.getJsonSchema(t)]),
        [["echo", "Echo the text back", echoDefinition.parameters]]
      )
    }).pipe(Effect.provide(layer))
  })

  it.effect("R11 R3.5 returns the proposed tool calls without running them, even invalid or undeclared ones", () => {
    const { layer } = scripted([
      Effect.succeed([
        { type: "text", text: "calling" },
        { type: "tool-call", id: "a", name: "echo", params: { text: "hi" } },
        { type: "tool-call", id: "b", name: "echo", params: { wrong: 1 } },
        { type: "tool-call", id: "c", name: "not_a_tool", params: "{broken" },
        finish(1_000, 500)
      ])
    ])
    return Effect.gen(function* () {
      const response = yield* generate(request({ tools: [echoDefinition] }))
      assert.deepStrictEqual(response, {
        text: "calling",
        toolCalls: [
          { id: "a", name: "echo", arguments: { text: "hi" } },
          { id: "b", name: "echo", arguments: { wrong: 1 } },
          { id: "c", name: "not_a_tool", arguments: "{broken" }
        ],
        usage: { inputTokens: 1_000, outputTokens: 500, costUsd: 0.002 },
        finishReason: "stop"
      })
    }).pipe(Effect.provide(layer))
  })

  it.effect("R11 a tool call the provider ran itself is not handed back to be run again", () => {
    const { layer } = scripted([
      Effect.succeed([
        { type: "tool-call", id: "ws", name: "web_search", params: { q: "x" }, providerExecuted: true },
        { type: "tool-call", id: "a", name: "echo", params: { text: "hi" } },
        finish(10, 5)
      ])
    ])
    return Effect.gen(function* () {
      const response = yield* generate(request({ tools: [echoDefinition] }))
      assert.deepStrictEqual(
        response.toolCalls.map((call) => call.id),
        ["a"]
      )
    }).pipe(Effect.provide(layer))
  })

  /** A finish part with the usage sides given, the rest of each side left out. */
  const usage = (
    input: Record<string, number | undefined>,
    output: Record<string, number | undefined>
  ): Response.PartEncoded => ({
    type: "finish",
    reason: "stop",
    usage: {
      inputTokens: { uncached: undefined, total: undefined, cacheRead: undefined, cacheWrite: undefined, ...input },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined, ...output }
    }
  })

  it.effect("R2.1 a side reported without its total counts its parts; a side not reported at all is estimated", () => {
    const { layer } = scripted([
      Effect.succeed([{ type: "text", text: "ok" }, usage({ uncached: 600, cacheRead: 400 }, { text: 1000 })]),
      Effect.succeed([{ type: "text", text: "x".repeat(400) }, usage({ total: 10 }, {})])
    ])
    return Effect.gen(function* () {
      const parts = yield* generate(request())
      assert.deepStrictEqual(
        [parts.usage.inputTokens, parts.usage.cachedInputTokens, parts.usage.outputTokens, parts.usage.estimated],
        [1000, 400, 1000, undefined]
      )
      const half = yield* generate(request())
      assert.strictEqual(half.usage.inputTokens, 10)
      // 400 characters of answer: about 100 tokens, never 0.
      assert.strictEqual(half.usage.outputTokens, 100)
      assert.isTrue(half.usage.estimated)
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "R2.1 a part larger than its whole was reported beside it: counted beside, never as less (review 117)",
    () => {
      const { layer } = scripted([
        Effect.succeed([{ type: "text", text: "4" }, usage({ total: 20 }, { total: 5, reasoning: 400 })]),
        Effect.succeed([{ type: "text", text: "4" }, usage({ total: 20, cacheRead: 30 }, { total: 5 })])
      ])
      return Effect.gen(function* () {
        const thinking = yield* generate(request())
        assert.deepStrictEqual(
          [thinking.usage.inputTokens, thinking.usage.outputTokens, thinking.usage.reasoningTokens],
          [20, 405, 400]
        )
        const cachedBeside = yield* generate(request())
        assert.deepStrictEqual([cachedBeside.usage.inputTokens, cachedBeside.usage.cachedInputTokens], [50, 30])
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("R11 a failed call's result reaches the model marked as a failure", () => {
    const { calls, layer } = scripted([Effect.succeed([{ type: "text", text: "ok" }, finish(3, 1)])])
    return Effect.gen(function* () {
      yield* generate(
        request({
          messages: [
            { _tag: "user", content: "echo" },
            {
              _tag: "assistant",
              content: "",
              toolCalls: [
                { id: "c1", name: "echo", arguments: "{}" },
                { id: "c2", name: "echo", arguments: '{"text":"hi"}' }
              ]
            },
            { _tag: "tool", toolCallId: "c1", name: "echo", content: "Error (invalid_arguments): text", failed: true },
            { _tag: "tool", toolCallId: "c2", name: "echo", content: "hi" }
          ],
          tools: [echoDefinition]
        })
      )
      const results = (calls[0]?.prompt.content ?? []).flatMap((m) => (m.role === "tool" ? m.content : []))
      assert.deepStrictEqual(
        results.map((part) => (part.type === "tool-result" ? [part.id, part.isFailure] : [])),
        [
          ["c1", true],
          ["c2", false]
        ]
      )
    }).pipe(Effect.provide(layer))
  })

  it.effect("R3.2 classifies AiError by its reason, not by its isRetryable flag", () => {
    const http = (status: number, headers: Record<string, string> = {}) => ({ response: { status, headers } })
    const cases: ReadonlyArray<readonly [AiError.AiErrorReason, string, string, string]> = [
      [new AiError.RateLimitError({ retryAfter: Duration.seconds(2) }), "Retryable", "transient_http", "http_429"],
      [
        new AiError.RateLimitError({ http: http(429, { "retry-after": "3" }) }),
        "Retryable",
        "transient_http",
        "http_429"
      ],
      [
        new AiError.InternalProviderError({ description: "x", http: http(503) }),
        "Retryable",
        "transient_http",
        "http_503"
      ],
      [new AiError.InternalProviderError({ description: "no status" }), "Retryable", "transient_http", "http_500"],
      // Reported in the body after a 200 (a stream's error event): the reason says what it is (review 183).
      [new AiError.RateLimitError({ http: http(200) }), "Retryable", "transient_http", "http_429"],
      [
        new AiError.InternalProviderError({ description: "overloaded_error", http: http(200) }),
        "Retryable",
        "transient_http",
        "http_500"
      ],
      [new AiError.InvalidRequestError({ http: http(200) }), "Permanent", "permanent_http", "http_400"],
      [new AiError.UnknownError({ http: http(408) }), "Retryable", "transient_http", "http_408"],
      [new AiError.UnknownError({ http: http(404) }), "Permanent", "permanent_http", "http_404"],
      [
        new AiError.AuthenticationError({ kind: "InvalidKey", http: http(401) }),
        "Permanent",
        "permanent_http",
        "http_401"
      ],
      [new AiError.AuthenticationError({ kind: "InsufficientPermissions" }), "Permanent", "permanent_http", "http_401"],
      [new AiError.InvalidRequestError({ http: http(400) }), "Permanent", "permanent_http", "http_400"],
      // The content filter refused: the run stops content_filtered, as for a filtered answer (R11).
      [
        new AiError.ContentPolicyError({ description: "prohibited" }),
        "Permanent",
        "content_filter",
        "content_filtered"
      ],
      [new AiError.QuotaExhaustedError({ http: http(429) }), "Permanent", "request_failed", "request_failed"],
      [
        new AiError.NetworkError({
          reason: "TransportError",
          method: "POST",
          url: "http://x",
          cause: new Error("reset")
        }),
        "Retryable",
        "connection",
        "connection_error"
      ],
      [
        new AiError.NetworkError({
          reason: "TransportError",
          method: "POST",
          url: "http://x",
          cause: new Cause.TimeoutError("slow")
        }),
        "Retryable",
        "timeout",
        "attempt_timeout"
      ],
      [
        new AiError.NetworkError({ reason: "InvalidUrlError", method: "POST", url: "::" }),
        "Permanent",
        "request_failed",
        "request_failed"
      ],
      [
        new AiError.InvalidOutputError({ description: "bad part" }),
        "Retryable",
        "corrupt_response",
        "corrupt_response"
      ],
      [
        new AiError.InvalidResponseError({ description: "not json" }),
        "Retryable",
        "corrupt_response",
        "corrupt_response"
      ],
      // effect/ai calls this retryable ("ask the model again"); as a provider failure it is not.
      [
        new AiError.ToolNotFoundError({ toolName: "x", availableTools: [] }),
        "Permanent",
        "request_failed",
        "request_failed"
      ],
      [new AiError.UnknownError({ description: "?" }), "Permanent", "request_failed", "request_failed"]
    ]
    const { layer } = scripted(cases.map(([reason]) => fail(reason)))
    return Effect.gen(function* () {
      for (const [reason, tag, category, code] of cases) {
        const failure = failureOf(yield* Effect.exit(generate(request())))
        assert.deepStrictEqual([failure._tag, failure.category, failure.code], [tag, category, code], reason._tag)
        assert.strictEqual(failure.source, "provider")
        if (failure.category !== "timeout") assert.include(failure.diagnostic, reason._tag)
      }
    }).pipe(Effect.provide(layer))
  })

  it.effect("R3.2 Retry-After from a RateLimitError or its response headers is kept", () => {
    const { layer } = scripted([
      fail(new AiError.RateLimitError({ retryAfter: Duration.seconds(2) })),
      fail(new AiError.RateLimitError({ http: { response: { status: 429, headers: { "retry-after": "3" } } } })),
      // Too long to represent, or infinite: longer than any deadline (it was "1e+25", which no reader takes).
      fail(new AiError.RateLimitError({ retryAfter: Duration.seconds(1e22) })),
      fail(new AiError.RateLimitError({ retryAfter: Duration.infinity }))
    ])
    return Effect.gen(function* () {
      for (const expected of [2_000, 3_000, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]) {
        const failure = failureOf(yield* Effect.exit(generate(request())))
        assert.strictEqual(failure._tag === "Retryable" ? failure.retryAfterMillis : undefined, expected)
      }
    }).pipe(Effect.provide(layer))
  })

  it.effect("R2.1 a negative token count is a corrupt_response, never a count (effect/ai refuses the rest)", () => {
    const text = { type: "text", text: "a" } as const
    const { layer } = scripted([
      Effect.succeed([text, finish(-3, 1)]),
      Effect.succeed([text, finish(1, -1)]),
      Effect.succeed([text, finish(1.5, 1)]),
      Effect.succeed([text, finish(Number.NaN, 1)])
    ])
    return Effect.gen(function* () {
      for (let i = 0; i < 4; i++) {
        const failure = failureOf(yield* Effect.exit(generate(request())))
        assert.deepStrictEqual([failure._tag, failure.code], ["Retryable", "corrupt_response"], `answer ${i}`)
      }
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "R2.1 R3.2 a negative count beside a larger part is a corrupt_response, never a smaller count (review 146)",
    () => {
      const text = { type: "text", text: "a" } as const
      const answer = (
        inputTokens: Partial<Record<"uncached" | "total" | "cacheRead" | "cacheWrite", number>>,
        outputTokens: Partial<Record<"total" | "text" | "reasoning", number>>
      ): Answer =>
        Effect.succeed([
          text,
          {
            type: "finish",
            reason: "stop",
            usage: {
              inputTokens: {
                uncached: undefined,
                total: undefined,
                cacheRead: undefined,
                cacheWrite: undefined,
                ...inputTokens
              },
              outputTokens: { total: undefined, text: undefined, reasoning: undefined, ...outputTokens }
            }
          }
        ])
      const { layer } = scripted([
        // Before: 5 input tokens, 10 of them cached, at a negative cost.
        answer({ total: -5, cacheRead: 10 }, { total: 1 }),
        answer({ total: 1 }, { total: -3, reasoning: 4 }),
        answer({ uncached: -100, cacheRead: 120 }, { total: 1 }),
        answer({ total: 1 }, { text: -100, reasoning: 101 })
      ])
      return Effect.gen(function* () {
        for (let i = 0; i < 4; i++) {
          const failure = failureOf(yield* Effect.exit(generate(request())))
          assert.deepStrictEqual([failure._tag, failure.code], ["Retryable", "corrupt_response"], `answer ${i}`)
          assert.include(failure.diagnostic, "negative token count")
        }
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("R3.1 R12 a credential an AiError's message carries is scrubbed from the diagnostic, however long", () => {
    const key = "sk-live-abcdefghijklmnopqrstuvwxyz0123"
    const { layer } = scripted([
      fail(new AiError.InvalidRequestError({ description: `Authorization: Bearer ${key} was rejected` })),
      fail(new AiError.AuthenticationError({ kind: "InvalidKey", http: { response: { status: 401, headers: {} } } })),
      fail(new AiError.UnknownError({ description: `${"u".repeat(600)} ${key}` })),
      // Millions of key-shaped characters: the scrubber's pattern overflowed the stack on them (review 87).
      fail(new AiError.UnknownError({ description: `sk-${"abcdefghijklmnop".repeat(400_000)}` }))
    ])
    return Effect.gen(function* () {
      for (let i = 0; i < 4; i++) {
        const failure = failureOf(yield* Effect.exit(generate(request())))
        for (const text of [failure.hint, failure.diagnostic ?? "", JSON.stringify(failure)]) {
          assert.notInclude(text, "abcdefghijklmnop")
        }
      }
    }).pipe(Effect.provide(layer))
  })

  it.effect("R4.2 a call still running at the request's deadline fails with an attempt timeout", () => {
    const { layer } = scripted([Effect.never])
    return Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(Effect.exit(generate(request({ deadlineAt: 250 }))))
      yield* TestClock.adjust("1 second")
      const failure = failureOf(yield* Fiber.join(fiber))
      assert.deepStrictEqual([failure._tag, failure.code], ["Retryable", "attempt_timeout"])
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "R11 R3.5 a full run on the adapter: unparsable arguments are corrected, the tool runs, and the run completes",
    () => {
      const { layer } = scripted([
        Effect.succeed([
          { type: "tool-call", id: "bad", name: "echo", params: '{"text": "unterminated' },
          finish(10, 2)
        ]),
        Effect.succeed([{ type: "tool-call", id: "good", name: "echo", params: { text: "hi" } }, finish(10, 2)]),
        Effect.succeed([{ type: "text", text: "hi" }, finish(10, 2)])
      ])
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "say hi", tools: [echo] })
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.finalAnswer, "hi")
        const failed = result.timeline.filter(
          (e): e is Extract<Event.Event, { _tag: "tool.failed" }> => e._tag === "tool.failed"
        )
        assert.deepStrictEqual(
          failed.map((e) => [e.callId, e.error.code, e.error.correctable]),
          [["bad", "invalid_arguments", true]]
        )
        assert.strictEqual(result.counters.inputTokens, 30)
      }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
    }
  )

  it.effect(
    "R11 tools go to effect/ai strict-ready, and a strict model's nulls come back in the tool's own shape",
    () => {
      const note = AgentTool.make({
        name: "note",
        description: "Write a note",
        input: Schema.Struct({ title: Schema.String, tag: Schema.optional(Schema.String) }),
        output: Schema.String,
        sideEffect: "none",
        handler: ({ title, tag }) => Effect.succeed(`${title}${tag ?? ""}`)
      })
      const { calls, layer } = scripted([
        Effect.succeed([{ type: "tool-call", id: "n", name: "note", params: { title: "t", tag: null } }, finish(5, 1)]),
        Effect.succeed([{ type: "text", text: "noted" }, finish(5, 1)])
      ])
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "note", tools: [note] })
        assert.strictEqual(result.status, "completed")
        const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
        assert.deepStrictEqual(
          succeeded?._tag === "tool.succeeded" ? Event.inputOf(result.timeline, succeeded) : undefined,
          { title: "t" }
        )
        const schema = calls[0]?.tools.map((t) => Tool.getJsonSchema(t))[0]
        assert.deepStrictEqual(schema, note.definition.strict?.parameters)
        assert.deepInclude(schema as object, { additionalProperties: false, required: ["title", "tag"] })
      }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
    }
  )

  it.effect(
    "R11 the finish reason, reasoning and usage details carry over: a cut-off answer is asked to finish",
    () => {
      const { calls, layer } = scripted([
        Effect.succeed([
          { type: "reasoning", text: "thinking hard" },
          { type: "text", text: "The answer" },
          {
            type: "finish",
            reason: "length",
            usage: {
              inputTokens: { uncached: 6, total: 10, cacheRead: 4, cacheWrite: undefined },
              outputTokens: { total: 8, text: 3, reasoning: 5 }
            }
          }
        ]),
        Effect.succeed([{ type: "text", text: "The answer is 42." }, finish(10, 2)])
      ])
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "answer", tools: [echo] })
        assert.strictEqual(result.status, "completed")
        const [first] = result.timeline.filter(
          (e): e is Extract<Event.Event, { _tag: "model.responded" }> => e._tag === "model.responded"
        )
        assert.deepInclude(first, { finishReason: "length", reasoning: "thinking hard" })
        assert.deepStrictEqual(first?.usage, {
          inputTokens: 10,
          outputTokens: 8,
          cachedInputTokens: 4,
          reasoningTokens: 5,
          costUsd: (10 * 1 + 8 * 2) / 1_000_000
        })
        assert.strictEqual(result.counters.reasoningTokens, 5)
        // The reasoning goes back with its turn.
        const assistant = calls[1]?.prompt.content.find((m) => m.role === "assistant")
        assert.deepInclude(assistant?.role === "assistant" ? assistant.content[0] : undefined, {
          type: "reasoning",
          text: "thinking hard"
        })
      }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
    }
  )

  it.effect(
    "R11 R8 what the provider attached to its reasoning and its calls (signatures, encrypted reasoning) is logged and goes back with its turn (review 183)",
    () => {
      const signature = { anthropic: { signature: "SIG-abc" } }
      const encrypted = { openai: { itemId: "rs_1", encryptedContent: "ENC" } }
      const thought = { google: { thoughtSignature: "TS-1" } }
      const { calls, layer } = scripted([
        Effect.succeed([
          { type: "reasoning", text: "thinking", metadata: signature },
          { type: "reasoning", text: "", metadata: encrypted },
          { type: "tool-call", id: "c1", name: "echo", params: { text: "hi" }, metadata: thought },
          { ...finish(5, 5), reason: "tool-calls" }
        ] as Array<Response.PartEncoded>),
        Effect.succeed([{ type: "text", text: "done" }, finish(5, 5)])
      ])
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "answer", tools: [echo] })
        assert.strictEqual(result.status, "completed", result.detail)
        const assistant = calls[1]?.prompt.content.find((m) => m.role === "assistant")
        const parts = assistant?.role === "assistant" ? assistant.content : []
        assert.deepStrictEqual(
          parts.map((part) => [part.type, part.type === "reasoning" ? part.text : "", part.options]),
          [
            ["reasoning", "thinking", signature],
            ["reasoning", "", encrypted],
            ["tool-call", "", thought]
          ]
        )
        // In the log, as the log is stored: a resumed run sends them back too.
        const responded = result.timeline.find((e) => e._tag === "model.responded")
        const stored = Schema.decodeUnknownSync(Schema.toCodecJson(Event.Event))(
          JSON.parse(JSON.stringify(Schema.encodeUnknownSync(Schema.toCodecJson(Event.Event))(responded)))
        )
        assert.deepInclude(stored, {
          reasoningParts: [
            { text: "thinking", metadata: signature },
            { text: "", metadata: encrypted }
          ]
        })
        assert.deepStrictEqual(stored._tag === "model.responded" ? stored.toolCalls[0]?.metadata : undefined, thought)
      }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
    }
  )

  /** A first answer cut short with finish reason `reason`, then a whole one: what the run ends with. */
  const unfinishedThenWhole = (
    reason: "error" | "other" | "pause" | "tool-calls",
    partial: string,
    besides: ReadonlyArray<Response.PartEncoded> = []
  ) => {
    const cut: Response.PartEncoded = { ...finish(1, 0), reason } as Response.PartEncoded
    const { calls, layer } = scripted([
      Effect.succeed([{ type: "text", text: partial }, ...besides, cut]),
      Effect.succeed([{ type: "text", text: "the whole answer" }, finish(2, 3)])
    ])
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [echo] }).pipe(TestClockDriver.drive)
      assert.deepStrictEqual([result.status, result.finalAnswer], ["completed", "the whole answer"])
      assert.lengthOf(calls, 2)
      const failed = result.timeline.find((e) => e._tag === "model.failed")
      return failed?._tag === "model.failed" ? failed.failure : undefined
    }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
  }

  it.effect("R11 an answer effect/ai reports ended in an error is never final: it is asked again", () =>
    Effect.gen(function* () {
      const failure = yield* unfinishedThenWhole("error", "half an ans")
      assert.strictEqual(failure?.code, "answer_unfinished")
    })
  )

  it.effect("R11 an answer the provider paused part way (finish reason pause) is never final: it is asked again", () =>
    Effect.gen(function* () {
      const failure = yield* unfinishedThenWhole("pause", "Let me search for")
      assert.deepInclude(failure, {
        code: "answer_unfinished",
        hint: "the provider stopped the answer unfinished (finish reason: pause)"
      })
    })
  )

  it.effect(
    "R11 an answer that says it calls tools and carries none is never final: it is asked again (review 128)",
    () =>
      Effect.gen(function* () {
        const failure = yield* unfinishedThenWhole("tool-calls", "I will call the tool now.")
        assert.deepInclude(failure, {
          code: "answer_unfinished",
          hint: "the answer says it calls tools (finish reason: tool-calls) and carries no tool call"
        })
      })
  )

  it.effect(
    "R11 an answer effect/ai says finished for a reason it has no name for (other) is never final: it is asked again (review 183)",
    () =>
      Effect.gen(function* () {
        const failure = yield* unfinishedThenWhole("other", "The answer is")
        assert.deepInclude(failure, {
          code: "answer_unfinished",
          hint: "the provider stopped the answer unfinished (finish reason: other)"
        })
      })
  )

  it.effect(
    "R11 an answer that says it calls tools and carries only calls the provider ran itself is never final (review 183)",
    () =>
      Effect.gen(function* () {
        const searched: Response.PartEncoded = {
          type: "tool-call",
          id: "ws",
          name: "web_search",
          params: { q: "x" },
          providerExecuted: true
        }
        const failure = yield* unfinishedThenWhole("tool-calls", "Let me search for that", [searched])
        assert.strictEqual(failure?.code, "answer_unfinished")
      })
  )

  it.effect("R2.1 R12 usage parts that add up past the safe integers count as the largest count (review 183)", () => {
    const M = Number.MAX_SAFE_INTEGER
    const parts = (reason: Response.FinishReason, inputTokens: object): Response.PartEncoded =>
      ({
        type: "finish",
        reason,
        usage: {
          inputTokens: {
            total: undefined,
            uncached: undefined,
            cacheRead: undefined,
            cacheWrite: undefined,
            ...inputTokens
          },
          outputTokens: { total: 1, text: undefined, reasoning: undefined }
        }
      }) as Response.PartEncoded
    const { layer } = scripted([
      Effect.succeed([{ type: "text", text: "ok" }, parts("stop", { uncached: M, cacheRead: M })]),
      Effect.succeed([{ type: "text", text: "The answ" }, parts("pause", { uncached: M, cacheRead: M })]),
      Effect.succeed([{ type: "text", text: "ok" }, parts("stop", { total: 2 ** 60 })]),
      Effect.succeed([{ type: "text", text: "The answ" }, parts("pause", { total: 2 ** 60 })])
    ])
    return Effect.gen(function* () {
      const summed = yield* generate(request())
      assert.isTrue(Schema.is(Model.Response)(summed))
      assert.strictEqual(summed.usage.inputTokens, M)
      // Unfinished, and what it cost counted all the same.
      const paused = failureOf(yield* Effect.exit(generate(request())))
      assert.deepInclude(paused, { code: "answer_unfinished" })
      assert.strictEqual(paused.usage?.inputTokens, M)
      // A count a number does not hold exactly is no count, finished or not (effect/ai refuses it).
      for (let i = 0; i < 2; i++) {
        const corrupt = failureOf(yield* Effect.exit(generate(request())))
        assert.deepInclude(corrupt, { _tag: "Retryable", code: "corrupt_response" })
      }
    }).pipe(Effect.provide(layer))
  })

  it.effect("R2.1 what an unfinished answer cost counts toward the run's tokens, cost and budget", () => {
    const paused: Response.PartEncoded = { ...finish(400, 600), reason: "pause" } as Response.PartEncoded
    const { calls, layer } = scripted([
      Effect.succeed([{ type: "text", text: "Let me look that up" }, paused]),
      Effect.succeed([{ type: "tool-call", id: "c1", name: "echo", params: { text: "hi" } }, finish(10, 5)]),
      Effect.succeed([{ type: "text", text: "done" }, finish(20, 5)])
    ])
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [echo], limits: { maxTokens: 500 } }).pipe(
        TestClockDriver.drive
      )
      // The paused answer's 1,000 tokens pass the budget of 500: the run stops before asking again.
      assert.deepStrictEqual([result.stopReason, calls.length], ["budget_exhausted", 1])
      assert.deepInclude(result.counters, { inputTokens: 400, outputTokens: 600 })
      const failed = result.timeline.find((e) => e._tag === "model.failed")
      assert.deepInclude(failed?._tag === "model.failed" ? failed.usage : undefined, {
        inputTokens: 400,
        outputTokens: 600
      })
    }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
  })

  it.effect("R2.1 an unfinished answer is charged its cost at the adapter's prices", () => {
    const cut: Response.PartEncoded = { ...finish(1_000_000, 0), reason: "error" } as Response.PartEncoded
    const { layer } = scripted([Effect.succeed([cut]), Effect.succeed([{ type: "text", text: "done" }, finish(0, 0)])])
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [echo] }).pipe(TestClockDriver.drive)
      // A million input tokens at $1 a million.
      assert.deepStrictEqual([result.status, result.counters.costUsd], ["completed", 1])
    }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
  })

  it.effect("R11 an answer effect/ai reports content-filtered ends the run content_filtered", () => {
    const filtered: Response.PartEncoded = { ...finish(1, 0), reason: "content-filter" } as Response.PartEncoded
    const { layer } = scripted([Effect.succeed([filtered])])
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "answer", tools: [echo] })
      assert.strictEqual(result.stopReason, "content_filtered")
    }).pipe(Effect.provide(Layer.mergeAll(layer, NodeServices.layer)))
  })
})

describe("LanguageModelAdapter options", () => {
  const makeWith = (options: unknown) =>
    LanguageModelAdapter.make(options as LanguageModelAdapter.Options).pipe(
      Effect.provideService(
        LanguageModel.LanguageModel,
        LanguageModel.make({ generateText: () => Effect.die("unused"), streamText: () => Stream.die("unused") }).pipe(
          Effect.runSync
        )
      ),
      Effect.flip
    )

  it.effect("R12 R2.1 a price that is negative, NaN or past the highest is refused when the model is made", () =>
    Effect.gen(function* () {
      for (const [prices, field] of [
        [{ input: Number.NaN, output: 1 }, "costPerMillionTokens.input"],
        [{ input: 1, output: -2 }, "costPerMillionTokens.output"],
        [{ input: 1, output: 1, cachedInput: 1e300 }, "costPerMillionTokens.cachedInput"],
        [{ input: 1 }, "costPerMillionTokens.output"]
      ] as const) {
        const error = yield* makeWith({ costPerMillionTokens: prices })
        assert.strictEqual(error._tag, "InvalidAdapterOptions")
        assert.include(error.message, field)
      }
      const strict = yield* makeWith({ strict: "no" })
      assert.include(strict.message, "strict")
      const unknown = yield* makeWith({ costPerMillion: { input: 1, output: 1 } })
      assert.include(unknown.message, "costPerMillion")
      assert.strictEqual((yield* makeWith(null))._tag, "InvalidAdapterOptions")
    })
  )

  it.effect("R2.1 a free model's answer costs $0, one at the highest price its full cost", () =>
    Effect.gen(function* () {
      for (const [prices, cost] of [
        [{ input: 0, output: 0 }, 0],
        [{ input: 1_000_000, output: 1_000_000, cachedInput: 0 }, 20]
      ] as const) {
        const { layer } = scripted([Effect.succeed([{ type: "text", text: "done" }, finish(10, 10)])], prices)
        const result = yield* Run.run({ goal: "answer", tools: [echo] }).pipe(
          Effect.provide(Layer.mergeAll(layer, NodeServices.layer))
        )
        assert.deepStrictEqual([result.status, result.counters.costUsd], ["completed", cost])
      }
    })
  )
})
