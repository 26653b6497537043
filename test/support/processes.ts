/**
 * Helpers for the tests of supervised subprocesses (R5.2): real processes, looked up in
 * /proc (Linux), and waits in real time whatever the clock.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll } from "vitest"

export const fixtures = path.join(import.meta.dirname, "..", "fixtures")

const made: Array<string> = []

// Registered while the test file that imports this module is collected: its directories go with it.
afterAll(() => {
  for (const each of made.splice(0)) fs.rmSync(each, { recursive: true, force: true })
})

/** A fresh temporary directory, removed after the test file's tests. */
export const tempDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "subprocess-test-"))
  made.push(dir)
  return dir
}

/** True once no process has this pid: `kill(pid, 0)` fails with ESRCH (a zombie would still answer). */
export const isGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
}

/** The fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, session, ... */
const statOf = (pid: string): ReadonlyArray<string> | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined // gone meanwhile
  }
}

const pids = (): ReadonlyArray<string> => fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))

/**
 * True once nothing is left running in the group led by `pid` (the child and anything it
 * started). A grandchild orphaned by the child's exit is reaped by PID 1, which in some
 * containers happens seconds later: such a zombie has finished and does not count.
 */
export const isGroupGone = (pid: number): boolean => {
  if (!isGone(pid)) return false
  for (const entry of pids()) {
    const fields = statOf(entry)
    if (fields !== undefined && Number(fields[2]) === pid && fields[0] !== "Z") return false
  }
  return true
}

/** The pids of this process's children, from /proc. */
export const childPids = (): ReadonlySet<number> => {
  const found = new Set<number>()
  for (const task of fs.readdirSync("/proc/self/task")) {
    const text = fs.readFileSync(`/proc/self/task/${task}/children`, "utf8")
    for (const word of text.split(/\s+/)) if (word !== "") found.add(Number(word))
  }
  return found
}

/**
 * The live processes whose environment holds `EAR_TEST_MARKER=<marker>`: a tool's
 * command gets the variable, and everything it starts inherits it, whatever session or
 * process group it moves to. A zombie has no environment left, so it never counts.
 */
export const markedPids = (marker: string): ReadonlyArray<number> => {
  const needle = `EAR_TEST_MARKER=${marker}\0`
  const found: Array<number> = []
  for (const entry of pids()) {
    let environ = ""
    try {
      environ = fs.readFileSync(`/proc/${entry}/environ`, "latin1")
    } catch {
      continue
    }
    if (environ.includes(needle) && statOf(entry)?.[0] !== "Z") found.push(Number(entry))
  }
  return found
}

/**
 * How many of the processes carrying `marker` lead a session of their own: the command
 * (started detached) and each descendant that called `setsid`, once it has.
 */
export const sessionLeaders = (marker: string): number =>
  markedPids(marker).filter((pid) => Number(statOf(String(pid))?.[3]) === pid).length

/** SIGKILLs whatever carries `marker`, so that a test that fails leaves nothing behind. */
export const killMarked = (marker: string): void => {
  for (const pid of markedPids(marker)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone meanwhile
    }
  }
}

/** Sleeps in real time, whatever the clock (some tests run on the TestClock). */
export const nap = (millis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Polls `condition` every few milliseconds, for at most `millis` of real time; says whether it came true. */
export const eventually = (condition: () => boolean, millis: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const start = performance.now()
    while (performance.now() - start < millis) {
      if (condition()) return true
      yield* nap(10)
    }
    return condition()
  })

/** Waits (in real time) until the child wrote its pid to `file`, i.e. its signal handlers are set. */
export const waitReady = (file: string): Effect.Effect<number> =>
  Effect.gen(function* () {
    const start = performance.now()
    while (performance.now() - start < 10_000) {
      const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim() : ""
      if (text !== "") return Number(text)
      yield* nap(5)
    }
    return yield* Effect.die(new Error(`${file} never appeared`))
  })
