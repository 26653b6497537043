/**
 * File tools confined to one workspace root: `read_file`, `list_files`,
 * `write_text_file`, `write_markdown_file` and `write_json_file`.
 *
 * Paths are relative to the root. The permission policy (R3.6) is what confines a
 * run; each tool also refuses, by itself, a path that resolves outside its root, so a
 * run without a policy still cannot wander off. Every path a tool reports back, in its
 * output or in a failure's hint, is relative to the root: absolute paths and platform
 * error text stay in `diagnostic`.
 *
 * @since 0.1.0
 */
import { Array as Arr, Effect, FileSystem, Order, Path, type PlatformError, Predicate, Schema } from "effect"
import * as Failure from "../Failure.ts"
import * as Tool from "../Tool.ts"

/**
 * One entry of a directory listing. A symbolic link is listed as what it points to.
 *
 * @category models
 * @since 0.1.0
 */
export const Entry = Schema.Struct({
  name: Schema.String,
  kind: Schema.Literals(["file", "directory"])
})

/**
 * @category models
 * @since 0.1.0
 */
export type Entry = typeof Entry.Type

/**
 * What a writer reports: the path it wrote, relative to the root, and the bytes written.
 *
 * @category models
 * @since 0.1.0
 */
export const Written = Schema.Struct({
  path: Schema.String,
  bytes: Schema.Int
})

/**
 * @category models
 * @since 0.1.0
 */
export type Written = typeof Written.Type

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** The workspace root; relative paths resolve against it. */
  readonly root: string
}

/**
 * @category models
 * @since 0.1.0
 */
export interface FileTools {
  readonly readFile: Tool.Tool<{ readonly path: string }, { readonly path: string; readonly content: string }>
  readonly listFiles: Tool.Tool<
    { readonly path: string },
    { readonly path: string; readonly entries: ReadonlyArray<Entry> }
  >
  readonly writeTextFile: Tool.Tool<{ readonly path: string; readonly content: string }, Written>
  readonly writeMarkdownFile: Tool.Tool<{ readonly path: string; readonly content: string }, Written>
  readonly writeJsonFile: Tool.Tool<{ readonly path: string; readonly content: Schema.Json }, Written>
  /** Every tool above, for a registry. */
  readonly all: ReadonlyArray<Tool.Any<never>>
}

const PathInput = Schema.Struct({ path: Schema.String })

const markdownPattern = /\.md$/i

const permanent = (code: string, category: string, hint: string, diagnostic?: string): Failure.Permanent =>
  new Failure.Permanent({ source: "tool", category, code, attempts: 1, hint, diagnostic })

type Operation = "read" | "list" | "write"

// `EISDIR` and `ENOTDIR` share the `BadResource` tag, so tell them apart by the errno code.
const errnoCode = (error: PlatformError.PlatformError): string | undefined => {
  const cause = error.reason.cause
  return Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) ? cause.code : undefined
}

const fromPlatformError =
  (operation: Operation, display: string) =>
  (error: PlatformError.PlatformError): Failure.Permanent => {
    const diagnostic = error.message
    if (error.reason._tag === "NotFound") {
      const hint =
        operation === "read"
          ? `no file at ${display}; list the directory first`
          : operation === "list"
            ? `no directory at ${display}; list its parent first`
            : `could not write ${display}: a directory on the way is missing`
      return permanent("not_found", "not_found", hint, diagnostic)
    }
    const code = errnoCode(error)
    if (code === "EISDIR") {
      return permanent("is_a_directory", "invalid_target", `${display} is a directory; use list_files`, diagnostic)
    }
    if (code === "ENOTDIR") {
      const hint =
        operation === "list"
          ? `${display} is a file, not a directory; use read_file`
          : `a parent of ${display} is a file, not a directory`
      return permanent("not_a_directory", "invalid_target", hint, diagnostic)
    }
    return permanent("io_error", "io", `could not ${operation} ${display}`, diagnostic)
  }

const byName = Order.mapInput(Order.String, (entry: Entry) => entry.name)

