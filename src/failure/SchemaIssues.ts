/**
 * Schema issues in words a model or a person can act on: one message per field, with its
 * path (`arguments.content: field is required`).
 *
 * @since 0.2.0
 */
import { Predicate, SchemaIssue } from "effect"

/** A key missing is said as what to do about it; every other issue as effect says it. */
const formatter = SchemaIssue.makeFormatterStandardSchemaV1({
  leafHook: (issue) =>
    issue._tag === "MissingKey" && typeof issue.annotations?.messageMissingKey !== "string"
      ? "field is required"
      : SchemaIssue.defaultLeafHook(issue)
})

const formatPath = (path: ReadonlyArray<PropertyKey>, root: string): string => {
  const joined = path.reduce<string>(
    (acc, key) => (Predicate.isNumber(key) ? `${acc}[${key}]` : `${acc}.${String(key)}`),
    root
  )
  if (root !== "") return joined
  return joined.startsWith(".") ? joined.slice(1) : joined === "" ? "value" : joined
}

/**
 * Each field a schema error names, with its message.
 *
 * @category combinators
 * @since 0.3.0
 */
export const entries = (
  issue: SchemaIssue.Issue
): ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }> =>
  formatter(issue).issues.map((i) => ({
    path: (i.path ?? []).map((p) => (typeof p === "object" ? p.key : p)),
    message: i.message
  }))

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
  const lines = issues.map((i, n) => `${fieldPaths[n]}: ${i.message}`)
  return { message: lines.join("; "), fieldPaths }
}
