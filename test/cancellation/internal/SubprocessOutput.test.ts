import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Stream } from "effect"
import * as SubprocessOutput from "../../../src/cancellation/internal/SubprocessOutput.ts"

const bytes = (text: string) => new TextEncoder().encode(text)

describe("SubprocessOutput.collect", () => {
  it.effect("R5.2 R12 output written a byte at a time is kept in one buffer, not a chunk per write", () =>
    Effect.gen(function* () {
      const output = SubprocessOutput.empty()
      const drip = Stream.fromIterable(Array.from({ length: 10_000 }, (_, i) => bytes(String(i % 10))))
      yield* SubprocessOutput.collect(output, 1024 * 1024, drip, Stream.make(bytes("warn\n")))
      assert.strictEqual(output.bytes, 10_005)
      assert.strictEqual(SubprocessOutput.decode(output.stdout).slice(0, 12), "012345678901")
      assert.strictEqual(SubprocessOutput.decode(output.stderr), "warn\n")
      // One buffer that grew by doubling: at most twice what it holds.
      assert.isAtMost(output.stdout.buffer.length, 2 * output.stdout.length)
    })
  )

  it.effect(
    "R5.2 past the limit, reading fails and keeps the output up to the limit; the buffer never grows past it",
    () =>
      Effect.gen(function* () {
        const output = SubprocessOutput.empty()
        const flood = Stream.fromIterable(Array.from({ length: 100 }, () => bytes("x".repeat(1000))))
        const exit = yield* Effect.exit(SubprocessOutput.collect(output, 50_500, flood, Stream.empty))
        assert.isTrue(Exit.isFailure(exit))
        assert.strictEqual(output.stdout.length, 50_500)
        assert.strictEqual(output.stdout.buffer.length, 50_500)
        assert.strictEqual(SubprocessOutput.decode(output.stdout), "x".repeat(50_500))
      })
  )
})
