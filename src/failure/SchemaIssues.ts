/**
 * Schema issues in words a model or a person can act on: one message per field, with its
 * path (`arguments.content: field is required`).
 *
 * @since 0.2.0
 */
import { Predicate, SchemaIssue } from "effect"

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

const formatPath = (path: ReadonlyArray<PropertyKey>, root: string): string => {
  const joined = path.reduce<string>(
    (acc, key) => (Predicate.isNumber(key) ? `${acc}[${key}]` : `${acc}.${String(key)}`),
    root
  )
  if (root !== "") return joined
  return joined.startsWith(".") ? joined.slice(1) : joined === "" ? "value" : joined
}

/**
 * Field-level messages for a schema error: `arguments.content: field is required`.
 * `root` names the value the paths start from (default `arguments`; `""` for none).
 *
 * @category combinators
 * @since 0.1.0
 */
export const describe = (
  issue: SchemaIssue.Issue,
  root = "arguments"
): { readonly message: string; readonly fieldPaths: ReadonlyArray<string> } => {
  const issues = formatter(issue).issues
  const fieldPaths = issues.map((i) =>
    formatPath(
      (i.path ?? []).map((p) => (typeof p === "object" ? p.key : p)),
      root
    )
  )
  const lines = issues.map((i, n) => {
    const text = i.message === "Missing key" ? "field is required" : i.message
    return `${fieldPaths[n]}: ${text}`
  })
  return { message: lines.join("; "), fieldPaths }
}
