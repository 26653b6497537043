/**
 * The recorder: every run's events appended to a JSONL file as they happen, one event a
 * line (`<directory>/<runId>.jsonl`), for the viewer (`effect-agent-runtime view`), for a
 * regression test, or for a look at a run while it is still going.
 *
 * `Recorder.layer({ directory })` records every run under it, fresh or resumed (a resumed
 * run appends to its file). The events are recorded as the timeline holds them, redacted
 * as it is (no `Redacted` value reaches the timeline); `content: false` also leaves the
 * message content out (see `Recording`). Each write appends whole lines, so a crash leaves
 * at most a torn last line, which a reader skips (`Recording.decode`), and which is cut off
 * before a run going on after the crash appends to its file; a run gives its
 * result once its `run.finished` is written. A write that fails is logged, and the run
 * goes on unrecorded: a recorder never fails a run. Each line is stamped with its writer
 * (`recordedBy`, one for each run in each process; see `Recording.line`).
 *
 * @example
 * ```ts
 * import { NodeServices } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 * import { Run } from "effect-agent-runtime"
 * import { Recorder } from "effect-agent-runtime/observability"
 *
 * const recorded = Layer.provide(Recorder.layer({ directory: "runs" }), NodeServices.layer)
 * // Effect.provide(Run.run({ goal, tools }), recorded) writes runs/<runId>.jsonl
 * ```
 *
 * @since 0.3.0
 */
import { Context, Deferred, Effect, FileSystem, Layer, Path, Queue, Schema } from "effect"
import type * as Event from "../events/Event.ts"
import * as Failure from "../failure/Failure.ts"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as RunObserver from "../run/RunObserver.ts"
import { withoutContent } from "./internal/Content.ts"
import * as Recording from "./Recording.ts"

/**
 * What the recorder is given: the `directory` of the recordings (made when missing);
 * `content: false` to leave the message content out (default: recorded); `file` to name
 * a run's file (default `<runId>.jsonl`, the id escaped to a safe file name). A file holds
 * one run: a run that starts where an earlier one was recorded sets it aside
 * (`<name>.1.jsonl`), unless a run of this recorder is still writing it (a `file` naming one
 * file for runs at once gives a file `Recording` refuses: events of two runs). A `file`
 * that throws costs the events it was asked to place: they are logged as not recorded,
 * and the recorder goes on (the run, and the runs after it, are not held up).
 *
 * @category models
 * @since 0.3.0
 */
export interface Options {
  readonly directory: string
  readonly content?: boolean | undefined
  readonly file?: ((runId: string) => string) | undefined
}

/**
 * The recorder under a layer: where a run's recording is, and `flush`, which waits until
 * every event recorded so far is written.
 *
 * @category services
 * @since 0.3.0
 */
export class Recorder extends Context.Service<
  Recorder,
  {
    readonly path: (runId: string) => string
    readonly flush: Effect.Effect<void>
  }
>()("effect-agent-runtime/Recorder") {}

/**
 * The recordings' directory cannot be made, or the options name one the recorder does not know.
 *
 * @category errors
 * @since 0.3.0
 */
export class RecorderError extends Schema.TaggedError<RecorderError>()("RecorderError", {
  directory: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `cannot record runs into ${this.directory}: ${this.detail}`
  }
}

