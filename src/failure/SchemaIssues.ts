/**
 * Schema issues in words a model or a person can act on: one message per field, with its
 * path (`arguments.content: field is required`).
 *
 * @since 0.2.0
 */
import { Predicate, type SchemaAST, SchemaIssue } from "effect"

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
 * The most issues a failure may hold while every problem is named (R12): some tens of
 * milliseconds and megabytes to collect. Only the first {@link maxFields} are shown in the end.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxDescribedIssues = 50_000

/**
 * The most values (objects, arrays and what they hold, counted alike) a value may hold for
 * a failure to name every problem in it, whatever its schema (R12). A larger value is
 * decoded up to its first problem.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxDescribedValues = 4_096

/**
 * An upper bound on the issues decoding may report for each value a value holds, from the
 * schema's shape alone: each member of a union tries the value and what it holds, and a
 * struct reports a missing key for each field. `Array(String)` is 1; an array of a union of
 * 50 structs of 50 fields is 2,500, so 4,000 empty objects against it are 10 million issues,
 * seconds of work no deadline can cut short. A schema that refers to itself counts 64 where
 * it does. A schema too large to count (over {@link maxCountedNodes} nodes walked: a
 * recursion whose thunks build it afresh at each step, branching) or whose thunk throws
 * counts as no bound at all (`Infinity`): its values are decoded up to their first problem.
 *
 * @category getters
 * @since 0.3.0
 */
export const issuesPerValue = (ast: SchemaAST.AST): number => {
  const open = new Set<SchemaAST.AST>()
  // A part used in many places (a struct reused, a grammar's kinds) is counted once.
  const counted = new Map<SchemaAST.AST, number>()
  const cost = (node: SchemaAST.AST): number => {
    // A schema met again on its own path, or one that makes a new one at each step (a
    // suspended thunk building its schema afresh), is a recursion: counted, not followed.
    if (open.has(node) || open.size > 64) return 64
    const known = counted.get(node)
    if (known !== undefined) return known
    // New parts at each step may branch (a union of an array and a record of itself): 2^64 of them.
    if (counted.size >= maxCountedNodes) throw tooLarge
    open.add(node)
    try {
      const total = own(node)
      counted.set(node, total)
      return total
    } finally {
      open.delete(node)
    }
  }
  const own = (node: SchemaAST.AST): number => {
    switch (node._tag) {
      case "Union":
        return node.types.reduce((sum, member) => sum + cost(member), 0)
      case "Objects":
        return Math.max(
          1,
          node.propertySignatures.length + node.indexSignatures.length,
          ...node.propertySignatures.map((p) => cost(p.type)),
          ...node.indexSignatures.map((i) => cost(i.type))
        )
      case "Arrays":
        return Math.max(1, node.elements.length, ...node.elements.map(cost), ...node.rest.map(cost))
      case "Suspend":
        return cost(node.thunk())
      case "Declaration":
        return Math.max(1, ...node.typeParameters.map(cost))
      default:
        return 1
    }
  }
  try {
    return cost(ast)
  } catch {
    // Too large to count, or a thunk that throws (decoding meets it again, inside its own guard).
    return Number.POSITIVE_INFINITY
  }
}

/**
 * The most distinct schema nodes {@link issuesPerValue} counts (the parts thunks build
 * included) before it gives up: a few milliseconds.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxCountedNodes = 10_000

const tooLarge = new Error("the schema is too large to count")

/**
 * Whether every problem of `value` may be named, decoding it with a schema of `perValue`
 * issues a value ({@link issuesPerValue}): it holds at most {@link maxDescribedValues} values,
 * and at most {@link maxDescribedIssues} issues. A walk without recursion that stops as soon
 * as it is past the limit.
 *
 * @category predicates
 * @since 0.3.0
 */
export const describable = (value: unknown, perValue = 1): boolean => {
  let left = Math.min(maxDescribedValues, Math.floor(maxDescribedIssues / Math.max(1, perValue)))
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
