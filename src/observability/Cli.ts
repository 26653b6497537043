/**
 * The command line, `effect-agent-runtime` (the package's `bin`):
 *
 * ```
 * effect-agent-runtime view <run.json|run.jsonl> [-o out.html] [--no-content]
 * ```
 *
 * `view` reads a `RunResult` as JSON or a JSONL recording (one still being written, or torn
 * by a crash, included) and writes the viewer's page (`Viewer.html`), by default beside it
 * (`run.jsonl` → `run.html`). A missing file, a file that is not JSON and JSON that is no
 * run each fail with a message that says so.
 *
 * @since 0.3.0
 */
import * as NodeFs from "node:fs/promises"
import { Effect, FileSystem, Option, Path, Schema } from "effect"
import * as Timeline from "../events/Timeline.ts"
import * as Recording from "./Recording.ts"
import * as Viewer from "./Viewer.ts"

/**
 * @category models
 * @since 0.3.0
 */
export const usage = `usage: effect-agent-runtime view <run.json|run.jsonl> [-o out.html] [--no-content]

  view    writes a run (a RunResult as JSON, or a JSONL recording) as one self-contained
          HTML page: why it stopped, a Gantt of its iterations, its budgets, its events.
  -o      where to write the page (default: the input with .html for its extension)
  --no-content   leave the message content (goal, model text, tool arguments and results) out`

/**
 * The command line is wrong (exit 2), or its work failed (exit 1): a file is missing, is
 * not JSON, is no run, or the page cannot be written.
 *
 * @category errors
 * @since 0.3.0
 */
export class CliError extends Schema.TaggedError<CliError>()("CliError", {
  message: Schema.String,
  exitCode: Schema.Int
}) {}

/** What `view` was asked. */
interface View {
  readonly input: string
  readonly output: string | undefined
  readonly content: boolean
}

/**
 * What the command prints: a file's name or content may hold control characters (a file
 * that opens with an escape sequence, quoted by the parser), which are written out, so that
 * no file moves the cursor of the terminal that views it, retitles it or clears it.
 */
const printable = Timeline.visible

const bad = (message: string) => new CliError({ message: `${printable(message)}\n\n${usage}`, exitCode: 2 })

const failed = (message: string) => new CliError({ message: printable(message), exitCode: 1 })

/**
 * Whether writing `output` would replace the file `input` is: the same path, or, both
 * existing, the same file (a symbolic or a hard link to it) by its device and inode, or by
 * its real path where the file system gives no inode.
 */
const sameFile = (fs: FileSystem.FileSystem, path: Path.Path, input: string, output: string) =>
  path.resolve(output) === path.resolve(input)
    ? Effect.succeed(true)
    : Effect.all([fs.stat(input), fs.stat(output)]).pipe(
        Effect.flatMap(([a, b]) =>
          Option.isSome(a.ino) && Option.isSome(b.ino)
            ? Effect.succeed(a.dev === b.dev && a.ino.value === b.ino.value)
            : Effect.map(Effect.all([fs.realPath(input), fs.realPath(output)]), ([x, y]) => x === y)
        ),
        // Either is missing: the page replaces nothing of the input (a missing input fails as it is read).
        Effect.orElseSucceed(() => false)
      )

/**
 * Runs `write` to the FIFO at `file` while this end holds it open, or fails when nothing
 * reads it: opening it to write without waiting fails (ENXIO) then. Held open until the
 * write ends, so that its reader does not see the end of its input before the page.
 */
const whileRead = <A, E>(file: string, write: Effect.Effect<A, E>): Effect.Effect<A, E | CliError> =>
  Effect.acquireUseRelease(
    Effect.promise(() =>
      NodeFs.open(file, NodeFs.constants.O_WRONLY | NodeFs.constants.O_NONBLOCK).then(
        (handle) => handle,
        () => undefined
      )
    ),
    (held): Effect.Effect<A, E | CliError> =>
      held === undefined
        ? Effect.fail(failed(`cannot write ${file}: it is a FIFO that nothing reads; give a file with -o`))
        : write,
    (held) => (held === undefined ? Effect.void : Effect.promise(() => held.close()))
  )

