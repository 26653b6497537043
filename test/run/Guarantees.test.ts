import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Metric, Option, Schema, Stream } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { runtime, span } from "../../src/tracing/Attributes.ts"
import * as Metrics from "../../src/tracing/Metrics.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { hostile, unprintable } from "../support/hostile.ts"
import { assertRoundTrips } from "../support/schema.ts"
import { memoryTracer } from "../support/tracer.ts"

type Handler = (input: unknown, context: Tool.CallContext) => Effect.Effect<unknown, never>

/** A tool whose handler is whatever the test says, typed or not. */
const toolOf = (handler: unknown, options: Partial<Tool.Options<unknown, unknown, never>> = {}) =>
  Tool.make({
    name: "t",
    description: "a tool of the test",
    input: Schema.Struct({}),
    output: Schema.Unknown,
    sideEffect: "none",
    ...options,
    handler: handler as Handler
  })

const script = (...steps: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(steps), NodeServices.layer)

const noTools: ReadonlyArray<Tool.Any<never>> = []

const callThenAnswer = script(ScriptedModel.toolCall("t", {}), ScriptedModel.finalAnswer("done"))

const modelLayer = (generate: unknown) =>
  Layer.mergeAll(
    Layer.succeed(Model.Model, { generate: generate as Model.Model["Service"]["generate"] }),
    NodeServices.layer
  )

const failureOf = (result: RunResult.RunResult, tag: "tool.failed" | "model.failed" = "tool.failed") => {
  const event = result.timeline.find((e) => e._tag === tag)
  if (event?._tag === "tool.failed") return event.error.failure
  if (event?._tag === "model.failed") return event.failure
  return undefined
}

describe("R12 user code that returns something other than an Effect", () => {
  const returns: ReadonlyArray<readonly [string, unknown, string]> = [
    ["the Promise of an async function", async () => 1, "a Promise"],
    // biome-ignore lint/suspicious/noThenProperty: a thenable is what this case is about
    ["a thenable", () => ({ then: (resolve: (n: number) => void) => resolve(1) }), "a Promise"],
    ["undefined", () => undefined, "undefined"],
    ["a number", () => 42, "a number"]
  ]
  for (const [what, handler, kind] of returns) {
    it.effect(`R12 R4.2 a handler returning ${what} is a typed failure with a hint, never a hang`, () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "x", tools: [toolOf(handler)], time: { run: "1 second" } })
        assert.strictEqual(result.stopReason, "tool_error")
        const failure = failureOf(result)
        assert.strictEqual(failure?.code, "not_an_effect")
        assert.strictEqual(failure?.classification, "permanent")
        assert.include(failure?.hint, `returned ${kind}, not an Effect`)
        assert.include(failure?.hint, "wrap promises with `Abortable.handler`")
        assertRoundTrips(result)
      }).pipe(Effect.provide(callThenAnswer))
    )
  }

  it.effect("R12 a model whose generate returns a Promise or undefined ends model_error, not a hang", () =>
    Effect.gen(function* () {
      for (const generate of [async () => Model.response({ text: "hi" }), () => undefined]) {
        const result = yield* Run.run({ goal: "x", tools: [], time: { run: "1 second" } }).pipe(
          Effect.provide(modelLayer(generate))
        )
        assert.strictEqual(result.stopReason, "model_error")
        assert.strictEqual(failureOf(result, "model.failed")?.code, "not_an_effect")
        assertRoundTrips(result)
      }
    })
  )

  it.effect("R12 a postcondition, a status query and a stop hook returning non-Effects fail typed", () =>
    Effect.gen(function* () {
      const checked = toolOf(() => Effect.succeed(1), { postcondition: (() => 42) as never })
      const post = yield* Run.run({ goal: "x", tools: [checked] }).pipe(Effect.provide(callThenAnswer))
      assert.strictEqual(post.stopReason, "inconsistent_result")
      assert.include(post.detail, "the postcondition of t returned a number, not an Effect")
      assertRoundTrips(post)

      const hook = Validation.stopHook("h", (() => Promise.resolve({ passed: true, detail: "" })) as never)
      const hooked = yield* Run.run({ goal: "x", tools: [], validation: { stopHooks: [hook] } }).pipe(
        Effect.provide(script(ScriptedModel.finalAnswer("done")))
      )
      assert.strictEqual(hooked.stopReason, "validation_failed")
      assert.include(hooked.detail, "hook:h: returned a Promise, not an Effect")
      assertRoundTrips(hooked)
    })
  )

  it.effect(
    "R12 a user effect that yields a non-Effect deep inside still gives a result (the run fiber is watched)",
    () =>
      Effect.gen(function* () {
        // effect's run loop ends a fiber that meets a non-Effect at once, skipping its finalizers.
        const broken = toolOf(() => Effect.flatMap(Effect.void, () => 42 as never))
        const inline = yield* Run.run({ goal: "x", tools: [broken] }).pipe(Effect.provide(callThenAnswer))
        assert.strictEqual(inline.status, "failed")
        assert.strictEqual(inline.stopReason, "internal_error")
        assert.strictEqual(inline.timeline.at(-1)?._tag, "run.finished")
        assertRoundTrips(inline)

        const started = yield* Effect.scoped(
          Effect.flatMap(Run.start({ goal: "x", tools: [broken] }), (handle) => handle.result)
        ).pipe(Effect.provide(script(ScriptedModel.toolCall("t", {}), ScriptedModel.finalAnswer("done"))))
        assert.strictEqual(started.stopReason, "internal_error")
        assertRoundTrips(started)
      })
  )
})

