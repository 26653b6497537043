/**
 * What `Tool.make` checks of `pathFields` and `contentFields` against the input schema:
 * each names a field the model sends, and a path field holds paths (a string, or an
 * array of strings) that reach the handler as the model sent them, since the permission
 * policy judges the arguments as sent (R3.6). A list that names no field, or a path the
 * schema transforms (`Schema.Trim`), would leave the policy checking something else than
 * what the handler gets. Private to `tools/`.
 */
import { Predicate, SchemaAST } from "effect"

/** How deep a recursive schema is followed. */
const maxDepth = 8

/** The objects a schema's values may be, at the top: a struct, or the structs of a union. */
const objectsOf = (ast: SchemaAST.AST, depth = 0): ReadonlyArray<SchemaAST.Objects> | undefined => {
  switch (ast._tag) {
    case "Objects":
      return [ast]
    case "Union": {
      const found: Array<SchemaAST.Objects> = []
      for (const member of ast.types) {
        const objects = objectsOf(member, depth)
        if (objects === undefined) return undefined
        found.push(...objects)
      }
      return found
    }
    case "Suspend":
      return depth >= maxDepth ? undefined : objectsOf(ast.thunk(), depth + 1)
    case "Unknown":
    case "Any":
    case "ObjectKeyword":
    case "Declaration":
      // Takes any key: its fields cannot be listed.
      return undefined
    default:
      return []
  }
}

/** The names of the fields a value may have at the top, or `undefined` when it may have any. */
const fieldNames = (ast: SchemaAST.AST): ReadonlySet<string> | undefined => {
  const objects = objectsOf(ast)
  if (objects === undefined || objects.some((o) => o.indexSignatures.length > 0)) return undefined
  return new Set(objects.flatMap((o) => o.propertySignatures.map((p) => p.name).filter(Predicate.isString)))
}

/** Whether values of `ast` are text the model sends as it is: a string, or an array of them. */
const holdsPaths = (ast: SchemaAST.AST): boolean => {
  if (ast.encoding !== undefined) return false
  switch (ast._tag) {
    case "String":
    case "TemplateLiteral":
    case "Undefined":
      return true
    case "Literal":
      return Predicate.isString(ast.literal)
    case "Arrays":
      return [...ast.elements, ...ast.rest].every(holdsPaths)
    case "Union":
      return ast.types.every(holdsPaths)
    default:
      return false
  }
}

/** The types of the field `name`, in every object of the schema that has it. */
const typesOf = (ast: SchemaAST.AST, name: string): ReadonlyArray<SchemaAST.AST> =>
  (objectsOf(ast) ?? []).flatMap((o) => o.propertySignatures.filter((p) => p.name === name).map((p) => p.type))

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
    // A field renamed by the schema (`encodeKeys`) is found by its sent name only: its type is read there.
    const types = typesOf(input, field)
    const sentTypes = types.length > 0 ? types : typesOf(SchemaAST.toEncoded(input), field)
    if (!sentTypes.every(holdsPaths)) {
      return `pathFields names "${field}", which must be a string or an array of strings that the schema does not transform: the permission policy checks the paths the model sent, so the handler must get those`
    }
  }
  return undefined
}
