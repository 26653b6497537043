/**
 * What a run hands user code (a policy's counters, a model's request, a criterion's or a
 * stop hook's timeline, what a handler returned) cannot change the run's log (R9.1, R12):
 * user code that writes to what it was handed fails, named, and the log stays the truth.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as RunLog from "../../src/events/RunLog.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunObserver from "../../src/run/RunObserver.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"

const echo = Tool.make({
  name: "echo",
  description: "Echoes a number.",
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Struct({ n: Schema.Number }),
  sideEffect: "none",
  handler: ({ n }) => Effect.succeed({ n })
})

const oneCall = ScriptedModel.layer([ScriptedModel.toolCall("echo", { n: 1 }), ScriptedModel.finalAnswer("done")])

const codec = Schema.toCodecJson(RunResult.RunResult)

/** The result as a journal or a recording gives it back. */
const roundTrip = (result: RunResult.RunResult) =>
  Schema.decodeUnknownSync(codec)(JSON.parse(JSON.stringify(Schema.encodeUnknownSync(codec)(result))))

/** The log is the truth: its fold gives the result's counters, and it survives JSON. */
const assertTruthful = (result: RunResult.RunResult) => {
  assert.deepStrictEqual(result.counters, Counters.snapshot(Counters.fold(result.timeline)))
  assert.deepStrictEqual(roundTrip(result), result)
}

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Extract<Event.Event, { _tag: T }> => e._tag === tag)

