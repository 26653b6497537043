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
import { Effect, FileSystem, Path, Result, Schema, SchemaIssue } from "effect"
import type * as Event from "../events/Event.ts"

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

const inferFormat = (path: string): Format => {
  const lower = path.toLowerCase()
  if (lower.endsWith(".md") || lower.endsWith(".markdown")) return "markdown"
  return lower.endsWith(".json") ? "json" : "text"
}

/**
 * An artifact contract. The format defaults from the extension (`.md` → markdown,
 * `.json` → json, else text), `nonEmpty` to true (for json: not `null`, `""`, `{}` or
 * `[]`) and `maxBytes` to {@link defaultMaxBytes}. Throws a `RangeError` for an empty
 * path, a schema on a format other than json, or a `maxBytes` that is not an integer
 * >= 0. Also exported as `Validation.artifact`, whose name its error messages carry.
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
  if (path.trim() === "") {
    throw new RangeError(`Validation.artifact: path must be a non-empty string, got ${JSON.stringify(path)}`)
  }
  const format = options?.format ?? inferFormat(path)
  const schema = options?.schema
  if (schema !== undefined && format !== "json") {
    throw new RangeError(`Validation.artifact: ${JSON.stringify(path)} has format ${format}; only json takes a schema`)
  }
  const maxBytes = options?.maxBytes
  if (maxBytes !== undefined && !(Number.isSafeInteger(maxBytes) && maxBytes >= 0)) {
    throw new RangeError(`Validation.artifact: maxBytes must be an integer >= 0, got ${String(maxBytes)}`)
  }
  return {
    path,
    format,
    nonEmpty: options?.nonEmpty ?? true,
    ...(schema === undefined ? {} : { schema }),
    ...(maxBytes === undefined ? {} : { maxBytes })
  }
}

/** Whether text holds nothing but whitespace and NUL bytes (a preallocated, zero-filled file). */
const isBlank = (text: string): boolean => /^[\s\0]*$/.test(text)

/** Whether a JSON value holds nothing: `null`, `""`, `{}` or `[]`. */
const isEmptyJson = (value: unknown): boolean =>
  value === null ||
  value === "" ||
  (Array.isArray(value) ? value.length === 0 : typeof value === "object" && Object.keys(value).length === 0)

const issueFormatter = SchemaIssue.makeFormatterStandardSchemaV1()

const formatIssue = (issue: SchemaIssue.Issue): string =>
  issueFormatter(issue)
    .issues.map(({ message, path }) => {
      const keys = (path ?? []).map((segment) => (typeof segment === "object" ? segment.key : segment))
      if (keys.length === 0) return message
      const at = keys.map((key) => `[${typeof key === "string" ? JSON.stringify(key) : String(key)}]`).join("")
      return `${message} at ${at}`
    })
    .join("; ")

const parseJson = Schema.decodeUnknownResult(Schema.fromJsonString(Schema.Unknown))

// `stat` follows symbolic links, so anything but a file here is a directory or a special file.
const entryKind = (type: FileSystem.File.Type): string =>
  type === "Directory" ? "a directory" : `an entry of type ${type}`

const isInside = (path: Path.Path, root: string, target: string): boolean => {
  const relative = path.relative(root, target)
  // `..report.json` is a name inside the root; `..` and `../x` lead out of it.
  return !(relative === ".." || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative))
}

const realPathOf = (fs: FileSystem.FileSystem, target: string): Effect.Effect<string | undefined> =>
  Effect.orElseSucceed(fs.realPath(target), () => undefined)

const hasHeading = (text: string): boolean => /^ {0,3}#{1,6}(\s|$)/m.test(text) || /^.+\n(=+|-+)\s*$/m.test(text)

/**
 * Checks one contract against the file at `contract.path` resolved against `root`.
 * Never fails: a missing, unreadable, empty, unparsable or mismatching file is a
 * failed check whose detail starts with `artifact:<path>: ` and says why.
 *
 * @category validation
 * @since 0.1.0
 */
export const check: (
  contract: Contract,
  root: string
) => Effect.Effect<Verdict, never, FileSystem.FileSystem | Path.Path> = Effect.fnUntraced(function* (
  contract: Contract,
  root: string
) {
  const fs = yield* FileSystem.FileSystem
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
  const full = path.resolve(root, contract.path)
  const info = yield* Effect.result(fs.stat(full))
  if (Result.isFailure(info)) {
    const tag = info.failure.reason._tag
    return fail(tag === "NotFound" ? `missing (no file at ${contract.path})` : `unreadable (${tag})`)
  }
  if (info.success.type !== "File") {
    return fail(`not a file (found ${entryKind(info.success.type)} at ${contract.path})`)
  }
  // A file named inside the root is the run's only if it is there on disk: a link out of it
  // (to any file that happens to exist) delivers nothing.
  if (isInside(path, path.resolve(root), full)) {
    const [realRoot, realFile] = yield* Effect.all([realPathOf(fs, root), realPathOf(fs, full)])
    if (realRoot === undefined || realFile === undefined || !isInside(path, realRoot, realFile)) {
      return fail(`leads outside the root through a symbolic link (${contract.path})`)
    }
  }
  const bytes = Number(info.success.size)
  const maxBytes = contract.maxBytes ?? defaultMaxBytes
  if (bytes > maxBytes) {
    return fail(`too large to check (${bytes} bytes, over the limit of ${maxBytes}: raise maxBytes)`)
  }
  const read = yield* Effect.result(fs.readFileString(full))
  if (Result.isFailure(read)) return fail(`unreadable (${read.failure.reason._tag})`)
  const text = read.success
  if (contract.nonEmpty && isBlank(text)) return fail("empty (no content after trimming whitespace)")
  const size = `${text.length} characters`
  switch (contract.format) {
    case "text":
      return pass(`text, ${size}`)
    case "markdown":
      return pass(`markdown, ${size}, ${hasHeading(text) ? "has a heading" : "no heading"}`)
    case "json": {
      const parsed = parseJson(text)
      if (Result.isFailure(parsed)) return fail("does not parse as JSON")
      if (contract.nonEmpty && isEmptyJson(parsed.success)) return fail(`empty (the JSON value ${text.trim()})`)
      if (contract.schema === undefined) return pass(`valid JSON, ${size}`)
      const decoded = yield* Effect.result(
        Schema.decodeUnknownEffect(contract.schema)(parsed.success, { errors: "all" })
      )
      if (Result.isFailure(decoded)) return fail(`schema mismatch: ${formatIssue(decoded.failure.issue)}`)
      return pass(`valid JSON matching its schema, ${size}`)
    }
  }
})
