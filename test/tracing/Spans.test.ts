import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Effect, Exit, Layer, Redacted, Schedule, Schema, Stream, Tracer } from "effect"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as Model from "../../src/model/Model.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunHost from "../../src/run/RunHost.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { errorType, genAi, runtime, span } from "../../src/tracing/Attributes.ts"
import * as Tracing from "../../src/tracing/Tracing.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { drive } from "../support/clock.ts"
import { crashThenResume, layers, pay } from "../support/restart.ts"
import { deaf, echo } from "../support/tools.ts"
import { memoryTracer } from "../support/tracer.ts"

/** A model that fails its first call with a 429 (retried), then with a 400 (not retryable: the run falls back). */
const primary = (): Model.Model["Service"] => {
  let calls = 0
  return {
    generate: () =>
      Effect.suspend(() => {
        calls++
        return Effect.fail(FailureBoundary.http({ status: calls === 1 ? 429 : 400, now: 0 }))
      })
  }
}

const deploy = Tool.make({
  name: "deploy",
  description: "deploys, once a person approves",
  input: Schema.Struct({ env: Schema.String }),
  output: Schema.String,
  sideEffect: "external",
  idempotent: true,
  needsApproval: true,
  handler: ({ env }) => Effect.succeed(`deployed to ${env}`)
})

const remove = Tool.make({
  name: "remove",
  description: "removes a file",
  input: Schema.Struct({ path: Schema.String }),
  output: Schema.String,
  sideEffect: "write",
  handler: () => Effect.succeed("removed")
})

const backup = (): Model.Fallback => ({
  name: "backup",
  model: ScriptedModel.make([
    ScriptedModel.toolCalls(["deploy", { env: "prod" }, "call_deploy"], ["remove", { path: "/etc" }, "call_remove"]),
    ScriptedModel.finalAnswer("deployed")
  ])
})

/** The run of the scenario: a retry, a fallback, an approval and a blocked call. */
const scenario = drive(
  Effect.gen(function* () {
    const handle = yield* Run.start({
      goal: "deploy",
      tools: [deploy, remove],
      modelName: "primary",
      recovery: { backoff: Recovery.backoff({ jitter: false }), fallbackModels: [backup()] }
    })
    yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
    // The gate takes the wait up just after the event: the approval is retried until it finds it.
    yield* Effect.retry(handle.approve("call_deploy", { by: "ada" }), {
      times: 100,
      schedule: Schedule.spaced("1 millis")
    })
    return yield* handle.result
  })
).pipe(
  Effect.provide(Permission.layer({ allowTools: ["deploy"] })),
  Effect.provide(Layer.mergeAll(Layer.succeed(Model.Model, primary()), NodeServices.layer, Approval.layerMemory))
)

const named = (spans: ReadonlyArray<Tracer.NativeSpan>, name: string) => spans.filter((s) => s.name === name)
const parentOf = (s: Tracer.NativeSpan) => (s.parent._tag === "Some" ? s.parent.value : undefined)
const attr = (s: Tracer.NativeSpan | undefined, key: string) => s?.attributes.get(key)

