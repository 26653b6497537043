/**
 * The permission policy (R3.6): a hard stop, checked before a tool's arguments are
 * even validated, that no model action and no recovery can bypass. A denial becomes a
 * *blocked* result with code `permission_denied`; it is never retried and never spends
 * the correction budget.
 *
 * `Permission` is a `Context.Reference` whose default allows everything, so a run needs
 * no layer. {@link layer} installs a policy built by {@link make}, which confines the
 * fields a tool declares as paths (`pathFields`) to a set of roots, refuses `.env`
 * files and symbolic links that lead out of the roots, and caps the size of the fields
 * it declares as content (`contentFields`).
 *
 * The policy judges a path when the call is made; a link can change before the tool
 * uses it. So the policy is the early, blocking refusal, and a tool that touches the file
 * system must still hold its own root when it opens a file, as `FileTools` does.
 *
 * @since 0.1.0
 */
import { Context, Effect, FileSystem, Layer, Path, Predicate, Result, Schema } from "effect"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as Text from "../failure/Text.ts"
import * as UserCode from "../failure/UserCode.ts"
import { isEnvPath } from "./internal/EnvFiles.ts"
import { isWellFormed } from "./internal/workspace/Names.ts"
import type * as Tool from "./Tool.ts"

/**
 * Why a call was refused.
 *
 * - `tool_not_allowed`: the tool is not on the allow-list.
 * - `outside_roots`: a path field leaves the allowed roots.
 * - `symlink_escape`: a path inside the roots reaches outside them through a symbolic link.
 * - `env_file`: a path field names a `.env` or `.env.*` file (or a copy: `.env~`, `.env-old`), or
 *   goes through a `.env` directory, as written or through a symbolic link.
 * - `content_too_large`: a content field is over the size limit.
 * - `invalid_path`: a path field is empty, holds a NUL byte or a lone UTF-16 surrogate (not
 *   well-formed text: the file system would read it as U+FFFD, so two paths would name one
 *   file), or is longer than 4096 bytes.
 * - `policy_failed`: the policy itself failed (threw, died, or returned something that is
 *   not a decision): a policy that cannot decide denies.
 *
 * @category models
 * @since 0.1.0
 */
export const Rule = Schema.Literals([
  "tool_not_allowed",
  "outside_roots",
  "symlink_escape",
  "env_file",
  "content_too_large",
  "invalid_path",
  "policy_failed"
])

/**
 * @category models
 * @since 0.1.0
 */
export type Rule = typeof Rule.Type

/**
 * What the policy decided about one call. `reason` names the tool, the field and the
 * offending value (for content, only its size), and is safe to show the model.
 *
 * @category models
 * @since 0.1.0
 */
export const Decision = Schema.Union([
  Schema.TaggedStruct("Allow", {}),
  Schema.TaggedStruct("Deny", { rule: Rule, reason: Schema.String })
])

/**
 * @category models
 * @since 0.1.0
 */
export type Decision = typeof Decision.Type

/**
 * @category constructors
 * @since 0.1.0
 */
export const allow: Decision = Object.freeze({ _tag: "Allow" })

/**
 * @category constructors
 * @since 0.1.0
 */
export const deny = (rule: Rule, reason: string): Decision => ({ _tag: "Deny", rule, reason })

/**
 * One tool call as the policy sees it: the raw parsed arguments, before schema
 * validation, so that a malformed call cannot slip past the policy.
 *
 * @category models
 * @since 0.1.0
 */
export interface Request {
  readonly tool: Tool.Any
  readonly arguments: Readonly<Record<string, unknown>>
  readonly runId: string
  readonly callId: string
}

/**
 * A policy. `check` has no error channel and no requirements: a policy captures what
 * it needs when it is built, and a policy that cannot decide must deny.
 *
 * @category models
 * @since 0.1.0
 */
export interface PermissionService {
  readonly check: (request: Request) => Effect.Effect<Decision>
}

/**
 * Allows every call.
 *
 * @category constructors
 * @since 0.1.0
 */
