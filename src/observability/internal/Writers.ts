/**
 * Which lines of a recording are the run's (R13, R9.4): a `run.resumed` (a resume going on from
 * its last commit) replaces every event recorded before it from its `seq` on, and a
 * `run.started` (the run started again from nothing, or its id used again) every event before it.
 *
 * A process a resume took the run from may still be going (fenced off, it learns so at its next
 * commit), and its recorder may write on into the file: its late lines go on from the last one
 * the resume replaced, a sequence of their own, and are not the run's (review 166: read as two
 * runs of one id). By their `seq` alone a late line can follow the run's last as well as its
 * writer's (review 168: a process that had run ahead hid the resumed run's ending; review 169:
 * one line taken for the run's handed it the rest). Each reading that gives every line a
 * sequence it follows is kept, a few at most, and the one in which the run has its ending
 * wins, then the one in which its own sequence is longest (the process taken over stops at its
 * next commit, the resumed run goes on), then the one whose lines go most with the line before
 * them (a recorder writes its lines in batches). A
 * line that follows no sequence is the run's when it comes after its last (a batch a recorder
 * lost), else a late one of a writer whose lines were lost. Linear in the lines. Private to
 * `observability/`.
 */
import type * as Event from "../../events/Event.ts"

/** The run's events of one reading, newest first, shared between readings. */
interface Kept {
  readonly event: Event.Event
  readonly before: Kept | undefined
}

interface Reading {
  readonly kept: Kept | undefined
  readonly length: number
  /** The `seq` each replaced writer goes on with; `undefined` before a resume. */
  readonly writers: ReadonlyArray<number> | undefined
  /** Who took the line before: the run, or a replaced writer (its index in `writers`). */
  readonly previous: "run" | number
  /** The count of lines that went with the line before them: a recorder writes its lines in batches. */
  readonly batched: number
}

/** The readings kept at each line, and the replaced writers each follows: enough for the interleavings a take-over makes. */
const mostReadings = 8
const mostWriters = 8

const push = (reading: Reading, event: Event.Event): Reading => ({
  ...reading,
  kept: { event, before: reading.kept },
  length: reading.length + 1,
  previous: "run",
  batched: reading.batched + (reading.previous === "run" ? 1 : 0)
})

/** `reading` with the line taken by writer `writer` of `writers`. */
const withWriters = (reading: Reading, writers: ReadonlyArray<number>, writer: number): Reading => ({
  ...reading,
  writers: writers.length > mostWriters ? writers.slice(-mostWriters) : writers,
  previous: writer,
  batched: reading.batched + (reading.previous === writer ? 1 : 0)
})

/** `reading` with `event`, a `run.resumed` or a `run.started`, and what it replaces. */
const restart = (reading: Reading, event: Event.Event): Reading => {
  let { kept, length } = reading
  let replaced: number | undefined
  while (kept !== undefined && kept.event.seq >= event.seq) {
    replaced ??= kept.event.seq
    kept = kept.before
    length--
  }
  const writers =
    event._tag === "run.started"
      ? undefined
      : [...(reading.writers ?? []), ...(replaced === undefined ? [] : [replaced + 1])].slice(-mostWriters)
  return push({ kept, length, writers, previous: "run", batched: reading.batched }, event)
}

/** The readings of `reading` with one more line, `event`, which is no restart. */
const readingsWith = (reading: Reading, event: Event.Event): ReadonlyArray<Reading> => {
  const writers = reading.writers
  if (writers === undefined) return [push(reading, event)]
  const last = reading.kept?.event
  const next = last === undefined || last._tag === "run.finished" ? undefined : last.seq + 1
  const readings: Array<Reading> = []
  if (event.seq === next) readings.push(push(reading, event))
  writers.forEach((at, i) => {
    if (at === event.seq)
      readings.push(
        withWriters(
          reading,
          writers.map((n, j) => (j === i ? n + 1 : n)),
          i
        )
      )
  })
  // A line past the run's next is also the run's after a batch its recorder lost (review 171).
  if (next !== undefined && event.seq > next) readings.push(push(reading, event))
  if (readings.length > 0) return readings
  return [withWriters(reading, [...writers, event.seq + 1], writers.length)]
}

/** Whether the run of `reading` has its ending. */
const ended = (reading: Reading): boolean => reading.kept?.event._tag === "run.finished"

/**
 * Whether `a` reads better than `b`: the run ended (review 171: a process taken over that wrote
 * more late lines than the run had left took it), then its sequence longer, then more lines
 * with the line before them.
 */
const better = (a: Reading, b: Reading): boolean =>
  ended(a) !== ended(b) ? ended(a) : a.length > b.length || (a.length === b.length && a.batched > b.batched)

/** Where two readings would go on alike: the better is kept. */
const keyOf = (reading: Reading): string => {
  const last = reading.kept?.event
  return `${last?.seq}:${last?._tag === "run.finished"}:${reading.writers?.join(",")}`
}

/** The run's events among `events`, in order. */
export const runEvents = (events: ReadonlyArray<Event.Event>): ReadonlyArray<Event.Event> => {
  let readings: ReadonlyArray<Reading> = [
    { kept: undefined, length: 0, writers: undefined, previous: "run", batched: 0 }
  ]
  for (const event of events) {
    const restarts = event._tag === "run.resumed" || event._tag === "run.started"
    const best = new Map<string, Reading>()
    for (const reading of readings) {
      for (const next of restarts ? [restart(reading, event)] : readingsWith(reading, event)) {
        const key = keyOf(next)
        const known = best.get(key)
        if (known === undefined || better(next, known)) best.set(key, next)
      }
    }
    readings = [...best.values()].sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0)).slice(0, mostReadings)
  }
  const kept: Array<Event.Event> = []
  for (let at = readings[0]?.kept; at !== undefined; at = at.before) kept.push(at.event)
  return kept.reverse()
}
