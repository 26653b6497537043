/**
 * The supervised subprocess executor (R5.2): runs a tool that cannot cooperate with
 * cancellation (blocking or foreign code) in a child process that the run can always
 * stop and reclaim.
 *
 * When the fiber running a process is interrupted (a cancelled run, the run deadline,
 * the tool's own timeout), its finalizer, which cannot itself be interrupted:
 *
 * 1. sends SIGTERM to the child and everything it started,
 * 2. waits up to `graceMillis` (default 2000, real time) for all of it to exit,
 * 3. sends SIGKILL to all of it if anything is still alive,
 * 4. waits for the exit to be reaped,
 *
 * and reports what became of the action as a {@link Settled} record: `completed` (it had
 * already exited with a code; what it left running stopped on SIGTERM), `cancelled` (it
 * stopped on SIGTERM within the grace period) or `outcome_unknown` (it ignored SIGTERM and
 * was killed mid-action, or had died of a signal before). Stopping the wait,
 * cancelling the task and the remote work stopping are three different results: a
 * child that had to be killed may have done part of its work, so it is never recorded
 * as cancelled. The interruption completes only after the reap, so a run's result is
 * never available while its child still runs. After a normal exit the same finalizer
 * stops whatever the child left running.
 *
 * "Everything it started" is its {@link Containment}: where the machine allows it
 * (Linux with a writable cgroup v2 hierarchy, see {@link cgroupSupport}), a cgroup of its
 * own, which holds every descendant, including one that left the process group on
 * purpose (`setsid`, a daemon's double fork); elsewhere, or with `cgroup: false`, its
 * process group, which such a descendant escapes. Each process also gets a supervisor, a
 * small `sh` process tied to the host by a pipe: if the host dies without stopping the
 * child (SIGKILL, `process.exit`, a crash), the supervisor stops it the same way.
 *
 * Output is bounded: stdout and stderr together may hold `maxOutputBytes` (default
 * 1 MiB); beyond that the child is stopped and the call fails. A non-zero exit or a
 * crash of the child is a typed {@link Failure.Permanent}, never a crash of the run; a
 * crash, or a stop for too much output, of a command unsafe to repeat is a
 * {@link Failure.UnknownOutcome} (its action may have taken place in part).
 * `Redacted` arguments and environment values reach the child only: they are replaced
 * by `<redacted>` in its output, in failures and in errors.
 *
 * {@link tool} wraps a command as a {@link Tool.Tool} whose handler forwards the
 * settlement to the call's `settle`, so the run's `tool.interrupted` event says the truth.
 *
 * The process is spawned with effect's `ChildProcessSpawner` (`NodeServices.layer` on
 * Node), in its own process group, so a signal reaches the children it started too; a
 * process group is stopped (steps 1 to 4) by the child handle's own `kill({ killSignal,
 * forceKillAfter })`, a cgroup through the cgroup (see `internal/ProcessGroup`).
 *
 * @since 0.1.0
 */

import type { Duration, Schema } from "effect"
import { Effect } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import type * as Failure from "../failure/Failure.ts"
import type * as OptionKeys from "../failure/OptionKeys.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Tool from "../tools/Tool.ts"
import * as SubprocessCgroup from "./internal/SubprocessCgroup.ts"
import * as SubprocessFailure from "./internal/SubprocessFailure.ts"
import { validateOptions } from "./internal/SubprocessOptions.ts"
import * as SubprocessRun from "./internal/SubprocessRun.ts"

/**
 * The default grace period and output limit live in `internal/SubprocessOptions`, with
 * the validation of the options; re-exported here.
 *
 * @category constants
 * @since 0.1.0
 */
export { defaultGraceMillis, defaultMaxOutputBytes } from "./internal/SubprocessOptions.ts"

import type { Options, Result, Settled, Spec } from "./internal/SubprocessSpec.ts"

export type { Containment, Options, Result, Settled, Signal, Spec } from "./internal/SubprocessSpec.ts"

/**
 * Whether processes can have cgroups of their own on this machine, and if not, why.
 *
 * @category models
 * @since 0.1.0
 */
export type CgroupSupport = SubprocessCgroup.Support

