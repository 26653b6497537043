/**
 * The JSON Schemas a model is shown for a tool's input (R11), private to the runtime:
 * the plain one, and the strict form of OpenAI's structured outputs (`strict: true`),
 * with the way back from the arguments a model sends against it.
 *
 * Both describe what the tool pipeline accepts. effect's generator describes a number
 * as `anyOf [number, "Infinity" | "-Infinity" | "NaN"]` (its JSON codec's encoding of
 * non-finite numbers), which the pipeline, decoding the model's JSON with the tool's
 * own schema, refuses: a number is described as a number here. Chat APIs take only
 * objects as a function's parameters: a root that names its definition (a class, a
 * recursive schema) is given as that definition, a union of objects as one object with
 * every member's properties (some APIs refuse a union at the root), and any other root (`Schema.Struct({})` is "anything but null") as an
 * object with no known field.
 *
 * The strict form is effect's (`ai/OpenAiStructuredOutput`): every object closed with
 * every property required, an optional one as nullable, records and tuples encoded in
 * shapes strict mode can express; its codec brings the model's arguments back. A tool
 * whose form strict mode still cannot take (a value of any JSON type, a root that is not
 * an object) has none, and is sent without `strict`.
 */
import { Exit, Schema } from "effect"
import { toCodecOpenAI } from "effect/ai/OpenAiStructuredOutput"
import { getJsonSchemaFromSchema } from "effect/ai/Tool"
import type * as Model from "../model/Model.ts"

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const nonFinite = ["Infinity", "-Infinity", "NaN"]

/** The `"Infinity" | "-Infinity" | "NaN"` member effect adds next to a number. */
const isNonFiniteMember = (member: unknown): boolean => {
  if (!isObject(member) || member.type !== "string") return false
  const values = member.enum
  return Array.isArray(values) && values.length === nonFinite.length && nonFinite.every((v) => values.includes(v))
}

const isNumberMember = (member: unknown): boolean =>
  isObject(member) && (member.type === "number" || member.type === "integer")

/** A union's members without the non-finite strings beside a number, each member once. */
const members = (list: ReadonlyArray<unknown>): Array<unknown> => {
  const hasNumber = list.some(isNumberMember)
  const seen = new Set<string>()
  const out: Array<unknown> = []
  for (const member of list) {
    if (hasNumber && isNonFiniteMember(member)) continue
    const key = JSON.stringify(member)
    if (seen.has(key)) continue
    seen.add(key)
    out.push(member)
  }
  return out
}

const nested = ["properties", "patternProperties", "$defs", "definitions"]
const single = ["items", "additionalProperties", "not", "contains", "propertyNames"]
const lists = ["anyOf", "oneOf", "allOf", "prefixItems"]

/** Rewrites every number's union (see the module doc), at every depth of the schema. */
export const finiteNumbers = (schema: unknown): unknown => {
  if (!isObject(schema)) return schema
  const out: Json = {}
  for (const [key, value] of Object.entries(schema)) {
    if (nested.includes(key) && isObject(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, finiteNumbers(sub)]))
    } else if (single.includes(key)) {
      out[key] = finiteNumbers(value)
    } else if (lists.includes(key) && Array.isArray(value)) {
      out[key] = (key === "anyOf" || key === "oneOf" ? members(value) : value).map(finiteNumbers)
    } else {
      out[key] = value
    }
  }
  for (const key of ["anyOf", "oneOf"]) {
    const list = out[key]
    // A union left with one member is that member (its own keywords win over the union's).
    if (Array.isArray(list) && list.length === 1 && isObject(list[0])) {
      const { [key]: _, ...rest } = out
      return { ...rest, ...list[0] }
    }
  }
  return out
}

/** The definition a `$ref` of the schema's own `$defs` names (`#/$defs/In`), if it has it. */
const definition = (schema: Json, ref: unknown): Json | undefined => {
  const defs = schema.$defs
  if (typeof ref !== "string" || !ref.startsWith("#/$defs/") || !isObject(defs)) return undefined
  const found = defs[ref.slice("#/$defs/".length)]
  return isObject(found) ? found : undefined
}

/**
 * The root as chat APIs need a function's parameters to be, an object, with its fields
 * kept: a root that names its definition (a `Schema.Class`, a recursive schema) is that
 * definition, its `$defs` kept for the references inside; a union of objects says it is
 * an object beside its members; any other root is an object with no known field.
 */
const objectRoot = (schema: unknown): unknown => {
  if (!isObject(schema)) return { type: "object", properties: {} }
  if (schema.type === "object") return schema
  const named = definition(schema, schema.$ref)
  if (named !== undefined && named.type === "object") {
    const { $ref: _, ...rest } = schema
    return { ...rest, ...named }
  }
  const members = Array.isArray(schema.anyOf)
    ? schema.anyOf.map((m) => (isObject(m) ? (definition(schema, m.$ref) ?? m) : m))
    : []
  const objects = members.filter((m): m is Json => isObject(m) && m.type === "object")
  if (members.length > 0 && objects.length === members.length) return merged(schema, objects)
  return { type: "object", properties: {} }
}

