import { assert, describe, it } from "@effect/vitest"
import { fitToRow } from "../../../src/observability/internal/Terminal.ts"

describe("Terminal.fitToRow", () => {
  it("R12 a line is cut to the row, its last cell free: wide characters count two cells, combining ones none", () => {
    // 20 columns: 19 cells of room, the last of them the `…` of a cut line.
    assert.strictEqual(fitToRow("a".repeat(19), 20), "a".repeat(19))
    assert.strictEqual(fitToRow("a".repeat(20), 20), `${"a".repeat(18)}…`)
    // Emoji shown as emoji and CJK are two cells each.
    assert.strictEqual(fitToRow("🚀".repeat(60), 20), `${"🚀".repeat(9)}…`)
    assert.strictEqual(fitToRow("✅".repeat(60), 20), `${"✅".repeat(9)}…`)
    assert.strictEqual(fitToRow("漢".repeat(50), 20), `${"漢".repeat(9)}…`)
    // A virama combines (no cell), a vowel sign is spacing (one cell): "क्षत्रिय" is 6 cells.
    assert.strictEqual(fitToRow("क्षत्रिय".repeat(20), 20), `${"क्षत्रिय".repeat(3)}…`)
    // A width not known leaves the line as it is.
    assert.strictEqual(fitToRow("a".repeat(500), undefined), "a".repeat(500))
  })
})
