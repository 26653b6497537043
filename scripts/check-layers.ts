/**
 * Checks the layout rules of ARCHITECTURE.md over every import in `src/` (type-only ones included)
 * and every export of a module outside `internal/`:
 *
 * 1. a subsystem folder imports only the folders below it (`layers`, below);
 * 2. `x/internal/*` is imported only from inside `x/`;
 * 3. no import cycles between files;
 * 4. no module imports the package by its own name (`effect-agent-runtime`, a hidden edge the
 *    other rules could not see), and `src/` holds no file of its own but `index.ts`;
 * 5. no exported signature mentions an internal type that no public module exports (rule 4 there).
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
  recovery: ["failure", "time", "model", "tools"],
  events: ["failure", "model", "tools", "recovery"],
  journal: ["failure", "time", "model", "tools", "events"],
  termination: ["failure", "model", "tools", "events"],
  validation: ["failure", "model", "tools", "events"],
  cancellation: ["failure", "time", "model", "tools"],
  explain: ["failure", "model", "tools", "recovery", "events", "termination"],
  tracing: ["failure", "model", "tools", "events"],
  run: belowRun,
  providers: ["failure", "time", "model"],
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
  return problems.concat(leakedInternalTypes(files))
}

/**
 * Rule 5: a type declared in an `internal/` file and named by a public module's exported
 * declaration must itself be exported by some public module, or users could meet it (in their
 * editor, in an error message, in `dist/*.d.ts`) but never name it. The written signature is
 * read (parameters, results, properties, type arguments, `extends`, alias bodies), and the
 * checker's type where it is inferred (`export const f = Effect.fn(...)`). Needs one Program
 * over `src/`; the checker works lazily, so only the exported declarations cost anything.
 */
