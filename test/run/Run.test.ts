import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Predicate, Schema } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import * as Event from "../../src/events/Event.ts"
import * as Timeline from "../../src/events/Timeline.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { echo, makeStore, thrower } from "../support/tools.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const tags = (timeline: ReadonlyArray<Event.Event>) => timeline.map((e) => e._tag)
const states = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.flatMap((e) => (e._tag === "state.changed" ? [e.to] : []))

describe("Run", () => {
  it.effect("R1.2 a run with a final answer walks the happy path to completed", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "say hi", tools: [echo] })
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.stopReason, "goal_reached")
      assert.strictEqual(result.finalAnswer, "hi")
      assert.deepStrictEqual(states(result.timeline), [
        "initializing",
        "planning",
        "model_thinking",
        "tool_executing",
        "model_thinking",
        "validating",
        "completed"
      ])
    }).pipe(
      Effect.provide(withScript([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("hi")]))
    )
  )

  it.effect("R8 the timeline starts with run.started, ends with run.finished, and numbers events without gaps", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "say hi", tools: [echo] })
      const t = result.timeline
      assert.strictEqual(t[0]?._tag, "run.started")
      assert.strictEqual(t[t.length - 1]?._tag, "run.finished")
      t.forEach((e, i) => {
        assert.strictEqual(e.seq, i)
        assert.strictEqual(e.runId, result.runId)
      })
      assert.strictEqual(tags(t).filter((x) => x === "run.finished").length, 1)
      assert.strictEqual(result.checkpoint, t.length - 1)
    }).pipe(
      Effect.provide(withScript([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("hi")]))
    )
  )

  it.effect("R8 the result's counters equal the fold of its timeline", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "say hi", tools: [echo] })
      assert.deepStrictEqual(result.counters, Counters.snapshot(Counters.fold(result.timeline)))
      assert.strictEqual(result.counters.iterations, 3)
      assert.strictEqual(result.counters.toolCalls, 2)
      assert.strictEqual(result.counters.inputTokens, 0)
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("echo", { text: "a" }),
          ScriptedModel.toolCall("echo", { text: "b" }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  )

  it.effect(
    "a defect thrown inside a tool handler becomes a failed tool result and a tool_error stop, never a crash",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "throw", tools: [thrower] })
        assert.strictEqual(result.status, "failed")
        assert.strictEqual(result.stopReason, "tool_error")
        const failed = result.timeline.find((e) => e._tag === "tool.failed")
        assert.strictEqual(failed?._tag, "tool.failed")
        if (failed?._tag === "tool.failed") {
          assert.strictEqual(failed.error.failure?.code, "tool_defect")
          assert.include(failed.error.message, "Error")
          assert.notInclude(failed.error.message, "boom")
        }
        assert.strictEqual(result.timeline[result.timeline.length - 1]?._tag, "run.finished")
      }).pipe(Effect.provide(withScript([ScriptedModel.toolCall("thrower", {})])))
  )

  it.effect("invalid run options end the run failed with a clear detail", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "dup", tools: [echo, echo] })
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "internal_error")
      assert.include(result.detail, 'two tools are named "echo"')
    }).pipe(Effect.provide(withScript([])))
  )

  it.effect("seed 000: missing content → field path → corrected call → success → final answer → completed", () => {
    const store = makeStore()
    return Effect.gen(function* () {
      const result = yield* Run.run({ goal: "write the report", tools: [store.write] })
      assert.strictEqual(result.status, "completed")
      const failed = result.timeline.find((e) => e._tag === "tool.failed")
      assert.isTrue(failed?._tag === "tool.failed" && failed.error.message === "arguments.content: field is required")
      assert.deepStrictEqual(store.writes, ["insight_report.json"])
      assert.deepStrictEqual(
        tags(result.timeline).filter((t) => t.startsWith("recovery")),
        ["recovery.started", "recovery.completed"]
      )
      assert.strictEqual(result.counters.toolCorrectionAttempts, 1)
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("write_json_file", { artifact_name: "insight_report.json" }),
          ScriptedModel.toolCall("write_json_file", { artifact_name: "insight_report.json", content: "{}" }),
          ScriptedModel.finalAnswer("report written")
        ])
      )
    )
  })

  it.effect("a defect in a user's termination policy ends the run failed with internal_error, never a crash", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "x",
        tools: [echo],
        policies: (defaults) => [
          Termination.make("broken", () => {
            throw new Error("policy bug")
          }),
          ...defaults
        ]
      })
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "internal_error")
      assert.strictEqual(result.detail, 'the termination policy "broken" threw Error')
      assert.strictEqual(result.timeline[result.timeline.length - 1]?._tag, "run.finished")
    }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("hi")])))
  )

  it.effect("a model that throws instead of failing ends the run with model_error and a safe hint", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "x", tools: [echo] })
      assert.strictEqual(result.stopReason, "model_error")
      assert.include(result.detail, "TypeError")
      assert.notInclude(result.detail, "bad provider")
      const failed = result.timeline.find((e) => e._tag === "model.failed")
      assert.isTrue(failed?._tag === "model.failed" && failed.failure.code === "defect")
    }).pipe(
      Effect.provide(
        withScript([
          () => {
            throw new TypeError("bad provider")
          }
        ])
      )
    )
  )
})

