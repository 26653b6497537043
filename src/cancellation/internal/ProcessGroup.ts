/**
 * Stopping and reaping a supervised child (R5.2), private to `Subprocess`: its process
 * group, or its cgroup where it has one.
 *
 * Built on top of effect's `ChildProcessHandle` (its `pid`, `isRunning` and `exitCode`)
 * rather than on its `kill` or the spawner's scope release, for three reasons:
 *
 * - They do send SIGTERM, wait and send SIGKILL (`forceKillAfter`), but do not say which
 *   of them ended the process; the run must record whether the child stopped on the
 *   signal (`cancelled`) or had to be killed (`outcome_unknown`). Without
 *   `forceKillAfter` they wait for a child that ignores SIGTERM forever.
 * - They count a zombie in the group as alive. A grandchild orphaned by the child's exit
 *   is reaped by PID 1, which some containers do late (seconds) or never (node as PID 1),
 *   so every wait would run to its bound. A zombie has finished: here it counts as gone.
 * - They know the process group only; a child with a cgroup (see `SubprocessCgroup`) is
 *   signalled and waited for through it, which reaches what left the group.
 *
 * The spawner starts the child detached, as the leader of its own process group, so a
 * signal to `-pid` reaches what the child started too. The grace period and the waits
 * are measured in real time, not by Effect's `Clock` (see `SubprocessTime`).
 */
import * as fs from "node:fs"
import { Effect } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import type * as Tool from "../../tools/Tool.ts"
import * as SubprocessCgroup from "./SubprocessCgroup.ts"
import { sleepReal } from "./SubprocessTime.ts"

/** A signal the supervisor sends. */
export type Signal = "SIGTERM" | "SIGKILL"

/** What holds a child and everything it started: its cgroup, or only its process group. */
export type Containment = "cgroup" | "process_group"

/** What the supervisor did to a child, and what became of the child's action. */
export interface Settled {
  readonly pid: number
  readonly containment: Containment
  readonly settlement: Tool.Settlement
  readonly signals: ReadonlyArray<Signal>
  readonly reaped: boolean
  readonly millis: number
  readonly detail: string
}

/** A running child: its handle (its pid is its process group id) and its cgroup, if it has one. */
export interface Target {
  readonly handle: ChildProcessSpawner.ChildProcessHandle
  readonly cgroup: SubprocessCgroup.Cgroup | undefined
}

/**
 * Once the leader has exited (an event), what it left is polled: first after 1 ms
 * (members signalled with it are usually gone by then), doubling up to 20 ms, since a
 * poll of a process group may read every `/proc/<pid>/stat` (some milliseconds).
 */
const pollMaxMillis = 20

const errnoOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/** Whether a process of group `pgid` other than a zombie exists. */
const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    // EPERM: a member exists that we may not signal (or, on macOS, only zombies remain).
    return errnoOf(error) === "EPERM" && process.platform !== "darwin"
  }
  if (process.platform !== "linux") return true
  // The group answers; on Linux, tell live members from zombies.
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
    } catch {
      continue // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (Number(fields[2]) === pgid && fields[0] !== "Z") return true
  }
  return false
}

const leaderRunning = (target: Target): Effect.Effect<boolean> =>
  Effect.orElseSucceed(target.handle.isRunning, () => false)

/** The child or anything it left in its cgroup (or, without one, its group) is still running. */
export const isAlive = (target: Target): Effect.Effect<boolean> =>
  Effect.flatMap(leaderRunning(target), (running) =>
    running || process.platform === "win32"
      ? Effect.succeed(running)
      : Effect.sync(() =>
          target.cgroup === undefined ? groupAlive(target.handle.pid) : SubprocessCgroup.populated(target.cgroup)
        )
  )

// ESRCH (gone already) is not an error: the wait that follows says what is left.
const signalGroup = (pid: number, name: Signal): void => {
  try {
    // No process groups on Windows: the leader only.
    process.kill(process.platform === "win32" ? pid : -pid, name)
  } catch {
    // gone already
  }
}

const signal = (target: Target, name: Signal): Effect.Effect<void> => {
  const cgroup = target.cgroup
  if (cgroup === undefined) return Effect.sync(() => signalGroup(target.handle.pid, name))
  // Each member gets one SIGTERM, whatever group it is in; SIGKILL goes to the whole cgroup.
  return name === "SIGTERM" ? Effect.sync(() => SubprocessCgroup.terminate(cgroup)) : SubprocessCgroup.kill(cgroup)
}

/** Waits until nothing of the child is alive, for at most `millis`; says whether that happened. */
const awaitGone = (target: Target, millis: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const deadline = performance.now() + millis
    let poll = 1
    while (true) {
      if (!(yield* isAlive(target))) return true
      const left = deadline - performance.now()
      if (left <= 0) return false
      // While the leader runs the child is alive: one timer, woken early by the leader's
      // exit. After it, what it left is polled.
      if (yield* leaderRunning(target)) {
        yield* Effect.raceFirst(Effect.ignore(target.handle.exitCode), sleepReal(left))
      } else {
        yield* sleepReal(Math.min(poll, left))
        poll = Math.min(poll * 2, pollMaxMillis)
      }
    }
  })

const round = (millis: number): number => Math.round(millis)

/**
 * Stops the child and what it started, and reaps it: SIGTERM, up to `graceMillis` for
 * all of it to exit, then SIGKILL and up to `killWaitMillis` for the reap. Never fails;
 * run it uninterruptibly.
 */
export const reclaim = Effect.fnUntraced(function* (target: Target, graceMillis: number, killWaitMillis: number) {
  const pid: number = target.handle.pid
  const containment: Containment = target.cgroup === undefined ? "process_group" : "cgroup"
  const who = `pid ${pid} (${containment === "cgroup" ? "cgroup" : "process group"})`
  if (!(yield* isAlive(target))) {
    return {
      pid,
      containment,
      settlement: "completed",
      signals: [],
      reaped: true,
      millis: 0,
      detail: `${who} had already exited`
    } satisfies Settled
  }
  const start = performance.now()
  yield* signal(target, "SIGTERM")
  if (yield* awaitGone(target, graceMillis)) {
    const millis = performance.now() - start
    return {
      pid,
      containment,
      settlement: "cancelled",
      signals: ["SIGTERM"],
      reaped: true,
      millis,
      detail: `${who} stopped on SIGTERM after ${round(millis)} ms`
    } satisfies Settled
  }
  const killedAt = performance.now()
  yield* signal(target, "SIGKILL")
  const reaped = yield* awaitGone(target, killWaitMillis)
  const end = performance.now()
  return {
    pid,
    containment,
    settlement: "outcome_unknown",
    signals: ["SIGTERM", "SIGKILL"],
    reaped,
    millis: end - start,
    detail: reaped
      ? `${who} did not stop within the ${graceMillis} ms grace period after SIGTERM; it was SIGKILLed and reaped ${round(
          end - killedAt
        )} ms later, and its action may or may not have taken effect`
      : `${who} was still running ${killWaitMillis} ms after SIGKILL; it must be reclaimed, and its action may or may not have taken effect`
  } satisfies Settled
})
