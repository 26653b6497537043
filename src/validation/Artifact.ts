/**
 * Artifact: a file the run must deliver, and how it is checked (R6.1).
 *
 * A `Contract` names a path (resolved against a root directory), a `Format`
 * (text, markdown or json), whether the file must be non-empty and, for json, an
 * optional schema. `check` looks at the file on disk, not at what the model claims:
 * it must exist, be a file, be readable, be non-empty when required, parse as JSON
 * for json, and match its schema when it has one.
 *
 * `Validation` runs these checks after plan steps and stop hooks (as
 * `artifact:<path>` checks); `Validation.artifact` is this module's `make`.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Option, Path, Result, Schema, type SchemaIssue } from "effect"
import type * as Event from "../events/Event.ts"
import * as Failure from "../failure/Failure.ts"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as SchemaIssues from "../failure/SchemaIssues.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Model from "../model/Model.ts"
import * as ToolArguments from "../tools/ToolArguments.ts"
import * as ToolCodec from "../tools/ToolCodec.ts"
import * as WorkspaceFiles from "../tools/WorkspaceFiles.ts"

/**
 * @category models
 * @since 0.1.0
 */
export type Format = "text" | "markdown" | "json"

/**
 * A file the run must deliver. `schema` (json only) must need no services to decode.
 *
 * @category models
 * @since 0.1.0
 */
export interface Contract {
  readonly path: string
  readonly format: Format
  readonly schema?: Schema.Decoder<unknown> | undefined
  readonly nonEmpty: boolean
  /** The largest file checked, in bytes: a larger one fails its check unread. Default 16 MiB. */
  readonly maxBytes?: number | undefined
}

/**
 * The largest artifact checked by default (16 MiB): a check reads the file whole, and
 * memory is bounded by limits, not by what a file holds.
 *
 * @category constructors
 * @since 0.3.0
 */
export const defaultMaxBytes = 16 * 1024 * 1024

/**
 * What backs a passing artifact check: the check name (`item`) and the artifact
 * path (`ref`). Structurally a `Validation.Evidence` of kind `artifact`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Evidence {
  readonly item: string
  readonly kind: "artifact"
  readonly ref: string
  readonly detail: string
}

/**
 * The outcome of checking one contract: the `artifact:<path>` check, whether its
 * failure fails the validation (always true for artifacts), and the evidence behind
 * it (empty unless it passed).
 *
 * @category models
 * @since 0.1.0
 */
export interface Verdict {
  readonly check: Event.Check
  readonly blocking: boolean
  readonly evidence: ReadonlyArray<Evidence>
}

const formats: ReadonlyArray<Format> = ["text", "markdown", "json"]

/** Every option of {@link make}: one it does not know is refused (review 173, as `Tool.make`'s). */
const knownOptions: OptionKeys.Known<NonNullable<Parameters<typeof make>[1]>> = {
  format: true,
  schema: true,
  nonEmpty: true,
  maxBytes: true
}

const inferFormat = (path: string): Format => {
  const lower = path.toLowerCase()
  if (lower.endsWith(".md") || lower.endsWith(".markdown")) return "markdown"
  return lower.endsWith(".json") ? "json" : "text"
}

