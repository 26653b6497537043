/**
 * Stopping and reaping a supervised child (R5.2), private to `Subprocess`: its process
 * group, or its cgroup where it has one.
 *
 * A process group is signalled through effect's `ChildProcessHandle.kill({ killSignal })`:
 * SIGTERM to the group, the grace period, SIGKILL to what is left, and the reap, the
 * waits on the monotonic clock (effect's own `forceKillAfter` reads the wall clock, which a
 * step of the system clock moves). Kept here too is what the kill does not say or see:
 *
 * - which of the signals ended the group: the run records whether the child stopped on
 *   SIGTERM (`cancelled`) or had to be killed (`outcome_unknown`). The SIGKILL is sent here,
 *   to the group or the cgroup, so whether it was is known. A leader running when the stop
 *   began and ended by SIGKILL counts as killed.
 * - a zombie, which it counts as alive. A grandchild orphaned by the child's exit is
 *   reaped by PID 1, which some containers do late (seconds) or never (node as PID 1), so
 *   its every wait would run to its bound. A watch that counts a zombie as gone races it.
 *   The watch reads `/proc` asynchronously (see `ProcScan`: one read for every group
 *   waited on), and only once the leader has exited and a signal 0 to the group still
 *   finds a member.
 * - what left the group: a child with a cgroup (see `SubprocessCgroup`) is signalled and
 *   waited for through its cgroup, which holds every descendant; effect's kill reaches the
 *   process group only.
 *
 * The spawner starts the child detached, as the leader of its own process group, so a
 * signal to `-pid` reaches what the child started too. The grace period and the waits
 * are measured in real time, not by Effect's `Clock` (see `SubprocessTime`).
 */
import * as os from "node:os"
import { Effect, Exit, Predicate } from "effect"
import type * as PlatformError from "effect/PlatformError"
import type { ChildProcessSpawner } from "effect/process"
import * as RealTime from "../../time/RealTime.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as ProcScan from "./ProcScan.ts"
import * as SubprocessCgroup from "./SubprocessCgroup.ts"
import { withinReal } from "./SubprocessTime.ts"

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
 * (members signalled with it are usually gone by then), doubling up to 20 ms.
 */
const pollMaxMillis = 20

const errnoOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/** Whether a process of group `pgid` other than a zombie exists. */
const groupAlive = (pgid: number): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    try {
      process.kill(-pgid, 0)
    } catch (error) {
      // EPERM: a member exists that we may not signal (or, on macOS, only zombies remain).
      return Effect.succeed(errnoOf(error) === "EPERM" && process.platform !== "darwin")
    }
    // The group answers; on Linux, tell live members from zombies.
    return process.platform === "linux"
      ? Effect.flatMap(Effect.service(ProcScan.ProcScanRef), (scan) => scan.hasLiveMember(pgid))
      : Effect.succeed(true)
  })

/**
 * Whether the leader is running: Node says so until it has run the exit's handler, which a
 * busy event loop delays, so a leader the kernel holds as a zombie, or that is reaped, has
 * exited already (review 89: a command that had exited 0 was taken as stopped by the
 * SIGTERM sent after).
 */
const leaderRunning = (target: Target): Effect.Effect<boolean> =>
  Effect.flatMap(
    Effect.orElseSucceed(target.handle.isRunning, () => false),
    (running) =>
      running
        ? Effect.flatMap(Effect.service(ProcScan.ProcScanRef), (scan) =>
            Effect.map(scan.hasExited(target.handle.pid), (exited) => !exited)
          )
        : Effect.succeed(false)
  )

/** Whether what the leader left in its containment (cgroup, or group) is alive. */
const othersAlive = (target: Target): Effect.Effect<boolean> => {
  if (process.platform === "win32") return Effect.succeed(false)
  const cgroup = target.cgroup
  return cgroup === undefined ? groupAlive(target.handle.pid) : Effect.sync(() => SubprocessCgroup.populated(cgroup))
}

/**
 * Waits until nothing of the child is alive, for at most `millis`; says whether that
 * happened. One wait for the leader's exit (an event), then what it left is polled.
 */
const awaitGone = (target: Target, millis: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const deadline = performance.now() + millis
    const exited = yield* withinReal(Effect.ignore(target.handle.exitCode), millis)
    if (exited._tag === "None") return false
    let poll = 1
    while (true) {
      if (!(yield* othersAlive(target))) return true
      const left = deadline - performance.now()
      if (left <= 0) return false
      yield* RealTime.sleep(Math.min(poll, left))
      poll = Math.min(poll * 2, pollMaxMillis)
    }
  })

