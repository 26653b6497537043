/**
 * What a run commits to its journal (R9): its row with its header at the first commit,
 * then its log at the barriers, fenced on the committed count, and its result at the
 * end. Private to the runtime.
 */
import { Effect, Exit, Option, Schema, Semaphore } from "effect"
import * as Event from "../../events/Event.ts"
import type * as Journal from "../../journal/Journal.ts"
import type * as JournalError from "../../journal/JournalError.ts"
import type * as Tool from "../../tools/Tool.ts"
import type * as RunContext from "../internal/RunContext.ts"
import * as RunResult from "../RunResult.ts"
import * as RunHeader from "./internal/RunHeader.ts"

const encodeResult = Schema.encodeUnknownExit(Schema.toCodecJson(RunResult.RunResult))
const isJson = Schema.is(Schema.Json)

/**
 * A result as the journal stores it: JSON. Only a typed `output` can be something JSON is
 * not (a decoded `Date`, a class): the result is then stored without it, so that the run
 * still reads as finished; its final answer, which `output` was decoded from, is kept.
 */
const storable = (result: unknown): Schema.Json | undefined => {
  const full = encodeResult(result)
  if (Exit.isSuccess(full) && isJson(full.value)) return full.value
  if (typeof result !== "object" || result === null || !("output" in result)) return undefined
  const { output: _, ...rest } = result
  const bare = encodeResult(rest)
  return Exit.isSuccess(bare) && isJson(bare.value) ? bare.value : undefined
}
/** A commit's failure as the run reads it: a conflict's detail says whose the run's log is now, whole. */
const commitError = (e: JournalError.JournalError): RunContext.CommitError =>
  e.reason._tag === "Conflict"
    ? { _tag: "Conflict", detail: `another process owns this run now (${e.message})` }
    : { _tag: e.reason._tag === "Unavailable" ? "Unavailable" : "Failed", detail: e.message }

/**
 * A fresh run whose row another start made (a start under an id in use, in this process or
 * another): the run writes nothing, and says so (review 194: it said another process owned it).
 */
const taken = (): RunContext.CommitError => ({
  _tag: "Conflict",
  detail:
    "its id is taken: the journal holds a run under this id already (resume that run with Run.resume, or start this one under another id)"
})

const isConflict = (e: JournalError.JournalError): boolean => e.reason._tag === "Conflict"

const encodeEvent = Schema.encodeUnknownExit(Schema.toCodecJson(Event.Event))

/** An event as the journal writes it: equal texts, equal events. */
const eventText = (event: Event.Event): string | undefined => {
  const encoded = encodeEvent(event)
  return Exit.isSuccess(encoded) ? JSON.stringify(encoded.value) : undefined
}
/** What a commit writes: events from `fromSeq`, the run's state, and its result with its last events. */
interface Batch {
  readonly fromSeq: number
  readonly events: ReadonlyArray<Event.Event>
  readonly state: Journal.Append["state"]
  readonly result: Schema.Json | undefined
}

const appendBatch = (journal: Journal.Service, runId: string, batch: Batch) =>
  journal.append(runId, {
    expectedSeq: batch.fromSeq,
    events: batch.events,
    state: batch.state,
    ...(batch.result === undefined ? {} : { result: batch.result })
  })

/**
 * A conflict, after a try that failed out of reach, that is this run's own earlier writes:
 * tries whose replies were lost wrote what it commits now, or a first part of it (a
 * connection cut after each commit, until the barrier gave up; the next one sends all
 * again). When the journal holds exactly those events after `fromSeq` (and the same result,
 * when one was written), only the rest is committed. Other events are another writer's: the conflict stands (R9).
 */
const committedMeanwhile = (
  journal: Journal.Service,
  runId: string,
  conflict: JournalError.JournalError,
  batch: Batch
): Effect.Effect<void, JournalError.JournalError> =>
  Effect.flatMap(journal.read(runId), (found) => {
    const stored = Option.getOrUndefined(found)
    const written = stored === undefined ? -1 : stored.nextSeq - batch.fromSeq
    if (stored === undefined || written <= 0 || written > batch.events.length) return Effect.fail(conflict)
    for (let i = 0; i < written; i++) {
      const theirs = stored.events[batch.fromSeq + i]
      const ours = batch.events[i]
      if (theirs === undefined || ours === undefined || eventText(theirs) !== eventText(ours))
        return Effect.fail(conflict)
    }
    // All of it written: done, if the result the store holds (when the run ended) is this one.
    if (written === batch.events.length) {
      const theirs = Option.getOrUndefined(stored.result)
      return JSON.stringify(theirs) === JSON.stringify(batch.result) ? Effect.void : Effect.fail(conflict)
    }
    if (Option.isSome(stored.result)) return Effect.fail(conflict)
    return appendBatch(journal, runId, { ...batch, fromSeq: stored.nextSeq, events: batch.events.slice(written) })
  })