/**
 * An artifact contract. The format defaults from the extension (`.md` → markdown,
 * `.json` → json, else text), `nonEmpty` to true (for json: not `null`, a blank string,
 * `{}` or `[]`) and `maxBytes` to {@link defaultMaxBytes}. Throws a `RangeError` for an empty
 * path, a schema on a format other than json, a `maxBytes` that is not an integer >= 0, or
 * an option it does not know. Also exported as `Validation.artifact`, whose name its error messages carry.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  path: string,
  options?: {
    readonly format?: Format | undefined
    readonly schema?: Schema.Decoder<unknown> | undefined
    readonly nonEmpty?: boolean | undefined
    readonly maxBytes?: number | undefined
  }
): Contract => {
  if (typeof path !== "string" || path.trim() === "") {
    throw new RangeError(`Validation.artifact: path must be a non-empty string, got ${UserCode.shown(path)}`)
  }
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) throw new RangeError(`Validation.artifact: ${unknown}`)
  if (options?.format !== undefined && !formats.includes(options.format)) {
    throw new RangeError(
      `Validation.artifact: format must be one of ${formats.join(", ")}, got ${UserCode.shown(options.format)}`
    )
  }
  if (options?.nonEmpty !== undefined && typeof options.nonEmpty !== "boolean") {
    throw new RangeError(`Validation.artifact: nonEmpty must be a boolean, got ${UserCode.shown(options.nonEmpty)}`)
  }
  if (options?.schema !== undefined && !Schema.isSchema(options.schema)) {
    throw new RangeError(`Validation.artifact: schema must be a Schema, got ${UserCode.shown(options.schema)}`)
  }
  const format = options?.format ?? inferFormat(path)
  const schema = options?.schema
  if (schema !== undefined && format !== "json") {
    throw new RangeError(`Validation.artifact: ${JSON.stringify(path)} has format ${format}; only json takes a schema`)
  }
  const maxBytes = options?.maxBytes
  if (maxBytes !== undefined && !(Number.isSafeInteger(maxBytes) && maxBytes >= 0)) {
    throw new RangeError(`Validation.artifact: maxBytes must be an integer >= 0, got ${UserCode.shown(maxBytes)}`)
  }
  return {
    path,
    format,
    nonEmpty: options?.nonEmpty ?? true,
    ...(schema === undefined ? {} : { schema }),
    ...(maxBytes === undefined ? {} : { maxBytes })
  }
}

/** Whether a JSON value holds nothing: `null`, a blank string (`""`, `"   "`), `{}` or `[]`. */
const isEmptyJson = (value: unknown): boolean =>
  value === null ||
  (typeof value === "string" && Model.isBlank(value)) ||
  (Array.isArray(value) ? value.length === 0 : typeof value === "object" && Object.keys(value).length === 0)

/** A schema's issue with a file: its first fields (see `SchemaIssues.maxFields`), then how many more. */
const formatIssue = (issue: SchemaIssue.Issue): string => {
  const { fields, omitted } = SchemaIssues.fields(issue)
  const lines = fields.map(({ message, path }) => {
    if (path.length === 0) return message
    const at = path.map((key) => `[${typeof key === "string" ? JSON.stringify(key) : String(key)}]`).join("")
    return `${message} at ${at}`
  })
  if (omitted > 0) lines.push(SchemaIssues.andMore(omitted))
  return lines.join("; ")
}

const parseJson = Schema.decodeUnknownResult(Schema.fromJsonString(Schema.Unknown))

const isInside = (path: Path.Path, root: string, target: string): boolean => {
  const relative = path.relative(root, target)
  // `..report.json` is a name inside the root; `..` and `../x` lead out of it.
  return !(relative === ".." || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative))
}

/**
 * The contract's path as the read takes it, or `undefined` when it is outside the root. An
 * absolute path not under the root as written is compared by real paths, its folder's
 * against the root's (a root reached through a link, review 118), and read by the names
 * between them. This needs `FileSystem` (`NodeServices.layer` gives it); the read still
 * refuses a link out of the root, one swapped in while it runs included.
 */
const located = Effect.fnUntraced(function* (path: Path.Path, root: string, given: string) {
  const base = path.resolve(root)
  const full = path.resolve(base, given)
  if (isInside(path, base, full)) return given
  const fs = yield* Effect.serviceOption(FileSystem.FileSystem)
  if (!path.isAbsolute(given) || Option.isNone(fs)) return undefined
  // A path not there yet is taken as written: the read then finds nothing.
  const real = (at: string) => fs.value.realPath(at).pipe(Effect.orElseSucceed(() => at))
  const realRoot = yield* real(base)
  const target = path.join(yield* real(path.dirname(full)), path.basename(full))
  if (!isInside(path, realRoot, target)) return undefined
  const relative = path.relative(realRoot, target)
  return relative === "" ? "." : relative
})

/** What a read that failed says, after `artifact:<path>: `. */
const unread = (error: WorkspaceFiles.WorkspaceError, at: string): string => {
  switch (error.reason) {
    case "not_found":
      return `missing (no file at ${at})`
    case "root_unavailable":
      return `missing: the root itself cannot be opened as a directory (${error.detail})`
    case "is_a_directory":
      return `not a file (found a directory at ${at})`
    case "not_a_regular_file":
      return `not a file (found a special file at ${at})`
    case "outside_root":
    case "link_loop":
      return `leads outside the root through a symbolic link (${at})`
    case "invalid_argument":
      return `not checked: ${error.detail}`
    default:
      return `unreadable (${error.reason})`
  }
}

