import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as RunState from "../../src/events/RunState.ts"

const happyPath: ReadonlyArray<RunState.State> = [
  "created",
  "initializing",
  "planning",
  "model_thinking",
  "tool_executing",
  "model_thinking",
  "validating",
  "completed"
]

describe("RunState", () => {
  it("R1.2 the happy path is legal, edge by edge", () => {
    for (let i = 1; i < happyPath.length; i++) {
      const from = happyPath[i - 1] as RunState.State
      const to = happyPath[i] as RunState.State
      assert.isTrue(Result.isSuccess(RunState.transition(from, to)), `${from} → ${to}`)
    }
  })

  it("R1.2 recovery leaves model_thinking or tool_executing and returns to either", () => {
    for (const from of ["model_thinking", "tool_executing"] as const) {
      assert.isTrue(RunState.canTransition(from, "recovering"))
    }
    assert.isTrue(RunState.canTransition("recovering", "model_thinking"))
    assert.isTrue(RunState.canTransition("recovering", "tool_executing"))
  })

  it("R1.2 every active phase may fail or be cancelled", () => {
    for (const phase of RunState.Phase.literals) {
      assert.isTrue(RunState.canTransition(phase, "failed"), phase)
      assert.isTrue(RunState.canTransition(phase, "cancelled"), phase)
    }
  })

  it("R1.2 an illegal transition is a typed error naming both ends", () => {
    const result = RunState.transition("created", "tool_executing")
    assert.isTrue(Result.isFailure(result))
    if (Result.isFailure(result)) {
      assert.strictEqual(result.failure._tag, "IllegalTransition")
      assert.strictEqual(result.failure.from, "created")
      assert.strictEqual(result.failure.to, "tool_executing")
      assert.include(result.failure.message, "created → tool_executing")
    }
  })

  it("R1.2 terminal statuses never move again", () => {
    for (const status of RunState.Status.literals) {
      assert.isTrue(RunState.isTerminal(status))
      for (const to of [...RunState.Phase.literals, ...RunState.Status.literals]) {
        assert.isFalse(RunState.canTransition(status, to), `${status} → ${to}`)
      }
    }
  })

  it("R1.1 R6.3 validating ends the run: completed, or how a stop with a plan checked ends", () => {
    assert.deepStrictEqual([...RunState.table.validating].sort(), [
      "cancelled",
      "completed",
      "failed",
      "partial",
      "unknown_outcome"
    ])
  })
})
