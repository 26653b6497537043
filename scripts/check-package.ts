/**
 * The package check (`npm run check:package`, part of `npm test`): the package a user installs,
 * used the ways users use it, offline.
 *
 * 1. `npm pack` (its `prepack` builds `dist/`). The tarball holds only what package.json's
 *    `files` lists, no test, and every file its `exports` names.
 * 2. The tarball is installed into a fresh project in a temporary folder, with links to the
 *    effect packages and `@types/node` already installed here: no network.
 * 3. Plain `node` (the pinned Node 22 under npm) runs the README's example
 *    (`scratchpad/readme-example.ts`, plain JavaScript too, copied as `run.mjs`): a scripted
 *    run to `completed`. `consumer/require.cjs` requires every entry point.
 * 4. `tsc --noEmit` of `consumer/run.ts` with moduleResolution `nodenext`, then `bundler`:
 *    strict, target ES2022, TypeScript's default libs, declarations checked (no skipLibCheck).
 *    Then every entry point but `./durable` and `./journal/pg` as a Node backend compiles it:
 *    `lib: ["ES2022"]` and `@types/node`, no DOM but the two types effect's own `Schema`
 *    names (`consumer/effect-dom.d.ts`). So the package's declarations must not reach effect's
 *    `rpc` modules, which name the DOM's `Transferable`; `./durable` does, through effect's
 *    cluster (the README says so), and `./journal/pg` needs `@effect/sql-pg`.
 * 5. esbuild bundles `consumer/run.ts`, from `dist/` only, and the bundle runs to `completed`.
 *    The core entries (`.` and `./testing`) and the providers (`./providers`, which run over
 *    any `HttpClient`) do not pull in `@effect/platform-node`, which is why it is an optional
 *    peer dependency; only `./providers/node` (the undici transport) needs it. Likewise
 *    `./journal` does not pull in `@effect/sql-pg` (the consumer has none installed, and
 *    `require.cjs` loads `./journal`); only `./journal/pg` needs it. `./durable` loads
 *    `@effect/platform-node` only when `DurableRun.layerCluster` is built, and
 *    `./observability` not at all (its `bin` loads it).
 * 6. The `bin`: `consumer/record.mjs` records a run with `./observability`'s Recorder, and
 *    `node_modules/.bin/effect-agent-runtime view` (as npm linked it) writes its page; a
 *    missing file is exit 1 with the message.
 *
 * The consumer files import the package by its name only, never by a path inside it, so the
 * list of entry points stays in package.json `exports` alone. A failure names its step, prints
 * the output, and exits 1. The temporary folder is removed either way.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Esbuild from "esbuild"

const repo = Path.resolve(import.meta.dirname, "..")
const consumer = Path.join(import.meta.dirname, "consumer")
const readmeExample = Path.join(repo, "scratchpad", "readme-example.ts")
const manifest = JSON.parse(Fs.readFileSync(Path.join(repo, "package.json"), "utf8"))
const node = process.execPath
const tsc = Path.join(repo, "node_modules", "typescript", "bin", "tsc")
const completed = "completed goal_reached"

/** A failed step: its name and what went wrong, output included. */
class CheckFailed extends Error {}

/** Runs a command to its end; a non-zero exit throws with everything it printed. */
const run = (command: string, args: ReadonlyArray<string>, cwd: string): string => {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
  if (result.error !== undefined) throw result.error
  if (result.status !== 0) {
    throw new Error(`\`${command} ${args.join(" ")}\` exited ${result.status}:\n${result.stdout}${result.stderr}`)
  }
  return result.stdout
}

const expectLine = (output: string, expected: string): void => {
  if (!output.split("\n").includes(expected)) throw new Error(`expected the line "${expected}", got:\n${output}`)
}

const step = <A>(name: string, body: () => A): A => {
  try {
    const value = body()
    console.log(`ok  ${name}`)
    return value
  } catch (error) {
    throw new CheckFailed(`${name}\n${error instanceof Error ? error.message : String(error)}`)
  }
}

