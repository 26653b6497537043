/**
 * What the spawner is asked to start for a supervised subprocess (R5.2), private to
 * `Subprocess`: the command itself, or, when it gets a cgroup, the `sh` trampoline that
 * joins the cgroup, waits until the host lets it go on, and `exec`s the command. Also the
 * secrets of a spec (its `Redacted` values), which never leave the child.
 *
 * Only a cgroup gets the trampoline: `sh` rebuilds the environment the command gets (it
 * drops names that are not shell names, such as `a.b`, and sets `PWD`), so a command
 * kept to its process group is spawned as it is.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Duration, Effect, Redacted, Stream } from "effect"
import { ChildProcess, type ChildProcessSpawner } from "effect/process"
import * as SecretForms from "../../failure/SecretForms.ts"
import type * as SubprocessCgroup from "./SubprocessCgroup.ts"
import type { Spec } from "./SubprocessSpec.ts"

/** The message the trampoline prints when it cannot join the cgroup (the command did not run). */
export const joinFailedMessage = "effect-agent-runtime: cannot join the cgroup of the process"

/** The message the trampoline prints when its host never let it go on (the command did not run). */
export const notReleasedMessage = "effect-agent-runtime: the host did not start the process"

/** The exit code of the trampoline when the command did not run (with one of the messages above). */
export const notRunCode = 125

/** The trampoline waits for this line on its fd 3 before it runs the command. */
const releaseLine = new TextEncoder().encode("go\n")

// $0: the cgroup's `cgroup.procs`; writing 0 to it moves the writer (this shell, whose
// pid the command keeps across `exec`). Then the shell waits for the host's line on fd 3,
// which the host writes once the supervisor knows the process: a host that dies before
// (SIGKILLed in that instant) closes the pipe, and the command never runs, so nothing it
// starts can outlive the host unsupervised. `echo` and `read` are builtins: no other
// process runs. The command does not inherit fd 3.
const trampoline = `echo 0 > "$0" || { echo "${joinFailedMessage}" >&2; exit ${notRunCode}; }
IFS= read -r go <&3 || { echo "${notReleasedMessage}" >&2; exit ${notRunCode}; }
exec "$@" 3<&-`

/** The arguments of `/bin/sh` that run `file` with `args` inside `cgroup`, once released. */
export const trampolineArgs = <A>(
  cgroup: SubprocessCgroup.Cgroup,
  file: string,
  args: ReadonlyArray<A>
): ReadonlyArray<string | A> => ["-c", trampoline, path.join(cgroup.path, "cgroup.procs"), file, ...args]

/**
 * Lets the trampoline of `handle` (one with a cgroup) run the command; call it once the
 * supervisor knows the process. A trampoline that died meanwhile (killed from outside)
 * makes the write fail: its exit says so.
 */
export const release = (handle: ChildProcessSpawner.ChildProcessHandle): Effect.Effect<void> =>
  Effect.ignore(Stream.run(Stream.make(releaseLine), handle.getInputFd(3)))

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
 * Why a script cannot run when its `#!` line names an interpreter that is not there, or
 * not an executable file (as `exec` then fails: ENOENT, EACCES); `undefined` otherwise.
 */
const interpreterProblem = (file: string, cwd: string): Unstartable | undefined => {
  const head = Buffer.alloc(256)
  let length: number
  try {
    const fd = fs.openSync(file, "r")
    try {
      length = fs.readSync(fd, head, 0, head.length, 0)
    } finally {
      fs.closeSync(fd)
    }
  } catch {
    return undefined
  }
  const text = head.subarray(0, length).toString("latin1")
  if (!text.startsWith("#!")) return undefined
  const interpreter = text.slice(2).split("\n")[0]?.trim().split(/[ \t]/)[0] ?? ""
  if (interpreter === "") return undefined
  const found = isExecutableFile(path.resolve(cwd, interpreter))
  if (found === "yes") return undefined
  const what = found === "missing" ? "which does not exist" : "which is not an executable file"
  const detail = `${file} names the interpreter ${interpreter}, ${what}`
  return { reason: found === "missing" ? "NotFound" : "PermissionDenied", detail }
}

