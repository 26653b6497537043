/**
 * Containing a supervised subprocess in a cgroup of its own (R5.2), private to
 * `Subprocess`.
 *
 * A process group holds only what stays in it: a child that calls `setsid` (a daemon, a
 * double fork) leaves it, and no signal to the group reaches it. A cgroup holds every
 * descendant, whatever session or group it moves to, and the kernel can kill it whole
 * (`cgroup.kill`, Linux 5.14; before that, freeze it and kill each member). So, where
 * the machine allows it (Linux, a cgroup v2 hierarchy this process may write to, as root
 * or in a delegated subtree), each process runs in a new cgroup below this process's
 * own: the command is started by a `sh` trampoline that moves itself into the cgroup and
 * then `exec`s the command (`SubprocessSpawn`), so the command keeps the pid (and the
 * exit status) the host sees, and everything it starts is born inside.
 *
 * Whether the machine allows it is found out once per process ({@link support}): the
 * cgroup2 mount and this process's place in it (/proc/self/mountinfo, /proc/self/cgroup),
 * a probe cgroup created there, and a probe process moved into it (which checks the
 * delegation rules and the "no internal processes" rule as the kernel applies them).
 * Elsewhere the process group is the containment, with its documented limit.
 */

import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import * as RealTime from "../../time/RealTime.ts"
import { withinReal } from "./SubprocessTime.ts"

/** How a cgroup is killed: `cgroup.kill` (Linux 5.14), or freezing it and killing each member (5.2). */
export type KillMethod = "cgroup.kill" | "freeze"

/** Whether supervised processes can have cgroups of their own here, and where. */
export type Support =
  | { readonly available: true; readonly parent: string; readonly kill: KillMethod }
  | { readonly available: false; readonly reason: string }

/** One process's cgroup. */
export interface Cgroup {
  readonly path: string
  readonly kill: KillMethod
}

// mountinfo escapes space, tab, newline and backslash as octal (\040).
const unescapeMountField = (field: string): string =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)))

/**
 * The directory of this process's cgroup in the cgroup2 tree, from the text of
 * /proc/self/cgroup and /proc/self/mountinfo; or why there is none.
 */
export const locate = (
  procSelfCgroup: string,
  mountinfo: string
): { readonly dir: string } | { readonly reason: string } => {
  const line = procSelfCgroup.split("\n").find((l) => l.startsWith("0::"))
  if (line === undefined) return { reason: "this process is in no cgroup v2 hierarchy (cgroup v1 only)" }
  const own = line.slice(3).trim()
  if (own.endsWith(" (deleted)")) return { reason: "this process's cgroup was removed" }
  let mounted = false
  for (const entry of mountinfo.split("\n")) {
    // id parent major:minor root mountpoint options [optional fields...] - fstype source super-options
    const separator = entry.indexOf(" - ")
    if (separator < 0 || entry.slice(separator + 3).split(" ")[0] !== "cgroup2") continue
    mounted = true
    const fields = entry.slice(0, separator).split(" ")
    const root = unescapeMountField(fields[3] ?? "")
    const mountPoint = unescapeMountField(fields[4] ?? "")
    const inside =
      root === "/" ? own : own === root ? "/" : own.startsWith(`${root}/`) ? own.slice(root.length) : undefined
    if (inside !== undefined) return { dir: path.join(mountPoint, inside).replace(/(.)\/+$/, "$1") }
  }
  return {
    reason: mounted
      ? "this process's cgroup is outside every mounted cgroup2 tree"
      : "no cgroup2 file system is mounted"
  }
}

const errorText = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : String(error)

// Unique without a counter: the process id says whose it is (tests clean up by it), the UUID which one.
const freshName = (): string => `effect-agent-runtime-${process.pid}-${randomUUID()}`

/** Runs `/bin/sh -c 'echo 0 > cgroup.procs'`: whether a process may join the cgroup. */
const probeJoin = (cgroup: string): Effect.Effect<string | undefined> =>
  Effect.map(
    withinReal(
      Effect.callback<string | undefined>((resume) => {
        const child = spawn("/bin/sh", ["-c", 'echo 0 > "$0"', path.join(cgroup, "cgroup.procs")], {
          stdio: ["ignore", "ignore", "pipe"],
          env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
        })
        let stderr = ""
        child.stderr?.on("data", (chunk: Buffer) => {
          stderr += chunk.toString()
        })
        child.once("error", (error) => resume(Effect.succeed(`a probe process could not start: ${errorText(error)}`)))
        child.once("close", (code) =>
          resume(
            Effect.succeed(code === 0 ? undefined : `a process cannot join a cgroup created here: ${stderr.trim()}`)
          )
        )
      }),
      2000
    ),
    (exit) =>
      exit._tag === "Some" && exit.value._tag === "Success" ? exit.value.value : "the probe process did not finish"
  )

const probe: Effect.Effect<Support> = Effect.uninterruptible(
  Effect.gen(function* () {
    if (process.platform !== "linux") return { available: false, reason: "cgroups exist on Linux only" } as const
    let located: ReturnType<typeof locate>
    try {
      located = locate(fs.readFileSync("/proc/self/cgroup", "utf8"), fs.readFileSync("/proc/self/mountinfo", "utf8"))
    } catch (error) {
      return { available: false, reason: `/proc could not be read (${errorText(error)})` } as const
    }
    if ("reason" in located) return { available: false, reason: located.reason } as const
    const parent = located.dir
    const dir = path.join(parent, `${freshName()}-probe`)
    try {
      fs.mkdirSync(dir)
    } catch (error) {
      return { available: false, reason: `cannot create a cgroup in ${parent} (${errorText(error)})` } as const
    }
    const kill: KillMethod | undefined = fs.existsSync(path.join(dir, "cgroup.kill"))
      ? "cgroup.kill"
      : fs.existsSync(path.join(dir, "cgroup.freeze"))
        ? "freeze"
        : undefined
    const problem =
      kill === undefined ? "the kernel has neither cgroup.kill (5.14) nor cgroup.freeze (5.2)" : yield* probeJoin(dir)
    yield* remove({ path: dir, kill: kill ?? "freeze" })
    if (problem !== undefined || kill === undefined) {
      return { available: false, reason: problem ?? "the cgroup cannot be killed" } as const
    }
    return { available: true, parent, kill } as const
  })
)