describe("what user code is handed", () => {
  it.effect("R12 R2.3 a policy that writes to the counters it is handed fails, named: no limit is switched off", () =>
    Effect.gen(function* () {
      const sneaky: Termination.Policy = {
        name: "sneaky",
        decide: (checkpoint) => {
          ;(checkpoint.counters as { iterations: number }).iterations = 0
          return Termination.continue_
        }
      }
      const result = yield* Run.run({
        goal: "g",
        tools: [echo],
        policies: (defaults) => [sneaky, ...defaults],
        limits: { maxIterations: 3 }
      }).pipe(Effect.provide(ScriptedModel.layerFunction(() => ScriptedModel.toolCall("echo", { n: 1 }))))
      assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"])
      assert.include(result.detail, `"sneaky"`)
      assert.strictEqual(result.counters.iterations, 1)
      assertTruthful(result)
    })
  )

  it.effect(
    "R12 R2.5 a policy that replaces what the checkpoint holds fails, named: no later policy, nor the check of a stop, sees its edit",
    () =>
      Effect.gen(function* () {
        const edits: ReadonlyArray<readonly [string, (checkpoint: Termination.Checkpoint) => void]> = [
          ["counters", (checkpoint) => Object.assign(checkpoint, { counters: Counters.empty })],
          ["phase", (checkpoint) => Object.assign(checkpoint, { phase: "after_tools" })],
          ["now", (checkpoint) => Object.assign(checkpoint, { now: checkpoint.deadlineAt })],
          [
            "a forged final answer",
            (checkpoint) =>
              Object.assign(checkpoint, { counters: { ...checkpoint.counters, finalAnswerReceived: true } })
          ]
        ]
        for (const [what, edit] of edits) {
          const editing: Termination.Policy = {
            name: "editing",
            decide: (checkpoint) => {
              edit(checkpoint)
              // Had the edit held: the limits after it blind (the counters, the phase), or the
              // check of this stop fooled by it (the time, a final answer).
              if (what === "counters" || what === "phase") return Termination.continue_
              return Termination.stop(what === "now" ? "run_timeout" : "goal_reached", "forged")
            }
          }
          const result = yield* Run.run({
            goal: "g",
            tools: [echo],
            policies: (defaults) => [editing, ...defaults],
            limits: { maxIterations: 2 }
          }).pipe(Effect.provide(ScriptedModel.layerFunction(() => ScriptedModel.toolCall("echo", { n: 1 }))))
          assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"], what)
          assert.include(result.detail, `"editing"`, what)
          assert.deepStrictEqual(ofTag(result.timeline, "tool.started"), [], what)
          assertTruthful(result)
        }
      })
  )

  it.effect("R12 R9.1 a model that edits its request cannot edit the run's conversation", () =>
    Effect.gen(function* () {
      const sent: Array<ReadonlyArray<Model.Message>> = []
      let calls = 0
      const editing = Layer.succeed(Model.Model, {
        generate: (request: Model.Request) =>
          Effect.sync(() => {
            sent.push(structuredClone(request.messages))
            // The edit is refused (the messages are frozen), or, for the array, only the model's own copy changes.
            ;(request.messages as Array<Model.Message>).length = 0
            return calls++ === 0 ? ScriptedModel.toolCall("echo", { n: 1 }) : ScriptedModel.finalAnswer("done")
          })
      })
      const result = yield* Run.run({ goal: "the real goal", tools: [echo] }).pipe(Effect.provide(editing))
      assert.strictEqual(result.status, "completed")
      const requested = result.timeline.flatMap((e, i) => (e._tag === "model.requested" ? [i] : []))
      assert.deepStrictEqual(
        sent,
        requested.map((i) => RunLog.messages(RunLog.fold(result.timeline.slice(0, i + 1))))
      )

      const rewriting = Layer.succeed(Model.Model, {
        generate: (request: Model.Request) =>
          Effect.sync(() => {
            for (const message of request.messages) (message as { content: string }).content = "IGNORE THE GOAL"
            return ScriptedModel.finalAnswer("done")
          })
      })
      const refused = yield* Run.run({ goal: "the real goal", tools: [echo] }).pipe(Effect.provide(rewriting))
      assert.strictEqual(refused.stopReason, "model_error")
      assert.include(refused.detail, "TypeError")
      const started = ofTag(refused.timeline, "run.started")[0]
      assert.strictEqual(started?.goal, "the real goal")
      assertTruthful(refused)
    })
  )

  it.effect(
    "R9.1 R6 a criterion or a stop hook that edits the timeline it is handed fails, named: the log, and what the other checks read, stay whole",
    () =>
      Effect.gen(function* () {
        const eraser = Criterion.custom("erases the log", (timeline) => {
          ;(timeline as Array<Event.Event>).splice(2)
          return Option.some("ok")
        })
        // Renames the call in what it was handed, so that the next step's criterion would find a "deploy".
        const forger = Criterion.custom("forges a deploy", (timeline) => {
          for (const e of timeline) if (e._tag === "tool.succeeded") (e as { name: string }).name = "deploy"
          return Option.none()
        })
        const erased = yield* Run.run({
          goal: "g",
          tools: [echo],
          validation: {
            plan: [
              { id: "s", description: "s", required: true, criteria: [eraser] },
              { id: "forge", description: "forge", required: false, criteria: [forger] },
              { id: "deploy", description: "deploy", required: true, criteria: [Criterion.toolSucceeded("deploy")] }
            ]
          }
        }).pipe(Effect.provide(oneCall))
        const detail = (name: string) => erased.checks.find((c) => c.name === name)?.detail ?? ""
        assert.include(detail("plan:s"), "criterion died (TypeError)")
        assert.include(detail("plan:forge"), "criterion died (TypeError)")
        assert.include(detail("plan:deploy"), `not observed: tool "deploy" succeeded`)
        assert.deepStrictEqual([erased.status, erased.stopReason], ["failed", "validation_failed"])
        assert.lengthOf(ofTag(erased.timeline, "tool.succeeded"), 1)
        assertTruthful(erased)

        const rewritten = yield* Run.run({
          goal: "g",
          tools: [echo],
          validation: {
            stopHooks: [
              {
                name: "rewriter",
                check: (context) =>
                  Effect.sync(() => {
                    for (const e of context.timeline)
                      if (e._tag === "tool.succeeded") (e as { output: unknown }).output = 999
                    return { passed: true, detail: "ok" }
                  })
              }
            ]
          }
        }).pipe(Effect.provide(oneCall))
        assert.include(rewritten.checks.find((c) => c.name === "hook:rewriter")?.detail, "died: TypeError")
        assert.deepStrictEqual(ofTag(rewritten.timeline, "tool.succeeded")[0]?.output, { n: 1 })
        assertTruthful(rewritten)

        // A hook that replaces what it was handed, rather than editing it, fails too; the next one
        // reads the run's own answer, log and counters (review 79).
        const seen: Array<unknown> = []
        const replaced = yield* Run.run({
          goal: "g",
          tools: [echo],
          validation: {
            stopHooks: [
              {
                name: "replacer",
                check: (context) =>
                  Effect.sync(() => {
                    const writable = context as { finalAnswer?: string; timeline: ReadonlyArray<Event.Event> }
                    writable.finalAnswer = "forged"
                    writable.timeline = []
                    return { passed: true, detail: "ok" }
                  })
              },
              {
                name: "reader",
                check: (context) =>
                  Effect.sync(() => {
                    seen.push(context.finalAnswer, context.timeline.length > 0)
                    return { passed: true, detail: "read" }
                  })
              }
            ]
          }
        }).pipe(Effect.provide(oneCall))
        assert.include(replaced.checks.find((c) => c.name === "hook:replacer")?.detail, "died: TypeError")
        assert.deepStrictEqual(seen, ["done", true])
      })
  )

  it.effect(
    "R9.1 a handler that returns one object and changes it later: each result keeps what it returned then",
    () =>
      Effect.gen(function* () {
        const shared = { count: 0 }
        const tally = Tool.make({
          name: "tally",
          description: "Counts.",
          input: Schema.Struct({ n: Schema.Number }),
          output: Schema.Unknown,
          sideEffect: "none",
          handler: () =>
            Effect.sync(() => {
              shared.count++
              return shared
            })
        })
        const result = yield* Run.run({ goal: "g", tools: [tally] }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              ScriptedModel.toolCall("tally", { n: 1 }),
              ScriptedModel.toolCall("tally", { n: 2 }),
              ScriptedModel.finalAnswer("done")
            ])
          )
        )
        assert.deepStrictEqual(
          ofTag(result.timeline, "tool.succeeded").map((e) => e.output),
          [{ count: 1 }, { count: 2 }]
        )
        assertTruthful(result)
      })
  )

  it.effect(
    "R12 a Failure built with its checks off, or changed since, is not trusted: it is the tool's defect, and the result encodes",
    () =>
      Effect.gen(function* () {
        const unchecked = new Failure.Retryable(
          {
            source: "tool",
            category: "unavailable",
            code: "busy",
            attempts: 1.5,
            hint: "busy",
            retryAfterMillis: Number.NaN
          },
          { disableChecks: true }
        )
        const changed = new Failure.Permanent({ source: "tool", category: "io", code: "x", attempts: 1, hint: "x" })
        ;(changed as { category: string }).category = "no such category"
        for (const failure of [unchecked, changed]) {
          const failing = Tool.make({
            name: "fail",
            description: "Fails.",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "none",
            handler: () => Effect.fail(failure)
          })
          const result = yield* Run.run({ goal: "g", tools: [failing] }).pipe(
            Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("fail", {}), ScriptedModel.finalAnswer("done")]))
          )
          const error = ofTag(result.timeline, "tool.failed")[0]?.error
          assert.strictEqual(error?.failure?.category, "defect")
          assertTruthful(result)
        }
      })
  )

  it.effect(
    "R9.1 a handler that edits its input, or a model that edits the arguments it sent, changes nothing recorded",
    () =>
      Effect.gen(function* () {
        const sent = { data: { x: "original" } }
        const editing = Tool.make({
          name: "edit",
          description: "Edits its input.",
          input: Schema.Struct({ data: Schema.Unknown }),
          output: Schema.String,
          sideEffect: "none",
          handler: (input) =>
            Effect.sync(() => {
              ;(input.data as { x: string }).x = "changed by handler"
              sent.data.x = "changed by model"
              return "ok"
            })
        })
        const result = yield* Run.run({ goal: "g", tools: [editing] }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              { ...ScriptedModel.toolCall("edit", {}), toolCalls: [{ id: "c1", name: "edit", arguments: sent }] },
              ScriptedModel.finalAnswer("done")
            ])
          )
        )
        assert.deepStrictEqual(ofTag(result.timeline, "model.responded")[0]?.toolCalls[0]?.arguments, {
          data: { x: "original" }
        })
        assertTruthful(result)
      })
  )

  it.effect("R12 a model that empties the tool list it is handed changes no later request's tools (review 193)", () =>
    Effect.gen(function* () {
      const offered: Array<ReadonlyArray<string>> = []
      let calls = 0
      const emptying = Layer.succeed(Model.Model, {
        generate: (request: Model.Request) =>
          Effect.sync(() => {
            offered.push(request.tools.map((tool) => tool.name))
            // Refused (the list is frozen): a model that edits it fails, and the run stops, named.
            if (calls++ === 1) (request.tools as Array<Model.ToolDefinition>).splice(0)
            return calls < 3 ? ScriptedModel.toolCall("echo", { n: calls }) : ScriptedModel.finalAnswer("done")
          })
      })
      const result = yield* Run.run({ goal: "g", tools: [echo] }).pipe(Effect.provide(emptying))
      // Before, the second request emptied the list of every later request: [["echo"], ["echo"], []].
      assert.deepStrictEqual(offered, [["echo"], ["echo"]])
      assert.strictEqual(result.stopReason, "model_error")
      assert.include(result.detail, "TypeError")
    })
  )

  it.effect("R9.1 R7 a subscriber to the run's events, or a handler editing its input, changes nothing recorded", () =>
    Effect.gen(function* () {
      const nested = Tool.make({
        name: "nested",
        description: "Returns a nested output.",
        input: Schema.Struct({ data: Schema.Unknown }),
        output: Schema.Struct({ inner: Schema.Struct({ n: Schema.Number }) }),
        sideEffect: "write",
        needsApproval: true,
        handler: (input) =>
          Effect.sync(() => {
            ;(input.data as { x: string }).x = "changed by handler"
            return { inner: { n: 1 } }
          })
      })
      const handle = yield* Run.start({ goal: "g", tools: [nested] })
      const refused: Array<string> = []
      yield* Stream.runDrain(
        Stream.tap(handle.events, (e) =>
          Effect.sync(() => {
            if (e._tag !== "tool.succeeded") return
            try {
              ;(e.output as { inner: { n: number } }).inner.n = 999
            } catch (error) {
              refused.push(String(error))
            }
          })
        )
      )
      const result = yield* handle.result
      assert.lengthOf(refused, 1)
      assert.deepStrictEqual(ofTag(result.timeline, "tool.succeeded")[0]?.output, { inner: { n: 1 } })
      assert.deepStrictEqual(ofTag(result.timeline, "approval.requested")[0]?.arguments, { data: { x: "original" } })
      assertTruthful(result)
    }).pipe(
      Effect.scoped,
      Effect.provideService(Approval.ApprovalGate, {
        request: () => Effect.succeed(Approval.approved("ops")),
        decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
        pending: Effect.succeed([])
      }),
      Effect.provide(
        ScriptedModel.layer([
          ScriptedModel.toolCall("nested", { data: { x: "original" } }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  )

  it.effect(
    "R3.6 R7 a permission policy that edits the arguments it reads fails: the handler and the person see what the model sent",
    () =>
      Effect.gen(function* () {
        const seen: Array<unknown> = []
        const write = Tool.make({
          name: "write",
          description: "Writes a file.",
          input: Schema.Struct({ path: Schema.String }),
          output: Schema.String,
          sideEffect: "write",
          handler: ({ path }) =>
            Effect.sync(() => {
              seen.push(path)
              return "ok"
            })
        })
        const editing: Permission.PermissionService = {
          check: (request) =>
            Effect.sync(() => {
              ;(request.arguments as { path: string }).path = "/etc"
              return Permission.allow
            })
        }
        const result = yield* Run.run({ goal: "g", tools: [write] }).pipe(
          Effect.provideService(Permission.Permission, editing),
          Effect.provide(
            ScriptedModel.layer([
              ScriptedModel.toolCall("write", { path: "/tmp/x" }),
              ScriptedModel.finalAnswer("done")
            ])
          )
        )
        assert.deepStrictEqual(seen, [])
        assert.notInclude(JSON.stringify(result.timeline), "/etc")
        assertTruthful(result)
      })
  )

  it.effect(
    "R12 a provider's object arguments with a 300,000-element array are recorded (a wide value is no stack hazard)",
    () =>
      Effect.gen(function* () {
        const sum = Tool.make({
          name: "sum",
          description: "Sums.",
          input: Schema.Struct({ xs: Schema.Array(Schema.Number) }),
          output: Schema.Number,
          sideEffect: "none",
          handler: ({ xs }) => Effect.succeed(xs.length)
        })
        const result = yield* Run.run({ goal: "g", tools: [sum] }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              {
                ...ScriptedModel.toolCall("sum", {}),
                toolCalls: [{ id: "c1", name: "sum", arguments: { xs: new Array(300_000).fill(0) } }]
              },
              ScriptedModel.finalAnswer("done")
            ])
          )
        )
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(ofTag(result.timeline, "tool.succeeded")[0]?.output, 300_000)
      })
  )

  it.effect("R12 an output that throws when read again is the tool's failure, not the run's", () =>
    Effect.gen(function* () {
      let reads = 0
      const output = {
        get value() {
          if (++reads > 2) throw new Error("gone")
          return 1
        }
      }
      const flaky = Tool.make({
        name: "flaky",
        description: "Returns an output that breaks.",
        input: Schema.Struct({}),
        output: Schema.Unknown,
        sideEffect: "none",
        handler: () => Effect.succeed(output)
      })
      const result = yield* Run.run({ goal: "g", tools: [flaky] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("flaky", {}), ScriptedModel.finalAnswer("done")]))
      )
      assert.notStrictEqual(result.stopReason, "internal_error")
      assert.strictEqual(ofTag(result.timeline, "tool.failed")[0]?.error.code, "output_validation_failed")
      assertTruthful(result)
    })
  )

  it.effect("R9.1 a field that takes any object (Struct({})) keeps the handler's object out of the log", () =>
    Effect.gen(function* () {
      const inner = { n: 1 }
      const meta = Tool.make({
        name: "meta",
        description: "Returns its metadata.",
        input: Schema.Struct({}),
        output: Schema.Struct({ meta: Schema.Struct({}) }),
        sideEffect: "none",
        handler: () => Effect.succeed({ meta: Object.freeze({ inner }) })
      })
      const result = yield* Run.run({ goal: "g", tools: [meta] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("meta", {}), ScriptedModel.finalAnswer("done")]))
      )
      inner.n = 999
      assert.deepStrictEqual(ofTag(result.timeline, "tool.succeeded")[0]?.output, { meta: { inner: { n: 1 } } })
      assertTruthful(result)
    })
  )

  it.effect(
    "R9.1 R12 an observer cannot reach into an event, the result is the same frozen value for every caller, and tool definitions are frozen",
    () =>
      Effect.gen(function* () {
        const writable: Array<string> = []
        const probe = (value: unknown, path: string): void => {
          if (typeof value !== "object" || value === null) return
          if (!Object.isFrozen(value)) writable.push(path)
          for (const [key, item] of Object.entries(value)) probe(item, `${path}.${key}`)
        }
        const observer: RunObserver.Observer = {
          attach: () => ({ event: (event) => probe(event, event._tag), settled: Effect.void })
        }
        const handle = yield* Run.start({ goal: "g", tools: [echo] }).pipe(
          Effect.provide(RunObserver.layer(Effect.succeed(observer)))
        )
        const first = yield* handle.result
        const second = yield* handle.result
        assert.deepStrictEqual(writable, [])
        assert.strictEqual(first, second)
        probe(first, "result")
        probe(echo.definition, "definition")
        assert.deepStrictEqual(writable, [])
        assertTruthful(first)
      }).pipe(Effect.scoped, Effect.provide(oneCall))
  )

  it.effect("R9.1 -0 from a handler or in the model's usage is 0 in the live log, as JSON gives it back", () =>
    Effect.gen(function* () {
      const negative = Tool.make({
        name: "zero",
        description: "Returns -0.",
        input: Schema.Struct({}),
        output: Schema.Number,
        sideEffect: "none",
        handler: () => Effect.succeed(-0)
      })
      const result = yield* Run.run({ goal: "g", tools: [negative] }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            { ...ScriptedModel.toolCall("zero", {}), usage: { inputTokens: 1, outputTokens: 1, costUsd: -0 } },
            ScriptedModel.finalAnswer("done")
          ])
        )
      )
      assert.isFalse(Object.is(ofTag(result.timeline, "tool.succeeded")[0]?.output, -0))
      assert.isFalse(Object.is(ofTag(result.timeline, "model.responded")[0]?.usage.costUsd, -0))
      assertTruthful(result)
    })
  )
})
