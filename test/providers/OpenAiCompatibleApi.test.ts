/**
 * The client against a fake as strict as the real APIs (R11): per-model options and
 * what each sends to OpenAI and to DeepSeek, strict tool schemas, finish reasons, usage
 * and cost, errors inside a stream, and DeepSeek's thinking mode with tools, each
 * through `OpenAiCompatible` and `FakeOpenAiServer` over a real socket.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Redacted, Schema, type Scope } from "effect"
import type * as HttpClient from "effect/http/HttpClient"
import * as Event from "../../src/events/Event.ts"
import type * as Model from "../../src/model/Model.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as Run from "../../src/run/Run.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { apiKey, classOf, failureOf, KEY, once, request } from "../support/provider.ts"
import { echo } from "../support/tools.ts"

const transport = NodeTransport.layer()

const live = <E>(name: string, body: () => Effect.Effect<void, E, Scope.Scope | HttpClient.HttpClient>) =>
  it.live(name, () => body().pipe(Effect.provide(transport)))

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Extract<Event.Event, { _tag: T }> => e._tag === tag)

type Json = Record<string, unknown>
const bodyOf = (recorded: FakeOpenAiServer.RecordedRequest | undefined): Json => (recorded?.body ?? {}) as Json
const messagesOf = (recorded: FakeOpenAiServer.RecordedRequest | undefined) =>
  (bodyOf(recorded).messages ?? []) as ReadonlyArray<Json>

const note = Tool.make({
  name: "note",
  description: "Write a note",
  input: Schema.Struct({ title: Schema.String, tag: Schema.optional(Schema.String), score: Schema.Number }),
  output: Schema.String,
  sideEffect: "none",
  idempotent: true,
  handler: ({ title, tag }) => Effect.succeed(`${title}${tag === undefined ? "" : ` #${tag}`}`)
})

/** A whole run with the real client against a fake playing `script`. */
const runWith = (
  script: FakeOpenAiServer.Script,
  options: Partial<OpenAiCompatible.Options> = {},
  server: FakeOpenAiServer.Options = {},
  tools: ReadonlyArray<Tool.Any<never>> = [echo]
) =>
  Effect.gen(function* () {
    const fake = yield* FakeOpenAiServer.make(script, server)
    const model = OpenAiCompatible.layer({ baseUrl: fake.url, model: "fake-model", apiKey, ...options })
    const result = yield* Run.run({ goal: "use the tools", tools, time: { run: "20 seconds" } }).pipe(
      Effect.provide(model)
    )
    return { result, requests: yield* fake.requests }
  }).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, transport)))

const echoCall = (text: string, id?: string): FakeOpenAiServer.ToolCall => ({
  ...(id === undefined ? {} : { id }),
  name: "echo",
  arguments: JSON.stringify({ text })
})

const echoDefinition = (): Model.ToolDefinition => echo.definition

