/**
 * File tools confined to one workspace root: `read_file`, `list_files`,
 * `write_text_file`, `write_markdown_file` and `write_json_file`.
 *
 * Paths are relative to the root. The tools hold their root by themselves, policy or
 * not, races included (R3.6, R3.11, R12): a path is resolved one name at a time from the
 * root without the kernel ever following a symbolic link, so a link (or a `..` in one)
 * that leads out of the root is refused as `outside_root`, and the file checked is the
 * file used. Links that stay inside the root keep working. A write replaces its target
 * atomically (a new file renamed over it), so it never writes through a link or a hard
 * link into a file elsewhere. Only regular files are read or written: a FIFO, a socket or
 * a device is refused without being opened for blocking I/O. Reads and writes are
 * bounded (`maxReadBytes`, `maxWriteBytes`).
 *
 * A path must be well-formed text: one with a lone UTF-16 surrogate (`"\ud800"`) is
 * `invalid_path`, as the file system would read it as U+FFFD and two paths would name one
 * file. A write's temporary file is named `.<16 hex digits>.tmp`; a process killed mid-write
 * leaves it behind. Such names are the tools' own: `list_files` does not list them, the
 * other tools refuse them (`invalid_path`), and a write removes those in its directory older
 * than a minute (checking each directory at most once a minute), never a younger one, which
 * may be another write's in progress.
 *
 * Every path a tool reports back, in its output or in a failure's hint, is relative to
 * the root: absolute paths and platform error text stay in `diagnostic`.
 *
 * @since 0.1.0
 */
import { Array as Arr, Effect, Order, Path, Result, Schema } from "effect"
import type * as Failure from "../failure/Failure.ts"
import * as FileToolsOptions from "./internal/FileToolsOptions.ts"
import { prettyJsonBytes } from "./internal/prettyJson.ts"
import * as Workspace from "./internal/workspace/Workspace.ts"
import { fromWorkspaceError, permanent, shown } from "./internal/workspace/WorkspaceFailure.ts"
import * as Tool from "./Tool.ts"

/**
 * One entry of a directory listing. A symbolic link is listed as what it points to;
 * entries that are neither files nor directories, links that dangle or lead out of the
 * root, and the writes' temporary files are left out. So is a name that is not valid UTF-8
 * (no path the model gives names it), counted in `omitted`.
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
  /**
   * The largest file `read_file` reads, in bytes; a larger one fails `file_too_large`
   * without being read. Default 1 MiB.
   */
  readonly maxReadBytes?: number | undefined
  /**
   * The most bytes a writer writes (for `write_json_file`, the pretty-printed text); more
   * fails `content_too_large` and writes nothing. Default 1 MiB, the permission policy's
   * content limit.
   */
  readonly maxWriteBytes?: number | undefined
  /**
   * The most entries `list_files` lists (the first by name); `omitted` then says how many
   * more there are, with the names that are not valid UTF-8 (never listed). Default 1,000.
   */
  readonly maxListEntries?: number | undefined
  /**
   * Refuse to read or write a `.env` file (or a copy, `.env~`, `.env-old`), judged where
   * symbolic links lead: a link `settings.txt` to `.env` is refused too (`env_file`). The
   * permission policy judges the path as the model wrote it; this, where it leads. Default
   * `true`, as the policy's `denyEnvFiles`.
   */
  readonly denyEnvFiles?: boolean | undefined
}

/**
 * @category models
 * @since 0.1.0
 */
export interface FileTools {
  readonly readFile: Tool.Tool<{ readonly path: string }, { readonly path: string; readonly content: string }>
  readonly listFiles: Tool.Tool<
    { readonly path: string },
    { readonly path: string; readonly entries: ReadonlyArray<Entry>; readonly omitted?: number }
  >
  readonly writeTextFile: Tool.Tool<{ readonly path: string; readonly content: string }, Written>
  readonly writeMarkdownFile: Tool.Tool<{ readonly path: string; readonly content: string }, Written>
  readonly writeJsonFile: Tool.Tool<{ readonly path: string; readonly content: Schema.Json }, Written>
  /** Every tool above, for a registry. */
  readonly all: ReadonlyArray<Tool.Any<never>>
}

const PathInput = Schema.Struct({ path: Schema.String })

const markdownPattern = /\.md$/i

