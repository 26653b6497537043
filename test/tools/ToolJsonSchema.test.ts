import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema, SchemaTransformation } from "effect"
import * as Tool from "../../src/tools/Tool.ts"

const tool = <I>(input: Schema.Codec<I, unknown>) =>
  Tool.make({
    name: "t",
    description: "a tool",
    input,
    output: Schema.String,
    sideEffect: "none",
    handler: () => Effect.succeed("ok")
  })

const decodes = <I>(input: Schema.Codec<I, unknown>, args: unknown) =>
  Schema.decodeUnknownExit(input)(typeof args === "string" ? JSON.parse(args) : args)._tag === "Success"

describe("tool JSON Schemas (R11)", () => {
  it("R11 a Schema.Number is described as a number, never as a union with the strings Infinity and NaN", () => {
    const add = tool(Schema.Struct({ a: Schema.Number, b: Schema.Union([Schema.String, Schema.Number]) }))
    const { parameters, strict } = add.definition
    assert.deepStrictEqual(parameters, {
      type: "object",
      properties: { a: { type: "number" }, b: { anyOf: [{ type: "string" }, { type: "number" }] } },
      required: ["a", "b"],
      additionalProperties: true
    })
    assert.notInclude(JSON.stringify(strict?.parameters), "Infinity")
    assert.deepStrictEqual(strict?.parameters, {
      type: "object",
      properties: { a: { type: "number" }, b: { anyOf: [{ type: "string" }, { type: "number" }] } },
      required: ["a", "b"],
      additionalProperties: false
    })
  })

  it("R11 the strict form closes every object and requires every property, an optional one as nullable", () => {
    const input = Schema.Struct({
      path: Schema.String,
      mode: Schema.optional(Schema.Literals(["overwrite", "append"])),
      meta: Schema.optional(Schema.Struct({ tag: Schema.optional(Schema.String) }))
    })
    const strict = tool(input).definition.strict
    assert.deepStrictEqual(strict?.parameters, {
      type: "object",
      properties: {
        path: { type: "string" },
        mode: { anyOf: [{ type: "string", enum: ["overwrite", "append"] }, { type: "null" }] },
        meta: {
          anyOf: [
            {
              type: "object",
              properties: { tag: { anyOf: [{ type: "string" }, { type: "null" }] } },
              required: ["tag"],
              additionalProperties: false
            },
            { type: "null" }
          ]
        }
      },
      required: ["path", "mode", "meta"],
      additionalProperties: false
    })
    // What a strict model sends (nulls for the fields it leaves out) comes back in the tool's own shape.
    const sent = '{"path": "a.md", "mode": null, "meta": {"tag": null}}'
    assert.isFalse(decodes(input, sent))
    const restored = strict?.restore(sent)
    assert.deepStrictEqual(JSON.parse(String(restored)), { path: "a.md", meta: {} })
    assert.isTrue(decodes(input, restored))
    assert.deepStrictEqual(JSON.parse(String(strict?.restore({ path: "b", mode: "append", meta: null }))), {
      path: "b",
      mode: "append"
    })
  })

  it("R11 R3.5 arguments that do not fit the strict form are handed on as they are, for the pipeline to refuse", () => {
    const strict = tool(Schema.Struct({ n: Schema.Int })).definition.strict
    for (const args of ['{"n": 1.5}', '{"n": ', "not json", '{"n": "1"}', 42]) {
      assert.strictEqual(strict?.restore(args), args)
    }
  })

  it("R11 records and tuples take strict mode's own shapes, and come back as they were", () => {
    const input = Schema.Struct({
      scores: Schema.Record(Schema.String, Schema.Number),
      pair: Schema.Tuple([Schema.String, Schema.Int])
    })
    const strict = tool(input).definition.strict
    assert.isDefined(strict)
    const sent = { scores: [{ "0": "a", "1": 1 }], pair: { "0": "x", "1": 2 } }
    assert.deepStrictEqual(JSON.parse(String(strict?.restore(sent))), { scores: { a: 1 }, pair: ["x", 2] })
  })

  it("R11 an input strict mode cannot express has no strict form, and one with no fields is an empty object", () => {
    assert.isUndefined(tool(Schema.Struct({ value: Schema.Unknown })).definition.strict)
    assert.isUndefined(
      tool(Schema.Union([Schema.Struct({ a: Schema.String }), Schema.Struct({ b: Schema.String })])).definition.strict
    )
    assert.deepStrictEqual(tool(Schema.Struct({})).definition.parameters, { type: "object", properties: {} })
  })

  it("R11 a class, a recursive schema or a union of objects at the root keeps its fields in what the model is shown", () => {
    class Point extends Schema.Class<Point>("Point")({ x: Schema.Number }) {}
    const byClass = tool(Point).definition.parameters as { type: string; properties: unknown; required: unknown }
    assert.deepStrictEqual(
      [byClass.type, byClass.properties, byClass.required],
      ["object", { x: { type: "number" } }, ["x"]]
    )

    interface Node {
      readonly name: string
      readonly children: ReadonlyArray<Node>
    }
    const NodeSchema: Schema.Codec<Node> = Schema.Struct({
      name: Schema.String,
      children: Schema.Array(Schema.suspend(() => NodeSchema))
    })
    const recursive = tool(NodeSchema).definition.parameters as { type: string; properties: Record<string, unknown> }
    assert.strictEqual(recursive.type, "object")
    assert.deepStrictEqual(Object.keys(recursive.properties), ["name", "children"])
    // The reference inside still resolves: the definitions travel with the root.
    assert.include(JSON.stringify(recursive), '"$defs"')

    // A union of objects is one object (some chat APIs refuse a union at the root): every
    // member's fields, required where every member requires them.
    const either = tool(
      Schema.Union([
        Schema.Struct({ a: Schema.String, id: Schema.Number }),
        Schema.Struct({ b: Schema.Number, id: Schema.Number })
      ])
    )
    assert.deepStrictEqual(either.definition.parameters, {
      type: "object",
      properties: { a: { type: "string" }, id: { type: "number" }, b: { type: "number" } },
      required: ["id"]
    })
  })
})