export const allowAll: PermissionService = { check: () => Effect.succeed(allow) }

/**
 * The policy in force. Defaults to {@link allowAll}.
 *
 * @category services
 * @since 0.1.0
 */
export class Permission extends Context.Reference<PermissionService>("effect-agent-runtime/Permission", {
  defaultValue: () => allowAll
}) {}

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Only these tools may be called. Default: every tool. */
  readonly allowTools?: ReadonlyArray<string> | undefined
  /**
   * Path fields must stay inside one of these directories; relative paths are resolved
   * against the first. Default: no confinement.
   */
  readonly roots?: ReadonlyArray<string> | undefined
  /**
   * Refuse `.env` and `.env.*` files, and copies of them (`.env~`, `.env-old`, `.env copy`);
   * `.envrc` and `.environment` are not refused. Default `true`.
   */
  readonly denyEnvFiles?: boolean | undefined
  /** Largest content field, in UTF-8 bytes (JSON text for non-string values). Default 1 MiB. */
  readonly maxContentBytes?: number | undefined
}

/**
 * The default content limit, in bytes (1 MiB). The file tools' read and write limits
 * default to it too, and the run's argument limit leaves room for a content field of this
 * size in its worst JSON encoding, so that oversize content is denied here (blocked,
 * spending nothing) rather than refused earlier as a correctable argument error.
 *
 * @category constructors
 * @since 0.1.0
 */
export const defaultMaxContentBytes = 1024 * 1024

const maxShownChars = 200

// The path as the model sent it, quoted and escaped (a NUL shows as \u0000), and cut short.
const show = (value: string): string => JSON.stringify(Text.clip(value, maxShownChars))

const contentBytes = (value: unknown): number | undefined => {
  if (Predicate.isString(value)) return Buffer.byteLength(value, "utf8")
  const text = Result.try(() => JSON.stringify(value))
  return Result.isSuccess(text) && Predicate.isString(text.success)
    ? Buffer.byteLength(text.success, "utf8")
    : undefined
}

// Symbolic links followed before giving up; the kernel's own limit is 40.
const maxLinkDepth = 40

// Linux's PATH_MAX: no longer path names anything, and resolving one name at a time would
// cost a system call per component.
const maxPathBytes = 4096

// The names a path's resolution takes, links' targets included: a link whose target is
// `a/../a/../…` made one check take a second of `lstat`s (review 191).
const maxWalkedNames = 4096

const unresolved = `goes through a loop of symbolic links, or more than ${maxWalkedNames} names once they are followed`

/** Every option: one a policy does not know is refused (review 173: `allowedTools` allowed every tool). */
const knownOptions: OptionKeys.Known<Options> = {
  allowTools: true,
  roots: true,
  denyEnvFiles: true,
  maxContentBytes: true
}

/** Why the options cannot make a policy, or `undefined` (a caller without types may pass anything). */
const optionsProblem = (options: Options): string | undefined => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) return unknown
  const { allowTools, roots, denyEnvFiles, maxContentBytes } = options
  const names = (value: unknown) =>
    Array.isArray(value) && value.every((item) => Predicate.isString(item) && item !== "")
  if (allowTools !== undefined && !names(allowTools)) return "allowTools must be an array of tool names"
  if (roots !== undefined && !(names(roots) && roots.every(isWellFormed))) {
    return "roots must be an array of directory paths, with no lone surrogate"
  }
  // An empty list would read as "no confinement": the opposite of what an empty allow-list says.
  if (roots !== undefined && roots.length === 0) {
    return "roots is empty: give at least one directory, or leave roots out for no confinement"
  }
  if (denyEnvFiles !== undefined && typeof denyEnvFiles !== "boolean") return "denyEnvFiles must be a boolean"
  if (maxContentBytes !== undefined && !(Number.isSafeInteger(maxContentBytes) && maxContentBytes >= 0)) {
    return `maxContentBytes must be an integer >= 0, got ${UserCode.shown(maxContentBytes)}`
  }
  return undefined
}