describe("R12 user code that throws a value that cannot be printed", () => {
  for (const [what, thrown] of [
    ["an object whose toString throws", unprintable],
    ["a Proxy whose traps throw", hostile]
  ] as const) {
    const raise = () => {
      throw thrown
    }
    it.effect(`R12 ${what}, thrown by a handler, a policy, a postcondition, a permission check, a hook or a gate`, () =>
      Effect.gen(function* () {
        const handler = yield* Run.run({ goal: "x", tools: [toolOf(raise)] }).pipe(Effect.provide(callThenAnswer))
        assert.strictEqual(handler.stopReason, "tool_error")
        assert.strictEqual(failureOf(handler)?.code, "tool_defect")
        assert.strictEqual(failureOf(handler)?.hint, "a non-Error object")
        assertRoundTrips(handler)

        const policy = yield* Run.run({
          goal: "x",
          tools: [toolOf(() => Effect.succeed(1))],
          policies: (defaults) => [Termination.make("p", raise), ...defaults]
        }).pipe(Effect.provide(callThenAnswer))
        assert.strictEqual(policy.stopReason, "internal_error")
        assert.strictEqual(policy.detail, 'the termination policy "p" threw a non-Error object')
        assertRoundTrips(policy)

        const post = yield* Run.run({
          goal: "x",
          tools: [toolOf(() => Effect.succeed(1), { postcondition: raise })]
        }).pipe(Effect.provide(callThenAnswer))
        assert.strictEqual(post.stopReason, "inconsistent_result")
        assertRoundTrips(post)

        // A policy that cannot decide denies (R3.6): the call is blocked, the run goes on.
        const permission = yield* Run.run({ goal: "x", tools: [toolOf(() => Effect.succeed(1))] }).pipe(
          Effect.provideService(Permission.Permission, { check: raise }),
          Effect.provide(callThenAnswer)
        )
        const blocked = permission.timeline.find((e) => e._tag === "tool.blocked")
        assert.isTrue(blocked?._tag === "tool.blocked" && blocked.error.message.startsWith("policy_failed:"))
        assert.strictEqual(permission.status, "completed")
        assertRoundTrips(permission)

        const hook = yield* Run.run({
          goal: "x",
          tools: [],
          validation: { stopHooks: [Validation.stopHook("h", raise)] }
        }).pipe(Effect.provide(script(ScriptedModel.finalAnswer("done"))))
        assert.strictEqual(hook.stopReason, "validation_failed")
        assert.include(hook.detail, "hook:h: threw a non-Error object")
        assertRoundTrips(hook)

        const gated = yield* Run.run({
          goal: "x",
          tools: [toolOf(() => Effect.succeed(1), { needsApproval: true })]
        }).pipe(
          Effect.provideService(Approval.ApprovalGate, {
            request: raise,
            decide: () => Effect.void,
            pending: Effect.succeed([])
          }),
          Effect.provide(callThenAnswer)
        )
        assert.strictEqual(gated.stopReason, "internal_error")
        assert.strictEqual(gated.detail, "the approval gate threw a non-Error object")
        assertRoundTrips(gated)
      })
    )

    it(`R12 ${what} thrown while the options are read gives a result, never a rejection`, async () => {
      const fromFactory = await Effect.runPromise(
        Run.run({ goal: "x", tools: noTools, policies: raise }).pipe(Effect.provide(callThenAnswer))
      )
      assert.strictEqual(fromFactory.stopReason, "internal_error")
      assert.strictEqual(fromFactory.detail, "invalid run options: policies: the function threw a non-Error object")
      assertRoundTrips(fromFactory)
      const options = new Proxy({} as Run.Options<Tool.Any<never>>, {
        get: () => {
          throw thrown
        }
      })
      const fromOptions = await Effect.runPromise(
        Run.run<Tool.Any<never>>(options).pipe(Effect.provide(callThenAnswer))
      )
      assert.strictEqual(fromOptions.stopReason, "internal_error")
      assertRoundTrips(fromOptions)
    })
  }
})

