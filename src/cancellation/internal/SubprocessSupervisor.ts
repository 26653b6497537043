/**
 * Tying a supervised subprocess to its host (R5.2), private to `Subprocess`.
 *
 * The host stops its children in a finalizer; a host that is SIGKILLed (or exits without
 * running its finalizers: `process.exit`, a crash, the OOM killer) runs none, and its
 * children live on under PID 1. So every supervised process gets a supervisor: a small
 * `sh` process (about 1 ms to start, against some 30 ms for another Node), started before
 * the command, in a session of its own (so no signal meant for the host's or the
 * command's group reaches it), whose stdin is a pipe from the host. The host writes on
 * it what it must stop should the host die (`cgroup <dir>`, `pgid <n>`), then `done` once
 * it has reclaimed everything itself. The pipe's end without `done` means the host is
 * gone: the kernel closed its end. The supervisor then does what the host would have
 * done: SIGTERM, the grace period, SIGKILL (`cgroup.kill`, or freezing the cgroup and
 * killing each member), and removes the cgroup.
 *
 * It is a sibling of the command, not its parent: the command stays the host's own
 * child, so the exit code, a death by signal and the pid the host sees are the
 * command's, exactly. The host's end of the pipe is close-on-exec, so no other child
 * holds it open.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Effect } from "effect"
import type { KillMethod } from "./SubprocessCgroup.ts"
import { withinReal } from "./SubprocessTime.ts"

// $1: the grace period in milliseconds; $2: how the kernel kills a cgroup (a KillMethod).
// `kill -s SIG -- -PGID` is the form dash accepts. Every wait is bounded by a timer of real
// time (a `sleep` of its own), not by a count of polls: 50 supervisors of a host that died,
// on 2 cores, stretched a count of 10 ms polls to five times the grace (review 185). `alive`
// reads the cgroup's state with the shell's own `read`, forking nothing.
const script = `grace=$1 method=$2 cg= pgid=
while IFS= read -r line; do
  case $line in
    done) exit 0 ;;
    "cgroup "*) cg=\${line#cgroup } ;;
    "pgid "*) pgid=\${line#pgid } ;;
  esac
done
case $pgid in *[!0-9]*) pgid= ;; esac
alive() {
  if [ -n "$cg" ]; then
    populated=0
    { while read -r key value; do [ "$key" = populated ] && populated=$value; done; } 2>/dev/null < "$cg/cgroup.events"
    [ "$populated" = 1 ]
  elif [ -n "$pgid" ]; then kill -s 0 -- "-$pgid" 2>/dev/null
  else return 1; fi
}
each() {
  for pid in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null); do kill -s "$1" "$pid" 2>/dev/null; done
}
timer_for() {
  sleep "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))" & timer=$!
}
wait_gone() {
  timer_for "$1"
  while kill -s 0 "$timer" 2>/dev/null && alive; do sleep 0.05; done
  kill "$timer" 2>/dev/null
}
if alive; then
  if [ -n "$cg" ]; then each TERM; else kill -s TERM -- "-$pgid" 2>/dev/null; fi
  wait_gone "$grace"
fi
if alive; then
  if [ -z "$cg" ]; then kill -s KILL -- "-$pgid" 2>/dev/null
  elif [ "$method" != cgroup.kill ] || ! echo 1 2>/dev/null > "$cg/cgroup.kill"; then
    echo 1 2>/dev/null > "$cg/cgroup.freeze"
    timer_for 1000
    while kill -s 0 "$timer" 2>/dev/null && alive; do each KILL; sleep 0.05; done
    kill "$timer" 2>/dev/null
    echo 0 2>/dev/null > "$cg/cgroup.freeze"
  fi
  wait_gone 5000
fi
[ -n "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \\; 2>/dev/null
exit 0
`

/** The name the supervisor shows in `ps` (`$0` of its shell). */
export const processName = "effect-agent-runtime-supervisor"

/** The supervisor of one process. */
export interface Supervisor {
  /** Its pid (0 where there is none: Windows). */
  readonly pid: number
  /** Should the host die, the supervisor stops everything in this cgroup. */
  readonly contain: (cgroup: string) => void
  /** Should the host die, the supervisor stops this process group (unless it has a cgroup). */
  readonly watch: (pgid: number) => void
  /** The host reclaimed everything: the supervisor is to exit, touching nothing. Returns at once. */
  readonly finish: () => void
  /** Finishes the supervisor (if not done yet) and waits for its exit. */
  readonly release: Effect.Effect<void>
}

const none: Supervisor = { pid: 0, contain: () => {}, watch: () => {}, finish: () => {}, release: Effect.void }

/** How long the host waits for a released supervisor to exit before it kills it. */
const releaseWaitMillis = 1000

const exited = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null

const make = (child: ChildProcess): Supervisor => {
  const send = (line: string) => {
    if (child.stdin?.writable === true) child.stdin.write(`${line}\n`)
  }
  const awaitExit = Effect.callback<void>((resume) => {
    if (exited(child)) return resume(Effect.void)
    const onExit = () => resume(Effect.void)
    child.once("exit", onExit)
    return Effect.sync(() => child.off("exit", onExit))
  })
  const finish = () => {
    if (child.stdin?.writableEnded === false) child.stdin.end("done\n")
  }
  return {
    pid: child.pid ?? 0,
    contain: (cgroup) => send(`cgroup ${cgroup}`),
    watch: (pgid) => send(`pgid ${pgid}`),
    finish,
    release: Effect.gen(function* () {
      finish()
      const gone = yield* withinReal(awaitExit, releaseWaitMillis)
      if (gone._tag === "None") child.kill("SIGKILL")
    })
  }
}

/**
 * Starts the supervisor of a process that gets `graceMillis` between SIGTERM and SIGKILL
 * (and whose cgroup, if it gets one, is killed by `kill`); fails with the spawn error if
 * `sh` cannot start (nothing else was started then).
 */
export const start = (graceMillis: number, kill: KillMethod = "cgroup.kill"): Effect.Effect<Supervisor, Error> => {
  if (process.platform === "win32") return Effect.succeed(none)
  return Effect.callback<Supervisor, Error>((resume) => {
    const child = spawn("/bin/sh", ["-c", script, processName, String(Math.ceil(graceMillis)), kill], {
      stdio: ["pipe", "ignore", "ignore"],
      detached: true,
      // The supervisor needs only the tools on PATH, not the host's secrets.
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
    })
    // A supervisor that died (someone killed it) makes a write fail; the host's own
    // reclamation does not depend on it.
    child.stdin?.on("error", () => {})
    child.once("error", (error) => resume(Effect.fail(error)))
    child.once("spawn", () => resume(Effect.succeed(make(child))))
  })
}
