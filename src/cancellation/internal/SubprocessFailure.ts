/**
 * The typed failures of a supervised subprocess (R5.2), private to `Subprocess`: options
 * that cannot work, a failure to start, too much output, a broken pipe, a death by
 * signal and a non-zero exit. The `hint` of each is one the model may see; the details
 * (the tail of stderr, the platform's error) go in `diagnostic`.
 */
import type * as PlatformError from "effect/PlatformError"
import * as Failure from "../../failure/Failure.ts"
import * as Text from "../../failure/Text.ts"
import * as ProcessGroup from "./ProcessGroup.ts"
import type { Spec } from "./SubprocessSpec.ts"

const stderrTailChars = 4000

/** The executable's name, without its directory. */
export const commandName = (spec: Spec): string => spec.command.split(/[\\/]/).pop() ?? spec.command

const tail = (text: string): string => (text.length <= stderrTailChars ? text : `…${Text.tail(text, stderrTailChars)}`)

/** Options that cannot work (see `SubprocessOptions.validateOptions`). */
export const invalid = (hint: string) =>
  new Failure.Permanent({
    source: "subprocess",
    category: "invalid_options",
    code: "invalid_options",
    attempts: 1,
    hint
  })

/** The child could not be started. */
export const spawnFailure = (spec: Spec, error: PlatformError.PlatformError): Failure.Failure => {
  const fields = {
    source: "subprocess" as const,
    category: "spawn" as const,
    code: "spawn_failed",
    attempts: 1,
    hint: `${commandName(spec)} could not be started (${error.reason._tag === "BadArgument" ? "bad argument" : error.reason._tag})`,
    diagnostic: error.message
  }
  // Nothing ran, so trying again is safe; but a missing or forbidden executable stays so.
  return error.reason._tag === "BadArgument" ||
    error.reason._tag === "NotFound" ||
    error.reason._tag === "PermissionDenied" ||
    error.reason._tag === "BadResource"
    ? new Failure.Permanent(fields)
    : new Failure.Retryable(fields)
}

/** What Node's spawn throws, instead of failing, for a call the system refuses (`E2BIG`, `EAGAIN`). */
export interface SpawnThrown {
  readonly code: string
  readonly message: string
}

/** Whether `defect` is an error Node's spawn threw for a call the system refused. */
export const isSpawnThrown = (defect: unknown): defect is SpawnThrown =>
  defect instanceof Error &&
  "syscall" in defect &&
  typeof defect.syscall === "string" &&
  defect.syscall.startsWith("spawn") &&
  "code" in defect &&
  typeof defect.code === "string"

/** The system's answers that stay the same when asked again. */
const refusedForGood = new Set(["E2BIG", "EINVAL", "ENOENT", "EACCES", "EPERM", "ENOTDIR", "ENAMETOOLONG", "ELOOP"])

/** The child could not be started: the system refused the call, as Node's spawn threw. */
export const spawnThrew = (spec: Spec, error: SpawnThrown): Failure.Failure => {
  const fields = {
    source: "subprocess" as const,
    category: "spawn" as const,
    code: "spawn_failed",
    attempts: 1,
    hint: `${commandName(spec)} could not be started (${
      error.code === "E2BIG" ? "E2BIG: its arguments and environment are too long" : error.code
    })`,
    diagnostic: error.message
  }
  return refusedForGood.has(error.code) ? new Failure.Permanent(fields) : new Failure.Retryable(fields)
}

/**
 * The command cannot be started: nothing executable has its name, or it is empty
 * (`NotFound`); what has it is not an executable file (`PermissionDenied`); its working
 * directory is missing (`NotFound`) or a file (`NotADirectory`). Found before anything is
 * spawned.
 */
export const notStartable = (spec: Spec, reason: "NotFound" | "PermissionDenied" | "NotADirectory", detail: string) =>
  new Failure.Permanent({
    source: "subprocess",
    category: "spawn",
    code: "spawn_failed",
    attempts: 1,
    hint: `${commandName(spec)} could not be started (${reason})`,
    diagnostic: detail
  })

/** The trampoline could not move itself into the cgroup, so the command never ran. */
export const joinFailed = (spec: Spec, stderr: string) =>
  new Failure.Permanent({
    source: "subprocess",
    category: "spawn",
    code: "spawn_failed",
    attempts: 1,
    hint: `${commandName(spec)} could not be started (its cgroup could not be joined)`,
    diagnostic: `${tail(stderr)} (run it with \`cgroup: false\` to keep to its process group)`
  })