describe("per-model options (R11)", () => {
  live("R11 each option is sent under OpenAI's name, and only what OpenAI takes", () =>
    Effect.gen(function* () {
      const { requests } = yield* once(
        FakeOpenAiServer.reply({ text: "ok" }),
        {
          maxOutputTokens: 256,
          toolChoice: { tool: "echo" },
          parallelToolCalls: false,
          strict: true,
          temperature: 0.5,
          reasoning: { effort: "low" }
        },
        undefined,
        [echoDefinition()]
      )
      const body = bodyOf(requests[0])
      assert.deepInclude(body, {
        max_completion_tokens: 256,
        tool_choice: { type: "function", function: { name: "echo" } },
        parallel_tool_calls: false,
        temperature: 0.5,
        reasoning_effort: "low"
      })
      assert.notProperty(body, "max_tokens")
      assert.notProperty(body, "thinking")
      assert.deepStrictEqual(body.tools, [
        {
          type: "function",
          function: {
            name: "echo",
            description: "Echo the text back",
            parameters: echo.definition.strict?.parameters,
            strict: true
          }
        }
      ])
    })
  )

  live(
    "R11 the DeepSeek preset sends the output cap as max_tokens, thinking and reasoning_effort, and no parallel_tool_calls",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "ok" })], { api: "deepseek" })
        const model = yield* OpenAiCompatible.make(
          OpenAiCompatible.deepseek({
            apiKey,
            baseUrl: server.url,
            maxOutputTokens: 256,
            toolChoice: "required",
            reasoning: { thinking: true, effort: "max" },
            temperature: 0.2
          })
        )
        yield* model.generate({ ...(yield* request()), tools: [echoDefinition()] })
        const body = bodyOf((yield* server.requests)[0])
        assert.deepInclude(body, {
          model: "deepseek-v4-flash",
          max_tokens: 256,
          tool_choice: "required",
          thinking: { type: "enabled" },
          reasoning_effort: "max",
          temperature: 0.2
        })
        for (const absent of ["max_completion_tokens", "parallel_tool_calls"]) assert.notProperty(body, absent)
      })
  )

  it.effect("R11 an option value that cannot work fails with a typed InvalidOptions naming the field", () =>
    Effect.gen(function* () {
      const base: OpenAiCompatible.Options = { baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey }
      const cases: ReadonlyArray<readonly [Partial<OpenAiCompatible.Options> | Record<string, unknown>, string]> = [
        [{ temperature: 3 }, "temperature"],
        [{ temperature: Number.NaN }, "temperature"],
        [{ maxOutputTokens: 0 }, "maxOutputTokens"],
        [{ maxOutputTokens: 1.5 }, "maxOutputTokens"],
        [{ toolChoice: "sometimes" }, "toolChoice"],
        [{ parallelToolCalls: "yes" }, "parallelToolCalls"],
        [{ reasoning: { effort: "max" } }, "reasoning.effort"],
        [{ reasoning: { thinking: true } }, "reasoning.thinking"],
        [{ dialect: "deepseek", parallelToolCalls: true }, "parallelToolCalls"],
        [{ dialect: "deepseek", reasoning: { effort: "none" } }, "reasoning.effort"],
        [{ dialect: "anthropic" }, "dialect"],
        [{ baseUrl: "not a url" }, "baseUrl"],
        [{ baseUrl: "ftp://example.com" }, "baseUrl"],
        [{ model: "" }, "model"],
        [{ apiKey: KEY }, "apiKey"],
        [{ timeouts: { connect: "soon" } }, "timeouts.connect"],
        [{ timeouts: { idleRead: Number.NaN } }, "timeouts.idleRead"],
        [{ timeouts: { connect: 0 } }, "timeouts.connect"],
        [{ timeouts: { connectTimeout: 5 } }, "timeouts.connectTimeout"],
        [{ maxTokens: 100 }, "maxTokens"],
        [{ apiKey: Redacted.make(`${KEY}\n`) }, "apiKey holds a line break"],
        [{ apiKey: Redacted.make(`${KEY}\u0000`) }, "apiKey holds a line break or a NUL"],
        [{ baseUrl: "https://user:hunter2secret@example.com/v1" }, "user name or password"],
        [{ baseUrl: "https://example.com/v1?api-version=2024-02-01" }, "query"],
        [{ baseUrl: "https://example.com/v1#frag" }, "fragment"],
        [{ timeouts: { firstByte: "-5 seconds" } }, "timeouts.firstByte"],
        [{ costPerMillionTokens: { input: -1, output: 1 } }, "costPerMillionTokens"]
      ]
      for (const [options, field] of cases) {
        const error = yield* Effect.flip(OpenAiCompatible.make({ ...base, ...options } as OpenAiCompatible.Options))
        assert.instanceOf(error, OpenAiCompatible.InvalidOptions, JSON.stringify(options))
        assert.include(error.message, field, JSON.stringify(options))
        assert.notInclude(error.message, KEY)
        assert.notInclude(error.message, "hunter2secret")
      }
    }).pipe(Effect.provide(transport))
  )

  live("R11 a toolChoice naming a tool the run does not have fails for good before any request", () =>
    Effect.gen(function* () {
      const { exit, requests } = yield* once(FakeOpenAiServer.reply({}), { toolChoice: { tool: "nope" } }, undefined, [
        echoDefinition()
      ])
      const failure = failureOf(exit)
      assert.deepStrictEqual(classOf(failure), ["Permanent", "invalid_options", "invalid_options"])
      assert.include(failure.hint, 'toolChoice names "nope", which is not one of the run\'s tools (echo)')
      assert.strictEqual(requests.length, 0)
    })
  )

  live(
    "R11 R3.5 strict: tools go in their strict form, and a strict model's nulls come back in the tool's own shape",
    () =>
      Effect.gen(function* () {
        const { result, requests } = yield* runWith(
          [
            FakeOpenAiServer.reply({
              toolCalls: [{ id: "n1", name: "note", arguments: '{"title": "hello", "tag": null, "score": 2}' }]
            }),
            FakeOpenAiServer.reply({ text: "noted" })
          ],
          { strict: true },
          {},
          [note]
        )
        assert.strictEqual(result.status, "completed")
        const [succeeded] = ofTag(result.timeline, "tool.succeeded")
        assert.deepStrictEqual(succeeded && Event.inputOf(result.timeline, succeeded), { title: "hello", score: 2 })
        assert.strictEqual(succeeded?.output, "hello")
        const tool = (bodyOf(requests[0]).tools as ReadonlyArray<Json>)[0]?.function as Json
        assert.isTrue(tool.strict)
        assert.deepStrictEqual(tool.parameters, {
          type: "object",
          properties: {
            title: { type: "string" },
            tag: { anyOf: [{ type: "string" }, { type: "null" }] },
            score: { type: "number" }
          },
          required: ["title", "tag", "score"],
          additionalProperties: false
        })
      })
  )

  live("R11 without strict, a number is still described as a number, and the tool runs", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* runWith(
        [
          FakeOpenAiServer.reply({ toolCalls: [{ name: "note", arguments: '{"title": "t", "score": 1.5}' }] }),
          FakeOpenAiServer.reply({ text: "noted" })
        ],
        {},
        {},
        [note]
      )
      assert.strictEqual(result.status, "completed")
      const tool = (bodyOf(requests[0]).tools as ReadonlyArray<Json>)[0]?.function as Json
      assert.notProperty(tool, "strict")
      assert.deepStrictEqual((tool.parameters as Json).properties, {
        title: { type: "string" },
        tag: { anyOf: [{ type: "string" }, { type: "null" }] },
        score: { type: "number" }
      })
    })
  )
})

