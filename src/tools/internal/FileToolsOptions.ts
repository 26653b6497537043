/**
 * The options of `FileTools.make` checked and resolved, every default filled in: what
 * cannot work throws a `RangeError` naming the option (the tools are built at start-up).
 */
import * as NodeFs from "node:fs"
import type { Path } from "effect"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Permission from "../Permission.ts"
import * as Workspace from "./workspace/Workspace.ts"

/** What `FileTools.make` takes (its `Options`), as a caller without types may pass it. */
export interface Given {
  readonly root: string
  readonly maxReadBytes?: number | undefined
  readonly maxWriteBytes?: number | undefined
  readonly maxListEntries?: number | undefined
  readonly denyEnvFiles?: boolean | undefined
}

const checkLimit = (name: string, value: number | undefined, fallback: number): number => {
  const limit = value ?? fallback
  if (!Number.isSafeInteger(limit) || limit < 0) {
    throw new RangeError(`FileTools.make: ${name} must be an integer >= 0, got ${limit}`)
  }
  return limit
}

/** Whether `at` is a directory, or nothing yet (a root the first write makes). */
const isDirectoryOrMissing = (at: string): boolean => {
  try {
    // Without `throwIfNoEntry: false`, which takes a file on the way for a missing name.
    return NodeFs.statSync(at).isDirectory()
  } catch (error) {
    // A file on the way (`ENOTDIR`) can never hold the root; the rest (`EACCES`) each call reports.
    return !(error instanceof Error && "code" in error && error.code === "ENOTDIR")
  }
}

/** The real path of `at` (its links followed), or `at` itself while nothing is there yet. */
export const realPathOf = (at: string): string => {
  try {
    return NodeFs.realpathSync(at)
  } catch {
    return at
  }
}

/** The root as given: a path that is not empty, with no NUL byte or lone surrogate; `undefined` when it is one. */
const rootProblem = (root: unknown): string | undefined =>
  typeof root === "string" && root !== "" && !root.includes("\0") && Workspace.isWellFormed(root)
    ? undefined
    : `root must be the workspace directory's path, got ${root === "" ? "an empty string" : String(root)}`

/** The options, checked, with their defaults. */
/** Every option: one `FileTools.make` does not know is refused (review 173, as `Tool.make`'s). */
const knownOptions: OptionKeys.Known<Given> = {
  root: true,
  maxReadBytes: true,
  maxWriteBytes: true,
  maxListEntries: true,
  denyEnvFiles: true
}

export const resolve = (options: Given, path: Path.Path) => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) throw new RangeError(`FileTools.make: ${unknown}`)
  const problem = rootProblem(options.root)
  if (problem !== undefined) throw new RangeError(`FileTools.make: ${problem}`)
  const root = path.resolve(options.root)
  if (!isDirectoryOrMissing(root)) throw new RangeError(`FileTools.make: root ${root} is not a directory`)
  if (options.denyEnvFiles !== undefined && typeof options.denyEnvFiles !== "boolean") {
    throw new RangeError(`FileTools.make: denyEnvFiles must be a boolean, got ${UserCode.shown(options.denyEnvFiles)}`)
  }
  return {
    root,
    maxReadBytes: checkLimit("maxReadBytes", options.maxReadBytes, Permission.defaultMaxContentBytes),
    maxWriteBytes: checkLimit("maxWriteBytes", options.maxWriteBytes, Permission.defaultMaxContentBytes),
    maxListEntries: checkLimit("maxListEntries", options.maxListEntries, 1_000),
    denyEnvFiles: options.denyEnvFiles ?? true
  }
}