/**
 * Why the command cannot run, looked up as `execvp` does (relative to the child's cwd, on
 * the child's PATH): nothing there (`NotFound`), only what is not an executable file
 * (`PermissionDenied`), or a script whose interpreter is either; `undefined` when it can.
 * The trampoline then `exec`s the command as given, so the child's `argv[0]` is what the
 * caller wrote. (A spawn without the trampoline fails so by itself.)
 */
export const findExecutable = (spec: Spec): Unstartable | undefined => {
  const cwd = path.resolve(spec.cwd ?? ".")
  const candidates = spec.command.includes("/")
    ? [path.resolve(cwd, spec.command)]
    : (childPath(spec) ?? defaultSearchPath).split(":").map((dir) => path.resolve(cwd, dir, spec.command))
  let denied: string | undefined
  for (const file of candidates) {
    const found = spec.command === "" ? "missing" : isExecutableFile(file)
    if (found === "yes") return interpreterProblem(file, cwd)
    if (found === "no") denied ??= file
  }
  return denied === undefined
    ? { reason: "NotFound", detail: `no executable named ${spec.command} was found` }
    : { reason: "PermissionDenied", detail: `${denied} is not an executable file` }
}

/** Why the command cannot start, whatever its containment. */
export type Unstartable = {
  readonly reason: "NotFound" | "PermissionDenied" | "NotADirectory"
  readonly detail: string
}

/**
 * What Node's spawn would throw instead of failing (an empty command, a working directory
 * that is a file) and, behind the trampoline, a working directory that does not exist
 * (the spawner finds that itself, for a command it starts directly).
 */
export const findUnstartable = (spec: Spec): Unstartable | undefined => {
  if (spec.command === "") return { reason: "NotFound", detail: "the command is empty" }
  if (spec.cwd === undefined) return undefined
  try {
    if (!fs.statSync(spec.cwd).isDirectory()) {
      return { reason: "NotADirectory", detail: `the working directory ${spec.cwd} is not a directory` }
    }
  } catch {
    return { reason: "NotFound", detail: `the working directory ${spec.cwd} does not exist` }
  }
  return undefined
}

/** The values of the spec that are `Redacted`: the child gets them, nothing else does. */
export const secretsOf = (spec: Spec): ReadonlyArray<string> => {
  const secrets: Array<string> = []
  for (const arg of spec.args ?? []) if (Redacted.isRedacted(arg)) secrets.push(Redacted.value(arg))
  for (const value of Object.values(spec.env ?? {})) if (Redacted.isRedacted(value)) secrets.push(Redacted.value(value))
  // Longest first, so a secret that contains another is replaced whole.
  return secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length)
}

/** Secrets shorter than this are replaced as they are only, not in their other forms (too many false matches). */
const minInForms = 4

/**
 * `text` with every secret replaced by `<redacted>`: as it is, however short, and in the forms
 * a command writes it (`curl -v`'s URL-encoded query, a base64 `Authorization` header: review
 * 188). Never the whole output: a long secret in the environment masked a whole build log
 * once a bound on the search's work was passed (review 191). `replaceAll` on each form: its
 * cost is the output's length times the forms', on output of at most `maxOutputBytes`.
 */
export const scrub = (text: string, secrets: ReadonlyArray<string>): string => {
  if (secrets.length === 0) return text
  const long = secrets.filter((secret) => secret.length >= minInForms)
  const forms = [...new Set([...secrets, ...long.flatMap(SecretForms.formsOf)])].sort((a, b) => b.length - a.length)
  const replaced = forms.reduce((acc, form) => acc.replaceAll(form, "<redacted>"), text)
  return SecretForms.masker(long)(replaced, "<redacted>")
}

/**
 * The command for the spawner: `spec` itself, or (with a cgroup) `/bin/sh` running the
 * trampoline, with fd 3 a pipe from the host (see {@link release}). Detached, so the
 * child leads its own process group.
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
  return options.cgroup === undefined
    ? ChildProcess.make(spec.command, args, commandOptions)
    : ChildProcess.make("/bin/sh", trampolineArgs(options.cgroup, spec.command, args), {
        ...commandOptions,
        additionalFds: { fd3: { type: "input" } }
      })
}