describe("finish reasons over HTTP (R11)", () => {
  for (const stream of [false, true]) {
    const mode = stream ? "streamed" : "plain"
    live(`R11 an answer cut off at the output cap is sent back to be finished, shorter, then completes (${mode})`, () =>
      Effect.gen(function* () {
        const { result, requests } = yield* runWith(
          [
            FakeOpenAiServer.reply({ text: "The answer is", finishReason: "length" }),
            FakeOpenAiServer.reply({ text: "The answer is 42." })
          ],
          { stream, maxOutputTokens: 5 }
        )
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.finalAnswer, "The answer is 42.")
        assert.strictEqual(ofTag(result.timeline, "model.responded")[0]?.finishReason, "length")
        const second = messagesOf(requests[1])
        assert.deepInclude(second[second.length - 2], { role: "assistant", content: "The answer is" })
        assert.include(String(second[second.length - 1]?.content), "cut off")
      })
    )
  }

  live("R11 a truncated answer never completes: past the correction budget the run stops output_truncated", () =>
    Effect.gen(function* () {
      const cut = FakeOpenAiServer.reply({ text: "The", finishReason: "length" })
      const { result, requests } = yield* runWith(() => cut)
      assert.strictEqual(result.stopReason, "output_truncated")
      assert.strictEqual(requests.length, 4)
    })
  )

  live("R11 a filtered answer ends the run content_filtered after one request", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* runWith([
        FakeOpenAiServer.reply({ text: "", finishReason: "content_filter" })
      ])
      assert.strictEqual(result.stopReason, "content_filtered")
      assert.strictEqual(ofTag(result.timeline, "model.failed")[0]?.failure.code, "content_filtered")
      assert.strictEqual(requests.length, 1)
    })
  )

  live("R11 a content-filter error inside a stream is a content_filter failure: the run stops content_filtered", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* runWith([
        FakeOpenAiServer.streamError({ message: "The response was filtered", code: "content_filter" })
      ])
      assert.strictEqual(result.stopReason, "content_filtered")
      const failure = ofTag(result.timeline, "model.failed")[0]?.failure
      assert.deepInclude(failure, { classification: "permanent", category: "content_filter", code: "content_filtered" })
      assert.strictEqual(requests.length, 1)
    })
  )

  live("R11 R3.5 tool-call arguments cut off at the cap are a correctable result, then corrected (streamed)", () =>
    Effect.gen(function* () {
      const { result } = yield* runWith(
        [
          FakeOpenAiServer.reply({
            toolCalls: [{ name: "echo", arguments: '{"text": "a very long te' }],
            finishReason: "length"
          }),
          FakeOpenAiServer.reply({ toolCalls: [echoCall("short")] }),
          FakeOpenAiServer.reply({ text: "done" })
        ],
        { stream: true }
      )
      assert.strictEqual(result.status, "completed")
      const [failed] = ofTag(result.timeline, "tool.failed")
      assert.strictEqual(failed?.error.code, "invalid_arguments")
      assert.include(failed?.error.message, "cut off by the output token limit")
    })
  )

  for (const stream of [false, true]) {
    live(
      `R3.2 R2.1 an answer DeepSeek stopped for lack of resources is retried, then completes; its tokens count (${stream ? "streamed" : "plain"})`,
      () =>
        Effect.gen(function* () {
          const { result } = yield* runWith(
            [
              FakeOpenAiServer.reply({
                text: "The ans",
                finishReason: "insufficient_system_resource",
                usage: { input: 300, output: 40 }
              }),
              FakeOpenAiServer.reply({ text: "The answer.", usage: { input: 310, output: 5 } })
            ],
            { stream, costPerMillionTokens: { input: 1, output: 2 } }
          )
          assert.strictEqual(result.status, "completed")
          assert.deepStrictEqual(
            ofTag(result.timeline, "recovery.started").map((e) => [e.kind, e.cause]),
            [["provider_retry", "insufficient_system_resource"]]
          )
          assert.deepInclude(ofTag(result.timeline, "model.failed")[0]?.usage, { inputTokens: 300, outputTokens: 40 })
          assert.deepInclude(result.counters, { inputTokens: 610, outputTokens: 45 })
          assert.closeTo(result.counters.costUsd, (610 + 45 * 2) / 1_000_000, 1e-12)
        })
    )

    live(
      `R11 finish_reason tool_calls with no tool call is an unfinished answer, asked again, never a final one (review 128, ${stream ? "streamed" : "plain"})`,
      () =>
        Effect.gen(function* () {
          // vLLM with tool_choice "required": a turn that made no call still says tool_calls.
          const { result, requests } = yield* runWith(
            [
              FakeOpenAiServer.reply({ text: "Hello! I'm fine.", finishReason: "tool_calls" }),
              FakeOpenAiServer.reply({ toolCalls: [echoCall("a")] }),
              FakeOpenAiServer.reply({ text: "done" })
            ],
            { stream }
          )
          assert.strictEqual(result.status, "completed", result.detail)
          assert.strictEqual(result.finalAnswer, "done")
          assert.strictEqual(requests.length, 3)
          const failure = ofTag(result.timeline, "model.failed")[0]?.failure
          assert.deepInclude(failure, { classification: "retryable", code: "answer_unfinished" })
          assert.include(failure?.hint, "tool_calls")
        })
    )
  }

  live(
    "R11 Bedrock's malformed_model_output and malformed_tool_use, and Anthropic's pause_turn, are unfinished answers (review 128)",
    () =>
      Effect.gen(function* () {
        for (const reason of ["malformed_model_output", "MALFORMED_TOOL_USE", "pause_turn"]) {
          const { result, requests } = yield* runWith([
            FakeOpenAiServer.reply({ text: "Let me look that up with the echo tool.", finishReason: reason }),
            FakeOpenAiServer.reply({ text: "final: a" })
          ])
          assert.strictEqual(result.finalAnswer, "final: a", reason)
          assert.strictEqual(requests.length, 2, reason)
          const failure = ofTag(result.timeline, "model.failed")[0]?.failure
          assert.deepInclude(failure, { classification: "retryable", code: "answer_unfinished" }, reason)
        }
      })
  )
})

