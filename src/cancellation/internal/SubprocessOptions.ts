/**
 * The defaults and the validation of the options of a supervised subprocess (R5.2),
 * private to `Subprocess`, which re-exports the defaults: a grace period and an output
 * limit that cannot work, and a spec that cannot be run, are refused before anything is
 * spawned.
 */
import { Redacted } from "effect"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import type { Options, Spec } from "./SubprocessSpec.ts"

/**
 * @category constants
 * @since 0.1.0
 */
export const defaultGraceMillis = 2000

/**
 * @category constants
 * @since 0.1.0
 */
export const defaultMaxOutputBytes = 1024 * 1024

/**
 * The longest grace a subprocess may be given: a day, far within what a timer can wait
 * (a longer `setTimeout` fires at once, which would take the grace away).
 */
const maxGraceMillis = 24 * 60 * 60 * 1000

/** Every option of `Subprocess.run`: one it does not know is refused (review 173). */
export const knownRunOptions: OptionKeys.Known<Options> = {
  graceMillis: true,
  maxOutputBytes: true,
  cgroup: true,
  unsafeToRepeat: true,
  onSpawn: true,
  onSettled: true
}

const knownSpec: OptionKeys.Known<Spec> = {
  command: true,
  args: true,
  cwd: true,
  env: true,
  extendEnv: true,
  stdin: true
}

/**
 * Why the options cannot work, or `undefined` when they can (a caller without types may pass
 * anything): among them a key none of `known` is.
 */
export const validateOptions = <Given>(
  options: {
    readonly graceMillis?: number | undefined
    readonly maxOutputBytes?: number | undefined
    readonly cgroup?: boolean | undefined
    readonly unsafeToRepeat?: boolean | undefined
  },
  known: OptionKeys.Known<Given>
): string | undefined => {
  const unknown = OptionKeys.unknownOption(options, known)
  if (unknown !== undefined) return unknown
  const grace = options.graceMillis ?? defaultGraceMillis
  if (typeof grace !== "number" || !(grace >= 0 && grace <= maxGraceMillis)) {
    return `graceMillis must be a number from 0 to ${maxGraceMillis} (a day), got ${show(grace)}`
  }
  const max = options.maxOutputBytes ?? defaultMaxOutputBytes
  if (!Number.isInteger(max) || max < 1) return `maxOutputBytes must be an integer >= 1, got ${show(max)}`
  for (const name of ["cgroup", "unsafeToRepeat"] as const) {
    const flag = options[name]
    if (flag !== undefined && typeof flag !== "boolean") return `${name} must be a boolean, got ${show(flag)}`
  }
  return undefined
}

/** A value as a message shows it: a string quoted. */
const show = (value: unknown): string => (typeof value === "string" ? JSON.stringify(value) : String(value))

const isText = (value: unknown): boolean =>
  typeof value === "string" || (Redacted.isRedacted(value) && typeof Redacted.value(value) === "string")

/** Why the spec cannot be run, or `undefined` when it can (a caller without types may pass anything). */
export const validateSpec = (spec: Spec): string | undefined => {
  if (typeof spec !== "object" || spec === null) return `the spec must be an object, got ${show(spec)}`
  const unknown = OptionKeys.unknownOption(spec, knownSpec)
  if (unknown !== undefined) return `the spec: ${unknown}`
  if (typeof spec.command !== "string") return `command must be a string, got ${show(spec.command)}`
  const { args, env, cwd, stdin, extendEnv } = spec
  if (args !== undefined && !(Array.isArray(args) && args.every(isText))) {
    return "args must be an array of strings (or Redacted strings)"
  }
  if (env !== undefined && (typeof env !== "object" || env === null || Array.isArray(env))) {
    return "env must be an object of variable names and values"
  }
  for (const [name, value] of Object.entries(env ?? {})) {
    if (name === "" || name.includes("=") || name.includes("\0"))
      return `env has an invalid variable name ${show(name)}`
    if (value !== undefined && !isText(value))
      return `env.${name} must be a string (or a Redacted string), got ${show(value)}`
  }
  if (cwd !== undefined && typeof cwd !== "string") return `cwd must be a string, got ${show(cwd)}`
  if (stdin !== undefined && typeof stdin !== "string" && !(stdin instanceof Uint8Array)) {
    return "stdin must be a string or a Uint8Array"
  }
  if (extendEnv !== undefined && typeof extendEnv !== "boolean")
    return `extendEnv must be a boolean, got ${show(extendEnv)}`
  const texts = [spec.command, cwd ?? "", ...(args ?? []).map(plainText), ...Object.values(env ?? {}).map(plainText)]
  if (texts.some((text) => text.includes("\0")))
    return "the command, its arguments, cwd and env may not hold a NUL byte"
  return undefined
}

const plainText = (value: string | Redacted.Redacted<string> | undefined): string =>
  value === undefined ? "" : Redacted.isRedacted(value) ? Redacted.value(value) : value