describe("R12 values user code hands back are checked", () => {
  it.effect("R12 a run given no Model (a caller without types) ends internal_error saying so", () =>
    Effect.gen(function* () {
      // The types require a Model; JavaScript does not check them.
      const untyped = Run.run({ goal: "x", tools: [] }) as Effect.Effect<RunResult.RunResult>
      const result = yield* untyped
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, "no Model service was provided to the run")
      assertRoundTrips(result)
    })
  )

  it.effect("R3.7 R12 a tool's failure hint reaches the model cut to maxObservationChars, as an output does", () =>
    Effect.gen(function* () {
      const hint = "x".repeat(500_000)
      const failing = toolOf(
        () =>
          Effect.fail(new Failure.Permanent({ source: "tool", category: "rejected", code: "no", attempts: 1, hint })),
        { recoverErrors: true }
      )
      let seen: ReadonlyArray<Model.Message> = []
      const result = yield* Run.run({ goal: "x", tools: [failing], limits: { maxObservationChars: 1_000 } }).pipe(
        Effect.provide(
          script(ScriptedModel.toolCall("t", {}), (request) => {
            seen = request.messages
            return ScriptedModel.finalAnswer("done")
          })
        )
      )
      const told = seen.find((m) => m._tag === "tool")
      assert.isBelow(told?.content.length ?? Number.POSITIVE_INFINITY, 1_200)
      assert.include(told?.content, "observation cut")
      const event = result.timeline.find((e): e is Event.Of<"tool.failed"> => e._tag === "tool.failed")
      assert.isBelow(event?.error.failure?.hint.length ?? Number.POSITIVE_INFINITY, 1_200)
    })
  )

  it.effect(
    "R12 R11 an output cut to maxObservationChars is never cut inside a character: the model gets well-formed text",
    () =>
      Effect.gen(function* () {
        // Emoji are two UTF-16 units: one of them lands on the cut, whatever the offset (review 87).
        for (const pad of [997, 998, 999]) {
          const output = `${"x".repeat(pad)}${"😀".repeat(10)}`
          let seen: ReadonlyArray<Model.Message> = []
          yield* Run.run({
            goal: "x",
            tools: [toolOf(() => Effect.succeed(output))],
            limits: { maxObservationChars: 1_000 }
          }).pipe(
            Effect.provide(
              script(ScriptedModel.toolCall("t", {}), (request) => {
                seen = request.messages
                return ScriptedModel.finalAnswer("done")
              })
            )
          )
          const told = seen.find((m) => m._tag === "tool")?.content ?? ""
          assert.include(told, "observation cut")
          // No first half of a pair without its second.
          assert.notMatch(told, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/, `pad ${pad}`)
        }
      })
  )

  it.effect("R12 a policy's invalid decision is a typed failure naming the field, and the result encodes", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "x",
        tools: [],
        policies: (defaults) => [
          Termination.make("p", () => ({ _tag: "Stop", reason: "because", detail: 5 }) as never),
          ...defaults
        ]
      }).pipe(Effect.provide(script(ScriptedModel.finalAnswer("done"))))
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, 'the decision of the termination policy "p" is invalid')
      assert.include(result.detail, "reason: Expected")
      assert.include(result.detail, "detail: Expected string")
      assertRoundTrips(result)
    })
  )

  it.effect(
    "R6.1 R2.5 R12 a policy cannot claim the goal reached without a final answer, nor a stop only the runtime gives",
    () =>
      Effect.gen(function* () {
        // Nor a timeout, a failure or a cut-off answer that never happened, nor the run deadline before it passed.
        for (const reason of [
          "goal_reached",
          "cancelled",
          "validation_failed",
          "step_timeout",
          "model_error",
          "tool_error",
          "output_truncated",
          "run_timeout"
        ] as const) {
          const ran: Array<string> = []
          const result = yield* Run.run({
            goal: "x",
            tools: [toolOf(() => Effect.sync(() => ran.push("t")))],
            policies: (defaults) => [
              Termination.make("mine", () => Termination.stop(reason, "done, I say")),
              ...defaults
            ]
          }).pipe(Effect.provide(callThenAnswer))
          assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"], reason)
          assert.include(result.detail, `the termination policy "mine" stopped the run with ${reason}`)
          assert.deepStrictEqual(ran, [])
        }
        // With the model's final answer, a policy may stop for the goal: validation then judges it.
        const answered = yield* Run.run({
          goal: "x",
          tools: [],
          policies: (defaults) => [
            Termination.make("mine", ({ counters }) =>
              counters.finalAnswerReceived ? Termination.stop("goal_reached", "answered") : Termination.continue_
            ),
            ...defaults
          ]
        }).pipe(Effect.provide(script(ScriptedModel.finalAnswer("done"))))
        assert.deepStrictEqual(
          [answered.status, answered.stopReason, answered.policy],
          ["completed", "goal_reached", "mine"]
        )
      })
  )

  it.effect("R2.3 R12 a policy cannot warn under a kind a built-in policy counts (review 132)", () =>
    Effect.gen(function* () {
      for (const kind of ["loop_warning", "same_class_errors"]) {
        const ran: Array<string> = []
        // Its warning would have moved the built-in policy's count, and with it that policy's own warning or stop.
        const result = yield* Run.run({
          goal: "x",
          tools: [toolOf(() => Effect.sync(() => ran.push("t")))],
          policies: (defaults) => [Termination.make("mine", () => Termination.warn(kind, "careful")), ...defaults]
        }).pipe(Effect.provide(callThenAnswer))
        assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"], kind)
        assert.include(result.detail, `the termination policy "mine" warned with the kind "${kind}"`)
        assert.deepStrictEqual(ran, [])
      }
      // A kind of its own is the policy's to give.
      const own = yield* Run.run({
        goal: "x",
        tools: [],
        policies: (defaults) => [Termination.make("mine", () => Termination.warn("mine", "careful")), ...defaults]
      }).pipe(Effect.provide(script(ScriptedModel.finalAnswer("done"))))
      assert.strictEqual(own.status, "completed")
    })
  )

  it.live("R12 R5.2 a settle outside its union is recorded as outcome_unknown, and the result encodes", () =>
    Effect.gen(function* () {
      const settleBadly = toolOf(
        (_: unknown, context: Tool.CallContext) => {
          context.settle("bogus" as Tool.Settlement, 7 as never)
          return Effect.never
        },
        { timeout: "50 millis", sideEffect: "read", idempotent: true, maxRetries: 0 }
      )
      const result = yield* Run.run({ goal: "x", tools: [settleBadly] }).pipe(Effect.provide(callThenAnswer))
      const interrupted = result.timeline.find((e) => e._tag === "tool.interrupted")
      assert.isTrue(interrupted?._tag === "tool.interrupted" && interrupted.settlement === "outcome_unknown")
      assertRoundTrips(result)
    })
  )

  it.effect("R12 a failure that only looks like one of the algebra is a defect, and the result encodes", () =>
    Effect.gen(function* () {
      const fake = toolOf(() => Effect.fail({ _tag: "Retryable" }), { recoverErrors: true })
      const result = yield* Run.run({ goal: "x", tools: [fake] }).pipe(Effect.provide(callThenAnswer))
      assert.strictEqual(failureOf(result)?.code, "defect")
      assert.strictEqual(failureOf(result)?.classification, "permanent")
      assertRoundTrips(result)
      const model = yield* Run.run({ goal: "x", tools: noTools }).pipe(
        Effect.provide(modelLayer(() => Effect.fail({ _tag: "Permanent", code: 5 })))
      )
      assert.strictEqual(model.stopReason, "model_error")
      assertRoundTrips(model)
    })
  )

  it.effect("R12 outputs whose schemas are not JSON (Date, Option, NaN) are kept as their JSON encoding", () =>
    Effect.gen(function* () {
      const dated = Tool.make({
        name: "t",
        description: "returns a date",
        input: Schema.Struct({}),
        output: Schema.Struct({ at: Schema.Date, maybe: Schema.Option(Schema.String), n: Schema.Number }),
        sideEffect: "none",
        handler: () => Effect.succeed({ at: new Date(0), maybe: Option.some("x"), n: Number.NaN })
      })
      const result = yield* Run.run({ goal: "x", tools: [dated] }).pipe(Effect.provide(callThenAnswer))
      assert.strictEqual(result.status, "completed")
      const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
      assert.strictEqual(
        JSON.stringify(succeeded?._tag === "tool.succeeded" ? succeeded.output : undefined),
        JSON.stringify({ at: "1970-01-01T00:00:00.000Z", maybe: { _tag: "Some", value: "x" }, n: "NaN" })
      )
      assertRoundTrips(result)
    })
  )

  it.effect("R12 a model answering text that is not a string, or a negative token count, fails invalid_response", () =>
    Effect.gen(function* () {
      const bad = [
        { text: 42, toolCalls: [], usage: Model.noUsage },
        { text: "hi", toolCalls: [], usage: { inputTokens: -1, outputTokens: 0 } },
        { text: "hi", toolCalls: [{ id: 1, name: "t", arguments: "{}" }], usage: Model.noUsage }
      ]
      for (const response of bad) {
        const result = yield* Run.run({ goal: "x", tools: [] }).pipe(
          Effect.provide(modelLayer(() => Effect.succeed(response)))
        )
        assert.strictEqual(result.stopReason, "model_error")
        assert.strictEqual(failureOf(result, "model.failed")?.code, "invalid_response")
        assertRoundTrips(result)
      }
    })
  )

  it.effect("R12 a model answering two million broken tool calls is refused by the first, not each", () =>
    Effect.gen(function* () {
      const response = { text: "", toolCalls: Array.from({ length: 2_000_000 }, () => 0), usage: Model.noUsage }
      const result = yield* Run.run({ goal: "x", tools: [] }).pipe(
        Effect.provide(modelLayer(() => Effect.succeed(response)))
      )
      const failure = failureOf(result, "model.failed")
      assert.strictEqual(failure?.code, "invalid_response")
      // Naming every problem held two million issues at once (385 MB); a small one names each.
      assert.notInclude(failure?.hint, "more problem")
      const few = yield* Run.run({ goal: "x", tools: [] }).pipe(
        Effect.provide(modelLayer(() => Effect.succeed({ ...response, toolCalls: [0, 0, 0] })))
      )
      assert.include(failureOf(few, "model.failed")?.hint, "[2]")
    })
  )
})