/** Every file path that package.json `exports` names, e.g. `dist/index.js`. */
const exportedFiles = (): Array<string> => {
  const targets: Array<string> = []
  const walk = (value: unknown): void => {
    if (typeof value === "string") targets.push(Path.posix.normalize(value))
    else if (typeof value === "object" && value !== null) Object.values(value).forEach(walk)
  }
  walk(manifest.exports)
  return targets
}

const pack = (into: string): { readonly path: string; readonly files: ReadonlyArray<string> } => {
  // With --json, the build's output goes to stderr and stdout holds only the report.
  const [report] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", into], repo))
  return { path: Path.join(into, report.filename), files: report.files.map((file: { path: string }) => file.path) }
}

const checkContents = (files: ReadonlyArray<string>): void => {
  const allowed: ReadonlyArray<string> = manifest.files
  const stray = files.filter(
    (file) => file !== "package.json" && !allowed.some((entry) => file === entry || file.startsWith(`${entry}/`))
  )
  if (stray.length > 0) throw new Error(`files outside package.json "files":\n${stray.join("\n")}`)
  const tests = files.filter((file) => /\.test\.|(^|\/)(test|bench|scratchpad|scripts)\//.test(file))
  if (tests.length > 0) throw new Error(`test or development files in the tarball:\n${tests.join("\n")}`)
  const bins: ReadonlyArray<string> = Object.values(manifest.bin ?? {})
  const missing = [
    ...exportedFiles(),
    ...bins.map((bin) => Path.posix.normalize(bin)),
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
    "ARCHITECTURE.md",
    "docs/SCALE.md"
  ].filter((file) => !files.includes(file))
  if (missing.length > 0) throw new Error(`missing from the tarball:\n${missing.join("\n")}`)
}

const install = (tarball: string, app: string): void => {
  Fs.cpSync(consumer, app, { recursive: true })
  Fs.copyFileSync(readmeExample, Path.join(app, "run.mjs"))
  const installed = (name: string) => `file:${Path.join(repo, "node_modules", name)}`
  const dependencies = {
    "effect-agent-runtime": `file:${tarball}`,
    effect: installed("effect"),
    "@effect/platform-node": installed("@effect/platform-node"),
    "@types/node": installed("@types/node")
  }
  const project = { name: "consumer", private: true, type: "module", dependencies }
  Fs.writeFileSync(Path.join(app, "package.json"), `${JSON.stringify(project, null, 2)}\n`)
  // --legacy-peer-deps: npm's tree builder crashes placing peers next to linked folders; the
  // peers are right there in `dependencies`, and the runs below show that they resolve.
  run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", "--legacy-peer-deps"], app)
}

const bundleAndRun = (app: string): string => {
  const result = Esbuild.buildSync({
    absWorkingDir: app,
    entryPoints: ["run.ts"],
    outfile: "bundle/run.mjs",
    bundle: true,
    platform: "node",
    format: "esm",
    metafile: true,
    logLevel: "silent"
  })
  const inputs = Object.keys(result.metafile.inputs)
  if (!inputs.some((input) => input.includes("node_modules/effect-agent-runtime/dist/"))) {
    throw new Error("the bundle took nothing from effect-agent-runtime/dist/")
  }
  if (inputs.some((input) => input.includes("node_modules/effect-agent-runtime/src/"))) {
    throw new Error("the bundle took sources from effect-agent-runtime/src/")
  }
  expectLine(run(node, ["bundle/run.mjs"], app), completed)
  const size = Fs.statSync(Path.join(app, "bundle", "run.mjs")).size
  return `${(size / 1024 / 1024).toFixed(1)} MiB`
}

/** The package's `bin`, as npm installed it, on a run the package's own Recorder wrote. */
const viewRecorded = (app: string): void => {
  const file = run(node, ["record.mjs"], app).trim()
  const bin = Path.join(app, "node_modules", ".bin", "effect-agent-runtime")
  const wrote = run(bin, ["view", file, "-o", "run.html"], app)
  if (!wrote.startsWith("wrote run.html: ")) throw new Error(`the bin said:\n${wrote}`)
  const page = Fs.readFileSync(Path.join(app, "run.html"), "utf8")
  if (!page.includes("goal_reached") || !page.includes('class="bar model"'))
    throw new Error("the page shows neither the stop reason nor the model's bars")
  const missing = spawnSync(bin, ["view", "missing.jsonl"], { cwd: app, encoding: "utf8" })
  if (missing.status !== 1 || !missing.stderr.includes("missing.jsonl: no such file"))
    throw new Error(`a missing file: exit ${missing.status}, ${missing.stderr}`)
}

/** Every entry point but the two that exist for an optional dependency. */
const coreEntries = Object.keys(manifest.exports).filter(
  (entry) => entry !== "./package.json" && entry !== "./providers/node" && entry !== "./journal/pg"
)

/** The entry points whose declarations compile without the DOM's types. */
const withoutDom = Object.keys(manifest.exports).filter(
  (entry) => entry !== "./package.json" && entry !== "./durable" && entry !== "./journal/pg"
)

const checkWithoutDom = (app: string): void => {
  const lines = withoutDom.map((entry, i) => `export * as Entry${i} from "effect-agent-runtime${entry.slice(1)}"`)
  Fs.writeFileSync(Path.join(app, "entries.ts"), `${lines.join("\n")}\n`)
  run(node, [tsc, "-p", "tsconfig.node.json"], app)
}

const checkCoreImports = (app: string): void => {
  const result = Esbuild.buildSync({
    absWorkingDir: app,
    stdin: {
      contents: coreEntries.map((entry) => `export * from "effect-agent-runtime${entry.slice(1)}"`).join("\n"),
      resolveDir: app
    },
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    metafile: true,
    logLevel: "silent"
  })
  const optional = Object.keys(result.metafile.inputs).filter(
    (input) => input.includes("@effect/platform-node") || input.includes("@effect/sql-pg")
  )
  if (optional.length > 0)
    throw new Error(`entries other than ./providers/node and ./journal/pg import:\n${optional.join("\n")}`)
}

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "effect-agent-runtime-check-"))
const app = Path.join(work, "app")
try {
  console.log(`package check of ${manifest.name}@${manifest.version} on Node ${process.version}`)
  const tarball = step("npm pack (prepack builds dist/)", () => pack(work))
  step(`the tarball holds only what a user needs (${tarball.files.length} files)`, () => checkContents(tarball.files))
  step("npm install of the tarball into a fresh project, offline", () => install(tarball.path, app))
  step("node: the README example imports . and ./testing and runs to completed", () =>
    expectLine(run(node, ["run.mjs"], app), completed)
  )
  step("node: require() of every entry point", () =>
    expectLine(run(node, ["require.cjs"], app), `required ${manifest.version}`)
  )
  step("tsc --noEmit, moduleResolution nodenext, strict, ES2022: 0 errors", () =>
    run(node, [tsc, "-p", "tsconfig.nodenext.json"], app)
  )
  step("tsc --noEmit, moduleResolution bundler, strict, ES2022: 0 errors", () =>
    run(node, [tsc, "-p", "tsconfig.bundler.json"], app)
  )
  step(`tsc --noEmit of ${withoutDom.join(", ")} with lib ES2022 and @types/node only (no DOM): 0 errors`, () =>
    checkWithoutDom(app)
  )
  const size = step("esbuild: a bundle of the consumer runs to completed", () => bundleAndRun(app))
  step("the bin: a run recorded by ./observability's Recorder, then `effect-agent-runtime view` of it", () =>
    viewRecorded(app)
  )
  step(`${coreEntries.join(", ")} import neither @effect/platform-node nor @effect/sql-pg`, () => checkCoreImports(app))
  console.log(`package check passed (bundle ${size})`)
} catch (error) {
  if (!(error instanceof CheckFailed)) throw error
  console.error(`\npackage check FAILED at: ${error.message}`)
  process.exitCode = 1
} finally {
  Fs.rmSync(work, { recursive: true, force: true })
}
