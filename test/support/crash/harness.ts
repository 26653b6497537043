/**
 * The parent's side of the real-crash suite (R9): starts the child (`child.ts`) with the
 * pinned node, reads its markers, `kill -9`s it by pid, and reads back what survived.
 *
 * The child is run bundled by esbuild (once per test file): one file loads in about 0.15 s
 * where the sources take about 0.55 s, and the suite starts some seventy processes. The
 * bundle is the same code; `node child.ts '<config>'` runs it unbundled.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Esbuild from "esbuild"

const root = path.join(import.meta.dirname, "..", "..", "..")
const node = path.join(root, "node_modules", ".bin", "node")
const deadlineMillis = 60_000

const living = new Set<ChildProcess>()
process.on("exit", () => {
  for (const child of living) child.kill("SIGKILL")
})

/** A fresh temporary directory (the caller removes it). */
export const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), "durable-crash-"))

/** Bundles the child (by default `child.ts`; any script of the same kind) into `dir`; gives the bundle's path. */
export const bundle = async (dir: string, entry = path.join(import.meta.dirname, "child.ts")): Promise<string> => {
  const outfile = path.join(dir, `${path.basename(entry, ".ts")}.mjs`)
  await Esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    logLevel: "warning",
    // pg and its dependencies are CommonJS and `require` Node's modules.
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" }
  })
  return outfile
}

export interface Child<R = Result> {
  readonly pid: number
  /** The marker lines so far. */
  readonly lines: ReadonlyArray<string>
  /** Resolves when the child has exited: its code, or the signal that ended it. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /** Resolves with the first marker line `match` accepts; rejects when the child exits first or after 60 s. */
  readonly waitFor: (match: string | ((line: string) => boolean)) => Promise<string>
  /** `kill -9` by pid, then waits until the child is gone. */
  readonly kill: () => Promise<void>
  /** Waits (60 s at most) for the child to end by itself, and fails unless it exited 0. */
  readonly succeeded: () => Promise<void>
  /** The run results it printed (`result <json>` lines). */
  readonly results: () => ReadonlyArray<R>
  /** What it wrote to stderr so far. */
  readonly stderr: () => string
}

/** What the child prints of a run's result. */
export interface Result {
  readonly runId: string
  readonly status: string
  readonly stopReason: string
  readonly pending: ReadonlyArray<string>
  readonly tags: ReadonlyArray<string>
}

const timeout = <A>(promise: Promise<A>, what: string): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${deadlineMillis} ms waiting for ${what}`)),
      deadlineMillis
    )
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}

/** Starts the child `script` (the bundle) with `config`; its compiled code is cached beside it. */
export const start = <R = Result>(script: string, config: object): Child<R> => {
  const child = spawn(node, ["--disable-warning=ExperimentalWarning", script, JSON.stringify(config)], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NODE_COMPILE_CACHE: path.join(path.dirname(script), "compile-cache") }
  })
  const pid = child.pid
  if (pid === undefined) throw new Error("the child did not start")
  living.add(child)
  const lines: Array<string> = []
  const waiters = new Set<() => void>()
  let stdout = ""
  let stderr = ""
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8")
    const parts = stdout.split("\n")
    stdout = parts.pop() ?? ""
    lines.push(...parts)
    for (const wake of waiters) wake()
  })
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8")
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      living.delete(child)
      resolve({ code, signal })
      for (const wake of waiters) wake()
    })
  )
  const describe = () => `child ${pid} (${JSON.stringify(config)}): ${lines.slice(-5).join(" | ")}\n${stderr}`
  const waitFor = (match: string | ((line: string) => boolean)) => {
    const accepts = typeof match === "string" ? (line: string) => line === match : match
    return timeout(
      new Promise<string>((resolve, reject) => {
        const check = () => {
          const found = lines.find(accepts)
          if (found !== undefined) {
            waiters.delete(check)
            resolve(found)
          } else if (child.exitCode !== null || child.signalCode !== null) {
            waiters.delete(check)
            reject(new Error(`exited before ${String(match)}: ${describe()}`))
          }
        }
        waiters.add(check)
        check()
      }),
      `${String(match)} from ${describe()}`
    )
  }
  return {
    pid,
    lines,
    exited,
    waitFor,
    kill: async () => {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone already
      }
      await timeout(exited, `child ${pid} to die`)
    },
    succeeded: async () => {
      const { code, signal } = await timeout(exited, `child ${pid} to finish`)
      if (code !== 0) throw new Error(`exited ${code ?? signal}: ${describe()}`)
    },
    results: () =>
      lines.filter((line) => line.startsWith("result ")).map((line) => JSON.parse(line.slice("result ".length))),
    stderr: () => stderr
  }
}