describe("tool-call ids over HTTP (R3.8, R11)", () => {
  for (const [name, calls] of [
    ["one id sent twice in an answer", [echoCall("a", "call_dup"), echoCall("bb", "call_dup")]],
    // The client names a call sent with no id `call_<iteration>_<index>`: here the server's own id for another.
    ["a made-up id that meets the server's", [echoCall("a", "call_1_1"), echoCall("bb", "")]]
  ] as const) {
    live(`R3.8 R11 ${name}: each call goes back under an id of its own, the run goes on (review 126)`, () =>
      Effect.gen(function* () {
        const { result, requests } = yield* runWith([
          FakeOpenAiServer.reply({ toolCalls: calls }),
          FakeOpenAiServer.reply({ text: "done" })
        ])
        // Before, the fake refused the second request (as OpenAI does: "Duplicate value for 'tool_call_id'").
        assert.strictEqual(result.status, "completed", result.detail)
        const sent = messagesOf(requests[1])
        const asked = (sent.find((m) => m.role === "assistant")?.tool_calls ?? []) as ReadonlyArray<Json>
        const ids = asked.map((c) => c.id)
        assert.strictEqual(new Set(ids).size, 2)
        // Each result answers its own call: the tool messages follow in call order, with the echoes.
        const answers = sent.filter((m) => m.role === "tool")
        assert.deepStrictEqual(
          answers.map((m) => m.tool_call_id),
          ids
        )
        assert.deepStrictEqual(
          answers.map((m) => String(m.content).replaceAll('"', "")),
          ["a", "bb"]
        )
      })
    )
  }
})

