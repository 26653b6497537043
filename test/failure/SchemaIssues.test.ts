/**
 * R12: what naming every problem of a value may cost, from its schema's shape and its size.
 */
import { Schema } from "effect"
import { assert, describe, it } from "vitest"
import * as SchemaIssues from "../../src/failure/SchemaIssues.ts"

interface Node {
  readonly next?: Node | undefined
}

describe("SchemaIssues bounds (R12)", () => {
  it("R12 issuesPerValue: one for a plain array, each union member's fields added, a recursion counted not followed", () => {
    assert.strictEqual(SchemaIssues.issuesPerValue(Schema.Array(Schema.String).ast), 1)
    const struct = (n: number) =>
      Schema.Struct(Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, Schema.String])))
    assert.strictEqual(SchemaIssues.issuesPerValue(Schema.Union([struct(3), struct(5)]).ast), 8)
    // A suspended schema that builds itself afresh at each step ends, as one that refers to itself does.
    const fresh = (): Schema.Codec<Node> => Schema.Struct({ next: Schema.optional(Schema.suspend(fresh)) })
    assert.isAbove(SchemaIssues.issuesPerValue(fresh().ast), 0)
    const Self: Schema.Codec<Node> = Schema.Struct({ next: Schema.optional(Schema.suspend(() => Self)) })
    assert.isAbove(SchemaIssues.issuesPerValue(Self.ast), 0)
  })

  it("R12 issuesPerValue: a branching recursion built afresh at each step, or a thunk that throws, is no bound (review 79)", () => {
    // JSON as people write it: each thunk makes a new union of an array and a record of itself.
    let thunks = 0
    const Json = (): Schema.Codec<unknown> => {
      thunks++
      return Schema.Union([
        Schema.String,
        Schema.Number,
        Schema.Array(Schema.suspend(Json)),
        Schema.Record(Schema.String, Schema.suspend(Json))
      ])
    }
    // Before, 2^64 paths: seconds, then the heap.
    assert.strictEqual(SchemaIssues.issuesPerValue(Json().ast), Number.POSITIVE_INFINITY)
    assert.isBelow(thunks, SchemaIssues.maxCountedNodes)
    const broken = Schema.Struct({
      next: Schema.suspend((): Schema.Codec<unknown> => {
        throw new Error("a bug in the schema")
      })
    })
    assert.strictEqual(SchemaIssues.issuesPerValue(broken.ast), Number.POSITIVE_INFINITY)
    // No bound: every value is decoded up to its first problem only.
    assert.isFalse(SchemaIssues.describable({}, Number.POSITIVE_INFINITY))
  })

  it("R3.5 R12 issuesPerValue: a part used in many places, or a grammar of kinds that refer to each other, keeps its bound (review 80)", () => {
    const fields = (n: number, of: () => Schema.Top) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, of()]))
    // Five levels, each referring seven times to the one below: five distinct structs, 7^5 paths.
    let level: Schema.Top = Schema.Struct(fields(7, () => Schema.String))
    for (let i = 0; i < 4; i++) {
      const below = level
      level = Schema.Struct(fields(7, () => below))
    }
    assert.strictEqual(SchemaIssues.issuesPerValue(level.ast), 7)
    // Seven kinds, each with an optional field of every other kind, declared once.
    const names = ["Expr", "Stmt", "Decl", "Type", "Pattern", "Block", "Module"]
    const kinds: Record<string, Schema.Top> = {}
    for (const name of names) {
      kinds[name] = Schema.Struct({
        kind: Schema.Literal(name),
        ...Object.fromEntries(
          names
            .filter((other) => other !== name)
            .map((other) => [
              other,
              Schema.optional(Schema.suspend((): Schema.Codec<unknown> => kinds[other] as Schema.Codec<unknown>))
            ])
        )
      })
    }
    const grammar = kinds.Module
    assert.isDefined(grammar)
    if (grammar !== undefined) assert.isFinite(SchemaIssues.issuesPerValue(grammar.ast))
  })

  it("R12 describable: at most 4,096 values, and at most 50,000 issues by the schema's shape", () => {
    const values = (n: number) => Array.from({ length: n - 1 }, () => 0)
    assert.isTrue(SchemaIssues.describable(values(4_096)))
    assert.isFalse(SchemaIssues.describable(values(4_097)))
    assert.isTrue(SchemaIssues.describable(values(20), 2_500))
    assert.isFalse(SchemaIssues.describable(values(21), 2_500))
  })
})
