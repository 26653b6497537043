/**
 * What the spawner is asked to start for a supervised subprocess (R5.2), private to
 * `Subprocess`: the command itself, or, when it gets a cgroup, the `sh` trampoline that
 * joins the cgroup and `exec`s it. Also the secrets of a spec (its `Redacted` values),
 * which never leave the child.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Duration, Redacted, Stream } from "effect"
import { ChildProcess } from "effect/process"
import * as SubprocessCgroup from "./SubprocessCgroup.ts"
import type { Spec } from "./SubprocessSpec.ts"

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
 * The command for the spawner: `spec` itself, or (with a cgroup) `/bin/sh` running the
 * trampoline. Detached, so the child leads its own process group.
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
    : ChildProcess.make("/bin/sh", SubprocessCgroup.trampolineArgs(options.cgroup, spec.command, args), commandOptions)
}
