import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"

const Insight = Schema.Struct({ title: Schema.String, rows: Schema.Array(Schema.Number) })

/** The seed-000 task: write insight_report.json through the real file tools, then validate it. */
const seedRun = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.makeTempDirectoryScoped({ prefix: "seed000-" })
    const tools = yield* FileTools.make({ root })
    const result = yield* Run.run({
      goal: "Write insight_report.json",
      tools: tools.all,
      validation: {
        root,
        plan: [
          Validation.step("write-report", "write the insight report", [Criterion.toolSucceeded("write_json_file")])
        ],
        artifacts: [Validation.artifact("insight_report.json", { schema: Insight })]
      }
    }).pipe(Effect.provide(Permission.layer({ roots: [root] })), Effect.provide(ScriptedModel.layer(script)))
    return { result, root }
  }).pipe(Effect.scoped, Effect.provide(NodeServices.layer))

const path = (timeline: ReadonlyArray<Event.Event>) =>
  timeline.flatMap((e) => {
    switch (e._tag) {
      case "state.changed":
        return [e.to]
      case "tool.failed":
      case "tool.succeeded":
      case "recovery.started":
      case "recovery.completed":
        return [e._tag]
      default:
        return []
    }
  })

const missingContent = ScriptedModel.toolCall("write_json_file", { path: "insight_report.json" })
const corrected = ScriptedModel.toolCall("write_json_file", {
  path: "insight_report.json",
  content: { title: "Insights", rows: [1, 2, 3] }
})

describe("Scenario (seed 000)", () => {
  it.effect(
    "R3.5 R6.1 missing content → field path → corrected call → success → final answer → validating → completed",
    () =>
      Effect.gen(function* () {
        const { result } = yield* seedRun([missingContent, corrected, ScriptedModel.finalAnswer("done")])
        const failed = result.timeline.find((e) => e._tag === "tool.failed")
        assert.isTrue(failed?._tag === "tool.failed" && failed.error.message === "arguments.content: field is required")
        assert.deepStrictEqual(path(result.timeline), [
          "initializing",
          "planning",
          "model_thinking",
          "tool_executing",
          "tool.failed",
          "recovering",
          "recovery.started",
          "model_thinking",
          "tool_executing",
          "tool.succeeded",
          "recovery.completed",
          "model_thinking",
          "validating",
          "completed"
        ])
        assert.strictEqual(result.stopReason, "goal_reached")
        assert.deepStrictEqual(
          result.checks.map((c) => [c.name, c.passed]),
          [
            ["plan:write-report", true],
            ["artifact:insight_report.json", true],
            ["evidence:index", true]
          ]
        )
        assert.isTrue(result.evidence.some((e) => e.item === "plan:write-report" && e.kind === "tool_result"))
      })
  )

  it.effect("R6.2 the same run ending early without the artifact fails, naming the artifact contract", () =>
    Effect.gen(function* () {
      const { result } = yield* seedRun([missingContent, ScriptedModel.finalAnswer("done, trust me")])
      assert.strictEqual(result.status, "failed")
      assert.strictEqual(result.stopReason, "validation_failed")
      assert.strictEqual(result.finalAnswer, "done, trust me")
      assert.include(result.detail, "artifact:insight_report.json: missing")
      const failing = result.checks.filter((c) => !c.passed).map((c) => c.name)
      assert.deepStrictEqual(failing, ["plan:write-report", "artifact:insight_report.json"])
      assert.deepStrictEqual(
        result.unfinished.map((i) => i.id),
        ["write-report"]
      )
      assert.strictEqual(result.nextStep, "write the insight report")
    })
  )

  it.effect("R6.3 a budget stop after some plan steps is partial, listing done and undone items and side effects", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped({ prefix: "partial-" })
      const tools = yield* FileTools.make({ root })
      const result = yield* Run.run({
        goal: "Write a.md and b.md",
        tools: tools.all,
        limits: { maxIterations: 2 },
        validation: {
          root,
          plan: [
            Validation.step("a", "write a.md", [
              Criterion.toolSucceeded("write_markdown_file", (input) => (input as { path: string }).path === "a.md")
            ]),
            Validation.step("b", "write b.md", [
              Criterion.toolSucceeded("write_markdown_file", (input) => (input as { path: string }).path === "b.md")
            ])
          ]
        }
      }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCall("write_markdown_file", { path: "a.md", content: "# A" }),
            ScriptedModel.toolCall("list_files", { path: "." })
          ])
        )
      )
      assert.strictEqual(result.status, "partial")
      assert.strictEqual(result.stopReason, "max_iterations")
      assert.deepStrictEqual(
        result.completed.map((i) => i.id),
        ["a"]
      )
      assert.deepStrictEqual(
        result.unfinished.map((i) => i.id),
        ["b"]
      )
      assert.deepStrictEqual(
        result.sideEffects.map((s) => s.name),
        ["write_markdown_file"]
      )
      assert.strictEqual(result.nextStep, "write b.md")
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer))
  )
})