/**
 * The result as it is committed. Its timeline is the log committed with it, so it goes in
 * empty (encoding and storing the log twice would cost a 200-step run about as much as
 * all its other commits), and {@link load} puts the log back. A result whose timeline is
 * not exactly that log keeps it.
 */
const withoutLog = (result: unknown, fromSeq: number, events: ReadonlyArray<Event.Event>): unknown => {
  if (typeof result !== "object" || result === null || !("timeline" in result)) return result
  const timeline = result.timeline
  const isLog =
    Array.isArray(timeline) &&
    timeline.length === fromSeq + events.length &&
    (events.length === 0 || timeline[timeline.length - 1] === events[events.length - 1])
  return isLog ? { ...result, timeline: [] } : result
}

/**
 * Where one run commits: its row is created with the header at the first commit (the
 * one that holds `run.started`), then every commit appends, fenced on the committed
 * count; the result goes in encoded, with the last events.
 */
export const sink = (
  journal: Journal.Service,
  runId: string,
  tools: Iterable<Tool.Any<unknown>>,
  /** Whether the run's row is in the journal already (a resumed run). */
  exists: boolean,
  /** The key the run signs a sensitive tool's calls under, kept in its header. */
  secretKey: string
): RunContext.Sink => {
  const prints = RunHeader.fingerprints(tools)
  let created = exists
  // Whether a try of this run's failed out of reach since its last commit that succeeded: its
  // reply may have been lost after the store wrote it. Only then may a conflict be this run's
  // own write; another writer's, even one identical to it, is a conflict (R9).
  let unsure = false
  const settle = <A>(self: Effect.Effect<A, JournalError.JournalError>) =>
    self.pipe(
      Effect.tapError((e) =>
        Effect.sync(() => {
          if (e.reason._tag === "Unavailable") unsure = true
        })
      ),
      Effect.tap(
        Effect.sync(() => {
          unsure = false
        })
      ),
      Effect.mapError(commitError)
    )
  return {
    commits: Semaphore.makeUnsafe(1),
    commit: ({ fromSeq, events, state, result }) =>
      // Chosen when it runs: a commit retried after its row was created only appends.
      Effect.suspend(() => {
        const encoded = result === undefined ? undefined : storable(withoutLog(result, fromSeq, events))
        const batch: Batch = { fromSeq, events, state, result: encoded }
        const append = Effect.catchIf(
          appendBatch(journal, runId, batch),
          (e) => unsure && isConflict(e),
          (conflict) => committedMeanwhile(journal, runId, conflict, batch)
        )
        if (fromSeq > 0 || created) return settle(append)
        const head = RunHeader.make(events[0], prints, secretKey)
        const create = Effect.tap(
          Effect.catchIf(
            journal.create({ runId, header: head, state }),
            (e) => unsure && isConflict(e),
            (conflict) => createdMeanwhile(journal, runId, conflict, head)
          ),
          Effect.sync(() => {
            created = true
          })
        )
        return Effect.catchIf(
          settle(Effect.andThen(create, append)),
          (e) => !created && e._tag === "Conflict",
          () => Effect.fail(taken())
        )
      })
  }
}

/** A conflict on creating the run that is this run's own earlier try: its row, with its header and no commit yet. */
const createdMeanwhile = (
  journal: Journal.Service,
  runId: string,
  conflict: JournalError.JournalError,
  head: Schema.Json
): Effect.Effect<void, JournalError.JournalError> =>
  Effect.flatMap(journal.read(runId), (found) => {
    const stored = Option.getOrUndefined(found)
    return stored !== undefined && stored.nextSeq === 0 && JSON.stringify(stored.header) === JSON.stringify(head)
      ? Effect.void
      : Effect.fail(conflict)
  })