describe("issue 15 spans", () => {
  it.effect(
    "invoke_agent > step > chat {model} (retries siblings, error.type the failure code), execute_tool {tool} for attempts and refusals, backoff, approval, validation",
    () =>
      Effect.gen(function* () {
        const { tracer, spans } = memoryTracer()
        const result = yield* Effect.withTracer(scenario, tracer)
        assert.strictEqual(result.status, "completed")

        // The run: one root span with its ending.
        const [run] = named(spans, span.run)
        assert.isDefined(run)
        assert.strictEqual(named(spans, span.run).length, 1)
        assert.strictEqual(run?.status._tag, "Ended")
        assert.strictEqual(attr(run, genAi.operation), "invoke_agent")
        assert.strictEqual(attr(run, genAi.conversationId), result.runId)
        assert.strictEqual(attr(run, runtime.status), "completed")
        assert.strictEqual(attr(run, runtime.stopReason), result.stopReason)
        assert.strictEqual(attr(run, runtime.policy), result.policy)
        assert.strictEqual(attr(run, runtime.iterations), result.counters.iterations)
        assert.strictEqual(attr(run, runtime.toolCalls), result.counters.toolCalls)
        assert.strictEqual(attr(run, genAi.requestModel), "backup")

        // One step span per iteration, children of the run.
        const steps = named(spans, span.step)
        assert.strictEqual(steps.length, result.counters.iterations)
        assert.deepStrictEqual(
          steps.map((s) => attr(s, runtime.iteration)),
          steps.map((_, i) => i + 1)
        )
        for (const s of steps) assert.strictEqual(parentOf(s), run)
        const [first, second] = steps

        // The first step: two primary attempts (429 retried, then 400), siblings, then the backup's answer.
        const chats = spans.filter((s) => s.name.startsWith("chat "))
        assert.deepStrictEqual(
          chats.map((s) => [s.name, attr(s, runtime.iteration), attr(s, runtime.attempt), attr(s, errorType)]),
          [
            ["chat primary", 1, 1, "http_429"],
            ["chat primary", 1, 2, "http_400"],
            ["chat backup", 1, 1, undefined],
            ["chat backup", 2, 1, undefined]
          ]
        )
        for (const s of chats.slice(0, 3)) assert.strictEqual(parentOf(s), first)
        assert.strictEqual(parentOf(chats[3] as Tracer.NativeSpan), second)
        assert.strictEqual(attr(chats[2], genAi.operation), "chat")
        assert.strictEqual(typeof attr(chats[2], genAi.inputTokens), "number")
        // A call to the model's service is a client span (GenAI conventions); the run's is internal.
        assert.deepStrictEqual([...new Set(chats.map((s) => s.kind))], ["client"])
        assert.strictEqual(run?.kind, "internal")
        // A completed run's span ends successfully.
        assert.isTrue(run?.status._tag === "Ended" && Exit.isSuccess(run.status.exit))

        // The backoff between the attempts, in the step, with its cause.
        const [backoff] = named(spans, span.backoff)
        assert.strictEqual(parentOf(backoff as Tracer.NativeSpan), first)
        assert.strictEqual(attr(backoff, runtime.cause), "http_429")
        assert.strictEqual(attr(backoff, runtime.attempt), 1)
        // What the wait is for, under the backoff's own name: no tool outcome on a model's retry.
        assert.strictEqual(attr(backoff, runtime.backoffKind), "provider_retry")
        assert.isFalse(backoff?.attributes.has(runtime.outcome))

        // The approval wait and the approved call's attempt; the refused call's span.
        const [approval] = named(spans, span.approval)
        assert.strictEqual(attr(approval, genAi.toolCallId), "call_deploy")
        assert.strictEqual(attr(approval, runtime.approval), "approved")
        const [deployed] = named(spans, span.tool("deploy"))
        assert.strictEqual(attr(deployed, runtime.outcome), "succeeded")
        assert.strictEqual(attr(deployed, runtime.attempt), 1)
        assert.strictEqual(attr(deployed, runtime.sideEffect), "external")
        assert.strictEqual(attr(deployed, genAi.toolCallId), "call_deploy")
        const [blocked] = named(spans, span.tool("remove"))
        assert.strictEqual(attr(blocked, runtime.outcome), "blocked")
        assert.strictEqual(attr(blocked, runtime.attempt), 0)
        assert.strictEqual(attr(blocked, runtime.sideEffect), "write")
        const refusal = result.timeline.find((e) => e._tag === "tool.blocked")
        assert.strictEqual(attr(blocked, errorType), refusal?._tag === "tool.blocked" ? refusal.error.code : "")
        for (const s of [approval, deployed, blocked]) assert.strictEqual(parentOf(s as Tracer.NativeSpan), first)

        // Validation, in the run.
        const [validation] = named(spans, span.validation)
        assert.strictEqual(parentOf(validation as Tracer.NativeSpan), run)
        assert.strictEqual(attr(validation, runtime.checks), result.checks.length)

        // Every span ended; no content by default.
        for (const s of spans) assert.strictEqual(s.status._tag, "Ended", s.name)
        for (const s of spans) {
          for (const key of [genAi.inputMessages, genAi.outputMessages, genAi.toolArguments]) {
            assert.isFalse(s.attributes.has(key), `${s.name} carries ${key}`)
          }
        }
      })
  )

  it.effect("R13 a run that does not complete ends its span failed, its error.type the stop reason", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const hang = Tool.make({
        name: "hang",
        description: "never returns",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "none",
        handler: () => Effect.never
      })
      const result = yield* Effect.withTracer(
        drive(Run.run({ goal: "wait", tools: [hang], time: { run: "1 second" } })),
        tracer
      ).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("hang", {})])))
      assert.strictEqual(result.stopReason, "run_timeout")
      const [run] = named(spans, span.run)
      assert.strictEqual(attr(run, errorType), "run_timeout")
      // Failed, as the conventions ask of an operation that ended in an error; only its type is said.
      assert.isTrue(run?.status._tag === "Ended" && Exit.isFailure(run.status.exit))
      const exit = run?.status._tag === "Ended" ? run.status.exit : undefined
      assert.include(exit !== undefined && Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "run_timeout")
    })
  )

  it.effect(
    "R13 R2.1 a chat span the run deadline or a cancel cut off carries what the answer cost so far, as the run counts it",
    () =>
      Effect.gen(function* () {
        const { tracer, spans } = memoryTracer()
        const paying = Layer.succeed(Model.Model, {
          generate: () =>
            Effect.never.pipe(
              Effect.onInterrupt(() => Model.reportCutOff({ inputTokens: 100, outputTokens: 7, costUsd: 0.5 }))
            )
        })
        const result = yield* Effect.withTracer(
          drive(Run.run({ goal: "wait", tools: [], time: { run: "100 millis" } })),
          tracer
        ).pipe(Effect.provide(paying))
        assert.strictEqual(result.stopReason, "run_timeout")
        assert.strictEqual(result.counters.inputTokens, 100)
        const [chat] = spans.filter((s) => s.name.startsWith("chat"))
        assert.deepStrictEqual(
          [attr(chat, genAi.inputTokens), attr(chat, genAi.outputTokens), attr(chat, runtime.costUsd)],
          [100, 7, 0.5]
        )
        // A cancel's cut-off is counted by the run with what it cost: and by its span.
        const cancelled = memoryTracer()
        const stopped = yield* Effect.withTracer(
          drive(
            Effect.gen(function* () {
              const handle = yield* Run.start({ goal: "wait", tools: [] })
              yield* Effect.sleep("50 millis")
              return yield* handle.cancel
            }).pipe(Effect.scoped)
          ),
          cancelled.tracer
        ).pipe(Effect.provide(paying))
        assert.strictEqual(stopped.stopReason, "cancelled")
        assert.strictEqual(stopped.counters.inputTokens, 100)
        const [cut] = cancelled.spans.filter((s) => s.name.startsWith("chat"))
        assert.deepStrictEqual(
          [attr(cut, genAi.inputTokens), attr(cut, genAi.outputTokens), attr(cut, runtime.costUsd)],
          [100, 7, 0.5]
        )
      })
  )

  it.effect("no tracer installed: the run makes no span (the native tracer is never asked)", () =>
    Effect.gen(function* () {
      const result = yield* scenario
      assert.strictEqual(result.status, "completed")
      // A span the runtime made would be the current span of the code the run calls: it saw none.
      let seen: unknown = "unset"
      const probe = Tool.make({
        name: "probe",
        description: "looks at the current span",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        handler: () =>
          Effect.map(Effect.option(Effect.currentSpan), (current) => {
            seen = current._tag
            return "ok"
          })
      })
      yield* Run.run({ goal: "probe", tools: [probe] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("probe", {}), ScriptedModel.finalAnswer("done")]))
      )
      assert.strictEqual(seen, "None")
    })
  )

  it.live(
    "R13 a journaled run with an approval makes only the runtime's spans: the journal's operations make none",
    () =>
      Effect.gen(function* () {
        const deploy = Tool.make({
          name: "deploy",
          description: "deploys",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "external",
          idempotent: true,
          needsApproval: true,
          handler: () => Effect.succeed("ok")
        })
        const scenario = Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "g", tools: [deploy] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          yield* Effect.sleep("100 millis")
          yield* handle.approve("call_1", { by: "ada" })
          return yield* handle.result
        }).pipe(
          Effect.scoped,
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("deploy", {}), ScriptedModel.finalAnswer("x")])),
          Effect.provide(JournalApprovals.layer({ pollInterval: "20 millis" })),
          Effect.provide(Journal.layerMemory)
        )
        const { tracer, spans } = memoryTracer()
        const result = yield* Effect.withTracer(scenario, tracer)
        assert.strictEqual(result.stopReason, "goal_reached")
        const names = new Set(spans.map((s) => s.name))
        assert.isTrue(names.has(span.tool("deploy")))
        assert.deepStrictEqual(
          [...names].filter((name) => name.startsWith("Journal")),
          []
        )
      })
  )

  it.effect(
    "R12 R13 a run whose fiber a value that is no Effect killed ends every span it left open, with the run's stop reason",
    () =>
      Effect.gen(function* () {
        const broken = Tool.make({
          name: "broken",
          description: "yields a value that is no Effect, deep inside",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          // Erased on purpose: the runtime's fiber meets a value that is no Effect when it runs this.
          handler: () => Effect.flatMap(Effect.yieldNow, () => 42 as unknown as Effect.Effect<string>)
        })
        const { tracer, spans } = memoryTracer()
        const result = yield* Effect.withTracer(
          Run.run({ goal: "g", tools: [broken] }).pipe(
            Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("broken", {}), ScriptedModel.finalAnswer("x")]))
          ),
          tracer
        )
        assert.strictEqual(result.stopReason, "internal_error")
        for (const s of spans) assert.strictEqual(s.status._tag, "Ended", s.name)
        const [call] = named(spans, span.tool("broken"))
        assert.strictEqual(attr(call, errorType), "internal_error")
      })
  )

  const login = Tool.make({
    name: "login",
    description: "logs in",
    input: Schema.Struct({ user: Schema.String, password: Schema.RedactedFromValue(Schema.String) }),
    output: Schema.String,
    sideEffect: "read",
    handler: () => Effect.succeed("ok")
  })
  const secret = "pw-SPAN-SECRET-1"
  const loginRun = Run.run({ goal: "log in", tools: [login] }).pipe(
    Effect.provide(
      ScriptedModel.layer([
        ScriptedModel.toolCall("login", { user: "ada", password: secret }),
        ScriptedModel.finalAnswer("in")
      ])
    )
  )
  const spanText = (spans: ReadonlyArray<Tracer.NativeSpan>) =>
    JSON.stringify(spans.map((s) => ({ name: s.name, attributes: Object.fromEntries(s.attributes) })))

  it.effect("R3.1 secrets never reach a span: content off by default", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      yield* Effect.withTracer(loginRun, tracer)
      assert.isAbove(spans.length, 0)
      assert.notInclude(spanText(spans), secret)
    })
  )

  it.effect("R3.1 a tool the model made up is named for no tool; its name, cut and printable, only with content", () =>
    Effect.gen(function* () {
      const invented = `\u202esk-live-${"k".repeat(5000)}`
      const run = Run.run({ goal: "g", tools: [] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall(invented, {}), ScriptedModel.finalAnswer("done")]))
      )
      const off = memoryTracer()
      yield* Effect.withTracer(run, off.tracer)
      const [refusal] = named(off.spans, span.tool("(unknown tool)"))
      assert.strictEqual(attr(refusal, genAi.toolName), "(unknown tool)")
      assert.notInclude(spanText(off.spans), "sk-live")
      const on = memoryTracer()
      yield* Effect.withTracer(run, on.tracer).pipe(Effect.provide(Tracing.layerRecordContent()))
      const [shown] = named(on.spans, span.tool("(unknown tool)"))
      const name = String(attr(shown, genAi.toolName))
      assert.isTrue(name.startsWith("\ufffdsk-live-k") && name.length === 65, name.slice(0, 80))
    })
  )

  it.effect(
    "R12 R13 content opted in never changes a run: a model's arguments that are no JSON (a BigInt, a cycle) end as untraced",
    () =>
      Effect.gen(function* () {
        const cyclic: Record<string, unknown> = { a: 1 }
        cyclic.self = cyclic
        for (const args of [{ text: 10n }, { text: cyclic }]) {
          // A model service that answers outside its type: arguments already parsed, and no JSON.
          const model = () => {
            let n = 0
            return Layer.succeed(Model.Model, {
              generate: () =>
                Effect.sync(() =>
                  n++ === 0
                    ? Model.response({ toolCalls: [{ id: "c1", name: "echo", arguments: args as never }] })
                    : Model.response({ text: "done" })
                )
            })
          }
          const run = Run.run({ goal: "g", tools: [echo] })
          const plain = yield* run.pipe(Effect.provide(model()))
          const { tracer, spans } = memoryTracer()
          const traced = yield* Effect.withTracer(run, tracer).pipe(
            Effect.provide(model()),
            Effect.provide(Tracing.layerRecordContent())
          )
          assert.strictEqual(traced.stopReason, plain.stopReason)
          assert.strictEqual(traced.detail, plain.detail)
          const [chat] = spans.filter((s) => s.name.startsWith("chat ") && attr(s, runtime.iteration) === 1)
          assert.include(String(attr(chat, genAi.outputMessages)), "(not JSON: ")
        }
      })
  )

  it.effect(
    "R13 content opted in: the messages are written as the GenAI conventions have them, role and parts (review 187)",
    () =>
      Effect.gen(function* () {
        const { tracer, spans } = memoryTracer()
        yield* Effect.withTracer(
          Run.run({ goal: "say hi", tools: [echo] }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ScriptedModel.toolCall("echo", { text: "hi" }, "c1"),
                ScriptedModel.finalAnswer("done")
              ])
            )
          ),
          tracer
        ).pipe(Effect.provide(Tracing.layerRecordContent()))
        const chats = spans.filter((s) => s.name.startsWith("chat "))
        const [first, second] = chats.map((s) => ({
          input: JSON.parse(String(attr(s, genAi.inputMessages))),
          output: JSON.parse(String(attr(s, genAi.outputMessages)))
        }))
        assert.deepStrictEqual(
          first?.input.map((m: { readonly role: string }) => m.role),
          ["user"]
        )
        assert.deepStrictEqual(first?.input[0].parts, [{ type: "text", content: "say hi" }])
        assert.deepStrictEqual(first?.output, [
          {
            role: "assistant",
            parts: [{ type: "tool_call", id: "c1", name: "echo", arguments: { text: "hi" } }],
            finish_reason: "tool_call"
          }
        ])
        const response = second?.input.find((m: { readonly role: string }) => m.role === "tool")
        assert.strictEqual(response?.parts[0]?.type, "tool_call_response")
        assert.strictEqual(response?.parts[0]?.id, "c1")
        assert.deepStrictEqual(second?.output[0].parts, [{ type: "text", content: "done" }])
      })
  )

  it.effect("R3.1 content opted in: the tool's arguments are on its span, its secrets masked", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      yield* Effect.withTracer(loginRun, tracer).pipe(Effect.provide(Tracing.layerRecordContent()))
      const [call] = named(spans, span.tool("login"))
      const args = String(attr(call, genAi.toolArguments))
      assert.include(args, "ada")
      assert.notInclude(args, secret)
      const [answer] = spans.filter((s) => s.name.startsWith("chat ") && attr(s, runtime.iteration) === 2)
      assert.include(String(attr(answer, genAi.outputMessages)), "in")
    })
  )
})