describe("Run: a refuted final answer (R6.2, R6.3)", () => {
  const said = Validation.step("say", "Say hi", [Criterion.toolSucceeded("echo")])
  const wrote = Validation.step("write", "Write the report", [Criterion.toolSucceeded("write_file")])

  it.effect(
    "R6.3 the nextStep is the first unfinished required step: never an optional one, none once all required are done",
    () =>
      Effect.gen(function* () {
        const polish = Validation.step("polish", "Polish the prose", [Criterion.toolSucceeded("polish")], {
          required: false
        })
        const refuted = yield* Run.run({ goal: "g", tools: [echo], validation: { plan: [said, polish, wrote] } }).pipe(
          Effect.provide(
            withScript([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("done")])
          )
        )
        assert.deepStrictEqual(
          [refuted.status, refuted.unfinished.map((item) => item.id), refuted.nextStep],
          ["partial", ["polish", "write"], "Write the report"]
        )
        const completed = yield* Run.run({ goal: "g", tools: [echo], validation: { plan: [said, polish] } }).pipe(
          Effect.provide(
            withScript([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("done")])
          )
        )
        assert.deepStrictEqual(
          [completed.status, completed.unfinished.map((item) => item.id), completed.nextStep],
          ["completed", ["polish"], undefined]
        )
      })
  )

  it.effect(
    "R6.2 R6.3 validation refutes the answer while a plan step is done: partial, done and unfinished listed",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({
          goal: "say hi, then report",
          tools: [echo],
          validation: { plan: [said, wrote] }
        })
        assert.strictEqual(result.status, "partial")
        assert.strictEqual(result.stopReason, "validation_failed")
        assert.deepStrictEqual(
          result.completed.map((item) => item.id),
          ["say"]
        )
        assert.deepStrictEqual(
          result.unfinished.map((item) => item.id),
          ["write"]
        )
        assert.strictEqual(result.nextStep, "Write the report")
      }).pipe(
        Effect.provide(
          withScript([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("all done")])
        )
      )
  )

  it.effect("R6.3 validation refutes the answer and no plan step is done: failed", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "report", tools: [echo], validation: { plan: [wrote] } })
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "validation_failed")
      assert.deepStrictEqual(result.completed, [])
    }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("all done")])))
  )

  it.effect(
    "R6.2 R6.3 a step whose criteria hold without evidence is not completed: the refuted run is failed, not partial",
    () =>
      Effect.gen(function* () {
        // One step a criterion claims without citing a result, one citing a call that never succeeded.
        const claimed = Validation.step("claimed", "Claimed done", [Criterion.custom("says so", () => "trust me")])
        const cited = Validation.step("cited", "Cites a call", [
          Criterion.custom("cites", () => ({ detail: "see call_999", callId: "call_999" }))
        ])
        const result = yield* Run.run({ goal: "report", tools: [echo], validation: { plan: [claimed, cited, wrote] } })
        assert.deepStrictEqual([result.status, result.stopReason], ["failed", "validation_failed"])
        assert.deepStrictEqual(result.completed, [])
        assert.deepStrictEqual(
          result.unfinished.map((item) => [item.id, item.reason]),
          [
            ["claimed", "plan:claimed passed without evidence"],
            [
              "cited",
              "plan:cited passed without evidence; plan:cited cites call call_999, which is not a tool.succeeded event"
            ],
            ["write", result.unfinished[2]?.reason]
          ]
        )
      }).pipe(Effect.provide(withScript([ScriptedModel.finalAnswer("all done")])))
  )

  it.effect(
    "R12 R6.2 the refuted answer's detail joining the failing checks is cut to 4,096 characters, and 20 MB hook texts leave a small result (review 118)",
    () =>
      Effect.gen(function* () {
        const big = "A".repeat(20_000_000)
        const hook = (name: string) => Validation.stopHook(name, () => Effect.succeed({ passed: false, detail: big }))
        const result = yield* Run.run({
          goal: "report",
          tools: [echo],
          validation: { plan: [said], stopHooks: [hook("one"), hook("two"), hook("three")] }
        })
        assert.deepStrictEqual([result.status, result.stopReason], ["partial", "validation_failed"])
        const detail = result.detail ?? ""
        assert.isTrue(detail.startsWith("the final answer is not backed: hook:one: AAAA"), detail.slice(0, 80))
        assert.match(detail, /^.{4096}\.\.\. \(\d+ more characters\)$/s)
        assert.isBelow(JSON.stringify(result).length, 100_000)
      }).pipe(
        Effect.provide(withScript([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("done")]))
      )
  )
})

