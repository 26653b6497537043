import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Effect, Schema } from "effect"
import * as RunResult from "../../src/run/RunResult.ts"
import * as Properties from "../../src/testing/Properties.ts"
import { Case, longestBlock, runCase, secret } from "../support/hostile.ts"

/** At least 1,000 generated cases; `PROPERTY_RUNS=20000` for a deeper local search. */
const runs = Math.max(1_000, Number(process.env.PROPERTY_RUNS ?? 1_000))

const codec = Schema.toCodecJson(RunResult.RunResult)

/** The invariants of every run's ending and timeline that hostile code must not break. */
const kept = ["R2.5", "R1.2", "R8", "R5.2 calls accounted for", "R5.2 one settlement per attempt"]

describe("R12 hostile user code", () => {
  it.effect.prop(
    "R12 whatever user code does, every run returns a RunResult that encodes, by its deadline plus the longest block",
    [Arbitrary.schema(Case)],
    ([c]) =>
      Effect.gen(function* () {
        const deadline = c.runTimeoutMillis + longestBlock(c)
        // Far past the deadline: a run still going then is a hang.
        const result = yield* runCase(c, deadline + 60_000)
        if (result === undefined) return assert.fail(`the run did not end: ${JSON.stringify(c)}`)
        const encoded = Schema.encodeUnknownExit(codec)(result)
        assert.isTrue(encoded._tag === "Success", `the result does not encode: ${String(encoded)}`)
        const text = JSON.stringify(encoded._tag === "Success" ? encoded.value : null)
        assert.deepStrictEqual(Schema.decodeUnknownSync(codec)(JSON.parse(text)), result)
        // The grace: the driver's 10 ms step, on top of the longest time the code held the event loop.
        assert.isAtMost(result.elapsedMillis, deadline + 10, `${result.stopReason} after ${result.elapsedMillis} ms`)
        assert.notInclude(text, secret)
        const broken = Properties.check(result, {
          runTimeoutMillis: c.runTimeoutMillis,
          maxRecoveries: 8,
          scheduleRetries: 2
        }).filter((v) => kept.some((prefix) => v.invariant.startsWith(prefix)))
        assert.deepStrictEqual(broken, [], JSON.stringify(broken))
      }),
    { timeout: 240_000, arbitrary: { runs } }
  )
})
