import { assert, describe, it } from "@effect/vitest"
import type * as Event from "../../../src/events/Event.ts"
import { omitted, withoutContent } from "../../../src/observability/internal/Content.ts"

describe("content left out of a recording", () => {
  const stamp = { runId: "r", seq: 3, at: 0 }
  it("R3.1 R13 a contradicted success's output is content: left out, and a failure's message with it", () => {
    const contradicted: Event.Event = {
      _tag: "tool.failed",
      ...stamp,
      callId: "c1",
      name: "write",
      error: { code: "inconsistent_result", message: "the check answered false", correctable: false },
      maxRetries: 0,
      output: { account: "IBAN DE00 1234" }
    }
    const left = withoutContent(contradicted)
    assert.strictEqual(left._tag === "tool.failed" ? left.output : undefined, omitted)
    assert.notInclude(JSON.stringify(left), "IBAN")
    const plain: Event.Event = { ...contradicted, output: undefined }
    const { output: _, ...without } = plain
    // A failure's message may quote the arguments (`read_file` names the path): left out, its code kept.
    assert.deepStrictEqual(withoutContent(without as Event.Event), {
      ...without,
      error: { ...contradicted.error, message: omitted }
    })
  })

  it("R13 R12 what a call was given or a person wrote is left out: a refusal's message, a reviewer's reason, the plan", () => {
    const secret = "/home/ada/SECRET-PATH/notes.txt"
    const events: ReadonlyArray<Event.Event> = [
      {
        _tag: "plan.set",
        ...stamp,
        steps: [{ id: "s1", description: `read ${secret}`, required: true }]
      },
      {
        _tag: "tool.blocked",
        ...stamp,
        callId: "c1",
        name: "read_file",
        error: { code: "permission_denied", message: `outside_roots: ${secret} is outside`, correctable: false }
      },
      {
        _tag: "approval.decided",
        ...stamp,
        callId: "c2",
        name: "pay",
        decision: "rejected",
        by: "bob",
        reason: `not ${secret}`
      },
      {
        _tag: "termination.decided",
        ...stamp,
        policy: "approval",
        reason: "approval_rejected",
        detail: `pay (c2) was rejected by bob: not ${secret}`
      }
    ]
    const left = events.map(withoutContent)
    assert.notInclude(JSON.stringify(left), "SECRET-PATH")
    const [plan, blocked, decided, decision] = left
    assert.deepStrictEqual(plan?._tag === "plan.set" ? plan.steps : [], [
      { id: "s1", description: omitted, required: true }
    ])
    assert.deepStrictEqual(blocked?._tag === "tool.blocked" ? blocked.error : undefined, {
      code: "permission_denied",
      message: omitted,
      correctable: false
    })
    assert.deepInclude(decided, { decision: "rejected", by: "bob", reason: omitted })
    assert.deepInclude(decision, { policy: "approval", reason: "approval_rejected", detail: omitted })
    // A stop the runtime or a policy worded keeps its detail.
    const budget: Event.Event = {
      _tag: "termination.decided",
      ...stamp,
      policy: "max_iterations",
      reason: "max_iterations",
      detail: "3 model responses of 3"
    }
    assert.deepStrictEqual(withoutContent(budget), budget)
  })
})