describe("R12 whatever arguments the model sends", () => {
  const deep = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`

  it.effect("R12 R3.5 arguments nested 3,000 deep get a correctable invalid_arguments, never a crash", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [toolOf(() => Effect.succeed(1))] }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("t", `{"a":${deep(3000)}}`), ScriptedModel.finalAnswer("done")))
      )
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.isTrue(failed?._tag === "tool.failed" && failed.error.code === "invalid_arguments")
      assert.isTrue(failed?._tag === "tool.failed" && failed.error.correctable)
      assert.include(failed?._tag === "tool.failed" ? failed.error.message : "", "nested more than 64 levels deep")
      assert.strictEqual(result.status, "completed")
      assertRoundTrips(result)
    })
  )

  it.effect("R12 arguments a provider parsed itself: cyclic, deep or not JSON get invalid_arguments", () =>
    Effect.gen(function* () {
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      let nested: unknown = {}
      for (let i = 0; i < 10_000; i++) nested = { a: nested }
      for (const [args, why] of [
        [cyclic, "the same object appears twice (a cycle or a shared value)"],
        [nested, "nested more than 64 levels deep"],
        [{ f: () => 1 }, "function is not a JSON value"],
        [{ n: Number.NaN }, "NaN is not a JSON number"],
        [{ d: new Date(0) }, "not a plain JSON object"]
      ] as const) {
        const response = Model.response({ toolCalls: [{ id: "c", name: "t", arguments: args }] })
        const result = yield* Run.run({ goal: "x", tools: [toolOf(() => Effect.succeed(1))] }).pipe(
          Effect.provide(script(response, ScriptedModel.finalAnswer("done")))
        )
        const failed = result.timeline.find((e) => e._tag === "tool.failed")
        assert.isTrue(failed?._tag === "tool.failed" && failed.error.code === "invalid_arguments")
        assert.include(failed?._tag === "tool.failed" ? failed.error.message : "", why)
      }
    })
  )

  it.effect("R12 limits.maxArgumentDepth sets the depth", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "x",
        tools: [toolOf(() => Effect.succeed(1))],
        limits: { maxArgumentDepth: 3 }
      }).pipe(
        Effect.provide(script(ScriptedModel.toolCall("t", `{"a":${deep(3)}}`), ScriptedModel.finalAnswer("done")))
      )
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.include(failed?._tag === "tool.failed" ? failed.error.message : "", "nested more than 3 levels deep")
    })
  )
})

describe("R3.11 no answer is accepted once the run deadline has passed", () => {
  /** Blocks the event loop for `millis` of real time, so no timer can fire. */
  const block = (millis: number) => {
    const until = performance.now() + millis
    while (performance.now() < until) {
      // busy
    }
  }

  it.live("R3.11 R4.2 a model call that blocks past the deadline and then answers ends run_timeout", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [], time: { run: "100 millis" } }).pipe(
        Effect.provide(
          modelLayer(() =>
            Effect.sync(() => {
              block(250)
              return Model.response({ text: "done" })
            })
          )
        )
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.notStrictEqual(result.status, "completed")
      assert.isUndefined(result.finalAnswer)
      assertRoundTrips(result)
    })
  )

  it.live("R3.11 a tool that blocks past the deadline: its success is recorded, no further action starts", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      const slow = toolOf(
        () =>
          Effect.sync(() => {
            calls.push("slow")
            block(250)
            return 1
          }),
        { name: "slow" }
      )
      const next = toolOf(() => Effect.sync(() => calls.push("next")), { name: "next" })
      const result = yield* Run.run({ goal: "x", tools: [slow, next], time: { run: "100 millis" } }).pipe(
        Effect.provide(script(ScriptedModel.toolCalls(["slow", {}], ["next", {}]), ScriptedModel.finalAnswer("done")))
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.deepStrictEqual(calls, ["slow"])
      assert.isTrue(result.timeline.some((e) => e._tag === "tool.succeeded" && e.name === "slow"))
      // The next call of the batch never started: no event of it at all.
      assert.isFalse(result.timeline.some((e) => "name" in e && e.name === "next"))
      assertRoundTrips(result)
    })
  )

  it.live("R3.11 a stop hook that blocks past the deadline does not let the answer through", () =>
    Effect.gen(function* () {
      const hook = Validation.stopHook("slow", () =>
        Effect.sync(() => {
          block(250)
          return { passed: true, detail: "fine" }
        })
      )
      const result = yield* Run.run({
        goal: "x",
        tools: [],
        time: { run: "100 millis" },
        validation: { stopHooks: [hook] }
      }).pipe(Effect.provide(script(ScriptedModel.finalAnswer("done"))))
      assert.strictEqual(result.stopReason, "run_timeout")
      assert.strictEqual(result.status, "failed")
      assertRoundTrips(result)
    })
  )
})

describe("R3.8 one call id, one effect", () => {
  /** A payment service that, like a real one, deduplicates by idempotency key. */
  const makeBank = () => {
    const applied = new Map<string, number>()
    const pay = Tool.make({
      name: "pay",
      description: "Pay",
      input: Schema.Struct({ amount: Schema.Finite }),
      output: Schema.String,
      sideEffect: "external",
      handler: ({ amount }, context) =>
        Effect.sync(() => {
          if (!applied.has(context.idempotencyKey)) applied.set(context.idempotencyKey, amount)
          return `paid ${amount}`
        })
    })
    return { pay, applied }
  }

  it.effect("R3.8 a model that reuses a call id across turns makes two payments under two keys", () =>
    Effect.gen(function* () {
      const { pay, applied } = makeBank()
      const result = yield* Run.run({ goal: "pay twice", tools: [pay], runId: "r" }).pipe(
        Effect.provide(
          script(
            ScriptedModel.toolCall("pay", { amount: 10 }, "call_0"),
            ScriptedModel.toolCall("pay", { amount: 20 }, "call_0"),
            ScriptedModel.finalAnswer("paid")
          )
        )
      )
      assert.deepStrictEqual([...applied.values()], [10, 20])
      assert.deepStrictEqual([...applied.keys()], ["r:call_0", "r:call_0#2"])
      // The run's identity of each call beside the model's id, as each response records them.
      const responses = result.timeline.filter((e): e is Event.Of<"model.responded"> => e._tag === "model.responded")
      assert.deepStrictEqual(
        responses.flatMap((e) => e.callIds.map((callId, i) => [callId, e.toolCalls[i]?.id])),
        [
          ["call_0", "call_0"],
          ["call_0#2", "call_0"]
        ]
      )
      assert.deepStrictEqual(
        result.sideEffects.map((e) => e.callId),
        ["call_0", "call_0#2"]
      )
      assertRoundTrips(result)
    })
  )

  it.effect(
    "R3.8 R11 the conversation sends a repeated id back under the call's identity, each with its result (review 126)",
    () =>
      Effect.gen(function* () {
        const { pay } = makeBank()
        const seen: Array<ReadonlyArray<Model.Message>> = []
        yield* Run.run({ goal: "pay", tools: [pay] }).pipe(
          Effect.provide(
            script(
              ScriptedModel.toolCalls(["pay", { amount: 1 }, "same"], ["pay", { amount: 2 }, "same"]),
              (request) => {
                seen.push(request.messages.slice())
                return ScriptedModel.finalAnswer("paid")
              }
            )
          )
        )
        const sent = seen[0] ?? []
        const asked = sent.flatMap((m) => (m._tag === "assistant" ? (m.toolCalls ?? []) : []))
        // Before, both went back as "same": an API takes an id once per request (OpenAI answers 400).
        assert.deepStrictEqual(
          asked.map((c) => [c.id, c.arguments]),
          [
            ["same", JSON.stringify({ amount: 1 })],
            ["same#2", JSON.stringify({ amount: 2 })]
          ]
        )
        const results = sent.filter((m) => m._tag === "tool")
        assert.deepStrictEqual(
          results.map((m) => (m._tag === "tool" ? m.toolCallId : "")),
          ["same", "same#2"]
        )
      })
  )

  it.effect("R3.8 R7 two calls with one id in a batch that both need approval can both be approved", () =>
    Effect.gen(function* () {
      const { pay, applied } = makeBank()
      const { name, description, input, output, handler, metadata } = pay
      const approved = Tool.make({ ...metadata, name, description, input, output, handler, needsApproval: true })
      const handle = yield* Run.start({ goal: "pay", tools: [approved], concurrency: 2 })
      const requested = yield* handle.events.pipe(
        Stream.filter((e): e is Event.Of<"approval.requested"> => e._tag === "approval.requested"),
        Stream.take(2),
        Stream.runCollect
      )
      const ids = requested.map((e) => e.callId)
      assert.deepStrictEqual(ids, ["dup", "dup#2"])
      const pending = yield* handle.pendingApprovals
      assert.deepStrictEqual(pending.map((p) => p.callId).sort(), ["dup", "dup#2"])
      for (const id of ids) yield* handle.approve(id)
      const result = yield* handle.result
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(applied.size, 2)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Layer.mergeAll(
          script(
            ScriptedModel.toolCalls(["pay", { amount: 1 }, "dup"], ["pay", { amount: 2 }, "dup"]),
            ScriptedModel.finalAnswer("paid")
          ),
          Approval.layerMemory
        )
      )
    )
  )

  it("R3.8 ids that are empty, too long or odd get an identity of the runtime's", async () => {
    const { pay } = makeBank()
    const result = await Effect.runPromise(
      Run.run({ goal: "pay", tools: [pay] }).pipe(
        Effect.provide(
          script(
            ScriptedModel.toolCalls(
              ["pay", { amount: 1 }, ""],
              ["pay", { amount: 2 }, "x".repeat(500)],
              ["pay", { amount: 3 }, "a b"]
            ),
            ScriptedModel.finalAnswer("paid")
          )
        )
      )
    )
    const ids = result.timeline.flatMap((e) => (e._tag === "tool.started" ? [e.callId] : []))
    assert.deepStrictEqual(ids, ["call#1", "call#2", "call#3"])
    const responded = result.timeline.find((e) => e._tag === "model.responded")
    assert.deepStrictEqual(responded?._tag === "model.responded" ? responded.callIds : [], ids)
    assert.isTrue(Option.isSome(Option.fromNullishOr(result.timeline.find((e) => e._tag === "run.finished"))))
  })
})

describe("R12 R4.2 R5.1 user code that cannot be interrupted", () => {
  const stuck = () => Effect.uninterruptible(Effect.sleep("1 hour"))
  const time = { run: "200 millis", stopGrace: "300 millis" } as const

  it.live(
    "R12 R4.2 a handler in an uninterruptible region: the run ends by deadline + stop grace, the call left behind",
    () =>
      Effect.gen(function* () {
        const started = performance.now()
        const result = yield* Run.run({ goal: "x", tools: [toolOf(stuck, { sideEffect: "read" })], time }).pipe(
          Effect.provide(callThenAnswer)
        )
        assert.isBelow(performance.now() - started, 2_000)
        assert.strictEqual(result.stopReason, "run_timeout")
        const left = result.timeline.find((e): e is Event.Of<"tool.interrupted"> => e._tag === "tool.interrupted")
        assert.strictEqual(left?.settlement, "outcome_unknown")
        assert.include(left?.detail, "still running")
        assert.include(result.detail, "stop grace of 300 ms")
        assert.strictEqual(result.timeline.at(-1)?._tag, "run.finished")
        assertRoundTrips(result)
      })
  )

  it.live(
    "R12 R7 a gate whose close cannot be interrupted holds no stop: the run ends by its deadline, the call withdrawn (review 148)",
    () =>
      Effect.gen(function* () {
        const memory = Approval.makeMemory()
        const gate: Approval.Gate = { ...memory, expire: () => Effect.as(stuck(), Option.none()) }
        const write = toolOf(() => Effect.succeed("paid"), { sideEffect: "external", needsApproval: true })
        const started = performance.now()
        const result = yield* Run.run({ goal: "x", tools: [write], time }).pipe(
          Effect.provideService(Approval.ApprovalGate, gate),
          Effect.provide(callThenAnswer)
        )
        assert.strictEqual(result.stopReason, "run_timeout")
        // Before, the stop waited on the gate's close until the stop grace left it behind.
        assert.notInclude(result.detail, "stop grace")
        assert.isBelow(performance.now() - started, 2_000)
        const decided = result.timeline.find((e) => e._tag === "approval.decided")
        assert.strictEqual(decided?._tag === "approval.decided" ? decided.decision : undefined, "withdrawn")
        assertRoundTrips(result)
      })
  )

  it.live(
    "R6.3 R12 left behind past its deadline with a plan step done: partial, as the same run stopped in time is",
    () =>
      Effect.gen(function* () {
        const look = toolOf(() => Effect.succeed("seen"), { sideEffect: "none" })
        const plan = [
          { id: "look", description: "look", required: true, criteria: [Criterion.toolSucceeded("t")] },
          { id: "finish", description: "finish", required: true, criteria: [Criterion.toolSucceeded("never")] }
        ]
        const model = ScriptedModel.layer([
          ScriptedModel.toolCall("t", {}),
          ScriptedModel.toolCall("slow", {}),
          ScriptedModel.finalAnswer("done")
        ])
        const ending = (slow: () => Effect.Effect<unknown>) =>
          Run.run({
            goal: "x",
            tools: [look, toolOf(slow, { name: "slow" })],
            time,
            validation: { plan }
          }).pipe(Effect.provide(model))
        const leftBehind = yield* ending(stuck)
        const inTime = yield* ending(() => Effect.sleep("1 hour").pipe(Effect.as("late")))
        for (const result of [leftBehind, inTime]) {
          assert.strictEqual(result.stopReason, "run_timeout")
          assert.strictEqual(result.status, "partial", result.detail)
          assert.deepStrictEqual(
            result.completed.map((c) => c.id),
            ["look"]
          )
        }
        assert.include(leftBehind.detail, "left behind")
        assert.strictEqual(leftBehind.timeline.at(-1)?._tag, "run.finished")
        // The same with an approval gate that will not stop asking: its request is withdrawn, the run judged.
        const stuckGate: Approval.Gate = {
          request: () => stuck().pipe(Effect.as(Approval.approved("ops"))),
          decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
          pending: Effect.succeed([])
        }
        const gated = yield* Run.run({
          goal: "x",
          tools: [look, toolOf(() => Effect.succeed("ok"), { name: "slow", needsApproval: true })],
          time,
          validation: { plan }
        }).pipe(Effect.provide(model), Effect.provideService(Approval.ApprovalGate, stuckGate))
        assert.strictEqual(gated.status, "partial", gated.detail)
        const withdrawn = gated.timeline.find((e) => e._tag === "approval.decided")
        assert.strictEqual(withdrawn?._tag === "approval.decided" ? withdrawn.decision : undefined, "withdrawn")
        const phases = gated.timeline.flatMap((e) => (e._tag === "state.changed" ? [e.to] : []))
        assert.deepStrictEqual(phases.slice(-3), ["tool_executing", "validating", "partial"])
      })
  )

  it.live(
    "R5.2 R12 a permission check in an uninterruptible region: left behind, the write it held never ran and is not pending",
    () =>
      Effect.gen(function* () {
        const neverDecides = Layer.succeed(Permission.Permission, { check: () => Effect.as(stuck(), Permission.allow) })
        const result = yield* Run.run({
          goal: "x",
          tools: [toolOf(() => Effect.succeed("done"), { sideEffect: "write" })],
          time
        }).pipe(Effect.provide(Layer.mergeAll(callThenAnswer, neverDecides)))
        assert.strictEqual(result.stopReason, "run_timeout")
        const left = result.timeline.find((e): e is Event.Of<"tool.interrupted"> => e._tag === "tool.interrupted")
        assert.strictEqual(left?.settlement, "cancelled")
        assert.include(left?.detail, "never ran")
        // Review 144: it said "still running: …; its handler had not started: it never ran".
        assert.notInclude(left?.detail, "still running")
        assert.deepStrictEqual(result.pendingActions, [])
      })
  )

  it.live(
    "R5.1 R12 cancelling a run whose model call cannot be interrupted returns cancelled within the stop grace",
    () =>
      Effect.gen(function* () {
        const handle = yield* Run.start({ goal: "x", tools: noTools, time: { stopGrace: "300 millis" } })
        yield* Effect.sleep("20 millis")
        const started = performance.now()
        const result = yield* handle.cancel
        assert.isBelow(performance.now() - started, 2_000)
        assert.strictEqual(result.status, "cancelled")
        assertRoundTrips(result)
        // The log is closed: what the stuck code does later changes nothing.
        const length = result.timeline.length
        yield* Effect.sleep("50 millis")
        assert.strictEqual(result.timeline.length, length)
      }).pipe(Effect.scoped, Effect.provide(modelLayer(stuck)))
  )

  it.live(
    "R9 R12 a run left behind after the stop grace ends as any run does: its result in its journal, on its span, in its metrics",
    () => {
      const { tracer, spans } = memoryTracer()
      return Effect.gen(function* () {
        const cancelled = Metric.withAttributes(Metrics.runs, { status: "cancelled", stop_reason: "cancelled" })
        const before = (yield* Metric.value(cancelled)).count
        const journal = yield* Journal.Journal
        const handle = yield* Run.start({
          goal: "x",
          runId: "left-behind",
          tools: [toolOf(stuck, { sideEffect: "read" })],
          time: { stopGrace: "300 millis" }
        })
        yield* Effect.sleep("50 millis")
        const result = yield* handle.cancel
        assert.strictEqual(result.status, "cancelled")
        const stored = yield* journal.read("left-behind")
        const committed = Option.flatMap(stored, (run) => run.result)
        assert.isTrue(Option.isSome(committed), "the result is in the journal")
        assert.strictEqual(Option.getOrUndefined(stored)?.events.at(-1)?._tag, "run.finished")
        const run = spans.find((s) => s.name === span.run)
        assert.strictEqual(run?.attributes.get(runtime.stopReason), "cancelled")
        assert.strictEqual((yield* Metric.value(cancelled)).count, before + 1)
      }).pipe(
        Effect.withTracer(tracer),
        Effect.scoped,
        Effect.provide(Layer.merge(Journal.layerMemory, callThenAnswer))
      )
    }
  )
})