/**
 * Finds out, once per process, whether a supervised process can have a cgroup of its
 * own here: Linux, a cgroup2 file system this process's cgroup is in, a cgroup created
 * below it, and a process moved into that (root, or a delegated subtree). `parent` is
 * the directory the processes' cgroups are created in; `kill` is how they are killed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const cgroupSupport: Effect.Effect<CgroupSupport> = SubprocessCgroup.support

/**
 * How long the supervisor waits for the exit after SIGKILL before it gives up and
 * reports the child as not reaped (a process stuck in the kernel cannot be killed).
 *
 * @category constants
 * @since 0.1.0
 */
export { killWaitMillis } from "./internal/SubprocessRun.ts"

/**
 * Runs a process to its exit and collects its output. Succeeds only on exit code 0;
 * a non-zero exit (`exit_<n>`), a death by signal (`killed_<signal>`), too much output
 * (`output_too_large`) and a failure to start (`spawn_failed`) are typed failures, with
 * the tail of stderr in `diagnostic` (never in `hint`, which the model may see). The
 * middle two are `UnknownOutcome`s for a command `unsafeToRepeat` (see {@link Options}).
 *
 * Interrupting the effect stops the child (SIGTERM, grace, SIGKILL, reap; see the module
 * doc) before the interruption completes, and reports the {@link Settled} record to
 * `onSettled`; so does an interruption that lands while what an exited child left running
 * is stopped (the effect is then interrupted, its result lost): the record says how the
 * child had ended. No child outlives the effect.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = (
  spec: Spec,
  options: Options = {}
): Effect.Effect<Result, Failure.Failure, ChildProcessSpawner.ChildProcessSpawner> =>
  Effect.suspend(() => {
    // What became of a child whose effect ended on its own, for an interruption landing as it is reclaimed.
    let ended: Settled | undefined
    const { onSettled } = options
    return Effect.scoped(
      SubprocessRun.runScoped(spec, options, (settled) => {
        ended = settled
      })
    ).pipe(
      Effect.onInterrupt(() => {
        const settled = ended
        return settled === undefined || onSettled === undefined
          ? Effect.void
          : Effect.exit(Effect.sync(() => UserCode.letGo(onSettled(settled))))
      })
    )
  })

/**
 * @category models
 * @since 0.1.0
 */
export interface ToolOptions<I, O, R> {
  readonly name: string
  readonly description: string
  readonly input: Schema.Codec<I, unknown>
  readonly output: Schema.Codec<O, unknown>
  /** The process to run for an input. */
  readonly command: (input: I) => Spec
  /** Turns a successful exit into the tool's output. */
  readonly parse: (result: Result, input: I) => O | Effect.Effect<O, Failure.Failure, R>
  /** Default `"external"`, the most cautious class. */
  readonly sideEffect?: Tool.SideEffect | undefined
  readonly idempotent?: boolean | undefined
  readonly maxRetries?: number | undefined
  readonly timeout?: Duration.Input | undefined
  readonly needsApproval?: boolean | undefined
  readonly recoverErrors?: boolean | undefined
  readonly pathFields?: ReadonlyArray<string> | undefined
  readonly contentFields?: ReadonlyArray<string> | undefined
  readonly observe?: ((output: O) => string) | undefined
  /** Default 2000. */
  readonly graceMillis?: number | undefined
  /** Default 1 MiB. */
  readonly maxOutputBytes?: number | undefined
  /** Default `true`: a cgroup per call where the machine allows it (see {@link Options}). */
  readonly cgroup?: boolean | undefined
  /** Called once the child of a call is running. */
  readonly onSpawn?: ((pid: number, context: Tool.CallContext) => void) | undefined
  /** Called, besides `context.settle`, with the whole record when a call is interrupted. */
  readonly onSettled?: ((settled: Settled, context: Tool.CallContext) => void) | undefined
}

/** Every option of {@link tool}: one it does not know is refused (review 173). */
const knownToolOptions: OptionKeys.Known<ToolOptions<unknown, unknown, unknown>> = {
  name: true,
  description: true,
  input: true,
  output: true,
  command: true,
  parse: true,
  sideEffect: true,
  idempotent: true,
  maxRetries: true,
  timeout: true,
  needsApproval: true,
  recoverErrors: true,
  pathFields: true,
  contentFields: true,
  observe: true,
  graceMillis: true,
  maxOutputBytes: true,
  cgroup: true,
  onSpawn: true,
  onSettled: true
}

