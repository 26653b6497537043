/**
 * What a subprocess is run from and what it ends with: the types of `Subprocess`, apart
 * from it so that the modules that run it can name them. Re-exported from `Subprocess`.
 */
import type { Redacted } from "effect"
import type * as Tool from "../../tools/Tool.ts"
import type * as ProcessGroup from "./ProcessGroup.ts"

/**
 * What to run.
 *
 * @category models
 * @since 0.1.0
 */
export interface Spec {
  /** The executable (looked up on `PATH`); no shell reads it (with a cgroup, a `sh` trampoline `exec`s it, see the module doc). */
  readonly command: string
  /** `Redacted` values reach the child and nothing else (see the module doc). */
  readonly args?: ReadonlyArray<string | Redacted.Redacted<string>> | undefined
  readonly cwd?: string | undefined
  /** Variables to set (a value `undefined` removes the variable); `Redacted` values reach the child only. */
  readonly env?: Readonly<Record<string, string | Redacted.Redacted<string> | undefined>> | undefined
  /** Default `true`: `env` is added to this process's environment; `false` gives the child only `env`. */
  readonly extendEnv?: boolean | undefined
  /** Written to the child's stdin, which is then closed. Without it, stdin is `/dev/null`. */
  readonly stdin?: string | Uint8Array | undefined
}

/**
 * What held a child and everything it started: a cgroup of its own (nothing escapes
 * it but a process privileged to move itself to another cgroup), or its process group
 * (a descendant that calls `setsid` escapes it).
 *
 * @category models
 * @since 0.1.0
 */
export type Containment = ProcessGroup.Containment

/**
 * A process that exited with code 0.
 *
 * @category models
 * @since 0.1.0
 */
export interface Result {
  readonly pid: number
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
  /** From the spawn to the exit. */
  readonly elapsedMillis: number
  /** What held the process and what it started. */
  readonly containment: Containment
}

/**
 * A signal the supervisor sends.
 *
 * @category models
 * @since 0.1.0
 */
export type Signal = ProcessGroup.Signal

/**
 * What the supervisor did to a child whose run stopped waiting for it, and what became
 * of the child's action. The supervisor's own record (`ProcessGroup.Settled`, internal)
 * has the same fields, and is checked against this one where it is reported (`onSettled`).
 *
 * @category models
 * @since 0.1.0
 */
export interface Settled {
  readonly pid: number
  /** What held the child and what it started: what was signalled and waited for. */
  readonly containment: Containment
  /**
   * - `completed`: the child had already exited, and nothing it started was left
   *   running in its containment; nothing was sent.
   * - `cancelled`: the child (or what it left running) exited on SIGTERM within the
   *   grace period.
   * - `outcome_unknown`: something outlived the grace period and was SIGKILLed; its
   *   action may or may not have taken effect.
   */
  readonly settlement: Tool.Settlement
  /** The signals sent, in order. */
  readonly signals: ReadonlyArray<Signal>
  /** Whether the exit was reaped (false only if the child survived SIGKILL for `Subprocess.killWaitMillis`). */
  readonly reaped: boolean
  /** From the first signal to the reap (0 when nothing was sent). */
  readonly millis: number
  /** One sentence for the timeline. */
  readonly detail: string
}

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** How long a child gets between SIGTERM and SIGKILL, in milliseconds. Default 2000. */
  readonly graceMillis?: number | undefined
  /** The most stdout and stderr together may hold, in bytes. Default 1 MiB. */
  readonly maxOutputBytes?: number | undefined
  /**
   * Default `true`: where `Subprocess.cgroupSupport` finds cgroups available, the process runs
   * in a cgroup of its own, so that nothing it starts escapes. `false` keeps to its
   * process group (for a process manager that owns the cgroup tree, say).
   */
  readonly cgroup?: boolean | undefined
  /**
   * Whether the command may change the world and is not safe to run twice. Default
   * `false`. A child that did not finish may have done part of its work: one stopped for
   * too much output, or killed by a signal its host did not send (a crash, the kernel's
   * out-of-memory killer). For such a command that is an `UnknownOutcome`, never retried
   * blindly, as a timeout of it is (R3.8); otherwise a `Permanent` failure.
   * `Subprocess.tool` sets it from the tool's `sideEffect` (`write`, `external`) and
   * `idempotent`.
   */
  readonly unsafeToRepeat?: boolean | undefined
  /** Called once the child is running, with its pid (which is also its process group id). */
  readonly onSpawn?: ((pid: number) => void) | undefined
  /**
   * Called when the running effect was interrupted (cancel, deadline, timeout), after the
   * child was reclaimed, with what became of it; also when the interruption lands while
   * what an exited child left running is stopped (the effect is then interrupted, not
   * given its result). Not called when the effect ends otherwise (an exit, a failure).
   */
  readonly onSettled?: ((settled: Settled) => void) | undefined
}
