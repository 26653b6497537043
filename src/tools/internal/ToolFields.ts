/**
 * What `Tool.make` checks of `pathFields` and `contentFields` against the input schema:
 * each names a field the model sends, and a path field holds paths (a string, or an
 * array of strings, possibly absent or null) that reach the handler as the model sent
 * them, since the permission policy judges the arguments as sent (R3.6). A list that
 * names no field, or a path the schema transforms (`Schema.Trim` on the field, a
 * transformation of the whole struct, a renamed key), would leave the policy checking
 * something else than what the handler gets. Private to `tools/`.
 */
import { Predicate, SchemaAST } from "effect"

/** How deep a recursive schema is followed. */
const maxDepth = 8

/** An object a value may be, and whether a transformation above or on it may change its fields. */
interface Found {
  readonly objects: SchemaAST.Objects
  readonly transformed: boolean
}

/**
 * The objects a schema's values may be, at the top: a struct, the structs of a union, the
 * fields of a `Schema.Class`; `undefined` when any object may be (`Unknown`, a declared type).
 */
const objectsOf = (ast: SchemaAST.AST, transformed = false, depth = 0): ReadonlyArray<Found> | undefined => {
  const here = transformed || ast.encoding !== undefined
  switch (ast._tag) {
    case "Objects":
      return [{ objects: ast, transformed: here }]
    case "Union": {
      const found: Array<Found> = []
      for (const member of ast.types) {
        const objects = objectsOf(member, here, depth)
        if (objects === undefined) return undefined
        found.push(...objects)
      }
      return found
    }
    case "Suspend":
      return depth >= maxDepth ? undefined : objectsOf(ast.thunk(), here, depth + 1)
    case "Declaration": {
      // A `Schema.Class`: its fields' struct, made into an instance as it is (its own encoding is that).
      const [fields] = ast.typeParameters
      return ast.typeParameters.length === 1 && fields?._tag === "Objects"
        ? objectsOf(fields, transformed, depth)
        : undefined
    }
    default:
      return []
  }
}

/** The names of the fields a value may have at the top, or `undefined` when it may have any. */
const fieldNames = (ast: SchemaAST.AST): ReadonlySet<string> | undefined => {
  const found = objectsOf(ast)
  if (found === undefined || found.some((f) => f.objects.indexSignatures.length > 0)) return undefined
  return new Set(found.flatMap((f) => f.objects.propertySignatures.map((p) => p.name).filter(Predicate.isString)))
}

/** Whether values of `ast` are text the model sends and the handler gets as it is (or nothing). */
const isPath = (ast: SchemaAST.AST): boolean => {
  if (ast.encoding !== undefined) return false
  switch (ast._tag) {
    case "String":
    case "TemplateLiteral":
    case "Undefined":
    case "Null":
      return true
    case "Literal":
      return Predicate.isString(ast.literal)
    case "Union":
      return ast.types.every(isPath)
    default:
      return false
  }
}

/** A path, or a flat list of paths: the shapes the permission policy checks. */
const isPathOrPaths = (ast: SchemaAST.AST): boolean => {
  if (ast.encoding !== undefined) return false
  if (ast._tag === "Arrays") return [...ast.elements, ...ast.rest].every(isPath)
  if (ast._tag === "Union") return ast.types.every(isPathOrPaths)
  return isPath(ast)
}

/**
 * The types a field named `name` has in the decoded schema, each with whether a
 * transformation may change it; `undefined` when any field may be there untransformed (`Unknown`).
 */
const typesOf = (
  ast: SchemaAST.AST,
  name: string
): ReadonlyArray<{ readonly type: SchemaAST.AST; readonly transformed: boolean }> | undefined => {
  const found = objectsOf(ast)
  if (found === undefined) return ast._tag === "Declaration" ? [] : undefined
  return found.flatMap(({ objects, transformed }) => {
    const named = objects.propertySignatures.filter((p) => p.name === name)
    // A record takes the field by its index signature.
    const types = named.length > 0 ? named.map((p) => p.type) : objects.indexSignatures.map((s) => s.type)
    return types.map((type) => ({ type, transformed }))
  })
}

/** Why the field lists cannot work with `input`, or `undefined`. */
export const problem = (
  input: SchemaAST.AST,
  pathFields: ReadonlyArray<string>,
  contentFields: ReadonlyArray<string>
): string | undefined => {
  const sent = fieldNames(SchemaAST.toEncoded(input))
  for (const [option, fields] of [
    ["pathFields", pathFields],
    ["contentFields", contentFields]
  ] as const) {
    const unknown = sent === undefined ? undefined : fields.find((field) => !sent.has(field))
    if (unknown !== undefined) {
      return `${option} names "${unknown}", which is not a field of the input (its fields: ${[...(sent ?? [])].join(", ") || "none"})`
    }
  }
  for (const field of pathFields) {
    const types = typesOf(input, field)
    // No type under the sent name (a key the schema renames, a declared type): the handler's value is not the one checked.
    if (types !== undefined && (types.length === 0 || types.some((t) => t.transformed || !isPathOrPaths(t.type)))) {
      return `pathFields names "${field}", which must be a string or an array of strings that the schema passes on as sent (no transformation, no renamed key): the permission policy checks the paths the model sent, so the handler must get those`
    }
  }
  return undefined
}
