/**
 * Running one supervised subprocess (R5.2), private to `Subprocess`: the supervisor, the
 * cgroup, the spawn, the reclamation registered with them, reading the output within its
 * limit, and turning the exit into a `Result` or a typed failure.
 */
import { Effect, Exit, Fiber, Option } from "effect"
import type * as PlatformError from "effect/PlatformError"
import { ChildProcessSpawner } from "effect/process"
import * as UserCode from "../../failure/UserCode.ts"
import * as ProcessGroup from "./ProcessGroup.ts"
import * as SubprocessCgroup from "./SubprocessCgroup.ts"
import * as SubprocessFailure from "./SubprocessFailure.ts"
import {
  defaultGraceMillis,
  defaultMaxOutputBytes,
  knownRunOptions,
  validateOptions,
  validateSpec
} from "./SubprocessOptions.ts"
import * as SubprocessOutput from "./SubprocessOutput.ts"
import * as SubprocessSpawn from "./SubprocessSpawn.ts"
import type { Containment, Options, Result, Spec } from "./SubprocessSpec.ts"
import * as SubprocessSupervisor from "./SubprocessSupervisor.ts"
import { withinReal } from "./SubprocessTime.ts"

/**
 * How long the supervisor waits for the exit after SIGKILL before it gives up and
 * reports the child as not reaped (a process stuck in the kernel cannot be killed).
 */
export const killWaitMillis = 5000

const stopReading = (readers: Fiber.Fiber<unknown, unknown> | undefined) =>
  readers === undefined ? Effect.void : Effect.asVoid(Fiber.interrupt(readers))

/**
 * Runs `spec` to its exit in the current scope, which reclaims the child however the
 * effect ends (see the module doc of `Subprocess`).
 */
