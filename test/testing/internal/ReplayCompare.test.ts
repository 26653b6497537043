import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Event from "../../../src/events/Event.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import * as FailureBoundary from "../../../src/failure/FailureBoundary.ts"
import { differences } from "../../../src/testing/internal/ReplayCompare.ts"

const decode = Schema.decodeUnknownSync(Event.Event)

/** A `model.failed` of a request its step left no time for, with `hint` as a version wrote it. */
const notAsked = (hint: string) =>
  decode({
    _tag: "model.failed",
    runId: "r1",
    seq: 4,
    at: 100,
    iteration: 2,
    failure: {
      ...Failure.summarize(
        FailureBoundary.timeout({ source: "provider", layer: "step", limitMillis: 0, afterMillis: 0 })
      ),
      hint
    }
  })

describe("ReplayCompare (R13)", () => {
  it("R13 R4.3 a request never made, as recordings before 0.3.0 worded it (cut off after 0 ms), compares equal to its wording now", () => {
    const now = FailureBoundary.timeout({ source: "provider", layer: "step", limitMillis: 0, afterMillis: 0 }).hint
    assert.strictEqual(now, "no answer within the step deadline, which had passed (it was not asked)")
    // Before, the hint differed: the replay of such a recording diverged at its first request never made.
    assert.deepStrictEqual(
      differences(notAsked("no answer within the step deadline (cut off after 0 ms)"), notAsked(now)),
      []
    )
    // What the hint says is still compared: another layer is another hint.
    assert.deepStrictEqual(
      differences(notAsked("no answer within the run deadline (cut off after 0 ms)"), notAsked(now)),
      ["failure"]
    )
  })
})
