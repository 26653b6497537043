/**
 * Which schemas are plain (R9.1): decoding and encoding by them build new values all the
 * way down, so the run freezes what they give in place; any other is copied first. And what a
 * failure to decode arguments holds (R12): bounded, whatever the model sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Exit, Schema, type SchemaIssue } from "effect"
import * as SchemaIssues from "../../src/failure/SchemaIssues.ts"
import * as ToolArguments from "../../src/tools/ToolArguments.ts"
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

/** How many leaves an issue holds: the issue objects a failure keeps alive, at the least. */
const leavesOf = (root: SchemaIssue.Issue): number => {
  let count = 0
  const stack: Array<SchemaIssue.Issue> = [root]
  for (let issue = stack.pop(); issue !== undefined; issue = stack.pop()) {
    if (issue._tag === "Pointer" || issue._tag === "Filter" || issue._tag === "Encoding") stack.push(issue.issue)
    else if (issue._tag === "Composite" || issue._tag === "AnyOf") stack.push(...issue.issues)
    else count++
  }
  return count
}

const issueOf = (exit: Exit.Exit<unknown, Schema.SchemaError>): SchemaIssue.Issue => {
  const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
  if (!Schema.isSchemaError(error)) return assert.fail("expected a schema error")
  return error.issue
}

describe("ToolCodec.compile: wrong arguments", () => {
  const names = Schema.Struct({ x: Schema.Array(Schema.String), n: Schema.Number })
  const codec = ToolCodec.compile(names as never, names as never)

  it("R12 arguments wrong in 200,000 places keep a failure of a bounded size: their first problem, and a word that there may be more", () => {
    const issue = issueOf(codec.decode({ x: Array.from({ length: 200_000 }, () => 0), n: "one" }))
    // One issue per wrong element before: 200,001 of them, held twice while described.
    assert.isAtMost(leavesOf(issue), 2)
    const described = ToolArguments.describeIssue(issue)
    assert.deepStrictEqual(described.fieldPaths, ["arguments.x[0]", "arguments"])
    assert.include(described.message, "arguments.x[0]: Expected string")
    assert.include(described.message, "too large to name each; there may be more")
    assert.notInclude(described.message, "more problems")
  })

  it("R12 arguments of at most maxDescribedValues values are described as before: the first 20 fields and a count of the rest", () => {
    const issue = issueOf(codec.decode({ x: Array.from({ length: 30 }, () => 0), n: "one" }))
    const described = ToolArguments.describeIssue(issue)
    assert.strictEqual(described.fieldPaths.length, SchemaIssues.maxFields)
    assert.strictEqual(described.fieldPaths[0], "arguments.x[0]")
    assert.isTrue(described.message.endsWith("and 11 more problems"), described.message)
  })

  it("R12 large arguments that fit decode whole, and the JSON form still reads what the schema does not", () => {
    const x = Array.from({ length: 200_000 }, (_, i) => `name-${i}`)
    const decoded = codec.decode({ x, n: 1 })
    assert.isTrue(Exit.isSuccess(decoded))
    if (Exit.isSuccess(decoded)) assert.deepStrictEqual(decoded.value, { x, n: 1 })
    const dated = Schema.Struct({ at: Schema.Date })
    const fromJson = ToolCodec.compile(dated as never, dated as never).decode({ at: "2026-01-02T00:00:00.000Z" })
    assert.isTrue(Exit.isSuccess(fromJson))
  })
})
