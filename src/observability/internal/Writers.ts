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
 * process) and each writer's lines are read as its own sequence. A writer's first line is its
 * start or its resume: one first seen without it writes on into a file another start set
 * aside its lines from (review 174), and is held as a replaced writer (so is one whose first
 * batch its recorder lost). Lines with no stamp (a file written with `Recording.line` alone)
 * are read as one writer's. Private to `observability/`.
 */
import { Result } from "effect"
import type * as Event from "../../events/Event.ts"

/** A line of a recording: its event, and the writer that stamped it. */
export interface Line {
  readonly event: Event.Event
  readonly writer: string | undefined
}

/** Where a writer stands: its last restart (`-1` for none), its last line's `seq`. */
interface Writer {
  readonly restartedAt: number
  last: number
}

const twoRuns = (seq: number, after: string) =>
  Result.fail(`event ${seq} follows ${after}: the events of two runs of one id, written at once?`)

/** What a line replaces of the lines before it: from its `seq` on for a resume, all for a start. */
const replacesFrom = (event: Event.Event): number =>
  event._tag === "run.started"
    ? Number.NEGATIVE_INFINITY
    : event._tag === "run.resumed"
      ? event.seq
      : Number.POSITIVE_INFINITY

/**
 * The restarts read so far, each with the least `from` of those from it on: the least `from`
 * of the restarts after a line is then one search (the restarts whose `from` a later one
 * undercuts are dropped, so the `from`s rise with the positions).
 */
class Restarts {
  private readonly at: Array<number> = []
  private readonly from: Array<number> = []

  add(position: number, from: number): void {
    while (this.from.length > 0 && (this.from.at(-1) ?? from) >= from) {
      this.at.pop()
      this.from.pop()
    }
    this.at.push(position)
    this.from.push(from)
  }

  /** The least `from` of the restarts read after `position`. */
  leastAfter(position: number): number {
    let low = 0
    let high = this.at.length
    while (low < high) {
      const middle = (low + high) >> 1
      if ((this.at[middle] ?? 0) > position) high = middle
      else low = middle + 1
    }
    return this.from[low] ?? Number.POSITIVE_INFINITY
  }
}

/**
 * The run's events among `lines`, in order; or why they are no one run's: a writer's lines go
 * back, or go on after another writer started the run again (two runs of one id written at
 * once, or a file made by hand). A line is the run's unless a restart after it replaces it,
 * or a restart of another writer before it, since its writer's own last, holds its writer
 * below it (a writer first seen after a restart, whose earlier lines went to a file set
 * aside, is held as well). In `n log n` of the lines, however many resumes and writers.
 */
export const runEvents = (lines: ReadonlyArray<Line>): Result.Result<ReadonlyArray<Event.Event>, string> => {
  // The least `from` of the restarts after each line.
  const laterFrom = new Array<number>(lines.length + 1).fill(Number.POSITIVE_INFINITY)
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]
    laterFrom[i] = Math.min(laterFrom[i + 1] ?? Number.POSITIVE_INFINITY, line ? replacesFrom(line.event) : Infinity)
  }
  const restarts = new Restarts()
  const writers = new Map<string | undefined, Writer>()
  let lastStart = -1
  const kept: Array<Event.Event> = []
  for (const [i, { event, writer }] of lines.entries()) {
    const from = replacesFrom(event)
    const own = writers.get(writer)
    if (from !== Number.POSITIVE_INFINITY) {
      writers.set(writer, { restartedAt: i, last: event.seq })
      restarts.add(i, from)
      if (event._tag === "run.started") lastStart = i
    } else {
      // A writer that started or resumed in this file, going on after another writer started the
      // run again: two runs at once. One that never did (a process whose file a new start set
      // aside, writing on, even between that setting aside and the start: review 176) is held.
      if (own !== undefined && own.restartedAt >= 0 && lastStart > own.restartedAt)
        return twoRuns(event.seq, "another run's start")
      const writing = own ?? { restartedAt: -1, last: Number.NEGATIVE_INFINITY }
      writers.set(writer, writing)
      // Held below a restart of another writer: its lines from there on were never committed.
      if (event.seq >= restarts.leastAfter(writing.restartedAt)) continue
      if (event.seq <= writing.last) return twoRuns(event.seq, `event ${writing.last}`)
      writing.last = event.seq
    }
    if (event.seq < (laterFrom[i + 1] ?? Number.POSITIVE_INFINITY)) kept.push(event)
  }
  kept.sort((a, b) => a.seq - b.seq)
  const twice = kept.findIndex((e, i) => i > 0 && e.seq === kept[i - 1]?.seq)
  return twice < 0 ? Result.succeed(kept) : twoRuns(kept[twice]?.seq ?? 0, `event ${kept[twice]?.seq}`)
}