/**
 * Builds the file tools for one root. The file system and path services are captured
 * here, so the handlers need nothing.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (
  options: Options
): Effect.fn.Return<FileTools, never, FileSystem.FileSystem | Path.Path> {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = path.resolve(options.root)

  // Defence in depth: the policy should already have refused such a path. The hint never
  // repeats an absolute path.
  const locate = (
    input: string
  ): Effect.Effect<{ readonly absolute: string; readonly display: string }, Failure.Permanent> => {
    if (input.length === 0 || input.includes("\0")) {
      return Effect.fail(permanent("invalid_path", "invalid_argument", "the path is empty or contains a NUL byte"))
    }
    const absolute = path.resolve(root, input)
    const relative = path.relative(root, absolute)
    if (relative === ".." || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative)) {
      return Effect.fail(
        permanent("outside_root", "permission", "the path is outside the workspace root; use a path inside it")
      )
    }
    return Effect.succeed({ absolute, display: relative === "" ? "." : relative })
  }

  const kindOf = Effect.fnUntraced(function* (directory: string, entry: FileSystem.DirectoryEntry) {
    if (entry.type === "File") return "file" as const
    if (entry.type === "Directory") return "directory" as const
    if (entry.type !== "SymbolicLink" && entry.type !== "Unknown") return undefined
    const info = yield* Effect.option(fs.stat(path.join(directory, entry.name)))
    if (info._tag === "None") return undefined
    return info.value.type === "Directory"
      ? ("directory" as const)
      : info.value.type === "File"
        ? ("file" as const)
        : undefined
  })

  const write = Effect.fnUntraced(function* (input: string, text: string) {
    const { absolute, display } = yield* locate(input)
    const onError = fromPlatformError("write", display)
    yield* fs.makeDirectory(path.dirname(absolute), { recursive: true }).pipe(Effect.mapError(onError))
    yield* fs.writeFileString(absolute, text).pipe(Effect.mapError(onError))
    return { path: display, bytes: Buffer.byteLength(text, "utf8") }
  })

  const readFile = Tool.make({
    name: "read_file",
    description: "Reads a UTF-8 text file. `path` is relative to the workspace root.",
    input: PathInput,
    output: Schema.Struct({ path: Schema.String, content: Schema.String }),
    sideEffect: "read",
    idempotent: true,
    // Read-only, so a failure (a wrong path) is safe to hand back to the model as an observation.
    recoverErrors: true,
    maxRetries: 2,
    pathFields: ["path"],
    handler: Effect.fnUntraced(function* ({ path: input }) {
      const { absolute, display } = yield* locate(input)
      const content = yield* fs.readFileString(absolute).pipe(Effect.mapError(fromPlatformError("read", display)))
      return { path: display, content }
    })
  })

  const listFiles = Tool.make({
    name: "list_files",
    description:
      "Lists a directory: each entry's name and whether it is a file or a directory, sorted by name. " +
      '`path` is relative to the workspace root; "." is the root itself.',
    input: PathInput,
    output: Schema.Struct({ path: Schema.String, entries: Schema.Array(Entry) }),
    sideEffect: "read",
    idempotent: true,
    // Read-only, so a failure (a wrong path) is safe to hand back to the model as an observation.
    recoverErrors: true,
    maxRetries: 2,
    pathFields: ["path"],
    handler: Effect.fnUntraced(function* ({ path: input }) {
      const { absolute, display } = yield* locate(input)
      const listed = yield* fs.readDirectoryEntries(absolute).pipe(Effect.mapError(fromPlatformError("list", display)))
      const entries: Array<Entry> = []
      for (const entry of listed) {
        const kind = yield* kindOf(absolute, entry)
        if (kind !== undefined) entries.push({ name: entry.name, kind })
      }
      return { path: display, entries: Arr.sort(entries, byName) }
    })
  })

  const textInput = Schema.Struct({ path: Schema.String, content: Schema.String })

  const writeTextFile = Tool.make({
    name: "write_text_file",
    description:
      "Writes a UTF-8 text file, replacing it if it exists and creating missing directories. " +
      "`path` is relative to the workspace root.",
    input: textInput,
    output: Written,
    sideEffect: "write",
    idempotent: true,
    pathFields: ["path"],
    contentFields: ["content"],
    handler: ({ path: input, content }) => write(input, content)
  })

  const writeMarkdownFile = Tool.make({
    name: "write_markdown_file",
    description:
      "Writes a Markdown file (the path must end in .md), replacing it if it exists and creating missing " +
      "directories. `path` is relative to the workspace root.",
    // The check in the schema makes a wrong extension a correctable argument error (R3.5);
    // the one in the handler keeps the tool honest when it is called directly.
    input: Schema.Struct({
      path: Schema.String.check(Schema.isPattern(markdownPattern, { message: "the path must end in .md" })),
      content: Schema.String
    }),
    output: Written,
    sideEffect: "write",
    idempotent: true,
    pathFields: ["path"],
    contentFields: ["content"],
    handler: Effect.fnUntraced(function* ({ path: input, content }) {
      if (!markdownPattern.test(input)) {
        return yield* permanent(
          "not_markdown",
          "invalid_argument",
          "write_markdown_file writes only .md files; use write_text_file for other files"
        )
      }
      return yield* write(input, content)
    })
  })

  const writeJsonFile = Tool.make({
    name: "write_json_file",
    description:
      "Writes any JSON value to a file, pretty-printed with two-space indentation, replacing it if it exists " +
      "and creating missing directories. `path` is relative to the workspace root.",
    input: Schema.Struct({ path: Schema.String, content: Schema.Json }),
    output: Written,
    sideEffect: "write",
    idempotent: true,
    pathFields: ["path"],
    contentFields: ["content"],
    handler: ({ path: input, content }) => write(input, `${JSON.stringify(content, null, 2)}\n`)
  })

  return {
    readFile,
    listFiles,
    writeTextFile,
    writeMarkdownFile,
    writeJsonFile,
    all: [readFile, listFiles, writeTextFile, writeMarkdownFile, writeJsonFile]
  }
})
