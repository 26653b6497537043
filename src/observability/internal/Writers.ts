/**
 * Which lines of a recording are the run's (R13, R9.4). A `run.resumed` (a resume going on
 * from its last commit) replaces every event recorded before it from its `seq` on, and a
 * `run.started` (the run started again from nothing, or its id used again) every event
 * before it.
 *
 * A process a resume took the run from may still be going (fenced off, it learns so at its
 * next commit), and its recorder may write on into the file, before the resume's lines and
 * among them: its events up to the resume's `seq` are the run's (committed), those past it
 * are not. By their `seq` alone its lines cannot be told from the resumed run's (reviews 166
 * to 172), so the recorder stamps each line with its writer (`recordedBy`: one a run in a
 * process) and each writer's lines are read as its own sequence. Lines with no stamp (a
 * file written with `Recording.line` alone) are read as one writer's. Private to
 * `observability/`.
 */
import { Result } from "effect"
import type * as Event from "../../events/Event.ts"

/** A line of a recording: its event, and the writer that stamped it. */
export interface Line {
  readonly event: Event.Event
  readonly writer: string | undefined
}

/**
 * What a writer may still add: its lines below `bound` are the run's; `last` is the `seq` of
 * its last line; `startedOver` once a `run.started` of another writer came after its lines.
 */
interface Writer {
  bound: number
  last: number
  startedOver: boolean
}

const twoRuns = (seq: number, after: string) =>
  Result.fail(`event ${seq} follows ${after}: the events of two runs of one id, written at once?`)

/**
 * The run's events among `lines`, in order; or why they are no one run's: a writer's lines go
 * back, or go on after another writer started the run again (two runs of one id written at
 * once, or a file made by hand).
 */
export const runEvents = (lines: ReadonlyArray<Line>): Result.Result<ReadonlyArray<Event.Event>, string> => {
  const kept = new Map<number, Event.Event>()
  const writers = new Map<string | undefined, Writer>()
  for (const { event, writer } of lines) {
    const own = writers.get(writer)
    if (own?.startedOver === true) return twoRuns(event.seq, "another run's start")
    if (event._tag === "run.started" || event._tag === "run.resumed") {
      // Everything before it from its `seq` on is replaced; every other writer is held below it.
      const started = event._tag === "run.started"
      const from = started ? Number.NEGATIVE_INFINITY : event.seq
      for (const seq of kept.keys()) if (seq >= from) kept.delete(seq)
      for (const other of writers.values()) {
        other.bound = Math.min(other.bound, from)
        other.startedOver ||= started
      }
      writers.set(writer, { bound: Number.POSITIVE_INFINITY, last: event.seq, startedOver: false })
      kept.set(event.seq, event)
      continue
    }
    if (own === undefined) {
      // A writer whose first line is no start: a recording of a run its recorder joined late.
      writers.set(writer, { bound: Number.POSITIVE_INFINITY, last: event.seq, startedOver: false })
      kept.set(event.seq, event)
      continue
    }
    // A writer a resume replaced: its lines from the resume's `seq` on were never committed.
    if (event.seq >= own.bound) continue
    if (event.seq <= own.last) return twoRuns(event.seq, `event ${own.last}`)
    own.last = event.seq
    kept.set(event.seq, event)
  }
  return Result.succeed([...kept.values()].sort((a, b) => a.seq - b.seq))
}