// Linux's PATH_MAX: no longer path can name anything.
const maxPathBytes = 4096

const byName = Order.mapInput(Order.String, (entry: Entry) => entry.name)

/**
 * Builds the file tools for one root. The path service is captured here, so the
 * handlers need nothing. The root need not exist yet: the first write makes it; until
 * then reading and listing fail `workspace_unavailable`.
 *
 * Dies with a `RangeError` naming the option for options that cannot work (a root that
 * is empty, or is there and is not a directory; a limit that is not an integer >= 0):
 * the tools are built at start-up.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (options: Options): Effect.fn.Return<FileTools, never, Path.Path> {
  const path = yield* Path.Path
  const { root, maxReadBytes, maxWriteBytes, maxListEntries, denyEnvFiles } = FileToolsOptions.resolve(options, path)
  const workspace = yield* Workspace.make({ root, denyEnvFiles })
  // The system's limit holds for the whole path, the root's real path included (the kernel names
  // a directory by it): a longer path would fail only after making the directories on its way.
  const realRoot = FileToolsOptions.realPathOf(root)
  const maxBelowRootBytes = Math.max(0, maxPathBytes - Buffer.byteLength(realRoot, "utf8") - 1)
  // Under the root as given, or under its real path (a root reached through a link, as macOS's
  // /tmp is, and a model given the real one): the names below it, or `undefined` when outside.
  const bases = realRoot === root ? [root] : [root, realRoot]
  const below = (absolute: string): string | undefined =>
    bases
      .map((base) => path.relative(base, absolute))
      .find((relative) => !(relative === ".." || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative)))

  // The path as names below the root, `..` resolved by text first (as the permission
  // policy does), so a path that is outside on its face never reaches the file system.
  // The hint never repeats an absolute path.
  const locate = (
    input: string
  ): Effect.Effect<{ readonly names: ReadonlyArray<string>; readonly display: string }, Failure.Permanent> => {
    if (input.length === 0 || input.includes("\0")) {
      return Effect.fail(permanent("invalid_path", "invalid_argument", "the path is empty or contains a NUL byte"))
    }
    // A lone surrogate would reach the file system as U+FFFD: two paths, one file.
    if (!Workspace.isWellFormed(input)) {
      return Effect.fail(
        permanent(
          "invalid_path",
          "invalid_argument",
          "the path is not well-formed text (it holds a lone UTF-16 surrogate, which names no character)"
        )
      )
    }
    const tooLong = (bytes: number, limit: number) =>
      Effect.fail(
        permanent(
          "invalid_path",
          "invalid_argument",
          `the path is ${bytes} bytes long, over the limit of ${limit} bytes in this workspace; use a shorter path`
        )
      )
    // No longer path names anything: refused before it is resolved.
    const bytes = Buffer.byteLength(input, "utf8")
    if (bytes > maxPathBytes) return tooLong(bytes, maxPathBytes)
    const relative = below(path.resolve(root, input))
    if (relative === undefined) {
      return Effect.fail(
        permanent("outside_root", "permission", "the path is outside the workspace root; use a path inside it")
      )
    }
    // What lies below the root (an absolute path holds the root already).
    const belowBytes = Buffer.byteLength(relative, "utf8")
    if (belowBytes > maxBelowRootBytes) return tooLong(belowBytes, maxBelowRootBytes)
    return Effect.succeed({
      names: relative.split(path.sep).filter((name) => name.length > 0),
      display: relative === "" ? "." : relative
    })
  }

  // `notes/`, `notes/.`, `..` name a directory, as the file system reads them: never a file.
  // A name of the form of the writes' own temporary files is theirs, swept when stale.
  const locateFile = (input: string) =>
    Workspace.namesDirectory(input, path.sep)
      ? Effect.fail(permanent("invalid_path", "invalid_argument", "the path names a directory; name a file"))
      : Effect.flatMap(locate(input), (located) =>
          Workspace.isTemporaryName(located.names[located.names.length - 1] ?? "")
            ? Effect.fail(
                permanent(
                  "invalid_path",
                  "invalid_argument",
                  "names of the form .<16 hex digits>.tmp are the file tools' own temporary files; use another name"
                )
              )
            : Effect.succeed(located)
        )

  const tooLarge = (display: string, what: string, bytes: string) =>
    permanent(
      "content_too_large",
      "too_large",
      `${what} for ${shown(display)} is ${bytes}, over the write limit of ${maxWriteBytes} bytes; write less`
    )

  const write = Effect.fnUntraced(function* (input: string, text: string, what = "the content") {
    const { names, display } = yield* locateFile(input)
    const bytes = Buffer.byteLength(text, "utf8")
    if (bytes > maxWriteBytes) return yield* tooLarge(display, what, `${bytes} bytes`)
    yield* workspace
      .write(names, Buffer.from(text, "utf8"))
      .pipe(Effect.mapError(fromWorkspaceError("write", display, maxReadBytes)))
    return { path: display, bytes }
  })

  const writeJson = Effect.fnUntraced(function* (input: string, content: Schema.Json) {
    const { display } = yield* locateFile(input)
    // Sized before the text exists: the pretty-printed text can be many times the compact
    // one (indentation grows with depth), and must not be built to find that out.
    if (prettyJsonBytes(content, maxWriteBytes - 1) === undefined) {
      return yield* tooLarge(display, "the pretty-printed JSON", `more than ${maxWriteBytes} bytes`)
    }
    const text = Result.try(() => `${JSON.stringify(content, null, 2)}\n`)
    if (Result.isFailure(text)) {
      return yield* permanent("invalid_json", "invalid_argument", "the content cannot be written as JSON")
    }
    return yield* write(input, text.success, "the pretty-printed JSON")
  })

  const readFile = Tool.make({
    name: "read_file",
    description: `Reads a UTF-8 text file of at most ${maxReadBytes} bytes. \`path\` is relative to the workspace root.`,
    input: PathInput,
    output: Schema.Struct({ path: Schema.String, content: Schema.String }),
    sideEffect: "read",
    idempotent: true,
    // Read-only, so a failure (a wrong path) is safe to hand back to the model as an observation.
    recoverErrors: true,
    maxRetries: 2,
    pathFields: ["path"],
    handler: Effect.fnUntraced(function* ({ path: input }) {
      const { names, display } = yield* locateFile(input)
      const bytes = yield* workspace
        .read(names, maxReadBytes)
        .pipe(Effect.mapError(fromWorkspaceError("read", display, maxReadBytes)))
      return { path: display, content: bytes.toString("utf8") }
    })
  })

  const listFiles = Tool.make({
    name: "list_files",
    description:
      "Lists a directory: each entry's name and whether it is a file or a directory, sorted by name. " +
      `At most ${maxListEntries} entries; \`omitted\` then counts the rest, with the names no path can ` +
      "give (not valid UTF-8), which are never listed. " +
      '`path` is relative to the workspace root; "." is the root itself.',
    input: PathInput,
    output: Schema.Struct({
      path: Schema.String,
      entries: Schema.Array(Entry),
      omitted: Schema.optionalKey(Schema.Int)
    }),
    sideEffect: "read",
    idempotent: true,
    // Read-only, so a failure (a wrong path) is safe to hand back to the model as an observation.
    recoverErrors: true,
    maxRetries: 2,
    pathFields: ["path"],
    handler: Effect.fnUntraced(function* ({ path: input }) {
      const { names, display } = yield* locate(input)
      const { entries, more } = yield* workspace
        .list(names, maxListEntries)
        .pipe(Effect.mapError(fromWorkspaceError("list", display, maxReadBytes)))
      const sorted = Arr.sort(entries, byName)
      return more > 0 ? { path: display, entries: sorted, omitted: more } : { path: display, entries: sorted }
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
    // A refused write (a bad path, too much content) wrote nothing: the model hears why, the run goes on.
    recoverErrors: true,
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
    // A refused write (a bad path, too much content) wrote nothing: the model hears why, the run goes on.
    recoverErrors: true,
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
      "Writes a JSON value (object, array, string, number, boolean or null) to a file, pretty-printed with two-space indentation, replacing it if it exists " +
      "and creating missing directories. `path` is relative to the workspace root.",
    input: Schema.Struct({ path: Schema.String, content: Schema.Json }),
    output: Written,
    sideEffect: "write",
    idempotent: true,
    // A refused write (a bad path, too much content) wrote nothing: the model hears why, the run goes on.
    recoverErrors: true,
    pathFields: ["path"],
    contentFields: ["content"],
    handler: ({ path: input, content }) => writeJson(input, content)
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
