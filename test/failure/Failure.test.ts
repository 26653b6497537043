import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"

const failureCodec = Schema.toCodecJson(Failure.Failure)
const timelineCodec = Schema.toCodecJson(Schema.Array(Event.Event))

// A failure as a later version of the library may store it: a category this version does not know.
const stored = {
  _tag: "Retryable",
  source: "tool",
  category: "quota_window",
  code: "quota_window_closed",
  attempts: 1,
  hint: "the quota window is closed"
}

describe("Failure", () => {
  it("R3.1 a stored failure whose category this version does not know decodes as `other`, code and hint kept", () => {
    const decoded = Schema.decodeUnknownSync(failureCodec)(stored)
    assert.instanceOf(decoded, Failure.Retryable)
    assert.strictEqual(decoded.category, "other")
    assert.strictEqual(decoded.code, "quota_window_closed")
    assert.strictEqual(decoded.hint, "the quota window is closed")
    // Encoding it again writes what this version knows: `other`.
    assert.deepInclude(Schema.encodeSync(failureCodec)(decoded), { category: "other" })
  })

  it("R8 a stored timeline with a failure of an unknown category still decodes", () => {
    const { _tag, ...summary } = stored
    const event = {
      _tag: "model.failed",
      runId: "r",
      seq: 3,
      at: 0,
      iteration: 1,
      failure: { ...summary, classification: "retryable" }
    }
    const [decoded] = Schema.decodeUnknownSync(timelineCodec)([event])
    assert.strictEqual(decoded?._tag, "model.failed")
    if (decoded?._tag === "model.failed") {
      assert.strictEqual(decoded.failure.category, "other")
      assert.strictEqual(decoded.failure.code, "quota_window_closed")
    }
  })

  it("R10 R13 a summary keeps a retryable failure's retryAfterMillis through the log; one written without it still decodes", () => {
    const limited = new Failure.Retryable({
      source: "provider",
      category: "rate_limited",
      code: "rate_limited",
      attempts: 1,
      hint: "HTTP 429",
      retryAfterMillis: 2000
    })
    const summary = Failure.summarize(limited)
    assert.strictEqual(summary.retryAfterMillis, 2000)
    const event = { _tag: "model.failed", runId: "r", seq: 3, at: 0, iteration: 1, failure: summary }
    const [decoded] = Schema.decodeUnknownSync(timelineCodec)(Schema.encodeSync(timelineCodec)([event as Event.Event]))
    assert.isTrue(decoded?._tag === "model.failed" && decoded.failure.retryAfterMillis === 2000)
    // As a log written before the field was kept: no retryAfterMillis, and none made up.
    const { retryAfterMillis: _, ...older } = summary
    const [old] = Schema.decodeUnknownSync(timelineCodec)([{ ...event, failure: older }])
    assert.isTrue(old?._tag === "model.failed" && !("retryAfterMillis" in old.failure))
    // Only a retryable failure has one to keep.
    assert.notProperty(Failure.summarize(new Failure.Permanent({ ...older, attempts: 1 })), "retryAfterMillis")
  })

  it("R3.1 a category that is not text is still a decoding error naming the field", () => {
    const decoded = Schema.decodeUnknownExit(failureCodec)({ ...stored, category: 7 })
    assert.isTrue(decoded._tag === "Failure")
    assert.include(String(decoded), "category")
  })

  it("R3.1 a known category decodes as itself, and a user's own code is kept as written", () => {
    const declined = new Failure.Permanent({
      source: "tool",
      category: "rejected",
      code: "payment_declined",
      attempts: 1,
      hint: "the card was declined"
    })
    const decoded = Schema.decodeUnknownSync(failureCodec)(Schema.encodeSync(failureCodec)(declined))
    assert.deepStrictEqual(decoded, declined)
    assert.strictEqual(decoded.category, "rejected")
    assert.strictEqual(decoded.code, "payment_declined")
  })

  it("R3.1 a failure built with a category outside the union is refused at construction", () => {
    const fields = { source: "tool", category: "made_up", code: "x", attempts: 1, hint: "h" } as const
    // A JavaScript caller (no type checking) can pass any text; the constructor checks it.
    assert.throws(() => new Failure.Permanent(fields as unknown as ConstructorParameters<typeof Failure.Permanent>[0]))
    assert.isFalse(Failure.isFailure({ ...fields, _tag: "Permanent", classification: "permanent" }))
  })

  it("R3.1 isFailure: ours, or a look-alike with every field ours has; nothing else, and never a throw", () => {
    const ours = new Failure.Retryable({ source: "tool", category: "other", code: "x", attempts: 1, hint: "h" })
    assert.isTrue(Failure.isFailure(ours))
    // Another copy of the library: a plain object with every field.
    assert.isTrue(Failure.isFailure({ ...ours, _tag: ours._tag, classification: ours.classification }))
    // A classification that is not its tag's, a function, a response, a hostile proxy.
    assert.isFalse(Failure.isFailure({ ...ours, _tag: "Retryable", classification: "permanent" }))
    assert.isFalse(Failure.isFailure(() => ours))
    assert.isFalse(Failure.isFailure({ text: "done", toolCalls: [] }))
    const hostile = new Proxy(
      {},
      {
        has: () => {
          throw new Error("trap")
        },
        get: () => {
          throw new Error("trap")
        }
      }
    )
    assert.isFalse(Failure.isFailure(hostile))
  })
})