/** The host could not let the trampoline run the command (its pipe broke), so the command never ran. */
export const notReleased = (spec: Spec, stderr: string) =>
  new Failure.Retryable({
    source: "subprocess",
    category: "spawn",
    code: "spawn_failed",
    attempts: 1,
    hint: `${commandName(spec)} could not be started (its host could not let it run)`,
    diagnostic: tail(stderr)
  })

/** The supervisor that ties the child to its host could not be started, so the child was not. */
export const supervisorFailure = (spec: Spec, error: Error) =>
  new Failure.Retryable({
    source: "subprocess",
    category: "spawn",
    code: "spawn_failed",
    attempts: 1,
    hint: `${commandName(spec)} could not be started (its supervisor could not be started)`,
    diagnostic: `/bin/sh: ${error.message}`
  })

/**
 * A child that did not finish its work as it meant to: `Permanent`, or, for a command
 * unsafe to repeat (`Options.unsafeToRepeat`), an `UnknownOutcome`, since it may have
 * done part of its work (R3.8), as a timeout of it is.
 */
const cutOff = (
  fields: {
    readonly category: "output_limit" | "crash"
    readonly code: string
    readonly hint: string
    readonly diagnostic: string
  },
  unsafeToRepeat: boolean
): Failure.Failure =>
  unsafeToRepeat
    ? new Failure.UnknownOutcome({
        source: "subprocess",
        attempts: 1,
        ...fields,
        hint: `${fields.hint}; whether its action took effect is unknown`
      })
    : new Failure.Permanent({ source: "subprocess", attempts: 1, ...fields })

/** The child wrote more than `maxOutputBytes` and was stopped; `how` says how it ended. */
export const tooLarge = (name: string, maxOutputBytes: number, how: string, unsafeToRepeat: boolean) =>
  cutOff(
    {
      category: "output_limit",
      code: "output_too_large",
      hint: `${name} wrote more than ${maxOutputBytes} bytes of output and was stopped`,
      diagnostic: how
    },
    unsafeToRepeat
  )

/** Reading the child's output failed. */
export const readFailure = (name: string, cause: unknown) =>
  new Failure.Permanent({
    source: "subprocess",
    category: "output",
    code: "output_read_failed",
    attempts: 1,
    hint: `reading the output of ${name} failed`,
    diagnostic: String(cause)
  })

/**
 * A tool's `parse` broke (threw, or died) on the output of a command that exited 0 and may
 * change the world: its action took place, and the run cannot tell what it came to, so the
 * call is in doubt (R3.8), never a failure that did nothing (review 149: a payment whose
 * output `JSON.parse` refused was a permanent `tool_defect` with no side effect).
 */
export const parseBroke = (name: string, pid: number, defect: unknown): Failure.UnknownOutcome =>
  new Failure.UnknownOutcome({
    source: "subprocess",
    category: "output",
    code: "output_unreadable",
    attempts: 1,
    hint: `${name} (pid ${pid}) exited with code 0, so its action took place, but the tool's parse broke on its output (${Failure.safeDescription(defect)}); what the action came to is unknown`,
    diagnostic: Failure.diagnosticOf(defect)
  })

/** The child died by a signal it was not sent by its host (a crash, the out-of-memory killer). */
export const killed = (name: string, signal: string, stderr: string, unsafeToRepeat: boolean) =>
  cutOff(
    { category: "crash", code: `killed_${signal}`, hint: `${name} was killed by ${signal}`, diagnostic: tail(stderr) },
    unsafeToRepeat
  )

/**
 * The child exited with a code other than 0: it says it failed (`Permanent`). A code a
 * shell gives when the command it ran died by a signal (`128 + n`: 137 for SIGKILL, 139
 * for SIGSEGV) is, for a command unsafe to repeat, a death by that signal: an
 * `UnknownOutcome`, as a worker under `sh -c`, `bash` or `npm run` is killed.
 */
export const exited = (name: string, exitCode: number, stderr: string, unsafeToRepeat: boolean) => {
  const signal = ProcessGroup.signalOfExitCode(exitCode)
  if (unsafeToRepeat && signal !== undefined) {
    return cutOff(
      {
        category: "crash",
        code: `exit_${exitCode}`,
        hint: `${name} exited with code ${exitCode}, the code a shell gives when the command it ran was killed by ${signal}`,
        diagnostic: tail(stderr)
      },
      true
    )
  }
  return new Failure.Permanent({
    source: "subprocess",
    category: "exit",
    code: `exit_${exitCode}`,
    attempts: 1,
    hint: `${name} exited with code ${exitCode}`,
    diagnostic: tail(stderr)
  })
}