/**
 * A tool that runs a supervised process per call (R5.2). A `write` or `external` tool
 * that is not `idempotent` runs its commands `unsafeToRepeat` (see {@link Options}): a
 * child stopped for too much output, or killed by a signal, is an unknown outcome. When the call is interrupted,
 * the handler reports to `context.settle` whether the child had already exited
 * (`completed`), stopped on SIGTERM (`cancelled`) or had to be SIGKILLed
 * (`outcome_unknown`), so the run's `tool.interrupted` event records it. A `write` or
 * `external` command that stopped on SIGTERM is `outcome_unknown` too: nothing of it is left
 * running, but what it had begun may have taken effect (a request a server had taken);
 * `onSettled`, which gets the child's own record, may tell `context.settle` better. Throws
 * {@link Tool.InvalidToolDefinition} for options that cannot work.
 *
 * @category constructors
 * @since 0.1.0
 */
export const tool = <I, O, R = never>(
  options: ToolOptions<I, O, R>
): Tool.Tool<I, O, R | ChildProcessSpawner.ChildProcessSpawner> => {
  const problem = validateOptions(options, knownToolOptions)
  if (problem !== undefined) throw new Tool.InvalidToolDefinition({ tool: options.name, reason: problem })
  const { onSettled, onSpawn } = options
  const made: Tool.Tool<I, O, R | ChildProcessSpawner.ChildProcessSpawner> = Tool.make({
    name: options.name,
    description: options.description,
    input: options.input,
    output: options.output,
    sideEffect: options.sideEffect,
    idempotent: options.idempotent,
    maxRetries: options.maxRetries,
    timeout: options.timeout,
    needsApproval: options.needsApproval,
    recoverErrors: options.recoverErrors,
    pathFields: options.pathFields,
    contentFields: options.contentFields,
    observe: options.observe,
    handler: (input, context) => {
      let exited: Result | undefined
      // Whether a child was stopped and its settlement given (see `onSettled`): interrupted
      // without one, no child was started, and the call never ran (review 114).
      let reclaimed = false
      return Effect.suspend(() =>
        run(UserCode.letGo(options.command(input)), {
          graceMillis: options.graceMillis,
          maxOutputBytes: options.maxOutputBytes,
          cgroup: options.cgroup,
          unsafeToRepeat: Tool.mayChangeWorld(made.metadata.sideEffect) && !made.metadata.idempotent,
          onSpawn: onSpawn === undefined ? undefined : (pid) => onSpawn(pid, context),
          onSettled: (settled) => {
            reclaimed = true
            const { sideEffect } = made.metadata
            // A command that stopped on SIGTERM left nothing running; what it had begun may have taken effect.
            if (settled.settlement === "cancelled" && Tool.mayChangeWorld(sideEffect)) {
              context.settle(
                "outcome_unknown",
                `${settled.detail}: nothing is left running, but the ${sideEffect} action it had begun may or may not have taken effect`
              )
            } else context.settle(settled.settlement, settled.detail)
            UserCode.letGo(onSettled?.(settled, context))
          }
        })
      ).pipe(
        Effect.flatMap((result) => {
          exited = result
          const parsed = Effect.suspend(() => {
            const value = options.parse(result, input)
            return Effect.isEffect(value) ? value : Effect.succeed(UserCode.letGo(value))
          })
          // What a command that may change the world did took place: a parse that breaks on it leaves it in doubt.
          return Tool.mayChangeWorld(made.metadata.sideEffect)
            ? Effect.catchDefect(parsed, (defect) =>
                Effect.fail(SubprocessFailure.parseBroke(`the command of ${options.name}`, result.pid, defect))
              )
            : parsed
        }),
        // Interrupted while parsing: the process had finished its work. Interrupted before its
        // command was started (checks, the spawner's lookup): nothing ran.
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            if (exited !== undefined) context.settle("completed", `pid ${exited.pid} had already exited with code 0`)
            else if (!reclaimed) context.settle("cancelled", "interrupted before its command was started; it never ran")
          })
        )
      )
    }
  })
  return made
}
