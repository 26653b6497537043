import { assert, describe, it } from "@effect/vitest"
import type * as Event from "../../../src/events/Event.ts"
import { omitted, withoutContent } from "../../../src/observability/internal/Content.ts"

describe("content left out of a recording", () => {
  const stamp = { runId: "r", seq: 3, at: 0 }
  it("R3.1 a contradicted success's output is content: left out; a plain failure has none", () => {
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
    assert.deepStrictEqual(withoutContent(without as Event.Event), without)
  })
})