/** Each member of the cgroup gets one SIGTERM, whatever group it is in; SIGKILL goes to the whole cgroup. */
const signalCgroup = (target: Target, cgroup: SubprocessCgroup.Cgroup, name: Signal): Effect.Effect<void> =>
  Effect.flatMap(leaderRunning(target), (running) => {
    // The leader is signalled by its pid too until it has joined (see `terminate`); its
    // pid is still its own while the handle has not seen it exit.
    const leader = running ? target.handle.pid : undefined
    return name === "SIGTERM"
      ? Effect.sync(() => SubprocessCgroup.terminate(cgroup, leader))
      : SubprocessCgroup.kill(cgroup, leader)
  })

const round = (millis: number): number => Math.round(millis)

/** What a stop did: whether all of it is gone, and whether it may have taken SIGKILL. */
interface Stop {
  readonly reaped: boolean
  readonly killed: boolean
}

/**
 * How a command that was not running when its stop began had ended, on its own: by its
 * exit code (it finished, whatever it answered) or by a signal (the OOM killer, say: it
 * died mid-action).
 */
type Ended = { readonly _tag: "Exited" } | { readonly _tag: "Died"; readonly signal: string }

/** The record of a stop, from when it started and what it did. */
const settledRecord = (
  target: Target,
  graceMillis: number,
  killWaitMillis: number,
  stop: Stop & {
    readonly start: number
    readonly end: number
    /** How the command had ended before the stop, if it had. */
    readonly ended: Ended | undefined
    /** Whether something was left to signal. */
    readonly signalled: boolean
  }
): Settled => {
  const pid: number = target.handle.pid
  const containment: Containment = target.cgroup === undefined ? "process_group" : "cgroup"
  const who = `pid ${pid} (${containment === "cgroup" ? "cgroup" : "process group"})`
  const millis = stop.end - stop.start
  if (stop.reaped && !stop.killed && stop.ended !== undefined) {
    // The command had ended on its own, and what it left behind, if it left something, stopped
    // as asked: its action is what its ending says (review 86: an exit 0 was recorded
    // cancelled, which invites a repeat of what it did).
    const signals: ReadonlyArray<Signal> = stop.signalled ? ["SIGTERM"] : []
    const left = stop.signalled ? `; what it left running stopped on SIGTERM after ${round(millis)} ms` : ""
    const exited = stop.ended._tag === "Exited"
    const detail = exited
      ? `${who} had already exited${left}`
      : `${who} had died of ${stop.ended.signal} before the stop, and its action may or may not have taken effect${left}`
    const settlement = exited ? "completed" : "outcome_unknown"
    return { pid, containment, settlement, signals, reaped: true, millis, detail }
  }
  if (stop.reaped && !stop.killed) {
    const detail = `${who} stopped on SIGTERM after ${round(millis)} ms`
    return { pid, containment, settlement: "cancelled", signals: ["SIGTERM"], reaped: true, millis, detail }
  }
  // A command that had ended on its own left something running, which had to be killed: what it began is in doubt.
  const what =
    stop.ended === undefined
      ? who
      : `${who} had ${stop.ended._tag === "Exited" ? "already exited" : `died of ${stop.ended.signal}`}; what it left running`
  const detail = !stop.reaped
    ? `${what} was still running ${killWaitMillis} ms after SIGKILL; it must be reclaimed, and its action may or may not have taken effect`
    : millis < graceMillis
      ? `${what} was ended by SIGKILL ${round(millis)} ms after SIGTERM, and its action may or may not have taken effect`
      : `${what} did not stop within the ${graceMillis} ms grace period after SIGTERM; it was SIGKILLed and reaped ${round(
          Math.max(0, millis - graceMillis)
        )} ms later, and its action may or may not have taken effect`
  return {
    pid,
    containment,
    settlement: "outcome_unknown",
    signals: ["SIGTERM", "SIGKILL"],
    reaped: stop.reaped,
    millis,
    detail
  }
}

/** The signal the child died of; the handle reports it only in the message of its error. */
export const signalOf = (error: PlatformError.PlatformError): string => {
  const cause = error.reason.cause
  const text = Predicate.isError(cause) ? cause.message : error.message
  return /signal: '([A-Z0-9]+)'/.exec(text)?.[1] ?? "unknown_signal"
}

/**
 * The signals that kill a command mid-action without its say (the kernel's, a crash's), whose
 * `128 + n` a shell exits with when its command died of one (137: SIGKILL, 139: SIGSEGV). A
 * program may exit 130 or 143 itself (after SIGINT or SIGTERM, handled): those are not read so.
 */