/**
 * A union of objects as one object, since chat APIs refuse a union at the root of a
 * function's parameters (Anthropic's among them): every member's properties (a property
 * several members describe differently is any of them), required where every member
 * requires it. The tool's own schema still decides what a call may send.
 */
const merged = (schema: Json, members: ReadonlyArray<Json>): Json => {
  // A `Map` by field name: a field may be named `__proto__`.
  const properties = new Map<string, unknown>()
  for (const member of members) {
    if (!isObject(member.properties)) continue
    for (const [key, sub] of Object.entries(member.properties)) {
      const seen = properties.get(key)
      if (seen === undefined) properties.set(key, sub)
      else if (JSON.stringify(seen) !== JSON.stringify(sub)) {
        const options = isObject(seen) && Array.isArray(seen.anyOf) ? seen.anyOf : [seen]
        properties.set(key, { anyOf: [...options, sub] })
      }
    }
  }
  const requiredBy = (member: Json): ReadonlyArray<unknown> => (Array.isArray(member.required) ? member.required : [])
  const required = [...properties.keys()].filter((key) => members.every((m) => requiredBy(m).includes(key)))
  const { anyOf: _, ...rest } = schema
  return {
    ...rest,
    type: "object",
    properties: Object.fromEntries(properties),
    ...(required.length > 0 ? { required } : {})
  }
}

/**
 * The plain JSON Schema of a tool's input: effect's (draft 2020-12, with `$defs`), its
 * numbers described as numbers and its root an object.
 */
export const plain = (input: Schema.Top): unknown => objectRoot(finiteNumbers(getJsonSchemaFromSchema(input)))

const parseJson = Schema.decodeUnknownExit(Schema.fromJsonString(Schema.Unknown))

const where = (path: ReadonlyArray<string>) => `In context=(${path.map((p) => `'${p}'`).join(", ")})`

/**
 * What OpenAI's strict mode refuses in a schema, in its words, or `undefined`: an object
 * that is not closed or does not require every property, a subschema with no type.
 */
export const strictIssue = (schema: unknown, path: ReadonlyArray<string> = []): string | undefined => {
  if (!isObject(schema)) return `${where(path)}, schema must be an object`
  const union = schema.anyOf ?? schema.oneOf
  if (Array.isArray(union)) {
    for (let i = 0; i < union.length; i++) {
      const issue = strictIssue(union[i], [...path, "anyOf", String(i)])
      if (issue !== undefined) return issue
    }
  } else if (schema.type === undefined && schema.$ref === undefined && schema.enum === undefined) {
    return `${where(path)}, schema must have a 'type' key`
  }
  if (schema.type === "object") {
    if (schema.additionalProperties !== false) {
      return `${where(path)}, 'additionalProperties' is required to be supplied and to be false`
    }
    const properties = isObject(schema.properties) ? schema.properties : {}
    const required = Array.isArray(schema.required) ? schema.required : []
    const missing = Object.keys(properties).filter((key) => !required.includes(key))
    if (missing.length > 0) {
      return `${where(path)}, 'required' is required to be supplied and to be an array including every key in properties. Missing '${missing[0]}'`
    }
    for (const [key, sub] of Object.entries(properties)) {
      const issue = strictIssue(sub, [...path, "properties", key])
      if (issue !== undefined) return issue
    }
  }
  if (schema.type === "array" && schema.items !== undefined) return strictIssue(schema.items, [...path, "items"])
  for (const defs of ["$defs", "definitions"]) {
    const table = schema[defs]
    if (!isObject(table)) continue
    for (const [key, sub] of Object.entries(table)) {
      const issue = strictIssue(sub, [...path, defs, key])
      if (issue !== undefined) return issue
    }
  }
  return undefined
}

/**
 * The strict form of a tool's input (see the module doc), or `undefined` when strict
 * mode cannot take it.
 */
export const strict = (input: Schema.Codec<unknown, unknown>): Model.StrictForm | undefined => {
  let converted: ReturnType<typeof toCodecOpenAI<unknown, unknown, never, never>>
  // Not `getJsonSchemaFromSchema(input, { transformer })`: it keeps only the JSON Schema, and
  // the codec beside it is what brings a strict model's arguments back (`restore`).
  try {
    converted = toCodecOpenAI(input)
  } catch {
    return undefined
  }
  const parameters = finiteNumbers(converted.jsonSchema)
  if (strictIssue(parameters) !== undefined) return undefined
  const fromStrict = Schema.decodeUnknownExit(converted.codec)
  const toOwn = Schema.encodeUnknownExit(input)
  const restore = (args: unknown): unknown => {
    try {
      const value = typeof args === "string" ? parseJson(args) : Exit.succeed(args)
      if (Exit.isFailure(value)) return args
      const decoded = fromStrict(value.value)
      if (Exit.isFailure(decoded)) return args
      const own = toOwn(decoded.value)
      return Exit.isSuccess(own) ? (JSON.stringify(own.value) ?? args) : args
    } catch {
      // A value JSON cannot hold, or one too deep for the encoder: the pipeline judges it.
      return args
    }
  }
  return { parameters, restore }
}