describe("Run: a call's arguments are stored once (R9)", () => {
  const note = Tool.make({
    name: "note",
    description: "Writes a note",
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ chars: Schema.Number }),
    sideEffect: "write",
    handler: ({ text }) => Effect.succeed({ chars: text.length })
  })

  it.effect("R9 a 1 MiB argument is in the timeline once, and evidence criteria still match on the input", () =>
    Effect.gen(function* () {
      const text = "x".repeat(1024 * 1024)
      const written = Validation.step("note", "Write the note", [
        Criterion.toolSucceeded("note", (input) => Predicate.hasProperty(input, "text") && input.text === text)
      ])
      const result = yield* Run.run({ goal: "write it", tools: [note], validation: { plan: [written] } }).pipe(
        Effect.provide(withScript([ScriptedModel.toolCall("note", { text }), ScriptedModel.finalAnswer("written")]))
      )
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(
        result.completed.map((item) => item.id),
        ["note"]
      )
      const json = JSON.stringify(result.timeline)
      assert.strictEqual(json.split(text).length - 1, 1, "the argument's copies in the JSON timeline")
      const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
      assert.isTrue(succeeded?._tag === "tool.succeeded" && succeeded.input === undefined)
      if (succeeded?._tag === "tool.succeeded")
        assert.deepStrictEqual(Event.inputOf(result.timeline, succeeded), { text })
    })
  )

  it.effect("R9 R3.5 the input is read back as the call was accepted, under the run's own limits", () =>
    Effect.gen(function* () {
      // Nested 80 deep: past the default limit of 64, within this run's 200.
      let value: unknown = "deep"
      for (let i = 0; i < 80; i++) value = { inner: value }
      const nested = Tool.make({
        name: "nested",
        description: "Takes a deep value",
        input: Schema.Struct({ value: Schema.Unknown }),
        output: Schema.Number,
        sideEffect: "none",
        handler: () => Effect.succeed(1)
      })
      const step = Validation.step("nested", "Sent it", [
        Criterion.toolSucceeded("nested", (input) => JSON.stringify(input) === JSON.stringify({ value }))
      ])
      const result = yield* Run.run({
        goal: "send it",
        tools: [nested],
        limits: { maxArgumentDepth: 200 },
        validation: { plan: [step] }
      }).pipe(
        Effect.provide(withScript([ScriptedModel.toolCall("nested", { value }), ScriptedModel.finalAnswer("sent")]))
      )
      assert.deepStrictEqual([result.status, result.completed.map((item) => item.id)], ["completed", ["nested"]])
    })
  )
})

