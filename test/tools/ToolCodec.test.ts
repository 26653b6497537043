/**
 * Which schemas are plain (R9.1): decoding and encoding by them build new values all the
 * way down, so the run freezes what they give in place; any other is copied first.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as ToolCodec from "../../src/tools/ToolCodec.ts"

const plain = (schema: Schema.Top) => ToolCodec.compile(schema as never, schema as never).plainInput

describe("ToolCodec.compile", () => {
  it("R9.1 objects, arrays, records, tuples, unions, primitives and literals are plain", () => {
    for (const schema of [
      Schema.Struct({ a: Schema.Number, b: Schema.optional(Schema.Int), c: Schema.Literals(["x", "y"]) }),
      Schema.Array(Schema.Struct({ s: Schema.String })),
      Schema.Record(Schema.String, Schema.Number),
      Schema.Tuple([Schema.Number, Schema.NullOr(Schema.String)]),
      Schema.Union([Schema.Number, Schema.Boolean])
    ]) {
      assert.isTrue(plain(schema), String(schema.ast))
    }
  })

  it("R9.1 anything that may hand on a value it was given is not: unknown, declarations, transformations", () => {
    for (const schema of [
      Schema.Struct({ a: Schema.Unknown }),
      Schema.Any,
      Schema.Struct({ d: Schema.Date }),
      Schema.Struct({ n: Schema.NumberFromString }),
      Schema.Option(Schema.String),
      Schema.RedactedFromValue(Schema.String),
      // An object with no fields takes any object and hands it on.
      Schema.Struct({}),
      Schema.Struct({ meta: Schema.Struct({}) }),
      Schema.Array(Schema.Struct({})),
      Schema.Union([Schema.Struct({}), Schema.Number])
    ]) {
      assert.isFalse(plain(schema), String(schema.ast))
    }
  })
})