const hasHeading = (text: string): boolean => /^ {0,3}#{1,6}(\s|$)/m.test(text) || /^.+\n(=+|-+)\s*$/m.test(text)

/**
 * Checks one contract against the file at `contract.path` resolved against `root`. An
 * absolute path is also compared by real paths (a root reached through a symbolic link),
 * with the `FileSystem` service when there is one. Never fails: a missing, unreadable,
 * empty, unparsable or mismatching file is a failed check whose detail starts with
 * `artifact:<path>: ` and says why.
 *
 * @category validation
 * @since 0.1.0
 */
export const check: (contract: Contract, root: string) => Effect.Effect<Verdict, never, Path.Path> = Effect.fnUntraced(
  function* (contract: Contract, root: string) {
    const path = yield* Path.Path
    const name = `artifact:${contract.path}`
    const verdict =
      (passed: boolean) =>
      (clause: string): Verdict => ({
        check: { name, kind: "artifact", passed, detail: `${name}: ${clause}` },
        blocking: true,
        evidence: passed ? [{ item: name, kind: "artifact", ref: contract.path, detail: clause }] : []
      })
    const [pass, fail] = [verdict(true), verdict(false)]
    const at = yield* located(path, root, contract.path)
    if (at === undefined) return fail(`outside the root (${contract.path} is not under ${root})`)
    const maxBytes = contract.maxBytes ?? defaultMaxBytes
    // Read as the file tools read (R12): what is checked is what one descriptor of a file inside
    // the root reads, no link followed out of it and nothing opened that could block (a FIFO),
    // whatever is swapped in while the check runs.
    const read = yield* Effect.result(WorkspaceFiles.read(root, at, maxBytes))
    if (Result.isFailure(read)) {
      const error = read.failure
      if (error.reason !== "too_large") return fail(unread(error, contract.path))
      const size = error.size === undefined ? "grew past the limit while checked" : `${error.size} bytes`
      return fail(`too large to check (${size}, over the limit of ${maxBytes}: raise maxBytes)`)
    }
    // Bytes that are not UTF-8 are no text file delivered (review 90: they passed as U+FFFD).
    let text: string
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(read.success)
    } catch {
      return fail("not UTF-8 text")
    }
    if (contract.nonEmpty && Model.isBlank(text)) return fail("empty (no content after trimming whitespace)")
    const size = `${text.length} characters`
    switch (contract.format) {
      case "text":
        return pass(`text, ${size}`)
      case "markdown":
        return pass(`markdown, ${size}, ${hasHeading(text) ? "has a heading" : "no heading"}`)
      case "json": {
        const parsed = parseJson(text)
        if (Result.isFailure(parsed)) return fail("does not parse as JSON")
        if (contract.nonEmpty && isEmptyJson(parsed.success)) {
          // A blank string is shown cut: it may be megabytes of spaces.
          const value = parsed.success
          return fail(
            `empty (the JSON value ${typeof value === "string" ? UserCode.shown(value) : JSON.stringify(value)})`
          )
        }
        if (contract.schema === undefined) return pass(`valid JSON, ${size}`)
        // Bounded as what the model sends is (R12): no decoder walks a nesting past the limit.
        const unfit = ToolArguments.jsonIssue(parsed.success, {
          root: "the file",
          maxDepth: ToolArguments.defaultLimits.maxArgumentDepth,
          maxNodes: text.length,
          strict: true
        })
        if (unfit !== undefined) return fail(`not checked against its schema: ${unfit}`)
        // Decoded as a tool's arguments are: by the schema, else in its JSON form (a `Date` as
        // its ISO text, review 173); every problem named only where they are few enough to
        // hold, a file wrong in millions of places by its first (R12).
        const schema = contract.schema
        const decoded = UserCode.decodingOf(() => ToolCodec.decodeArguments(schema)(parsed.success))
        if (decoded._tag === "Mismatch") return fail(`schema mismatch: ${formatIssue(decoded.error.issue)}`)
        if (decoded._tag === "Broken") {
          const why = Failure.fromCause("runtime", decoded.cause).hint
          return fail(`its schema failed while decoding the file: ${why}`)
        }
        return pass(`valid JSON matching its schema, ${size}`)
      }
    }
  }
)