const killedBy: ReadonlyArray<string> = ["SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGSYS"]

/** The signal a shell's exit code `128 + n` says its command was killed by, if it is one of {@link killedBy}. */
export const signalOfExitCode = (exitCode: number): string | undefined =>
  killedBy.find((name) => os.constants.signals[name as keyof typeof os.constants.signals] === exitCode - 128)

/** How the leader ended (call it once it has: its exit is then known). */
const endingOf = (target: Target): Effect.Effect<Ended> =>
  Effect.map(Effect.exit(target.handle.exitCode), (exit): Ended => {
    if (Exit.isSuccess(exit)) {
      // A shell's `128 + n` for a command a signal killed is that death (review 89: 137 was "exited").
      const signal = signalOfExitCode(exit.value)
      return signal === undefined ? { _tag: "Exited" } : { _tag: "Died", signal }
    }
    const error = Exit.findErrorOption(exit)
    return { _tag: "Died", signal: error._tag === "Some" ? signalOf(error.value) : "unknown_signal" }
  })

/**
 * SIGTERM, the grace period, SIGKILL and the reap of the process group: the signals go to the
 * group through effect's kill, and the grace and the reap are waited for by the watch, on the
 * monotonic clock. Effect's own escalation reads `Date.now()`: a wall clock set back during the
 * grace held SIGKILL off for as long as it was set back, and the child outlived its stop; one
 * set forward sent SIGKILL at once, and the record said SIGTERM (review 149).
 */
const stopGroup = Effect.fnUntraced(function* (target: Target, graceMillis: number, killWaitMillis: number) {
  // The kill's own wait (for the leader, bounded by the wall clock) is not taken: the watch says when all is gone.
  const signalled = (signal: Signal, millis: number) =>
    Effect.raceFirst(
      Effect.andThen(Effect.ignore(target.handle.kill({ killSignal: signal })), Effect.never),
      awaitGone(target, millis)
    )
  if (yield* signalled("SIGTERM", graceMillis)) return { reaped: true, killed: false } satisfies Stop
  return { reaped: yield* signalled("SIGKILL", killWaitMillis), killed: true } satisfies Stop
})

// effect's kill reaches the process group only; a cgroup holds what left it (setsid, a double fork).
const stopCgroup = Effect.fnUntraced(function* (
  target: Target,
  cgroup: SubprocessCgroup.Cgroup,
  graceMillis: number,
  killWaitMillis: number
) {
  yield* signalCgroup(target, cgroup, "SIGTERM")
  if (yield* awaitGone(target, graceMillis)) return { reaped: true, killed: false } satisfies Stop
  yield* signalCgroup(target, cgroup, "SIGKILL")
  return { reaped: yield* awaitGone(target, killWaitMillis), killed: true } satisfies Stop
})

/**
 * Stops the child and what it started, and reaps it: SIGTERM, up to `graceMillis` for
 * all of it to exit, then SIGKILL and up to `killWaitMillis` for the reap. Never fails;
 * run it uninterruptibly. The whole of it is one wait in real time (`RealTime.held`): a
 * test-clock driver does not move its clock between its polls.
 */
export const reclaim = (target: Target, graceMillis: number, killWaitMillis: number) =>
  RealTime.held(reclaiming(target, graceMillis, killWaitMillis))

const reclaiming = Effect.fnUntraced(function* (target: Target, graceMillis: number, killWaitMillis: number) {
  const leaderWasRunning = yield* leaderRunning(target)
  const ended = leaderWasRunning ? undefined : yield* endingOf(target)
  const start = performance.now()
  if (ended !== undefined && !(yield* othersAlive(target))) {
    const stop = { reaped: true, killed: false, start, end: start, ended, signalled: false }
    return settledRecord(target, graceMillis, killWaitMillis, stop)
  }
  const cgroup = target.cgroup
  const stop =
    cgroup === undefined
      ? yield* stopGroup(target, graceMillis, killWaitMillis)
      : yield* stopCgroup(target, cgroup, graceMillis, killWaitMillis)
  // A leader that SIGKILL ended while it was being stopped (the kill, or the OOM killer)
  // was killed mid-action; one that had ended before the stop is recorded by its ending.
  const ending = stop.reaped && leaderWasRunning ? yield* endingOf(target) : undefined
  const killed = stop.killed || (ending?._tag === "Died" && ending.signal === "SIGKILL")
  return settledRecord(target, graceMillis, killWaitMillis, {
    reaped: stop.reaped,
    killed,
    start,
    end: performance.now(),
    ended,
    signalled: true
  })
})