describe("issue 15 spans say why a call failed by its type, never by its message", () => {
  const secret = "pw-EXCEPTION-SECRET-2"
  /** What an exporter writes of a span: its name, attributes and how it ended (its `exception` event). */
  const exported = (spans: ReadonlyArray<Tracer.NativeSpan>) =>
    JSON.stringify(
      spans.map((s) => ({
        name: s.name,
        attributes: Object.fromEntries(s.attributes),
        end: s.status._tag === "Ended" && Exit.isFailure(s.status.exit) ? Cause.pretty(s.status.exit.cause) : ""
      }))
    )

  it.effect("R3.1 a tool failure quoting its Redacted argument: masked on the timeline, absent from every span", () =>
    Effect.gen(function* () {
      const login = Tool.make({
        name: "login",
        description: "logs in",
        input: Schema.Struct({ password: Schema.RedactedFromValue(Schema.String) }),
        output: Schema.String,
        sideEffect: "read",
        handler: ({ password }) =>
          Effect.fail(
            new Failure.Permanent({
              source: "tool",
              category: "other",
              code: "bad_login",
              attempts: 1,
              hint: `the password ${Redacted.value(password)} was refused`
            })
          )
      })
      const { tracer, spans } = memoryTracer()
      const result = yield* Effect.withTracer(
        Run.run({ goal: "log in", tools: [login] }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              ScriptedModel.toolCall("login", { password: secret }),
              ScriptedModel.finalAnswer("no")
            ])
          )
        ),
        tracer
      )
      // The failure as the timeline keeps it is masked (the model's own message keeps what it wrote).
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.isDefined(failed)
      assert.notInclude(JSON.stringify(failed), secret)
      const [call] = named(spans, span.tool("login"))
      assert.strictEqual(attr(call, errorType), "bad_login")
      assert.include(exported(spans), "bad_login")
      assert.notInclude(exported(spans), secret)
    })
  )

  it.effect("R3.1 a model that dies quoting its key: the key is in no span", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const model = Layer.succeed(Model.Model, {
        generate: () => Effect.die(new Error(`401 from the provider for key sk-${secret}`))
      })
      const result = yield* Effect.withTracer(Run.run({ goal: "x", tools: [] }).pipe(Effect.provide(model)), tracer)
      assert.strictEqual(result.status, "failed")
      assert.isAbove(named(spans, span.chat("model")).length, 0)
      assert.notInclude(exported(spans), secret)
    })
  )

  it.effect(
    "R12 a failure outside the error type with a free-text `reason`: error.type is its tag, the text in no span",
    () =>
      Effect.gen(function* () {
        class ProviderError extends Data.TaggedError("ProviderError")<{ readonly reason: string }> {}
        const model = Layer.succeed(Model.Model, {
          generate: () => Effect.fail(new ProviderError({ reason: `401: key sk-${secret} is not valid` })) as never
        })
        const { tracer, spans } = memoryTracer()
        yield* Effect.withTracer(Run.run({ goal: "x", tools: [] }).pipe(Effect.provide(model)), tracer)
        const chats = named(spans, span.chat("model"))
        assert.isAbove(chats.length, 0)
        for (const chat of chats) assert.strictEqual(attr(chat, errorType), "ProviderError")
        assert.notInclude(exported(spans), secret)
        // A tag that is not an identifier, or a Failure's code that is not, is named by a fixed word.
        assert.strictEqual(Tracing.errorTypeOf(Cause.fail({ _tag: `key ${secret}`, reason: "x" })), "error")
        const coded = new Failure.Permanent({
          source: "tool",
          category: "other",
          code: `${secret}!`,
          attempts: 1,
          hint: ""
        })
        assert.strictEqual(Tracing.errorTypeOf(Cause.fail(coded)), "failure")
        assert.strictEqual(Tracing.errorTypeOf(Cause.die(new Error(secret))), "defect")
      })
  )

  it.live("the run's span has ended when Run.run returns, on a run_timeout too", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const never = Layer.succeed(Model.Model, { generate: () => Effect.never })
      const result = yield* Effect.withTracer(
        Run.run({ goal: "x", tools: [], time: { run: "100 millis" } }).pipe(Effect.provide(never)),
        tracer
      )
      assert.strictEqual(result.stopReason, "run_timeout")
      const [run] = named(spans, span.run)
      assert.strictEqual(run?.status._tag, "Ended")
      assert.strictEqual(attr(run, errorType), "run_timeout")
    })
  )

  it.live(
    "R12 a run left behind past its stop grace: its span ends with its result (the stuck tool's stays open, a caller's span is not touched)",
    () =>
      Effect.gen(function* () {
        const { tracer, spans } = memoryTracer()
        // A handler that will not be interrupted: it outlives the run's stop grace.
        const stuck = deaf("stuck", 2_000)
        const model = ScriptedModel.layer([ScriptedModel.toolCall("stuck", {}), ScriptedModel.finalAnswer("done")])
        const result = yield* Effect.withTracer(
          Run.run({ goal: "x", tools: [stuck], time: { run: "100 millis", stopGrace: "100 millis" } }).pipe(
            Effect.provide(model)
          ),
          tracer
        )
        assert.strictEqual(result.stopReason, "run_timeout")
        assert.include(result.detail, "left behind")
        const [run] = named(spans, span.run)
        assert.strictEqual(run?.status._tag, "Ended", "the run's span ends when its result is given")
        assert.strictEqual(attr(run, errorType), "run_timeout")
        const tool = spans.find((s) => s.name.startsWith("execute_tool"))
        assert.strictEqual(tool?.status._tag, "Started", "the handler still runs: its span is open")
        // No tracer installed: the run makes no span, and the caller's own span is left to its caller.
        const mine = yield* Effect.withSpan(
          Effect.flatMap(
            Run.run({ goal: "x", tools: [stuck], time: { run: "100 millis", stopGrace: "100 millis" } }).pipe(
              Effect.provide(model)
            ),
            () => Effect.map(Effect.currentSpan, (inside) => inside.status._tag)
          ),
          "mine"
        )
        assert.strictEqual(mine, "Started", "the caller's span is still open inside it")
      })
  )

  it.effect("an approval span names the decision: rejected", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const result = yield* Effect.gen(function* () {
        const handle = yield* Run.start({ goal: "deploy", tools: [deploy] })
        const [request] = yield* Effect.flatMap(
          Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested")),
          () => handle.pendingApprovals
        )
        if (request !== undefined) yield* handle.reject(request.callId, "not today")
        return yield* handle.result
      }).pipe(
        Effect.scoped,
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("deploy", { env: "prod" })])),
        Effect.withTracer(tracer)
      )
      assert.strictEqual(result.stopReason, "approval_rejected")
      const [approval] = named(spans, span.approval)
      assert.strictEqual(attr(approval, runtime.approval), "rejected")
      assert.strictEqual(attr(approval, errorType), "approval_rejected")
    })
  )

  it.effect("the validation span counts the typed output's check with the others", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const result = yield* Effect.withTracer(
        Run.run({ goal: "x", tools: [], output: Schema.Struct({ n: Schema.Number }) }).pipe(
          Effect.provide(ScriptedModel.layer(Array.from({ length: 6 }, () => ScriptedModel.finalAnswer("not json"))))
        ),
        tracer
      )
      assert.strictEqual(result.stopReason, "validation_failed", result.detail)
      const last = named(spans, span.validation).at(-1)
      const failed = result.timeline.filter((e) => e._tag === "validation.checked" && !e.check.passed).length
      assert.isAbove(failed, 0)
      assert.strictEqual(attr(last, runtime.failedChecks), 1)
    })
  )
})

