import { assert } from "@effect/vitest"
import { Schema } from "effect"
import * as RunResult from "../../src/run/RunResult.ts"

const codec = Schema.toCodecJson(RunResult.RunResult)

/** The result is valid against its schema and comes back the same through JSON text (R8). */
export const assertRoundTrips = (result: RunResult.RunResult): void => {
  assert.isTrue(Schema.is(RunResult.RunResult)(result))
  const json = JSON.stringify(Schema.encodeUnknownSync(codec)(result))
  assert.deepStrictEqual(Schema.decodeUnknownSync(codec)(JSON.parse(json)), result)
}
