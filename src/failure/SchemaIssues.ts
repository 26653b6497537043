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
 * The most fields one description names: a value wrong in a million places (a model's
 * arguments, a file) is described by its first ones and a count of the rest, so that the
 * words, their cost and what the model is sent stay bounded.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxFields = 20

type Issue = SchemaIssue.Issue

/** The input an issue reported, passed on when it is rebuilt (`reportInput`). */
const reported = (issue: Issue): readonly [unknown, { readonly reportInput: true }] | readonly [] =>
  Object.hasOwn(issue, "input") ? [issue.input, { reportInput: true }] : []

/** How many problems an issue holds: its leaves (a union's, those of its members). */
const problemsIn = (root: Issue): number => {
  let count = 0
  const stack: Array<Issue> = [root]
  for (let issue = stack.pop(); issue !== undefined; issue = stack.pop()) {
    switch (issue._tag) {
      case "Pointer":
      case "Filter":
      case "Encoding":
        stack.push(issue.issue)
        break
      case "Composite":
        for (const child of issue.issues) stack.push(child)
        break
      case "AnyOf":
        // A union's failure is its members' problems, as the formatter names them; none is one.
        if (issue.issues.length === 0) count++
        for (const child of issue.issues) stack.push(child)
        break
      default:
        count++
    }
  }
  return count
}

/**
 * The issue with only its first `budget.left` problems kept, in order (`undefined` when
 * none is left); the nodes above a cut are rebuilt, the others kept as they are. Recursive:
 * an issue is as deep as the schema and the value, which the runtime bounds.
 */
const firstProblems = (issue: Issue, budget: { left: number }): Issue | undefined => {
  switch (issue._tag) {
    case "Pointer":
    case "Filter":
    case "Encoding": {
      const inner = firstProblems(issue.issue, budget)
      if (inner === undefined) return undefined
      if (inner === issue.issue) return issue
      if (issue._tag === "Pointer") return new SchemaIssue.Pointer(issue.path, inner)
      if (issue._tag === "Filter") return new SchemaIssue.Filter(issue.filter, inner, ...reported(issue))
      return new SchemaIssue.Encoding(issue.ast, inner, ...reported(issue))
    }
    case "Composite":
    case "AnyOf": {
      if (issue.issues.length === 0) return leaf(issue, budget)
      const kept: Array<Issue> = []
      for (const child of issue.issues) {
        if (budget.left === 0) break
        const first = firstProblems(child, budget)
        if (first !== undefined) kept.push(first)
      }
      const [head, ...rest] = kept
      if (head === undefined) return undefined
      if (kept.length === issue.issues.length && kept.every((k, i) => k === issue.issues[i])) return issue
      return issue._tag === "Composite"
        ? new SchemaIssue.Composite(issue.ast, [head, ...rest], ...reported(issue))
        : new SchemaIssue.AnyOf(issue.ast, kept, ...reported(issue))
    }
    default:
      return leaf(issue, budget)
  }
}

/** A problem kept while the budget lasts. */
const leaf = (issue: Issue, budget: { left: number }): Issue | undefined => {
  if (budget.left === 0) return undefined
  budget.left--
  return issue
}

/**
 * Each field a schema error names, with its message: the first {@link maxFields}, and how
 * many problems were left out.
 *
 * @category combinators
 * @since 0.3.0
 */
export const fields = (
  issue: SchemaIssue.Issue
): {
  readonly fields: ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>
  readonly omitted: number
} => {
  const total = problemsIn(issue)
  const first = total <= maxFields ? issue : firstProblems(issue, { left: maxFields })
  const fields = (first === undefined ? [] : formatter(first).issues).map((i) => ({
    path: (i.path ?? []).map((p) => (typeof p === "object" ? p.key : p)),
    message: i.message
  }))
  return { fields, omitted: total <= maxFields ? 0 : total - maxFields }
}

/**
 * Field-level messages for a schema error: `arguments.content: field is required`, at most
 * {@link maxFields} of them, then how many more there are.
 * `root` names the value the paths start from (default `arguments`; `""` for none).
 *
 * @category combinators
 * @since 0.1.0
 */
export const describe = (
  issue: SchemaIssue.Issue,
  root = "arguments"
): { readonly message: string; readonly fieldPaths: ReadonlyArray<string> } => {
  const { fields: named, omitted } = fields(issue)
  const fieldPaths = named.map((f) => formatPath(f.path, root))
  const lines = named.map((f, n) => `${fieldPaths[n]}: ${f.message}`)
  if (omitted > 0) lines.push(andMore(omitted))
  return { message: lines.join("; "), fieldPaths }
}

/**
 * How a description ends when it leaves problems out: `and 3 more problems`.
 *
 * @category combinators
 * @since 0.3.0
 */
export const andMore = (omitted: number): string => `and ${omitted} more problem${omitted === 1 ? "" : "s"}`

/**
 * The most values (objects, arrays and what they hold, counted alike) a value may hold for a
 * failure to name every problem in it (R12). A value can hold many problems (one per member
 * of a union it matches none of, per field of each): 4,096 values against a union of eight
 * five-field structs are some 160,000 issues, tens of megabytes while described; 120,000
 * values were 1.6 GB and 13 s. Only the first {@link maxFields} are shown in the end. A larger
 * value is decoded up to its first problem.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxDescribedValues = 4_096

/**
 * Whether `value` holds at most {@link maxDescribedValues} values: a walk without recursion
 * that stops as soon as it is past the limit.
 *
 * @category predicates
 * @since 0.3.0
 */
export const describable = (value: unknown): boolean => {
  let left = maxDescribedValues
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const next = stack.pop()
    if (--left < 0) return false
    if (typeof next !== "object" || next === null) continue
    if (Array.isArray(next)) {
      if (next.length > left) return false
      for (const item of next) stack.push(item)
      continue
    }
    for (const key in next) {
      if (!Object.hasOwn(next, key)) continue
      if (stack.length >= left) return false
      stack.push(Reflect.get(next, key))
    }
  }
  return true
}
