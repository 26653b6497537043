/**
 * Which calls of a batch were taken up, read from its log: the batch takes its calls in
 * call order, `concurrency` at a time, from the phase change that starts it, and each
 * call's result lets the next one in until the run is stopping. Private to `events/`
 * (`RunLog.takenUp`, `RunLog.mayHaveTakenUp`).
 */
import * as Event from "../Event.ts"

/** The phases a batch runs in: the first change into one after a response starts the batch. */
const batchPhases: ReadonlySet<string> = new Set(["tool_executing", "awaiting_approval", "recovering"])

/** A batch's calls as its log leaves them. */
class Schedule {
  /** When each call was taken up. */
  readonly taken = new Map<string, number>()
  /** The calls taken up and not ended. */
  running = new Set<string>()
  readonly ended = new Set<string>()
  /** The next call in order to take up. */
  next = 0
  started = false
  stopping = false

  readonly order: ReadonlyArray<string>
  /** The calls that run at once: the run's concurrency, or the one a resume laid. */
  concurrency: number

  constructor(order: ReadonlyArray<string>, concurrency: number) {
    this.order = order
    this.concurrency = concurrency
  }

  /** Takes up calls in order while there is room. */
  fill(at: number): void {
    while (this.running.size < this.concurrency && this.next < this.order.length) {
      const callId = this.order[this.next++] ?? ""
      if (this.ended.has(callId)) continue
      this.running.add(callId)
      if (!this.taken.has(callId)) this.taken.set(callId, at)
    }
  }

  /** A call ended: its place goes to the next call, unless the run is stopping. */
  end(callId: string, at: number): void {
    this.ended.add(callId)
    if (this.running.delete(callId) && !this.stopping) this.fill(at)
  }
}

/** The schedule at the end of `events`, which begin with the batch's `model.responded`. */
const schedule = (events: ReadonlyArray<Event.Event>, concurrency: number): Schedule | undefined => {
  const asked = events[0]
  if (asked?._tag !== "model.responded") return undefined
  const s = new Schedule(asked.callIds, concurrency)
  for (const e of events) {
    if (e._tag === "run.stopping") s.stopping = true
    if (e._tag === "run.resumed") {
      // The resumed run goes on with the batch, if the process that stopped had begun it, at
      // the concurrency its resume says.
      const resumedAt = e.limits?.concurrency
      if (resumedAt !== undefined && resumedAt >= 1) s.concurrency = resumedAt
      s.stopping = false
      s.running = new Set()
      s.next = 0
      if (s.started || s.taken.size > 0) s.fill(e.at)
      s.started = s.started || s.taken.size > 0
      continue
    }
    if (e._tag === "state.changed" && !s.started && batchPhases.has(e.to)) {
      s.started = true
      s.fill(e.at)
      continue
    }
    const callId = Event.callIdOf(e)
    if (callId === undefined || !s.order.includes(callId)) continue
    if (!s.taken.has(callId)) s.taken.set(callId, e.at)
    // A call's result lets the next one in; an interruption is the batch's (the run is
    // stopping), and the batch takes up nothing more.
    if (e._tag === "tool.interrupted" && e.attempt === 0) s.ended.add(callId)
    if (Event.isResult(e) && !s.ended.has(callId)) s.end(callId, e.at)
  }
  return s
}

export const takenUp = (events: ReadonlyArray<Event.Event>, concurrency: number): ReadonlyMap<string, number> =>
  schedule(events, concurrency)?.taken ?? new Map()

export const inPlace = (events: ReadonlyArray<Event.Event>, concurrency: number): ReadonlySet<string> =>
  schedule(events, concurrency)?.running ?? new Set()

export const mayHaveTakenUp = (
  events: ReadonlyArray<Event.Event>,
  concurrency: number,
  commitsAtOnce: (name: string) => boolean
): ReadonlySet<string> => {
  const s = schedule(events, concurrency)
  if (s === undefined) return new Set()
  const at = events.at(-1)?.at ?? 0
  if (!s.stopping) {
    const asked = events[0]
    const names = new Map(asked?._tag === "model.responded" ? Event.callsOf(asked).map((c) => [c.callId, c.name]) : [])
    const requested = new Set<string>()
    for (const e of events) {
      if (e._tag === "approval.requested") requested.add(e.callId)
      if (e._tag === "approval.decided") requested.delete(e.callId)
    }
    // A call holds its place while the log shows it there: its ending is committed at once
    // when it may act twice, and an approval's decision before the call goes on.
    const holds = (callId: string) => commitsAtOnce(names.get(callId) ?? "") || requested.has(callId)
    let free = [...s.running].filter((callId) => !holds(callId))
    while (free.length > 0) {
      for (const callId of free) s.end(callId, at)
      free = [...s.running].filter((callId) => !holds(callId))
    }
  }
  return new Set(s.taken.keys())
}

export const concurrencyOf = (events: ReadonlyArray<Event.Event>): number => {
  const first = events[0]
  let n = first?._tag === "run.started" ? first.limits?.concurrency : undefined
  // A resume that laid another is in force from then on.
  for (const e of events) if (e._tag === "run.resumed" && e.limits?.concurrency !== undefined) n = e.limits.concurrency
  return n !== undefined && n >= 1 ? n : 1
}
