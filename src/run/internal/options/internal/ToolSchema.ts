/**
 * A tool of the run, as `Tool.make` builds it, and the list of them (names unique).
 * Private to `options/`.
 */
import { Predicate, Schema, SchemaIssue } from "effect"
import type * as Model from "../../../../model/Model.ts"
import * as Tool from "../../../../tools/Tool.ts"
import type * as ToolCodec from "../../../../tools/ToolCodec.ts"
import { Count, fn, Millis, opaque, readOnce, SchemaValue, uniqueBy } from "./Readers.ts"

const namePattern = /^[a-zA-Z0-9_-]{1,64}$/

const ToolName = Schema.String.check(
  Schema.isPattern(namePattern, { expected: "1 to 64 characters of letters, digits, '_' or '-'" })
)

const Metadata = Schema.Struct({
  idempotent: Schema.Boolean,
  maxRetries: Count(0),
  // Read as milliseconds, once: what was checked is what every attempt is bounded by.
  timeout: Schema.optional(Millis),
  sideEffect: Tool.SideEffect,
  destructive: Schema.Boolean,
  needsApproval: Schema.Boolean,
  recoverErrors: Schema.Boolean,
  pathFields: Schema.Array(Schema.String),
  contentFields: Schema.Array(Schema.String)
})

const isTool = (u: unknown): boolean => Predicate.isTagged(u, "Tool")

/** Frozen, with data properties only: what was read from it is what it holds, now and later. */
const isFrozenData = (value: unknown): boolean =>
  Predicate.isObjectOrArray(value) &&
  Object.isFrozen(value) &&
  Object.values(Object.getOwnPropertyDescriptors(value)).every((property) => "value" in property)

/**
 * A tool as `Tool.make` made it, once the Schema has read it: frozen all through, so it is
 * its own snapshot (a run keeps it as it is, with nothing copied).
 */
const isFrozenTool = (from: unknown): from is Tool.Any => {
  if (!isFrozenData(from) || !Predicate.hasProperty(from, "metadata")) return false
  const metadata = from.metadata
  return (
    isFrozenData(metadata) &&
    Predicate.hasProperty(metadata, "pathFields") &&
    isFrozenData(metadata.pathFields) &&
    Predicate.hasProperty(metadata, "contentFields") &&
    isFrozenData(metadata.contentFields)
  )
}

/** A tool of the run, as `Tool.make` builds it: itself when frozen, else a copy of what was checked. */
const ToolSchema = readOnce(
  Schema.Struct({
    _tag: Schema.Literal("Tool"),
    name: ToolName,
    description: Schema.String,
    input: SchemaValue,
    output: SchemaValue,
    definition: opaque<Model.ToolDefinition>(
      (u) => Predicate.hasProperty(u, "name") && Predicate.isString(u.name),
      "the tool's definition (build tools with Tool.make)"
    ),
    codec: opaque<ToolCodec.Compiled>(
      (u) => Predicate.hasProperty(u, "decode") && Predicate.isFunction(u.decode),
      "the tool's compiled schemas (build tools with Tool.make)"
    ),
    metadata: Metadata,
    handler: fn<Tool.Any["handler"]>(),
    postcondition: Schema.optional(fn<NonNullable<Tool.Any["postcondition"]>>()),
    observe: Schema.optional(fn<NonNullable<Tool.Any["observe"]>>()),
    reconcile: Schema.optional(fn<NonNullable<Tool.Any["reconcile"]>>())
  }).check(
    Schema.makeFilter((tool) =>
      tool.definition.name === tool.name
        ? undefined
        : {
            path: ["definition"],
            issue: new SchemaIssue.InvalidValue({ expected: "the definition Tool.make made for this tool's name" })
          }
    )
  ),
  (tool, from): Tool.Any =>
    isFrozenTool(from)
      ? from
      : {
          _tag: "Tool",
          name: tool.name,
          description: tool.description,
          input: tool.input,
          output: tool.output,
          definition: tool.definition,
          codec: tool.codec,
          handler: tool.handler,
          postcondition: tool.postcondition,
          observe: tool.observe,
          reconcile: tool.reconcile,
          metadata: { ...tool.metadata, timeout: tool.metadata.timeout }
        }
)

export const Tools = Schema.Array(
  Schema.Unknown.check(
    Schema.makeFilter(isTool, {
      expected: "a tool (build tools with Tool.make, or AiTools.fromTool for an effect/ai tool)"
    })
  ).pipe(Schema.decodeTo(ToolSchema))
).check(uniqueBy("name", (name) => `two tools are named "${name}"; tool names must be unique`))