export const runScoped = Effect.fnUntraced(function* (
  spec: Spec,
  options: Options,
  /**
   * Given what became of the child when the effect ended without an interruption (its exit,
   * a failure): an interruption may still land as the reclamation ends, and the caller is
   * then interrupted, not given the result (see `Subprocess.run`).
   */
  onEnded?: (settled: ProcessGroup.Settled) => void
) {
  const problem = validateOptions(options, knownRunOptions) ?? validateSpec(spec)
  if (problem !== undefined) return yield* Effect.fail(SubprocessFailure.invalid(problem))
  const graceMillis = options.graceMillis ?? defaultGraceMillis
  const maxOutputBytes = options.maxOutputBytes ?? defaultMaxOutputBytes
  const unsafeToRepeat = options.unsafeToRepeat === true
  const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
  const support = options.cgroup === false ? undefined : yield* SubprocessCgroup.support
  const cgroups = support?.available === true ? support : undefined
  // Behind the trampoline a missing command would be the shell's exit 127: it is found
  // here, as typed as the spawner's own error without a cgroup.
  const unstartable =
    SubprocessSpawn.findUnstartable(spec) ?? (cgroups === undefined ? undefined : SubprocessSpawn.findExecutable(spec))
  if (unstartable !== undefined) {
    return yield* Effect.fail(SubprocessFailure.notStartable(spec, unstartable.reason, unstartable.detail))
  }
  const secrets = SubprocessSpawn.secretsOf(spec)
  // `spawn` blocks the event loop for a few milliseconds (fork and exec). Yield first, so
  // that timers raced against this call (the run deadline, the tool timeout) are armed
  // before it, not after: a timer armed after the spawn fires that much late.
  yield* Effect.yieldNow

  const output = SubprocessOutput.empty()
  // Starting the supervisor, making the cgroup, spawning, registering the reclamation
  // and starting the readers happen as one uninterruptible step, so an interruption can
  // never fall between a live child and what stops it. Finalizers run in reverse: the
  // reclamation first (which then removes the cgroup and lets the supervisor go), the
  // spawner's release, the cgroup's removal (for a spawn that failed), and last the
  // wait for the supervisor's exit.
  let readers: Fiber.Fiber<void, PlatformError.PlatformError | SubprocessOutput.OutputTooLarge> | undefined
  // The child's stop for too much output, when it came first: what the record says if the
  // effect is then interrupted (the reclamation after it finds nothing left, review 86).
  let stoppedFirst: ProcessGroup.Settled | undefined
  const started = performance.now()
  const { target, reading } = yield* Effect.uninterruptible(
    Effect.gen(function* () {
      const supervisor = yield* Effect.acquireRelease(
        Effect.mapError(SubprocessSupervisor.start(graceMillis, cgroups?.kill), (error) =>
          SubprocessFailure.supervisorFailure(spec, error)
        ),
        (supervisor) => supervisor.release
      )
      const made = cgroups === undefined ? undefined : SubprocessCgroup.create(cgroups)
      // A cgroup that cannot be made (a limit on descendants, say): the process group.
      const cgroup = made !== undefined && "path" in made ? made : undefined
      if (cgroup !== undefined) {
        supervisor.contain(cgroup.path)
        // Removed by the reclamation below; this covers a spawn that failed.
        yield* Effect.addFinalizer(() => SubprocessCgroup.remove(cgroup))
      }
      const handle = yield* spawner.spawn(SubprocessSpawn.command(spec, { graceMillis, cgroup })).pipe(
        Effect.mapError((error) => SubprocessFailure.spawnFailure(spec, error)),
        // Node's spawn throws for some refusals (arguments too long): the same typed failure.
        Effect.catchDefect((defect) =>
          SubprocessFailure.isSpawnThrown(defect)
            ? Effect.fail(SubprocessFailure.spawnThrew(spec, defect))
            : Effect.die(defect)
        )
      )
      supervisor.watch(handle.pid)
      // Only now may a command in a cgroup run: a host that died before this left nothing
      // running. Without a cgroup the command runs from the spawn: a host SIGKILLed before
      // the line above leaves it to PID 1 (a documented limit).
      if (cgroup !== undefined) yield* SubprocessSpawn.release(handle)
      const target: ProcessGroup.Target = { handle, cgroup }
      // However the effect ends, nothing the child started is left running (after a
      // normal exit this stops only what the child left behind).
      yield* Effect.addFinalizer((exit) =>
        Effect.gen(function* () {
          // The readers keep draining the pipes meanwhile, so a child that flushes its
          // output on SIGTERM is not blocked on a full pipe.
          const reclaimed = yield* ProcessGroup.reclaim(target, graceMillis, killWaitMillis)
          const settled = stoppedFirst ?? reclaimed
          // Nothing is left for the supervisor to stop: it exits while the rest is
          // cleaned up (its release, last, waits for that).
          if (cgroup !== undefined) yield* SubprocessCgroup.remove(cgroup)
          supervisor.finish()
          yield* stopReading(readers)
          // The child is gone: keep the spawner's release from signalling its group and
          // waiting again (it does so after an exit code 0 or a death by signal while referenced).
          yield* Effect.ignore(handle.unref)
          const onSettled = options.onSettled
          if (!Exit.hasInterrupts(exit)) onEnded?.(settled)
          else if (onSettled !== undefined) yield* Effect.exit(Effect.sync(() => UserCode.letGo(onSettled(settled))))
        })
      )
      const reading = yield* Effect.forkChild(
        SubprocessOutput.collect(output, maxOutputBytes, handle.stdout, handle.stderr),
        { startImmediately: true }
      )
      readers = reading
      return { target, reading }
    })
  )
  const handle = target.handle
  const containment: Containment = target.cgroup === undefined ? "process_group" : "cgroup"
  const pid: number = handle.pid
  const onSpawn = options.onSpawn
  if (onSpawn !== undefined) yield* Effect.exit(Effect.sync(() => UserCode.letGo(onSpawn(pid))))
  const name = SubprocessFailure.commandName(spec)

  // Wait for the exit, unless reading fails first (too much output, a broken pipe).
  const first = yield* Effect.raceFirst(
    Effect.map(Effect.exit(handle.exitCode), (exit) => ({ _tag: "Exited", exit }) as const),
    Effect.flatMap(Effect.exit(Fiber.join(reading)), (exit) =>
      Exit.isFailure(exit) ? Effect.succeed({ _tag: "ReadFailed", exit } as const) : Effect.never
    )
  )
  if (first._tag === "ReadFailed") {
    const settled = yield* Effect.uninterruptible(
      Effect.tap(ProcessGroup.reclaim(target, graceMillis, killWaitMillis), (stop) =>
        Effect.sync(() => {
          stoppedFirst = stop
        })
      )
    )
    const error = Exit.findErrorOption(first.exit)
    if (error._tag === "Some" && error.value._tag === "OutputTooLarge")
      return yield* Effect.fail(SubprocessFailure.tooLarge(name, maxOutputBytes, settled.detail, unsafeToRepeat))
    return yield* Effect.fail(SubprocessFailure.readFailure(name, first.exit))
  }
  const elapsedMillis = performance.now() - started
  // The child has exited; the rest of its output is still in the pipes.
  const drained = yield* withinReal(Fiber.join(reading), SubprocessOutput.outputDrainMillis)
  yield* stopReading(reading)
  if (Option.isSome(drained) && Exit.isFailure(drained.value)) {
    const readExit = drained.value
    const error = Exit.findErrorOption(readExit)
    if (error._tag === "Some" && error.value._tag === "OutputTooLarge") {
      return yield* Effect.fail(
        SubprocessFailure.tooLarge(name, maxOutputBytes, `${name} had already exited`, unsafeToRepeat)
      )
    }
    if (!Exit.hasInterrupts(readExit)) return yield* Effect.fail(SubprocessFailure.readFailure(name, readExit))
  }
  const stdout = SubprocessSpawn.scrub(SubprocessOutput.decode(output.stdout), secrets)
  const stderr = SubprocessSpawn.scrub(SubprocessOutput.decode(output.stderr), secrets)
  const exit = first.exit
  if (Exit.isFailure(exit)) {
    const error = Exit.findErrorOption(exit)
    const signal = error._tag === "Some" ? ProcessGroup.signalOf(error.value) : "unknown_signal"
    return yield* Effect.fail(SubprocessFailure.killed(name, signal, stderr, unsafeToRepeat))
  }
  const exitCode: number = exit.value
  if (target.cgroup !== undefined && exitCode === SubprocessSpawn.notRunCode) {
    // Only the trampoline wrote to stderr then: its message is the last line.
    if (stderr.endsWith(`${SubprocessSpawn.joinFailedMessage}\n`)) {
      return yield* Effect.fail(SubprocessFailure.joinFailed(spec, stderr))
    }
    if (stderr === `${SubprocessSpawn.notReleasedMessage}\n`) {
      return yield* Effect.fail(SubprocessFailure.notReleased(spec, stderr))
    }
  }
  if (exitCode !== 0) {
    return yield* Effect.fail(SubprocessFailure.exited(name, exitCode, stderr, unsafeToRepeat))
  }
  return { pid, exitCode, stdout, stderr, elapsedMillis, containment } satisfies Result
})