describe("usage and cost (R2.1)", () => {
  const usage = { input: 1_000, output: 500, cached: 400, reasoning: 100 }
  const prices = { input: 2, output: 8, cachedInput: 0.5 }
  // 600 uncached at $2, 400 cached at $0.5, 500 out at $8, per million.
  const cost = (600 * 2 + 400 * 0.5 + 500 * 8) / 1_000_000
  for (const api of ["openai", "deepseek"] as const) {
    for (const stream of [false, true]) {
      live(
        `R2.1 input, output, cached and reasoning tokens, and cached input at its own price (${api}, ${stream ? "streamed" : "plain"})`,
        () =>
          Effect.gen(function* () {
            const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "ok", usage })], { api })
            const model = yield* OpenAiCompatible.make({
              baseUrl: server.url,
              model: "m",
              apiKey,
              dialect: api,
              stream,
              costPerMillionTokens: prices
            })
            const response = yield* model.generate(yield* request())
            assert.strictEqual(response.usage.inputTokens, 1_000)
            assert.strictEqual(response.usage.outputTokens, 500)
            assert.strictEqual(response.usage.cachedInputTokens, 400)
            assert.strictEqual(response.usage.reasoningTokens, 100)
            assert.closeTo(response.usage.costUsd ?? 0, cost, 1e-12)
          })
      )
    }
  }

  live("R2.1 a run counts cached and reasoning tokens, and its cost budget sees the cached price", () =>
    Effect.gen(function* () {
      const { result } = yield* runWith(
        [
          FakeOpenAiServer.reply({ toolCalls: [echoCall("hi")], usage }),
          FakeOpenAiServer.reply({ text: "done", usage: { input: 100, output: 10, cached: 100 } })
        ],
        { costPerMillionTokens: prices }
      )
      assert.strictEqual(result.counters.cachedInputTokens, 500)
      assert.strictEqual(result.counters.reasoningTokens, 100)
      assert.closeTo(result.counters.costUsd, cost + (100 * 0.5 + 10 * 8) / 1_000_000, 1e-12)
    })
  )

  // Gemini's gateways report thinking tokens beside the completion's (review 117): each such
  // answer was a corrupt_response, asked again until the recoveries ran out, and counted by
  // an estimate from its text, a seventh of what was billed.
  for (const stream of [false, true]) {
    live(
      `R2.1 R11 a usage whose part is larger than its whole, or whose total adds it, counts it beside: never less than reported (${stream ? "streamed" : "plain"})`,
      () =>
        Effect.gen(function* () {
          const answer = (usage: object) =>
            stream
              ? FakeOpenAiServer.raw({
                  headers: { "content-type": "text/event-stream" },
                  body: [
                    `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "The answer is 4." }, finish_reason: "stop" }] })}\n\n`,
                    `data: ${JSON.stringify({ choices: [], usage })}\n\n`,
                    "data: [DONE]\n\n"
                  ].join("")
                })
              : FakeOpenAiServer.raw({
                  body: JSON.stringify({
                    choices: [{ message: { content: "The answer is 4." }, finish_reason: "stop" }],
                    usage
                  })
                })
          const usages = [
            // Reasoning larger than the completion.
            {
              prompt_tokens: 20,
              completion_tokens: 5,
              total_tokens: 425,
              completion_tokens_details: { reasoning_tokens: 400 }
            },
            // Smaller, but the total adds it.
            {
              prompt_tokens: 20,
              completion_tokens: 50,
              total_tokens: 110,
              completion_tokens_details: { reasoning_tokens: 40 }
            },
            // Within the completion, as OpenAI reports it.
            {
              prompt_tokens: 20,
              completion_tokens: 50,
              total_tokens: 70,
              completion_tokens_details: { reasoning_tokens: 40 }
            },
            // Cache reads beside the prompt.
            { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11, prompt_tokens_details: { cached_tokens: 11 } },
            // Beside its whole, past the counts a number holds exactly: the most it holds (review 122).
            {
              prompt_tokens: 10,
              completion_tokens: 5,
              prompt_tokens_details: { cached_tokens: Number.MAX_SAFE_INTEGER },
              completion_tokens_details: { reasoning_tokens: Number.MAX_SAFE_INTEGER }
            }
          ]
          const server = yield* FakeOpenAiServer.make(usages.map(answer))
          const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "m", apiKey, stream })
          const counted = []
          for (const _ of usages) {
            const { usage } = yield* model.generate(yield* request())
            counted.push([usage.inputTokens, usage.outputTokens, usage.reasoningTokens, usage.cachedInputTokens])
          }
          assert.deepStrictEqual(counted, [
            [20, 405, 400, undefined],
            [20, 90, 40, undefined],
            [20, 50, 40, undefined],
            [21, 1, undefined, 11],
            [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]
          ])
        })
    )
  }

  live(
    "R2.1 R11 a streamed usage chunk with no choices key, or choices null, is usage only: the answer stands with the usage reported (review 128)",
    () =>
      Effect.gen(function* () {
        const usage = { prompt_tokens: 1_200, completion_tokens: 7, total_tokens: 1_207 }
        const answer = (last: object) =>
          FakeOpenAiServer.raw({
            headers: { "content-type": "text/event-stream" },
            body: [
              `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "The answer is 42." }, finish_reason: null }] })}\n\n`,
              `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`,
              // A keep-alive of an empty object, as some gateways send.
              "data: {}\n\n",
              `data: ${JSON.stringify(last)}\n\n`,
              "data: [DONE]\n\n"
            ].join("")
          })
        const lasts = [
          { id: "x", object: "chat.completion.chunk", usage },
          { choices: null, usage }
        ]
        const server = yield* FakeOpenAiServer.make(lasts.map(answer))
        const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "m", apiKey, stream: true })
        for (const last of lasts) {
          const exit = yield* Effect.exit(model.generate(yield* request()))
          assert.isTrue(Exit.isSuccess(exit), `${JSON.stringify(last)}: ${String(exit)}`)
          if (Exit.isSuccess(exit)) {
            assert.strictEqual(exit.value.text, "The answer is 42.")
            assert.strictEqual(exit.value.finishReason, "stop")
            assert.deepStrictEqual(exit.value.usage, { inputTokens: 1_200, outputTokens: 7 })
          }
        }
      })
  )

  for (const stream of [false, true]) {
    live(
      `R2.1 R11 a usage missing a part counts what it has, and estimates only the side it says nothing of (review 128, ${stream ? "streamed" : "plain"})`,
      () =>
        Effect.gen(function* () {
          const text = "The answer is 4."
          const answer = (usage: object) =>
            stream
              ? FakeOpenAiServer.raw({
                  headers: { "content-type": "text/event-stream" },
                  body: [
                    `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text }, finish_reason: "stop" }] })}\n\n`,
                    `data: ${JSON.stringify({ choices: [], usage })}\n\n`,
                    "data: [DONE]\n\n"
                  ].join("")
                })
              : FakeOpenAiServer.raw({
                  body: JSON.stringify({ choices: [{ message: { content: text }, finish_reason: "stop" }], usage })
                })
          const usages = [
            // No completion count, no total: the completion is estimated from the text (16 characters, 4 tokens).
            { prompt_tokens: 40 },
            { prompt_tokens: 40, completion_tokens: null },
            // A total tells the side left out.
            { prompt_tokens: 40, completion_tokens: null, total_tokens: 46 },
            { completion_tokens: 6, total_tokens: 46 },
            // Nothing but a total: split by the estimate (the request's "hi" is 1 token), summing to it
            // (review 129: it counted 5 of the 50 reported).
            { total_tokens: 50 }
          ]
          const server = yield* FakeOpenAiServer.make(usages.map(answer))
          const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "m", apiKey, stream })
          const counted = []
          for (const usage of usages) {
            const exit = yield* Effect.exit(model.generate(yield* request()))
            assert.isTrue(Exit.isSuccess(exit), `${JSON.stringify(usage)}: ${String(exit)}`)
            if (Exit.isSuccess(exit)) {
              const u = exit.value.usage
              counted.push([u.inputTokens, u.outputTokens, u.estimated === true])
            }
          }
          assert.deepStrictEqual(counted, [
            [40, 4, true],
            [40, 4, true],
            [40, 6, false],
            [40, 6, false],
            [1, 49, true]
          ])
        })
    )
  }
})

