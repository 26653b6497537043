/**
 * Checks the layout rules of ARCHITECTURE.md over every import in `src/` (type-only ones included):
 *
 * 1. a subsystem folder imports only the folders below it (`layers`, below);
 * 2. `x/internal/*` is imported only from inside `x/`;
 * 3. no import cycles between files;
 * 4. no module imports the package by its own name (`effect-agent-runtime`, a hidden edge the
 *    other rules could not see), and `src/` holds no file of its own but `index.ts`.
 *
 * Run by `npm test`; prints every violation and exits 1 when there is one.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

/** What `run/` may import: every layer below it. */
const belowRun = [
  "failure",
  "time",
  "model",
  "tools",
  "recovery",
  "events",
  "journal",
  "termination",
  "validation",
  "cancellation",
  "explain",
  "tracing"
] as const

/** Each subsystem and the subsystems it may import. Lower layers never import higher ones. */
export const layers: Readonly<Record<string, ReadonlyArray<string>>> = {
  failure: [],
  time: ["failure"],
  model: ["failure"],
  tools: ["failure", "model"],
  recovery: ["failure", "model", "tools"],
  events: ["failure", "model", "tools", "recovery"],
  journal: ["failure", "model", "tools", "events"],
  termination: ["failure", "model", "tools", "events"],
  validation: ["failure", "model", "tools", "events"],
  cancellation: ["failure", "model", "tools"],
  explain: ["failure", "model", "tools", "recovery", "events", "termination"],
  tracing: ["failure", "model", "tools", "events"],
  run: belowRun,
  providers: ["failure", "model"],
  durable: [...belowRun, "run"],
  observability: [...belowRun, "run"],
  testing: [...belowRun, "run", "providers"]
}

const root = path.resolve(import.meta.dirname, "..", "src")

const sourceFiles = (dir: string): Array<string> =>
  fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) =>
      entry.isDirectory()
        ? sourceFiles(path.join(dir, entry.name))
        : entry.name.endsWith(".ts")
          ? [path.join(dir, entry.name)]
          : []
    )

const packageName: string = JSON.parse(
  fs.readFileSync(path.resolve(import.meta.dirname, "..", "package.json"), "utf8")
).name

/** Every specifier one file imports (static, type-only, dynamic, re-exports, `import()` types). */
const specifiersOf = (file: string): Array<string> =>
  ts.preProcessFile(fs.readFileSync(file, "utf8"), true, true).importedFiles.map((ref) => ref.fileName)

/** The relative imports of one file, resolved to absolute paths. */
const importsOf = (file: string): Array<string> =>
  specifiersOf(file)
    .filter((specifier) => specifier.startsWith("."))
    .map((specifier) => path.resolve(path.dirname(file), specifier))

const relative = (file: string) => path.relative(root, file)
/** The subsystem a file belongs to: its first folder under `src/`, or "" for the root index. */
const subsystemOf = (file: string) => {
  const parts = relative(file).split(path.sep)
  return parts.length > 1 ? (parts[0] as string) : ""
}
/** The folder that owns an internal file (`run/pipeline` for `run/pipeline/internal/X.ts`), if it is one. */
const internalOwner = (file: string): string | undefined => {
  const parts = relative(file).split(path.sep)
  const at = parts.lastIndexOf("internal")
  return at < 0 ? undefined : parts.slice(0, at).join(path.sep)
}
const isInside = (file: string, folder: string) => folder === "" || relative(file).startsWith(folder + path.sep)

export const check = (): Array<string> => {
  const files = sourceFiles(root)
  const graph = new Map(files.map((file) => [file, importsOf(file)]))
  const problems: Array<string> = []

  for (const file of files) {
    if (subsystemOf(file) === "" && relative(file) !== "index.ts") {
      problems.push(`${relative(file)}: a module at the root of src/; it belongs in a subsystem folder`)
    }
    for (const specifier of specifiersOf(file)) {
      if (specifier === packageName || specifier.startsWith(`${packageName}/`)) {
        problems.push(
          `${relative(file)} imports "${specifier}": the package by its own name; import the module by its path`
        )
      }
    }
  }

  for (const [file, imports] of graph) {
    const from = subsystemOf(file)
    for (const target of imports) {
      if (!graph.has(target)) {
        problems.push(`${relative(file)} imports ${relative(target)}, which is not a file in src/`)
        continue
      }
      const to = subsystemOf(target)
      if (from === "" && to !== "") continue
      if (from !== "" && !(from in layers)) problems.push(`${relative(file)}: "${from}" is not a subsystem in layers`)
      else if (to !== from && from !== "" && !layers[from]?.includes(to)) {
        problems.push(`${relative(file)} imports ${relative(target)}: "${from}" may not depend on "${to}"`)
      }
      const owner = internalOwner(target)
      if (owner !== undefined && !isInside(file, owner)) {
        problems.push(`${relative(file)} imports ${relative(target)}: an internal module of ${owner}/`)
      }
    }
  }

  // Cycles: a depth-first walk that reports each back edge's cycle once.
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const visit = (file: string): void => {
    state.set(file, "open")
    stack.push(file)
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue
      const seen = state.get(target)
      if (seen === "open") {
        const cycle = stack.slice(stack.indexOf(target)).concat(target)
        problems.push(`import cycle: ${cycle.map(relative).join(" -> ")}`)
      } else if (seen === undefined) visit(target)
    }
    stack.pop()
    state.set(file, "done")
  }
  for (const file of graph.keys()) if (!state.has(file)) visit(file)
  return problems
}

if (import.meta.main) {
  const problems = check()
  for (const problem of problems) console.error(problem)
  if (problems.length > 0) {
    console.error(`check-layers: ${problems.length} violation(s) of the rules in ARCHITECTURE.md`)
    process.exit(1)
  }
  console.log("check-layers: every import follows the layers, no internal module is used from outside, no cycles")
}