const parse = (args: ReadonlyArray<string>): View | "help" | CliError => {
  const [command, ...rest] = args
  // No command is a wrong command line (exit 2), as for any tool; asking for help is not.
  if (command === undefined) return bad("no command")
  if (command === "--help" || command === "-h" || command === "help") return "help"
  if (command !== "view") return bad(`unknown command: ${command}`)
  let input: string | undefined
  let output: string | undefined
  let content = true
  // One iterator: an option's value is taken from it, so the loop goes on after the value.
  const remaining = rest.values()
  for (const arg of remaining) {
    if (arg === "-o" || arg === "--output") {
      const value = remaining.next().value
      if (value === undefined) return bad(`${arg} needs a file name`)
      output = value
    } else if (arg === "--no-content") content = false
    else if (arg === "--help" || arg === "-h") return "help"
    else if (arg === "-") return bad("a run is read from a file, not from standard input: give its path")
    else if (arg.startsWith("-")) return bad(`unknown option: ${arg}`)
    else if (input === undefined) input = arg
    else return bad(`one input file only, got ${input} and ${arg}`)
  }
  if (input === undefined) return bad("view needs a file: a RunResult as JSON, or a JSONL recording")
  return { input, output, content }
}

/**
 * Runs the command line `args` (without `node` and the script): what to print when it
 * succeeds, or why it failed.
 *
 * @category commands
 * @since 0.3.0
 */
export const main = (args: ReadonlyArray<string>): Effect.Effect<string, CliError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function* () {
    const parsed = parse(args)
    if (parsed === "help") return usage
    if (parsed instanceof CliError) return yield* parsed
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const { dir, name } = path.parse(parsed.input)
    const output = parsed.output ?? path.join(dir, `${name}.html`)
    // The page never replaces the run it is drawn from (`view run.html`, or `-o` naming the input or a link to it).
    if (yield* sameFile(fs, path, parsed.input, output)) {
      return yield* bad(`the page would overwrite its input ${parsed.input}: give another file with -o`)
    }
    const recording = yield* Effect.mapError(Recording.read(parsed.input), (error) => failed(error.message))
    // A page is one string: past what V8 holds in one (about 512 MiB, the page of a recording of
    // some 100 MB) it cannot be made, which is said as such, not as a crash.
    const page = yield* Effect.try({
      try: () => Viewer.html(recording, { content: parsed.content }),
      catch: (error) =>
        failed(
          error instanceof RangeError
            ? `the page of ${recording.events.length} events would be larger than one JavaScript string can be (about 512 MiB): the recording is too large to view as one page`
            : `cannot draw the page: ${error instanceof Error ? error.message : String(error)}`
        )
    })
    // A directory is no page; a FIFO nobody reads would hold the write for good (a device, a
    // socket or a FIFO something reads, `-o /dev/stdout` piped on, is written as asked).
    const existing = yield* Effect.option(fs.stat(output))
    if (Option.isSome(existing) && existing.value.type === "Directory") {
      return yield* failed(`cannot write ${output}: it is a directory; give a file with -o`)
    }
    const write = Effect.mapError(fs.writeFileString(output, page), (error) =>
      failed(`cannot write ${output}: ${error.message}`)
    )
    yield* Option.isSome(existing) && existing.value.type === "FIFO" ? whileRead(output, write) : write
    const torn = recording.torn ? " (its torn last line skipped)" : ""
    const replaced =
      recording.replaced > 0 ? ` (${recording.replaced} events a resume replaced, never committed, left out)` : ""
    return printable(`wrote ${output}: ${recording.events.length} events${torn}${replaced}`)
  })