/**
 * Builds a policy. Rules run in this order, and the first that fails decides:
 *
 * 1. the tool must be in `allowTools` (`tool_not_allowed`);
 * 2. for each path of a path field (a string, or each string of an array): not empty, no NUL byte, no lone
 *    surrogate, at most 4096 bytes (`invalid_path`); not a
 *    `.env` file (`env_file`); inside a root after resolving `..` (`outside_roots`);
 *    still inside a root after following symbolic links, for a file that does not exist
 *    yet through its nearest existing ancestor (`symlink_escape`); not led to a `.env`
 *    file by a link (`env_file`; without `roots`, a relative path is followed from the
 *    working directory: a tool with a root of its own, as `FileTools`, checks where its
 *    own links lead);
 * 3. each content field within `maxContentBytes` (`content_too_large`).
 *
 * Absent or wrongly typed fields are left to schema validation, which runs next.
 *
 * Dies with a `RangeError` naming the option for options that cannot work (an empty
 * `roots`, a `maxContentBytes` that is not an integer >= 0, …): a policy is built at start-up.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (
  options: Options
): Effect.fn.Return<PermissionService, never, FileSystem.FileSystem | Path.Path> {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const invalid = optionsProblem(options)
  if (invalid !== undefined) throw new RangeError(`Permission.make: ${invalid}`)
  const allowTools = options.allowTools === undefined ? undefined : new Set(options.allowTools)
  const roots = (options.roots ?? []).map((root) => path.resolve(root))
  const denyEnvFiles = options.denyEnvFiles ?? true
  const maxContentBytes = options.maxContentBytes ?? defaultMaxContentBytes

  const isInside = (root: string, target: string): boolean =>
    target === root || target.startsWith(root.endsWith(path.sep) ? root : `${root}${path.sep}`)

  // The canonical path, also for a path that does not exist yet: the real path of its
  // nearest existing ancestor plus the missing rest. Resolved one name at a time from the
  // top, as the kernel (and the file tools) would: a link, even a dangling one, is
  // followed, so a write through it is judged by where it would land, and a `..` after a
  // link is the parent of where the link led. One `lstat` a name; a missing one is taken as
  // a directory to come (a write may make it), and the names after it are walked on: a `..`
  // back out of it may lead to a link (review 191: `missing/../link/x` was judged by text).
  // `undefined` means a loop of links, or more than `maxWalkedNames` names. Always walked, never
  // Node's `realpath`, which takes out a `..` by text, in the path (review 188) and in a link's
  // target (review 192: `l -> inner/../x`, `inner` a link out of the roots, was judged inside).
  const realPath = (target: string): Effect.Effect<string | undefined> =>
    Effect.gen(function* () {
      const split = (value: string) => value.split(path.sep).filter((name) => name.length > 0 && name !== ".")
      // The names still to walk, the next one last: a link's target is pushed on as it comes.
      const stack = split(target).reverse()
      let current = path.parse(target).root
      let links = 0
      let walked = 0
      // How deep the walk is below a name that does not exist: nothing there to look at (review 192).
      let missing = 0
      for (let name = stack.pop(); name !== undefined; name = stack.pop()) {
        if (++walked > maxWalkedNames) return undefined
        // `current` holds no link, so its parent by name is its parent on disk.
        if (name === "..") {
          current = path.dirname(current)
          missing = Math.max(0, missing - 1)
          continue
        }
        // Joined by hand: `path.join` would read the whole path again at each name (review 192).
        const next = current.endsWith(path.sep) ? `${current}${name}` : `${current}${path.sep}${name}`
        const info = missing > 0 ? undefined : yield* Effect.option(fs.lstat(next))
        if (info === undefined || info._tag === "None" || info.value.type !== "SymbolicLink") {
          if (info === undefined || info._tag === "None") missing++
          current = next
          continue
        }
        links += 1
        if (links > maxLinkDepth) return undefined
        const link = yield* Effect.option(fs.readLink(next))
        if (link._tag === "None") return undefined
        if (path.isAbsolute(link.value)) current = path.parse(link.value).root
        stack.push(...split(link.value).reverse())
      }
      return current
    })

  const checkPath = Effect.fnUntraced(function* (tool: string, field: string, value: string) {
    const subject = `${tool}: arguments.${field} ${show(value)}`
    if (value.length === 0 || value.includes("\0")) {
      return deny("invalid_path", `${subject} is empty or contains a NUL byte`)
    }
    if (!isWellFormed(value)) {
      return deny("invalid_path", `${subject} is not well-formed text: it holds a lone UTF-16 surrogate`)
    }
    const bytes = Buffer.byteLength(value, "utf8")
    if (bytes > maxPathBytes) {
      return deny("invalid_path", `${subject} is ${bytes} bytes long, over the limit of ${maxPathBytes} bytes`)
    }
    if (denyEnvFiles && isEnvPath(value)) {
      return deny("env_file", `${subject} names a .env file, which may hold secrets`)
    }
    const first = roots[0]
    if (first === undefined) {
      // No confinement: a link is still followed (a relative path from the working directory,
      // where a tool of no root of its own resolves it), so it cannot lead to a .env file unseen.
      if (!denyEnvFiles) return allow
      const real = yield* realPath(path.isAbsolute(value) ? value : `${path.resolve()}${path.sep}${value}`)
      // A path that cannot be followed to its end cannot be shown to lead to no .env file (review 192).
      if (real === undefined) return deny("symlink_escape", `${subject} ${unresolved}`)
      return isEnvPath(real) ? deny("env_file", `${subject} leads to a .env file through a symbolic link`) : allow
    }
    const target = path.resolve(first, value)
    const realRoots = yield* Effect.forEach(roots, realPath)
    // Under a root as given, or under its real path (a root reached through a link, as macOS's /tmp is).
    const under = (root: string | undefined) => root !== undefined && isInside(root, target)
    if (!roots.some(under) && !realRoots.some(under)) {
      return deny("outside_roots", `${subject} resolves outside the allowed roots`)
    }
    // The path as sent, not as `resolve` shortens it: a tool may open it so, and the kernel
    // takes a `..` after a link to the parent of where the link led.
    const real = yield* realPath(path.isAbsolute(value) ? value : `${first}${path.sep}${value}`)
    if (real === undefined) {
      return deny("symlink_escape", `${subject} ${unresolved}`)
    }
    if (!realRoots.some((root) => root !== undefined && isInside(root, real))) {
      return deny("symlink_escape", `${subject} leads outside the allowed roots through a symbolic link`)
    }
    if (denyEnvFiles && isEnvPath(real)) {
      return deny("env_file", `${subject} leads to a .env file through a symbolic link`)
    }
    return allow
  })

  const check = Effect.fnUntraced(function* (request: Request) {
    const { tool } = request
    if (allowTools !== undefined && !allowTools.has(tool.name)) {
      return deny("tool_not_allowed", `${tool.name}: the tool is not on the allow-list`)
    }
    for (const field of tool.metadata.pathFields) {
      const value = request.arguments[field]
      // A path field holds a path or a list of them (`Tool.make` checks its schema); anything else is the schema's to refuse.
      const paths = Predicate.isString(value) ? [value] : Array.isArray(value) ? value.filter(Predicate.isString) : []
      for (const [i, path] of paths.entries()) {
        const decision = yield* checkPath(tool.name, Array.isArray(value) ? `${field}[${i}]` : field, path)
        if (decision._tag === "Deny") return decision
      }
    }
    for (const field of tool.metadata.contentFields) {
      const value = request.arguments[field]
      if (value === undefined) continue
      const bytes = contentBytes(value)
      if (bytes !== undefined && bytes > maxContentBytes) {
        return deny(
          "content_too_large",
          `${tool.name}: arguments.${field} is ${bytes} bytes, over the limit of ${maxContentBytes} bytes`
        )
      }
    }
    return allow
  })

  return { check }
})

/**
 * Installs the policy built by {@link make} in place of the default.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Options): Layer.Layer<never, never, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Permission, make(options))
