import { assert, describe, it } from "@effect/vitest"
import { DateTime } from "effect"
import * as OwnCopy from "../../../src/run/internal/OwnCopy.ts"

describe("OwnCopy.frozenPlainCopy", () => {
  it("R9.1 R12 plain parts are copied and frozen, shared ones once; instances, holes and prototypes are kept", () => {
    const shared = { n: 1 }
    const at = DateTime.makeUnsafe(0)
    const holed: Array<number> = [1]
    holed.length = 3
    const bare = Object.assign(Object.create(null), { k: "v" })
    const root = { a: shared, b: shared, list: [shared], holed, at, bare }
    const copy = OwnCopy.frozenPlainCopy(root)
    assert.notStrictEqual(copy, root)
    assert.isTrue(Object.isFrozen(copy) && Object.isFrozen(copy.a) && Object.isFrozen(copy.holed))
    // The same value met twice is one copy; the originals are left as they were.
    assert.strictEqual(copy.a, copy.b)
    assert.strictEqual(copy.list[0], copy.a)
    assert.isFalse(Object.isFrozen(shared) || Object.isFrozen(holed) || Object.isFrozen(root))
    // An instance of a class is the value itself, not frozen; a hole stays a hole; no prototype stays none.
    assert.strictEqual(copy.at, at)
    assert.isFalse(Object.isFrozen(at))
    assert.strictEqual(copy.holed.length, 3)
    assert.isFalse(1 in copy.holed)
    assert.isNull(Object.getPrototypeOf(copy.bare))
    // A cycle is copied as a cycle.
    const cyclic: { self?: unknown } = {}
    cyclic.self = cyclic
    const again = OwnCopy.frozenPlainCopy(cyclic)
    assert.strictEqual(again.self, again)
    assert.strictEqual(OwnCopy.frozenPlainCopy(5), 5)
  })
})