describe("Tool.make (R12: a definition that cannot work is refused where it is written)", () => {
  const base = {
    name: "t",
    description: "a tool",
    input: Schema.Struct({ path: Schema.String }),
    output: Schema.String,
    sideEffect: "write" as const,
    handler: () => Effect.succeed("ok")
  }
  const refused = (options: object, reason: string) => {
    // Options as a caller without types may pass them.
    const untyped = options as Tool.Options<unknown, unknown, never>
    assert.throws(() => Tool.make(untyped), Tool.InvalidToolDefinition, reason)
  }

  it("R3.6 path and content field lists must be lists of names: a string is never read as its letters", () => {
    refused({ ...base, pathFields: "path" }, 'pathFields must be an array of field names, got "path"')
    refused({ ...base, contentFields: "content" }, "contentFields must be an array of field names")
    refused({ ...base, pathFields: ["path", ""] }, "pathFields must hold non-empty field names")
    assert.deepStrictEqual(Tool.make({ ...base, pathFields: ["path"] }).metadata.pathFields, ["path"])
  })

  it("R3.6 path and content fields must be fields of the input; a path field a string or strings sent as they are", () => {
    refused(
      { ...base, pathFields: ["file"] },
      'pathFields names "file", which is not a field of the input (its fields: path)'
    )
    refused({ ...base, contentFields: ["body"] }, 'contentFields names "body", which is not a field of the input')
    // The policy checks what the model sent: a path the schema changes would reach the handler unchecked.
    const changed = SchemaTransformation.transform<{ readonly path: string }, { readonly path: string }>({
      decode: ({ path }) => ({ path: `/etc/${path}` }),
      encode: ({ path }) => ({ path: path.replace(/^\/etc\//, "") })
    })
    const renamed = Schema.Struct({ filePath: Schema.String }).pipe(Schema.encodeKeys({ filePath: "file_path" }))
    for (const [input, field] of [
      [Schema.Struct({ path: Schema.Trim }), "path"],
      [
        Schema.Struct({ path: Schema.String }).pipe(Schema.decodeTo(Schema.Struct({ path: Schema.String }), changed)),
        "path"
      ],
      [renamed, "file_path"],
      [Schema.Struct({ path: Schema.Number }), "path"],
      // The policy checks a path or a flat list of them: a list of lists would go unchecked.
      [Schema.Struct({ path: Schema.Array(Schema.Array(Schema.String)) }), "path"]
    ] as const) {
      refused(
        { ...base, input, pathFields: [field] },
        `pathFields names "${field}", which must be a string or an array of strings that the schema passes on as sent`
      )
    }
    class Located extends Schema.Class<Located>("Located")({ path: Schema.String }) {}
    const accepted: ReadonlyArray<Schema.Top> = [
      Schema.Struct({ path: Schema.String.check(Schema.isMinLength(1)) }),
      Schema.Struct({ path: Schema.NonEmptyString }),
      Schema.Struct({ path: Schema.optional(Schema.String) }),
      Schema.Struct({ path: Schema.optional(Schema.NullOr(Schema.String)) }),
      Schema.Struct({ path: Schema.Array(Schema.String) }),
      Schema.Union([Schema.Struct({ path: Schema.String }), Schema.Struct({ path: Schema.Literal("a") })]),
      Schema.Record(Schema.String, Schema.String),
      Located
    ]
    for (const input of accepted) {
      assert.strictEqual(Tool.make({ ...base, input: input as Schema.Codec<unknown>, pathFields: ["path"] }).name, "t")
    }
  })

  it("R3.5 the input must be a schema of a JSON object, since the model sends arguments as one", () => {
    refused({ ...base, input: Schema.String }, "input must be a schema of a JSON object")
    refused({ ...base, input: Schema.Never }, "input must be a schema of a JSON object")
    refused({ ...base, input: Schema.Union([Schema.String, Schema.Number]) }, "input must be a schema of a JSON object")
    // What can hold an object is accepted: a pass-through tool's Unknown, a nullable struct.
    for (const input of [
      Schema.Unknown,
      Schema.NullOr(Schema.Struct({ a: Schema.String })),
      Schema.Record(Schema.String, Schema.Number)
    ]) {
      assert.strictEqual(Tool.make({ ...base, input }).name, "t")
    }
    refused({ ...base, input: { path: "string" } }, "input must be a Schema")
    refused({ ...base, output: undefined }, "output must be a Schema")
  })

  it("R12 every other option is checked by its type: handler, side-effect class, flags, timeout, functions", () => {
    refused({ ...base, handler: undefined }, "handler must be a function, got undefined")
    refused(
      { ...base, sideEffect: "nuke" },
      'sideEffect must be one of "none", "read", "write", "external", got "nuke"'
    )
    refused({ ...base, idempotent: "yes" }, "idempotent must be a boolean, got string")
    refused({ ...base, timeout: "Infinity" }, "timeout must be a positive, finite duration")
    refused({ ...base, timeout: 0 }, "timeout must be a positive, finite duration")
    // Positive, but less than effect's nanosecond: refused as what it is, not as one that is not positive.
    refused(
      { ...base, timeout: "0.000000001 millis" },
      'timeout must be at least 1 nanosecond (effect counts time in whole nanoseconds), got "0.000000001 millis"'
    )
    refused({ ...base, timeout: 1e-9 }, "timeout must be at least 1 nanosecond")
    // As a Duration effect made of it (0 nanoseconds): before, "a positive, finite duration, got an object".
    refused({ ...base, timeout: Duration.millis(4e-7) }, "timeout must be at least 1 nanosecond")
    // A value whose `toString` throws, or that has none, is named by its kind: the refusal is the
    // typed one, not the TypeError of turning it into text.
    refused({ ...base, maxRetries: Object.create(null) }, "maxRetries must be an integer >= 0, got an object")
    const throwing = {
      toString() {
        throw new Error("x")
      }
    }
    refused({ ...base, timeout: throwing }, "timeout must be a positive, finite duration, got an object")
    refused({ ...base, description: 5 }, "description must be a string, got number")
    refused({ ...base, observe: "json" }, "observe must be a function, got string")
    refused({ ...base, name: "no spaces" }, "the name must be 1 to 64 characters")
  })
})