const leakedInternalTypes = (files: ReadonlyArray<string>): Array<string> => {
  const config = ts.getParsedCommandLineOfConfigFile(
    path.resolve(root, "..", "tsconfig.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))
      }
    }
  )
  const options = { ...config?.options, noEmit: true }
  const host = ts.createCompilerHost(options)
  host.jsDocParsingMode = ts.JSDocParsingMode.ParseNone // JSDoc types nothing in .ts files: not parsing it is faster
  const program = ts.createProgram({ rootNames: files, options, host })
  const checker = program.getTypeChecker()
  const ours = (file: string) => file.startsWith(root + path.sep)
  const isInternal = (file: string) => ours(file) && internalOwner(file) !== undefined
  const publicFiles = files.filter((file) => !isInternal(file))
  const resolve = (symbol: ts.Symbol) =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
  const exportsOf = (file: string): Array<ts.Symbol> => {
    const source = program.getSourceFile(file)
    const module = source && checker.getSymbolAtLocation(source)
    return module ? checker.getExportsOfModule(module) : []
  }
  const fileOf = (symbol: ts.Symbol) => symbol.declarations?.[0]?.getSourceFile().fileName ?? ""

  // What users can name: every export of a public module, through `export * as` and namespaces,
  // and the type a public name stands for (`type Alarm = Alarms.Alarm`, `interface O extends I.O {}`).
  const reachable = new Set<ts.Symbol>()
  const reach = (symbol: ts.Symbol): void => {
    const target = resolve(symbol)
    if (reachable.has(target)) return
    reachable.add(target)
    if (target.flags & ts.SymbolFlags.Module) for (const member of checker.getExportsOfModule(target)) reach(member)
    for (const declaration of target.declarations ?? []) {
      const renamed = renamedType(declaration)
      const named = renamed && checker.getSymbolAtLocation(renamed)
      if (named) reach(named)
    }
  }
  for (const file of publicFiles) for (const symbol of exportsOf(file)) reach(symbol)

  /** The internal types one export's declarations mention that users cannot name. */
  const leaksOf = (declarations: ReadonlyArray<ts.Declaration>): Set<string> => {
    const leaks = new Set<string>()
    const seen = new Set<ts.Type | ts.Declaration>()

    const mention = (symbol: ts.Symbol | undefined): void => {
      const target = symbol && resolve(symbol)
      const declaration = target?.declarations?.[0]
      if (target === undefined || declaration === undefined || reachable.has(target)) return
      const scope = ts.isVariableDeclaration(declaration) ? declaration.parent.parent.parent : declaration.parent
      const topLevel = ts.isSourceFile(scope) || ts.isModuleBlock(scope)
      if (isInternal(fileOf(target)) && topLevel) {
        leaks.add(`${target.name} (${relative(fileOf(target))})`)
      }
      // A public module's own type that it does not export (`type Checked<A> = ...`) is read
      // through: its body is part of the signature that names it.
      const local = topLevel && (ts.isTypeAliasDeclaration(declaration) || ts.isInterfaceDeclaration(declaration))
      if (local && ours(fileOf(target)) && !seen.has(declaration)) {
        seen.add(declaration)
        walkNode(declaration)
      }
    }

    // An inferred type: the aliases, interfaces and classes it names, their type arguments, and
    // the members of anonymous types (a named type's own members are checked where it is declared).
    const walkType = (type: ts.Type): void => {
      if (seen.has(type)) return
      seen.add(type)
      mention(type.aliasSymbol ?? type.symbol)
      for (const argument of type.aliasTypeArguments ?? []) walkType(argument)
      if (type.isUnionOrIntersection()) for (const member of type.types) walkType(member)
      if (!(type.flags & ts.TypeFlags.Object)) return
      const object = type as ts.ObjectType
      if (object.objectFlags & ts.ObjectFlags.Reference) {
        for (const argument of checker.getTypeArguments(object as ts.TypeReference)) walkType(argument)
      }
      if (!(object.objectFlags & ts.ObjectFlags.Anonymous) || type.aliasSymbol !== undefined) return
      for (const property of checker.getPropertiesOfType(type)) {
        if (!(property.valueDeclaration && isHidden(property.valueDeclaration)))
          walkType(checker.getTypeOfSymbol(property))
      }
      for (const kind of [ts.SignatureKind.Call, ts.SignatureKind.Construct]) {
        for (const signature of checker.getSignaturesOfType(type, kind)) {
          for (const parameter of signature.parameters) walkType(checker.getTypeOfSymbol(parameter))
          walkType(signature.getReturnType())
        }
      }
    }

    // A declaration as written, but its bodies and initializers, whose types are taken instead.
    const walkNode = (node: ts.Node): void => {
      if (isHidden(node)) return
      if (ts.isTypeReferenceNode(node)) mention(checker.getSymbolAtLocation(rightmost(node.typeName)))
      if (ts.isTypeQueryNode(node)) mention(checker.getSymbolAtLocation(rightmost(node.exprName)))
      if (ts.isImportTypeNode(node) && node.qualifier) mention(checker.getSymbolAtLocation(rightmost(node.qualifier)))
      if (ts.isExpressionWithTypeArguments(node)) {
        const base = node.expression
        if (ts.isIdentifier(base) || ts.isPropertyAccessExpression(base)) mention(checker.getSymbolAtLocation(base))
        // A computed base (`Schema.Class<X>("X")({ ... })`): its type, as the checker sees it.
        else walkType(checker.getTypeAtLocation(node))
      }
      if ((ts.isVariableDeclaration(node) || ts.isPropertyDeclaration(node)) && node.type === undefined) {
        const value = node.initializer
        // `const f = (a: A): B => ...` is read as written; any other initializer by its inferred type.
        if (value && (ts.isArrowFunction(value) || ts.isFunctionExpression(value))) walkNode(value)
        else if (value) walkType(checker.getTypeAtLocation(node.name))
      }
      if (ts.isFunctionLike(node) && node.type === undefined && !ts.isConstructorDeclaration(node)) {
        const signature = checker.getSignatureFromDeclaration(node)
        if (signature) walkType(signature.getReturnType())
      }
      const { body, initializer } = node as { body?: ts.Node; initializer?: ts.Node }
      ts.forEachChild(node, (child) => {
        if (child !== body && child !== initializer) walkNode(child)
      })
    }

    for (const declaration of declarations) walkNode(declaration)
    return leaks
  }

  const problems: Array<string> = []
  const checked = new Set<ts.Symbol>()
  for (const file of publicFiles) {
    for (const symbol of exportsOf(file)) {
      const target = resolve(symbol)
      if (checked.has(target) || target.flags & ts.SymbolFlags.Module) continue
      checked.add(target)
      // Its declarations here, and the internal ones this module re-exports (a public module's are checked there).
      const declarations = (target.declarations ?? []).filter((declaration) => {
        const from = declaration.getSourceFile().fileName
        return from === file || isInternal(from)
      })
      const leaks = leaksOf(declarations)
      if (leaks.size > 0) {
        problems.push(
          `${relative(file)} exports ${symbol.name}, which mentions ${[...leaks].join(", ")}: internal, and no ` +
            `public module exports it (re-export it, \`export type { X } from "./internal/X.ts"\`, with a doc comment)`
        )
      }
    }
  }
  return problems
}

const rightmost = (name: ts.EntityName): ts.Identifier => (ts.isQualifiedName(name) ? name.right : name)

/** The type a declaration only renames: `type A = B.C<...>`, or `interface A extends B.C {}` with no members. */
const renamedType = (declaration: ts.Declaration): ts.Node | undefined => {
  if (ts.isTypeAliasDeclaration(declaration) && ts.isTypeReferenceNode(declaration.type)) {
    return rightmost(declaration.type.typeName)
  }
  if (!ts.isInterfaceDeclaration(declaration) || declaration.members.length > 0) return undefined
  const bases = declaration.heritageClauses?.flatMap((clause) => clause.types) ?? []
  const base = bases.length === 1 ? bases[0]?.expression : undefined
  return base && ts.isPropertyAccessExpression(base) ? base.name : base
}

/** A class member users cannot see: `private`, `protected` or `#private`. */
const isHidden = (node: ts.Node): boolean =>
  (ts.isClassElement(node) && node.name !== undefined && ts.isPrivateIdentifier(node.name)) ||
  (ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some(
      (modifier) => modifier.kind === ts.SyntaxKind.PrivateKeyword || modifier.kind === ts.SyntaxKind.ProtectedKeyword
    ))

if (import.meta.main) {
  const problems = check()
  for (const problem of problems) console.error(problem)
  if (problems.length > 0) {
    console.error(`check-layers: ${problems.length} violation(s) of the rules in ARCHITECTURE.md`)
    process.exit(1)
  }
  console.log(
    "check-layers: every import follows the layers, no internal module is used from outside, no cycles, no internal type leaks"
  )
}
