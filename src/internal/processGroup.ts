/**
 * Stopping and reaping a child's process group (R5.2), private to `Subprocess`.
 *
 * Built on top of effect's `ChildProcessHandle` (its `pid`, `isRunning` and `exitCode`)
 * rather than on its `kill` or the spawner's scope release, for two reasons:
 *
 * - They do send SIGTERM, wait and send SIGKILL (`forceKillAfter`), but do not say which
 *   of them ended the process; the run must record whether the child stopped on the
 *   signal (`cancelled`) or had to be killed (`outcome_unknown`). Without
 *   `forceKillAfter` they wait for a child that ignores SIGTERM forever.
 * - They count a zombie in the group as alive. A grandchild orphaned by the child's exit
 *   is reaped by PID 1, which some containers do late (seconds) or never (node as PID 1),
 *   so every wait would run to its bound. A zombie has finished: here it counts as gone.
 *
 * The spawner starts the child detached, as the leader of its own process group, so a
 * signal to `-pid` reaches what the child started too. The grace period and the waits
 * are measured in real time, not by Effect's `Clock`: the child lives in real time, and
 * a `TestClock` that is never advanced must not be able to stall the reclamation of a
 * real process.
 */
import * as fs from "node:fs"
import { Effect, type Exit, Option } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import type * as Tool from "../Tool.ts"

/** A signal the supervisor sends. */
export type Signal = "SIGTERM" | "SIGKILL"

/** What the supervisor did to a child, and what became of the child's action. */
export interface Settled {
  readonly pid: number
  readonly settlement: Tool.Settlement
  readonly signals: ReadonlyArray<Signal>
  readonly reaped: boolean
  readonly millis: number
  readonly detail: string
}

/**
 * Once the leader has exited (an event), what it left in the group is polled: first
 * after 1 ms (members signalled with it are usually gone by then), doubling up to 20 ms,
 * since a poll may read every `/proc/<pid>/stat` (some milliseconds).
 */
const groupPollMaxMillis = 20

export const sleepReal = (millis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** How `effect` ended, if it did within `millis` of real time; it is interrupted otherwise. */
export const withinReal = <A, E>(
  effect: Effect.Effect<A, E>,
  millis: number
): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.raceFirst(Effect.map(Effect.exit(effect), Option.some), Effect.as(sleepReal(millis), Option.none()))

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

const leaderRunning = (handle: ChildProcessSpawner.ChildProcessHandle): Effect.Effect<boolean> =>
  Effect.orElseSucceed(handle.isRunning, () => false)

/** The child or anything left in its group is still running. */
export const isAlive = (handle: ChildProcessSpawner.ChildProcessHandle): Effect.Effect<boolean> =>
  Effect.flatMap(leaderRunning(handle), (running) =>
    running || process.platform === "win32" ? Effect.succeed(running) : Effect.sync(() => groupAlive(handle.pid))
  )

// ESRCH (gone already) is not an error: the wait that follows says what is left.
const signal = (handle: ChildProcessSpawner.ChildProcessHandle, name: Signal): Effect.Effect<void> =>
  Effect.ignore(
    Effect.try({
      // No process groups on Windows: the leader only.
      try: () => process.kill(process.platform === "win32" ? handle.pid : -handle.pid, name),
      catch: errnoOf
    })
  )

/** Waits until nothing of the group is alive, for at most `millis`; says whether that happened. */
const awaitGone = (handle: ChildProcessSpawner.ChildProcessHandle, millis: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const deadline = performance.now() + millis
    let poll = 1
    while (true) {
      if (!(yield* isAlive(handle))) return true
      const left = deadline - performance.now()
      if (left <= 0) return false
      // While the leader runs the group is alive: one timer, woken early by the leader's
      // exit. After it, what it left in the group is polled.
      if (yield* leaderRunning(handle)) {
        yield* Effect.raceFirst(Effect.ignore(handle.exitCode), sleepReal(left))
      } else {
        yield* sleepReal(Math.min(poll, left))
        poll = Math.min(poll * 2, groupPollMaxMillis)
      }
    }
  })

const round = (millis: number): number => Math.round(millis)

/**
 * Stops the child's group and reaps it: SIGTERM, up to `graceMillis` for everything in
 * the group to exit, then SIGKILL and up to `killWaitMillis` for the reap. Never fails;
 * run it uninterruptibly.
 */
export const reclaim = Effect.fnUntraced(function* (
  handle: ChildProcessSpawner.ChildProcessHandle,
  graceMillis: number,
  killWaitMillis: number
) {
  const pid: number = handle.pid
  if (!(yield* isAlive(handle))) {
    return {
      pid,
      settlement: "completed",
      signals: [],
      reaped: true,
      millis: 0,
      detail: `pid ${pid} had already exited`
    } satisfies Settled
  }
  const start = performance.now()
  yield* signal(handle, "SIGTERM")
  if (yield* awaitGone(handle, graceMillis)) {
    const millis = performance.now() - start
    return {
      pid,
      settlement: "cancelled",
      signals: ["SIGTERM"],
      reaped: true,
      millis,
      detail: `pid ${pid} stopped on SIGTERM after ${round(millis)} ms`
    } satisfies Settled
  }
  const killedAt = performance.now()
  yield* signal(handle, "SIGKILL")
  const reaped = yield* awaitGone(handle, killWaitMillis)
  const end = performance.now()
  return {
    pid,
    settlement: "outcome_unknown",
    signals: ["SIGTERM", "SIGKILL"],
    reaped,
    millis: end - start,
    detail: reaped
      ? `pid ${pid} did not stop within the ${graceMillis} ms grace period after SIGTERM; it was SIGKILLed and reaped ${round(
          end - killedAt
        )} ms later, and its action may or may not have taken effect`
      : `pid ${pid} was still running ${killWaitMillis} ms after SIGKILL; it must be reclaimed, and its action may or may not have taken effect`
  } satisfies Settled
})