/** Whether supervised processes can have cgroups of their own here: probed once per process. */
export const support: Effect.Effect<Support> = Effect.runSync(Effect.cached(probe))

/** A new, empty cgroup below `parent`, or why it could not be made. */
export const create = (
  available: Extract<Support, { readonly available: true }>
): Cgroup | { readonly reason: string } => {
  const dir = path.join(available.parent, freshName())
  try {
    fs.mkdirSync(dir)
    return { path: dir, kill: available.kill }
  } catch (error) {
    return { reason: `cannot create a cgroup in ${available.parent} (${errorText(error)})` }
  }
}

/** Every directory of the cgroup's subtree, deepest first (a root member may create sub-cgroups). */
const subtree = (dir: string): ReadonlyArray<string> => {
  const found: Array<string> = []
  const walk = (at: string) => {
    let entries: ReadonlyArray<fs.Dirent> = []
    try {
      entries = fs.readdirSync(at, { withFileTypes: true })
    } catch {
      return // removed meanwhile
    }
    for (const entry of entries) if (entry.isDirectory()) walk(path.join(at, entry.name))
    found.push(at)
  }
  walk(dir)
  return found
}

/** Whether a live process is in the cgroup or below it (a zombie has left it). */
export const populated = (cgroup: Cgroup): boolean => {
  try {
    return /^populated 1$/m.test(fs.readFileSync(path.join(cgroup.path, "cgroup.events"), "utf8"))
  } catch {
    return false // removed: nothing is in it
  }
}

/** The pids of the live processes in the cgroup's subtree. */
export const members = (cgroup: Cgroup): ReadonlyArray<number> =>
  subtree(cgroup.path).flatMap((dir) => {
    try {
      return fs
        .readFileSync(path.join(dir, "cgroup.procs"), "utf8")
        .split("\n")
        .flatMap((line) => (line === "" ? [] : [Number(line)]))
    } catch {
      return []
    }
  })

const write = (file: string, text: string): boolean => {
  try {
    fs.writeFileSync(file, text)
    return true
  } catch {
    return false
  }
}

const killEach = (pids: ReadonlyArray<number>, signal: NodeJS.Signals): void => {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * Sends SIGTERM to each member once (a process group signal would miss those that left
 * the group), and to `leader` if it is not one yet: a trampoline stopped in its first
 * instant, before it joined, then ends without running the command.
 */
export const terminate = (cgroup: Cgroup, leader: number | undefined): void => {
  const pids = members(cgroup)
  killEach(leader === undefined || pids.includes(leader) ? pids : [...pids, leader], "SIGTERM")
}

const frozen = (cgroup: Cgroup): boolean => {
  try {
    return /^frozen 1$/m.test(fs.readFileSync(path.join(cgroup.path, "cgroup.events"), "utf8"))
  } catch {
    return true
  }
}

/**
 * SIGKILLs everything in the cgroup without `cgroup.kill`: frozen, no member can fork
 * while the list is read, so the list is complete; the kill takes effect on frozen
 * processes too. The cgroup is thawed afterwards.
 */
export const freezeAndKill = Effect.fnUntraced(function* (cgroup: Cgroup) {
  write(path.join(cgroup.path, "cgroup.freeze"), "1")
  const start = performance.now()
  // A process in uninterruptible sleep delays the freeze; the kill loop below copes.
  while (!frozen(cgroup) && populated(cgroup) && performance.now() - start < 100) yield* RealTime.sleep(1)
  for (let round = 0; round < 10 && populated(cgroup); round++) {
    killEach(members(cgroup), "SIGKILL")
    if (round > 0) yield* RealTime.sleep(1)
  }
  write(path.join(cgroup.path, "cgroup.freeze"), "0")
})

/** SIGKILLs everything in the cgroup and below it, and `leader` too (see {@link terminate}). */
export const kill = (cgroup: Cgroup, leader: number | undefined): Effect.Effect<void> =>
  Effect.andThen(
    cgroup.kill === "cgroup.kill" && write(path.join(cgroup.path, "cgroup.kill"), "1")
      ? Effect.void
      : freezeAndKill(cgroup),
    // A second SIGKILL to a member does nothing more.
    Effect.sync(() => killEach(leader === undefined ? [] : [leader], "SIGKILL"))
  )

/**
 * Removes the cgroup (and any sub-cgroup a member made), waiting up to a second for the
 * kernel to let go of members that were just killed; says whether it is gone.
 */
export const remove = Effect.fnUntraced(function* (cgroup: Cgroup) {
  const start = performance.now()
  let wait = 1
  while (true) {
    let busy = false
    for (const dir of subtree(cgroup.path)) {
      try {
        fs.rmdirSync(dir)
      } catch (error) {
        if (errorText(error) !== "ENOENT") busy = true
      }
    }
    if (!busy) return true
    if (performance.now() - start > 1000) return false
    yield* RealTime.sleep(wait)
    wait = Math.min(wait * 2, 20)
  }
})