/** A run id as a file name: letters, digits, `-` and `_` kept, every other character escaped. */
export const fileName = (runId: string): string => {
  const escaped = Array.from(runId, (c) =>
    /[A-Za-z0-9_-]/.test(c)
      ? c
      : Array.from(new TextEncoder().encode(c), (b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("")
  ).join("")
  // File names are at most 255 bytes: a longer id keeps its start and a digest of the whole.
  return `${escaped.length > 200 ? `${escaped.slice(0, 180)}~${digest(runId)}` : escaped}.jsonl`
}

/** FNV-1a, 32 bits, as hex: enough to tell long ids apart in a directory. */
const digest = (text: string): string => {
  let hash = 0x811c9dc5
  for (const b of new TextEncoder().encode(text)) hash = Math.imul(hash ^ b, 0x01000193) >>> 0
  return hash.toString(16).padStart(8, "0")
}

/**
 * What the writer is given: an event to append, a run gone from this process (ended, taken
 * away, parked: it writes no more here), or a flush to complete once all before it is written.
 */
/** Every option: one the recorder does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options> = { directory: true, content: true, file: true }

type Item =
  | { readonly _tag: "event"; readonly event: Event.Event; readonly writer: string }
  | { readonly _tag: "gone"; readonly runId: string }
  | { readonly _tag: "flush"; readonly done: Deferred.Deferred<void> }

const byteLength = (text: string): number => new TextEncoder().encode(text).length

/** The runs whose tool names a recorder without content keeps while they are away (parked, or gone for good without an ending), at most. */
const keptRuns = 10_000

/**
 * Records every run under it (see the module's description). Needs `FileSystem` and `Path`
 * (`NodeServices.layer` on Node).
 *
 * @category layers
 * @since 0.3.0
 */
export const layer = (options: Options): Layer.Layer<Recorder, RecorderError, FileSystem.FileSystem | Path.Path> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const unknown = OptionKeys.unknownOption(options, knownOptions)
      if (unknown !== undefined)
        return yield* new RecorderError({ directory: String(options.directory), detail: unknown })
      yield* Effect.mapError(
        fs.makeDirectory(options.directory, { recursive: true }),
        (error) => new RecorderError({ directory: options.directory, detail: error.message })
      )
      const given = options.file
      // An `async` file name is none: its Promise is let go, and the path it gives fails as a bad name would.
      const name = given === undefined ? fileName : (runId: string) => UserCode.letGo(given(runId))
      const pathOf = (runId: string) => path.join(options.directory, name(runId))
      // The tools of each run whose `run.started` this recorder saw, until its `run.finished`: a tool
      // name the model made up is content. Kept while the run is away (a park, then a wake in this
      // process: review 151, its made-up names were written), the oldest let go past `keptRuns`.
      const tools = new Map<string, ReadonlySet<string>>()
      const shown = (event: Event.Event): Event.Event => {
        if (options.content !== false) return event
        if (event._tag === "run.started") {
          tools.set(event.runId, new Set(event.tools))
          if (tools.size > keptRuns) tools.delete(tools.keys().next().value ?? "")
        }
        const hidden = withoutContent(event, tools.get(event.runId))
        if (event._tag === "run.finished") tools.delete(event.runId)
        return hidden
      }
      const queue = yield* Queue.unbounded<Item>()

      // A run's file this process has not written to yet (or since the run last left it) may end
      // in a line a crash tore (a run going on after a restart appends to it): cut it off, so
      // that the file stays a recording, its torn line gone and every line after it whole.
      const opened = new Set<string>()
      const repaired = (file: string, runId: string) =>
        Effect.suspend(() => {
          if (opened.has(runId)) return Effect.void
          opened.add(runId)
          return Effect.flatMap(fs.exists(file), (exists) =>
            exists
              ? Effect.flatMap(fs.readFileString(file), (text) =>
                  text === "" || text.endsWith("\n")
                    ? Effect.void
                    : fs.truncate(file, byteLength(text.slice(0, text.lastIndexOf("\n") + 1)))
                )
              : Effect.void
          )
        })

      /**
       * Appends a batch of a run's lines to its file. A write that fails, or a `file` option
       * that throws (or names no file), costs that batch only: it is logged, and the writer
       * goes on with the next (a dead writer would leave every flush, so every run, waiting).
       */
      /**
       * A run that starts (its `run.started`) where a file of its id holds lines already: a
       * run id used again, or a run started again from nothing. The old recording is kept
       * beside it (`<name>.1.jsonl`, the first number free), and the run gets a file of its
       * own: appended, the two read as one run (review 44).
       */
      // The number past the last one each file was set aside under here: a run id used a
      // thousand times looks up one name, not a thousand (review 196: each run took longer).
      const nextAside = new Map<string, number>()
      const setAside = (file: string) =>
        Effect.gen(function* () {
          const exists = yield* fs.exists(file)
          if (!exists || Number((yield* fs.stat(file)).size) === 0) return
          const { dir, name, ext } = path.parse(file)
          let n = nextAside.get(file) ?? 1
          while (yield* fs.exists(path.join(dir, `${name}.${n}${ext}`))) n++
          yield* fs.rename(file, path.join(dir, `${name}.${n}${ext}`))
          nextAside.set(file, n + 1)
        })

      // The runs each file is being written for (from their first event here until they are gone):
      // a file another run still writes to (a `file` option naming one file for several runs, one
      // id run twice at once) is never set aside under it (review 47).
      const writing = new Map<string, Set<string>>()
      const wrote = (file: string, runId: string) => {
        writing.set(file, (writing.get(file) ?? new Set<string>()).add(runId))
      }
      const gone = (runId: string) => {
        for (const [file, runs] of writing) if (runs.delete(runId) && runs.size === 0) writing.delete(file)
      }

      const append = (runId: string, events: ReadonlyArray<Event.Event>, text: ReadonlyArray<string>) =>
        Effect.suspend(() => {
          const file = pathOf(runId)
          const starts = events[0]?._tag === "run.started" && writing.get(file) === undefined
          const ready = starts
            ? Effect.andThen(
                setAside(file),
                Effect.sync(() => opened.add(runId))
              )
            : repaired(file, runId)
          return Effect.andThen(
            ready,
            Effect.andThen(
              fs.writeFileString(file, text.join(""), { flag: "a" }),
              Effect.sync(() => wrote(file, runId))
            )
          )
        }).pipe(
          Effect.catch((error) => Effect.logWarning(`recorder: run ${runId} not recorded: ${error.message}`)),
          Effect.catchDefect((defect) =>
            Effect.logWarning(
              `recorder: ${text.length} events of run ${runId} not recorded: naming its file threw ${Failure.safeDescription(defect)}`
            )
          )
        )

      /** A run's file, or none when naming it throws (its lines are then logged as not recorded). */
      const fileOf = (runId: string): string | undefined => {
        try {
          return pathOf(runId)
        } catch {
          return undefined
        }
      }

      /**
       * Appends what came since the last batch, each run's lines in one write, then marks the
       * runs gone; a run that starts in a file another run of the batch wrote to or left waits
       * for those to be written and marked first (whether the file is set aside depends on
       * them); then completes the flushes.
       */
      const writeBatch = Effect.fnUntraced(function* (items: ReadonlyArray<Item>) {
        const runs = new Map<string, { readonly events: Array<Event.Event>; readonly lines: Array<string> }>()
        const left: Array<string> = []
        // The files the runs waiting in the batch write to or left, each named once a run.
        const files = new Set<string>()
        const named = new Map<string, string | undefined>()
        const fileOfRun = (runId: string) => {
          if (!named.has(runId)) named.set(runId, fileOf(runId))
          return named.get(runId)
        }
        const touches = (runId: string) => {
          const file = fileOfRun(runId)
          if (file !== undefined) files.add(file)
        }
        const settle = Effect.suspend(() => {
          const batch = [...runs]
          const gones = left.splice(0)
          runs.clear()
          files.clear()
          return Effect.andThen(
            Effect.forEach(batch, ([runId, run]) => append(runId, run.events, run.lines), { discard: true }),
            Effect.sync(() => {
              // A run gone is let go (review 130: every id was kept); back, its file is read again,
              // as another process may have written to it, and torn its last line, meanwhile.
              for (const runId of gones) {
                gone(runId)
                opened.delete(runId)
              }
            })
          )
        })
        for (const item of items) {
          if (item._tag === "gone") {
            left.push(item.runId)
            touches(item.runId)
          }
          if (item._tag !== "event") continue
          const text = Recording.line(shown(item.event), item.writer)
          if (text === undefined) {
            yield* Effect.logWarning(`recorder: event ${item.event.seq} of run ${item.event.runId} does not encode`)
            continue
          }
          if (item.event._tag === "run.started") {
            const file = fileOfRun(item.event.runId)
            if (file !== undefined && files.has(file)) yield* settle
          }
          touches(item.event.runId)
          const run = runs.get(item.event.runId) ?? { events: [], lines: [] }
          run.events.push(item.event)
          run.lines.push(text)
          runs.set(item.event.runId, run)
        }
        yield* settle
        for (const item of items) if (item._tag === "flush") yield* Deferred.succeed(item.done, undefined)
      })
      yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.takeAll(queue), writeBatch)))

      /** Waits until everything offered before it is written; at once when the recorder is closed. */
      const flush = Effect.suspend(() => {
        const done = Deferred.makeUnsafe<void>()
        return Queue.offerUnsafe(queue, { _tag: "flush", done }) ? Deferred.await(done) : Effect.void
      })
      // Closing the layer writes what is left, then stops the writer (finalizers run last-added first).
      yield* Effect.addFinalizer(() => Effect.andThen(flush, Queue.shutdown(queue)))

      const observer: RunObserver.Observer = {
        attach: (runId) => {
          // This run in this process, stamped on its lines: a process a resume took the run from
          // may write on into the file, and its lines are told from the resumed run's by it.
          const writer = crypto.randomUUID().replaceAll("-", "").slice(0, 12)
          return {
            event: (event) => {
              Queue.offerUnsafe(queue, { _tag: "event", event, writer })
            },
            settled: Effect.andThen(
              Effect.sync(() => Queue.offerUnsafe(queue, { _tag: "gone", runId })),
              flush
            )
          }
        }
      }
      const existing = yield* RunObserver.RunObservers
      return Context.make(Recorder, { path: pathOf, flush }).pipe(
        Context.add(RunObserver.RunObservers, [...existing, observer])
      )
    })
  )