describe("the validation span's failed checks (R13)", () => {
  it.effect(
    "R13 R6.3 an optional step not done is no failed check: a completed run's span counts none (review 118)",
    () =>
      Effect.gen(function* () {
        const { tracer, spans } = memoryTracer()
        const result = yield* Effect.withTracer(
          Run.run({
            goal: "x",
            tools: [],
            validation: {
              plan: [Validation.step("polish", "polish", [Criterion.toolSucceeded("polish")], { required: false })]
            }
          }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")]))),
          tracer
        )
        assert.strictEqual(result.status, "completed", result.detail)
        const last = named(spans, span.validation).at(-1)
        assert.isAtLeast(Number(attr(last, runtime.checks)), 1)
        assert.strictEqual(attr(last, runtime.failedChecks), 0)
      })
  )
})

describe("issue 15 spans of a resumed run", () => {
  it.effect("R9 the rest of the iteration a crash cut is a step span of that iteration, the next one its own", () =>
    Effect.gen(function* () {
      const payment = pay(true)
      const { tracer, spans } = memoryTracer()
      // Killed after the payment's intent record (commit 3): the resumed run finishes iteration 1.
      const { resumed } = yield* Effect.withTracer(
        crashThenResume({ crashAt: { commit: 3, when: "after" } }, [payment.tool]),
        tracer
      )
      assert.strictEqual(resumed.status, "completed")
      const runs = named(spans, span.run)
      assert.strictEqual(runs.length, 2)
      const steps = named(spans, span.step).filter((s) => parentOf(s) === runs[1])
      assert.deepStrictEqual(
        steps.map((s) => attr(s, runtime.iteration)),
        [1, 2]
      )
      // The payment the resumed run made is inside iteration 1's step.
      const inResumed = named(spans, span.tool("pay")).filter((s) => parentOf(s) === steps[0])
      assert.isAbove(inResumed.length, 0)
    }).pipe(Effect.provide(layers))
  )
})

describe("a tracer that breaks (R13, R12)", () => {
  /** The native tracer, but the spans named `where` break as `how` says: made, annotated or ended. */
  const breaking = (how: "span" | "attribute" | "end", where: string) =>
    Tracer.make({
      span(options) {
        if (how === "span" && options.name.startsWith(where)) throw new Error("tracer span() broke")
        const made = new Tracer.NativeSpan(options)
        if (!options.name.startsWith(where)) return made
        if (how === "attribute") {
          made.attribute = () => {
            throw new Error("tracer attribute() broke")
          }
        }
        if (how === "end") {
          made.end = () => {
            throw new Error("tracer end() broke")
          }
        }
        return made
      }
    })

  it.live(
    "R13 R12 a tracer that throws making, annotating or ending a span changes nothing of the run (review 130)",
    () =>
      Effect.gen(function* () {
        for (const how of ["span", "attribute", "end"] as const) {
          for (const where of [span.run, span.step, "chat", span.tool("echo"), span.validation]) {
            // Before, a root span that could not be made held the run for good; the others failed it.
            const result = yield* Run.run({ goal: "x", tools: [echo], time: { run: "5 seconds" } }).pipe(
              Effect.provide(
                ScriptedModel.layer([ScriptedModel.toolCall("echo", { text: "a" }), ScriptedModel.finalAnswer("done")])
              ),
              Effect.withTracer(breaking(how, where)),
              Effect.timeoutOrElse({ duration: "8 seconds", orElse: () => Effect.die(`${how} at ${where}: no result`) })
            )
            assert.deepStrictEqual(
              [how, where, result.status, result.stopReason],
              [how, where, "completed", "goal_reached"]
            )
          }
        }
      })
  )
})

describe("Spans of a model call cut off with what it cost (R13, R2.1)", () => {
  it.effect(
    "R13 R12 a cut-off usage that is no Model.Usage reaches neither the span nor the counters (review 151)",
    () =>
      Effect.gen(function* () {
        for (const usage of [
          { inputTokens: Number.NaN, outputTokens: 7, costUsd: 0.5 },
          { inputTokens: { secret: "sk-LEAK" }, outputTokens: 7 },
          { inputTokens: -5, outputTokens: 7, costUsd: Number.POSITIVE_INFINITY }
        ]) {
          const { tracer, spans } = memoryTracer()
          const cutOff = Layer.succeed(Model.Model, {
            generate: () =>
              Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff(usage as unknown as Model.Usage)))
          })
          const result = yield* Effect.withTracer(
            drive(Run.run({ goal: "wait", tools: [], time: { run: "100 millis" } })),
            tracer
          ).pipe(Effect.provide(cutOff))
          assert.strictEqual(result.stopReason, "run_timeout")
          const chat = spans.find((s) => s.name.startsWith("chat"))
          const attributes = Object.fromEntries(chat?.attributes ?? [])
          // Before, the span carried NaN, -5, Infinity or the object as given, the counters none of it.
          assert.isUndefined(attributes[genAi.inputTokens], JSON.stringify(usage))
          assert.isUndefined(attributes[runtime.costUsd], JSON.stringify(usage))
          assert.strictEqual(result.counters.inputTokens, 0)
        }
      })
  )

  it.effect("R13 R2.1 a valid cut-off usage is on the span as the run counts it", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const cutOff = Layer.succeed(Model.Model, {
        generate: () =>
          Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff({ inputTokens: 40, outputTokens: 7 })))
      })
      const result = yield* Effect.withTracer(
        drive(Run.run({ goal: "wait", tools: [], time: { run: "100 millis" } })),
        tracer
      ).pipe(Effect.provide(cutOff))
      const chat = spans.find((s) => s.name.startsWith("chat"))
      assert.strictEqual(Object.fromEntries(chat?.attributes ?? [])[genAi.inputTokens], 40)
      assert.strictEqual(result.counters.inputTokens, 40)
    })
  )
})

