/**
 * What the spawner is asked to start for a supervised subprocess (R5.2), private to
 * `Subprocess`: a `sh` trampoline that joins the process's cgroup (when it gets one),
 * waits until the host has told the supervisor its process group, and then `exec`s the
 * command (Windows, with no supervisor, starts the command itself). Also the secrets of a
 * spec (its `Redacted` values), which never leave the child.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Duration, Effect, Redacted, Stream } from "effect"
import { ChildProcess, type ChildProcessSpawner } from "effect/process"
import type * as SubprocessCgroup from "./SubprocessCgroup.ts"
import type { Spec } from "./SubprocessSpec.ts"

/** The message the trampoline prints when it cannot join the cgroup (the command did not run). */
export const joinFailedMessage = "effect-agent-runtime: cannot join the cgroup of the process"

/** The message the trampoline prints when its host never let it start (the command did not run). */
export const notReleasedMessage = "effect-agent-runtime: the host did not start the process"

/** The exit code of the trampoline when the command did not run (with one of the messages above). */
export const notRunCode = 125

/** The trampoline waits for this line on its fd 3 before it runs the command. */
const releaseLine = new TextEncoder().encode("go\n")

// $0: the cgroup's `cgroup.procs`, or "" without one; writing 0 to it moves the writer
// (this shell, whose pid the command keeps across `exec`). Then the shell waits for the
// host's line on fd 3, which the host writes once the supervisor knows the process
// group: a host that dies before (SIGKILLed in that instant) closes the pipe, and the
// command never runs, so nothing it starts can outlive the host unsupervised. `echo` and
// `read` are builtins: no other process runs. The command does not inherit fd 3.
const trampoline = `if [ -n "$0" ]; then echo 0 > "$0" || { echo "${joinFailedMessage}" >&2; exit ${notRunCode}; }; fi
IFS= read -r go <&3 || { echo "${notReleasedMessage}" >&2; exit ${notRunCode}; }
exec "$@" 3<&-`

/** The arguments of `/bin/sh` that run `file` with `args`, inside `cgroup` if there is one, once released. */
export const trampolineArgs = <A>(
  cgroup: SubprocessCgroup.Cgroup | undefined,
  file: string,
  args: ReadonlyArray<A>
): ReadonlyArray<string | A> => [
  "-c",
  trampoline,
  cgroup === undefined ? "" : path.join(cgroup.path, "cgroup.procs"),
  file,
  ...args
]

/** Whether the command starts behind the trampoline (everywhere but Windows). */
export const trampolined = process.platform !== "win32"

/**
 * Lets the trampoline of `handle` run the command; call it once the supervisor knows the
 * process group. A trampoline that died meanwhile (killed from outside) makes the write
 * fail: its exit says so.
 */
export const release = (handle: ChildProcessSpawner.ChildProcessHandle): Effect.Effect<void> =>
  trampolined ? Effect.ignore(Stream.run(Stream.make(releaseLine), handle.getInputFd(3))) : Effect.void

const unwrap = (value: string | Redacted.Redacted<string>): string =>
  Redacted.isRedacted(value) ? Redacted.value(value) : value

/** The PATH the child searches: its own environment's, as Node's spawn does. */
const childPath = (spec: Spec): string | undefined => {
  const env = spec.env
  if (env !== undefined && Object.hasOwn(env, "PATH")) {
    const value = env.PATH
    return value === undefined ? undefined : unwrap(value)
  }
  // Without `extendEnv`, an `env` without PATH leaves the child none; Node then searches
  // the default path.
  if (env !== undefined && spec.extendEnv === false) return undefined
  return process.env.PATH
}

const defaultSearchPath = "/usr/bin:/bin"

const isExecutableFile = (file: string): "yes" | "no" | "missing" => {
  try {
    if (!fs.statSync(file).isFile()) return "no"
    fs.accessSync(file, fs.constants.X_OK)
    return "yes"
  } catch (error) {
    return typeof error === "object" && error !== null && "code" in error && error.code === "ENOENT" ? "missing" : "no"
  }
}

/**
 * Why the command cannot run, looked up as `execvp` does (relative to the child's cwd, on
 * the child's PATH): nothing there (`NotFound`), or only what is not an executable file
 * (`PermissionDenied`); `undefined` when it can. The trampoline then `exec`s the command
 * as given, so the child's `argv[0]` is what the caller wrote.
 */
export const findExecutable = (
  spec: Spec
): { readonly reason: "NotFound" | "PermissionDenied"; readonly detail: string } | undefined => {
  const cwd = path.resolve(spec.cwd ?? ".")
  const candidates = spec.command.includes("/")
    ? [path.resolve(cwd, spec.command)]
    : (childPath(spec) ?? defaultSearchPath).split(":").map((dir) => path.resolve(cwd, dir, spec.command))
  let denied: string | undefined
  for (const file of candidates) {
    const found = spec.command === "" ? "missing" : isExecutableFile(file)
    if (found === "yes") return undefined
    if (found === "no") denied ??= file
  }
  return denied === undefined
    ? { reason: "NotFound", detail: `no executable named ${spec.command} was found` }
    : { reason: "PermissionDenied", detail: `${denied} is not an executable file` }
}

/** The values of the spec that are `Redacted`: the child gets them, nothing else does. */
export const secretsOf = (spec: Spec): ReadonlyArray<string> => {
  const secrets: Array<string> = []
  for (const arg of spec.args ?? []) if (Redacted.isRedacted(arg)) secrets.push(Redacted.value(arg))
  for (const value of Object.values(spec.env ?? {})) if (Redacted.isRedacted(value)) secrets.push(Redacted.value(value))
  // Longest first, so a secret that contains another is replaced whole.
  return secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length)
}

/** `text` with every secret replaced by `<redacted>`. */
export const scrub = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((acc, secret) => acc.replaceAll(secret, "<redacted>"), text)

/**
 * The command for the spawner: `/bin/sh` running the trampoline, with fd 3 a pipe from
 * the host (see {@link release}); on Windows `spec` itself. Detached, so the child leads
 * its own process group.
 */
export const command = (
  spec: Spec,
  options: { readonly graceMillis: number; readonly cgroup: SubprocessCgroup.Cgroup | undefined }
): ChildProcess.Command => {
  const args = spec.args ?? []
  const stdin = spec.stdin
  const commandOptions: ChildProcess.CommandOptions = {
    cwd: spec.cwd,
    env: spec.env,
    extendEnv: spec.extendEnv ?? true,
    detached: true,
    stdin:
      stdin === undefined ? "ignore" : Stream.make(typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin),
    stdout: "pipe",
    stderr: "pipe",
    // The supervisor stops the child before the spawner's own release runs; these
    // bound that release should it ever find something alive.
    killSignal: "SIGTERM",
    forceKillAfter: Duration.millis(options.graceMillis)
  }
  return trampolined
    ? ChildProcess.make("/bin/sh", trampolineArgs(options.cgroup, spec.command, args), {
        ...commandOptions,
        additionalFds: { fd3: { type: "input" } }
      })
    : ChildProcess.make(spec.command, args, commandOptions)
}