describe("Run: what run.started records", () => {
  const write = Tool.make({
    name: "save",
    description: "saves a note",
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.String,
    sideEffect: "write",
    handler: ({ text }) => Effect.succeed(text)
  })
  const script = withScript([ScriptedModel.finalAnswer("ok")])

  it.effect("R3.6 R8 write tools under the default allow-all permission are named on the timeline", () =>
    Effect.gen(function* () {
      const approved = Tool.make({
        name: "deploy",
        description: "deploys, after a person approves",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "external",
        needsApproval: true,
        handler: () => Effect.succeed("deployed")
      })
      const result = yield* Run.run({ goal: "note", system: "be brief", tools: [echo, write, approved] })
      const started = result.timeline[0]
      assert.strictEqual(started?._tag, "run.started")
      if (started?._tag !== "run.started") return
      assert.strictEqual(started.permission, "allow_all")
      assert.deepStrictEqual(started.unguardedTools, ["save"])
      assert.strictEqual(started.system, "be brief")
      assert.deepStrictEqual(
        started.policies,
        Termination.defaults().map((policy) => policy.name)
      )
      assert.include(Timeline.describe(started), "no permission policy: save can write or act unchecked")
    }).pipe(Effect.provide(script))
  )

  it.effect("R3.6 with a permission policy installed, nothing is unguarded", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({ goal: "note", tools: [echo, write] })
      const started = result.timeline[0]
      assert.strictEqual(started?._tag === "run.started" ? started.permission : undefined, "policy")
      assert.strictEqual(started?._tag === "run.started" ? started.unguardedTools : [], undefined)
      assert.strictEqual(started?._tag === "run.started" ? started.system : "", undefined)
    }).pipe(Effect.provide(Permission.layer({ allowTools: ["echo", "save"] })), Effect.provide(script))
  )
})

describe("Run: FileSystem and Path only for artifacts", () => {
  // Only the model is provided: a run without artifact contracts needs nothing else (the type
  // says so: this file would not compile if Run.run still required FileSystem and Path).
  it.effect("R6.1 a run with a plan but no artifacts needs no file system", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "say hi",
        tools: [echo],
        validation: { plan: [Validation.step("say", "Say hi", [Criterion.toolSucceeded("echo")])] }
      })
      assert.strictEqual(result.status, "completed")
    }).pipe(
      Effect.provide(
        ScriptedModel.layer([ScriptedModel.toolCall("echo", { text: "hi" }), ScriptedModel.finalAnswer("hi")])
      )
    )
  )

  it.effect("R6.1 an artifact contract without FileSystem and Path fails its check saying what to provide", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "write it",
        tools: [echo],
        validation: { artifacts: [Validation.artifact("report.md", { format: "markdown" })] }
      })
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "validation_failed")
      const check = result.checks.find((c) => c.name === "artifact:report.md")
      assert.isFalse(check?.passed)
      assert.include(check?.detail ?? "", "provide NodeServices.layer")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))
  )
})

describe("Run: usage at the boundary (R2.1)", () => {
  it.effect(
    "R2.1 R12 a token count past what a sum can hold exactly is an invalid response; the result still encodes",
    () =>
      Effect.gen(function* () {
        const result = yield* Run.run({ goal: "count", tools: [echo] })
        assert.notStrictEqual(result.status, "completed")
        assert.isTrue(Number.isFinite(result.counters.inputTokens))
        const failed = result.timeline.find((e) => e._tag === "model.failed")
        assert.strictEqual(failed?._tag === "model.failed" ? failed.failure.code : undefined, "invalid_response")
        yield* Schema.encodeUnknownEffect(RunResult.RunResult)(result)
      }).pipe(
        Effect.provide(
          ScriptedModel.layer([Model.response({ text: "", usage: { inputTokens: Number.MAX_VALUE, outputTokens: 1 } })])
        )
      )
  )
})