describe("Spans of a hosted run parked on an approval (R13, R9.3)", () => {
  it.effect("R13 the parked wait's span says pending, the woken one's approved; never withdrawn (review 151)", () =>
    Effect.gen(function* () {
      const { tracer, spans } = memoryTracer()
      const payNeedingApproval = Tool.make({
        name: "pay",
        description: "Pays an amount.",
        input: Schema.Struct({ amount: Schema.Number }),
        output: Schema.String,
        sideEffect: "external",
        needsApproval: true,
        handler: ({ amount }) => Effect.succeed(`r-${amount}`)
      })
      const options = { goal: "pay 5", tools: [payNeedingApproval] }
      assert.strictEqual((yield* Effect.withTracer(RunHost.drive("k1", options), tracer))._tag, "Parked")
      const journal = yield* Journal.Journal
      yield* JournalApprovals.make(journal).decide("k1", "c1", Approval.approved("ops"))
      assert.strictEqual((yield* Effect.withTracer(RunHost.drive("k1", options), tracer))._tag, "Finished")
      const decisions = spans.filter((s) => s.name === span.approval).map((s) => s.attributes.get(runtime.approval))
      // Before: ["withdrawn", "approved"], the call withdrawn and then approved.
      assert.deepStrictEqual(decisions, ["pending", "approved"])
    }).pipe(
      Effect.provide([
        Journal.layerMemory,
        ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCall("pay", { amount: 5 }, "c1")
            : ScriptedModel.finalAnswer("done")
        )
      ])
    )
  )
})