describe("errors inside a stream (R3.2)", () => {
  const cases: ReadonlyArray<readonly [FakeOpenAiServer.ApiError, string, string]> = [
    [
      { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" },
      "Retryable",
      "rate_limited"
    ],
    [{ message: "The server had an error", type: "server_error" }, "Retryable", "server_error"],
    [{ message: "Upstream said 429", code: 429 }, "Retryable", "rate_limited"],
    [{ message: "Something odd happened" }, "Retryable", "stream_error"],
    // A code that is no HTTP status is no status: it says nothing (review 87: 1e308 was a server error).
    [{ message: "A huge code", code: 1e308, type: "invalid_request_error" }, "Permanent", "invalid_request"],
    [
      { message: "Invalid 'messages'", type: "invalid_request_error", param: "messages" },
      "Permanent",
      "invalid_request"
    ],
    [
      { message: "You exceeded your current quota", type: "insufficient_quota", code: "insufficient_quota" },
      "Permanent",
      "insufficient_quota"
    ],
    // A spent quota is one whatever status comes with it, as over HTTP (review 106).
    [{ message: "Quota spent", type: "insufficient_quota", code: 429 }, "Permanent", "insufficient_quota"],
    [{ message: `Incorrect API key provided: ${KEY}`, code: "invalid_api_key" }, "Permanent", "authentication"]
  ]
  live("R3.2 an error event is classified by what it says, and its message (no key) is in the hint", () =>
    Effect.gen(function* () {
      for (const [error, tag, code] of cases) {
        const { exit } = yield* once(FakeOpenAiServer.streamError(error), { stream: true })
        const failure = failureOf(exit)
        assert.deepStrictEqual(classOf(failure), [tag, "stream_error", code], error.message)
        assert.include(failure.hint, error.message.replace(KEY, "<redacted>"))
        assert.notInclude(JSON.stringify(failure), KEY)
      }
    })
  )

  live("R3.2 an error envelope beside choices is the error, in a stream and in a plain body", () =>
    Effect.gen(function* () {
      const error = { message: "Invalid 'messages'", type: "invalid_request_error" }
      const answer = { index: 0, finish_reason: "stop" }
      const chunk = { id: "c", object: "chat.completion.chunk", created: 1, model: "m" }
      const event = { ...chunk, error, choices: [{ ...answer, delta: { role: "assistant", content: "A" } }] }
      const body = {
        id: "c",
        object: "chat.completion",
        created: 1,
        model: "m",
        error,
        choices: [{ ...answer, message: { role: "assistant", content: "A" } }]
      }
      const steps: ReadonlyArray<readonly [FakeOpenAiServer.Step, boolean]> = [
        [
          FakeOpenAiServer.raw({
            headers: { "content-type": "text/event-stream" },
            body: `data: ${JSON.stringify(event)}\n\ndata: [DONE]\n\n`
          }),
          true
        ],
        [FakeOpenAiServer.raw({ body: JSON.stringify(body) }), false]
      ]
      for (const [step, stream] of steps) {
        const { exit } = yield* once(step, { stream })
        // It was taken as the answer "A".
        const failure = failureOf(exit)
        assert.deepStrictEqual(classOf(failure), ["Permanent", "stream_error", "invalid_request"], String(stream))
        assert.include(failure.hint, "Invalid 'messages'")
      }
      // An empty envelope says nothing: the answer stands.
      const empty = { ...body, error: { message: null, type: null, code: null } }
      const { exit } = yield* once(FakeOpenAiServer.raw({ body: JSON.stringify(empty) }))
      assert.isTrue(Exit.isSuccess(exit) && exit.value.text === "A", String(exit))
    })
  )

  live(
    "R3.2 R8 a rate limit in the stream is retried; an invalid request ends the run model_error, its message on the timeline",
    () =>
      Effect.gen(function* () {
        const limited = yield* runWith(
          [
            FakeOpenAiServer.streamError({ message: "Rate limit reached", code: "rate_limit_exceeded" }),
            FakeOpenAiServer.reply({ text: "done" })
          ],
          { stream: true }
        )
        assert.strictEqual(limited.result.status, "completed")
        assert.include(ofTag(limited.result.timeline, "model.failed")[0]?.failure.hint, "Rate limit reached")
        const refused = yield* runWith(
          [
            FakeOpenAiServer.streamError({
              message: "Invalid schema for function 'echo'",
              type: "invalid_request_error"
            })
          ],
          { stream: true }
        )
        assert.strictEqual(refused.result.stopReason, "model_error")
        assert.include(refused.result.detail, "Invalid schema for function 'echo'")
        assert.strictEqual(refused.requests.length, 1)
      })
  )

  live("R3.2 the provider's message of an HTTP error reaches the hint too, scrubbed", () =>
    Effect.gen(function* () {
      const { exit } = yield* once(FakeOpenAiServer.status(400, { message: `Bad thing near ${KEY}` }))
      const failure = failureOf(exit)
      assert.include(failure.hint, "HTTP 400 (bad request): Bad thing near <redacted>")
      assert.notInclude(JSON.stringify(failure), KEY)
    })
  )

  live(
    "R3.1 R8 a short key a local server takes is scrubbed where it stands alone, not out of the library's words (review 146)",
    () =>
      Effect.gen(function* () {
        for (const key of ["a", "e", "0", "ollama"]) {
          const { exit } = yield* once(FakeOpenAiServer.status(400, { message: `model not found for key ${key}` }), {
            apiKey: Redacted.make(key)
          })
          // Before, "a" made "the provider <redacted>nswered", and "0" made "HTTP 4<redacted><redacted>".
          assert.strictEqual(
            failureOf(exit).hint,
            "the provider answered HTTP 400 (bad request): model not found for key <redacted>",
            key
          )
        }
      })
  )

  live("R3.2 an error whose message is the error itself (text-generation-inference's) is read as one", () =>
    Effect.gen(function* () {
      // It was a corrupt response, retried, its message never shown (review 87).
      const error = {
        error: "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096",
        error_type: "validation"
      }
      const event = FakeOpenAiServer.raw({ body: `data: ${JSON.stringify(error)}\n\n` })
      const streamed = failureOf((yield* once(event, { stream: true })).exit)
      assert.deepStrictEqual(classOf(streamed), ["Permanent", "stream_error", "invalid_request"])
      assert.include(streamed.hint, "(validation): Input validation error")
      const status = FakeOpenAiServer.raw({ status: 422, body: JSON.stringify(error) })
      const refused = failureOf((yield* once(status)).exit)
      assert.include(refused.hint, "HTTP 422")
      assert.include(refused.hint, "Input validation error")
      // Overloaded: retried.
      const busy = { error: "Model is overloaded", error_type: "overloaded" }
      const overloaded = failureOf(
        (yield* once(FakeOpenAiServer.raw({ body: `data: ${JSON.stringify(busy)}\n\n` }), { stream: true })).exit
      )
      assert.deepStrictEqual(classOf(overloaded), ["Retryable", "stream_error", "server_error"])
    })
  )
})

describe("DeepSeek's thinking mode with tools (R11)", () => {
  const script = [
    FakeOpenAiServer.reply({
      toolCalls: [echoCall("hi", "d1")],
      reasoning: "I should echo hi first.",
      usage: { input: 50, output: 30, reasoning: 20, cached: 10 }
    }),
    FakeOpenAiServer.reply({
      text: "Echoed.",
      reasoning: "The echo worked.",
      usage: { input: 90, output: 12, reasoning: 8 }
    })
  ]
  for (const stream of [false, true]) {
    live(
      `R11 reasoning_content is kept, sent back on the tool turn, recorded and counted: the run completes (${stream ? "streamed" : "plain"})`,
      () =>
        Effect.gen(function* () {
          const { result, requests } = yield* runWith(script, { dialect: "deepseek", stream }, { api: "deepseek" })
          assert.strictEqual(result.status, "completed", result.detail)
          const assistant = messagesOf(requests[1]).find((m) => m.role === "assistant")
          assert.strictEqual(assistant?.reasoning_content, "I should echo hi first.")
          assert.deepStrictEqual(
            ofTag(result.timeline, "model.responded").map((e) => e.reasoning),
            ["I should echo hi first.", "The echo worked."]
          )
          for (const e of ofTag(result.timeline, "tool.succeeded"))
            assert.notInclude(JSON.stringify(e), "echo hi first")
          assert.strictEqual(result.counters.reasoningTokens, 28)
          assert.strictEqual(result.counters.cachedInputTokens, 10)
          assert.notInclude(String(result.finalAnswer), "worked")
        })
    )
  }

  for (const stream of [false, true]) {
    live(
      `R11 DeepSeek thinking mode: a text-only turn after a tool call passes its reasoning back (review 128, ${stream ? "streamed" : "plain"})`,
      () =>
        Effect.gen(function* () {
          // A tool call, then an answer the output cap cut off: the run's reminder is a user
          // message, and the cut-off turn sits between two user messages where a tool was called.
          const { result, requests } = yield* runWith(
            [
              FakeOpenAiServer.reply({ toolCalls: [echoCall("a", "d1")], reasoning: "R1: call echo" }),
              FakeOpenAiServer.reply({ text: "The answer is", finishReason: "length", reasoning: "R2: answering" }),
              FakeOpenAiServer.reply({ text: "The answer is a.", reasoning: "R3" })
            ],
            { dialect: "deepseek", stream },
            { api: "deepseek" }
          )
          assert.strictEqual(result.status, "completed", result.detail)
          assert.strictEqual(requests.length, 3)
          const assistants = messagesOf(requests[2]).filter((m) => m.role === "assistant")
          assert.deepStrictEqual(
            assistants.map((m) => m.reasoning_content),
            ["R1: call echo", "R2: answering"]
          )
        })
    )
  }

  live(
    "R11 DeepSeek thinking mode: a text-only turn whose reasoning is unknown goes with an empty one after a tool call, and none elsewhere (review 128)",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "ok" })], { api: "deepseek" })
        const model = yield* OpenAiCompatible.make(OpenAiCompatible.deepseek({ apiKey, baseUrl: server.url }))
        const messages: ReadonlyArray<Model.Message> = [
          { _tag: "user", content: "hello" },
          { _tag: "assistant", content: "hi", toolCalls: [] },
          { _tag: "user", content: "echo hi" },
          { _tag: "assistant", content: "", toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
          { _tag: "tool", toolCallId: "c1", name: "echo", content: "hi" },
          { _tag: "assistant", content: "not json", toolCalls: [] },
          { _tag: "user", content: "answer as JSON" }
        ]
        const exit = yield* Effect.exit(
          model.generate({ ...(yield* request({ messages })), tools: [echoDefinition()] })
        )
        assert.isTrue(Exit.isSuccess(exit), String(exit))
        const sent = messagesOf((yield* server.requests)[0])
        assert.notProperty(sent[1], "reasoning_content")
        assert.strictEqual(sent[3]?.reasoning_content, "")
        assert.strictEqual(sent[5]?.reasoning_content, "")
      })
  )

  live("R11 a client that drops reasoning_content gets DeepSeek's 400, and the run ends model_error saying why", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* runWith(script, { dialect: "openai" }, { api: "deepseek" })
      assert.strictEqual(result.stopReason, "model_error")
      assert.include(result.detail, "reasoning_content")
      assert.strictEqual(requests.length, 2)
    })
  )

  live("R11 a tool turn of another model (no reasoning) is sent with an empty reasoning_content, and accepted", () =>
    Effect.gen(function* () {
      const server = yield* FakeOpenAiServer.make([FakeOpenAiServer.reply({ text: "ok" })], { api: "deepseek" })
      const model = yield* OpenAiCompatible.make(OpenAiCompatible.deepseek({ apiKey, baseUrl: server.url }))
      const messages: ReadonlyArray<Model.Message> = [
        { _tag: "user", content: "echo hi" },
        { _tag: "assistant", content: "", toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
        { _tag: "tool", toolCallId: "c1", name: "echo", content: "hi" }
      ]
      const exit = yield* Effect.exit(model.generate({ ...(yield* request({ messages })), tools: [echoDefinition()] }))
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(messagesOf((yield* server.requests)[0])[1]?.reasoning_content, "")
    })
  )

  live("R11 with thinking off, no reasoning_content is sent", () =>
    Effect.gen(function* () {
      const { result, requests } = yield* runWith(
        [FakeOpenAiServer.reply({ toolCalls: [echoCall("hi")] }), FakeOpenAiServer.reply({ text: "done" })],
        { dialect: "deepseek", reasoning: { thinking: false } },
        { api: "deepseek" }
      )
      assert.strictEqual(result.status, "completed")
      const assistant = messagesOf(requests[1]).find((m) => m.role === "assistant")
      assert.notProperty(assistant, "reasoning_content")
      assert.deepInclude(bodyOf(requests[1]), { thinking: { type: "disabled" } })
    })
  )
})
