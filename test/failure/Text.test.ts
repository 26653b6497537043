import { assert, describe, it } from "@effect/vitest"
import * as Text from "../../src/failure/Text.ts"

/** Half of a surrogate pair without its other half. */
const loneHalf = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const wellFormed = (text: string) => !loneHalf.test(text)

describe("Text", () => {
  it("R12 a cut never leaves half of a surrogate pair, wherever it falls", () => {
    const text = "ab😀c漢𠀀d🚀"
    for (let max = 0; max <= text.length + 1; max++) {
      const head = Text.head(text, max)
      assert.isTrue(wellFormed(head), `head at ${max}`)
      assert.isTrue(text.startsWith(head))
      // At most one unit short of `max`: the half it would have split.
      assert.isAtLeast(head.length, Math.min(max, text.length) - 1)
      assert.isAtMost(head.length, max)
      assert.isTrue(wellFormed(Text.clip(text, max)), `clip at ${max}`)
      const tail = Text.tail(text, max)
      assert.isTrue(wellFormed(tail), `tail at ${max}`)
      assert.isTrue(text.endsWith(tail))
      assert.isAtLeast(tail.length, Math.min(max, text.length) - 1)
      assert.isAtMost(tail.length, max)
    }
  })

  it("R12 clip marks a cut only where it cut, with the mark asked for", () => {
    assert.strictEqual(Text.clip("abcdef", 6), "abcdef")
    assert.strictEqual(Text.clip("abcdef", 3), "abc…")
    assert.strictEqual(Text.clip("ab😀", 3), "ab…")
    assert.strictEqual(Text.clip("abcdef", 3, "..."), "abc...")
  })
})
