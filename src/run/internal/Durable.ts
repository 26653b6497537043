/**
 * A run and its journal (R9): what a run commits (its header once, then its log at the
 * barriers, its result at the end), and what a resumed run reads back and checks before
 * it goes on. Private to the runtime; `Run.resume` and `Run.recover` are the public face.
 */
import { Clock, Effect, Exit, Option, Schema, Semaphore } from "effect"
import * as Event from "../../events/Event.ts"
import * as Journal from "../../journal/Journal.ts"
import type * as JournalError from "../../journal/JournalError.ts"
import type * as Tool from "../../tools/Tool.ts"
import { ResumeError } from "../ResumeError.ts"
import { RunId, runIdRule } from "../RunOptions.ts"
import * as RunResult from "../RunResult.ts"
import * as RunOptionsSchema from "./options/RunOptionsSchema.ts"
import type * as RunContext from "./RunContext.ts"
import * as RunHeader from "./RunHeader.ts"

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
const decodeResult = Schema.decodeUnknownExit(Schema.toCodecJson(RunResult.RunResult))

const isRunId = Schema.is(RunId)

const commitError = (e: JournalError.JournalError): RunContext.CommitError => ({
  _tag: e.reason._tag === "Conflict" ? "Conflict" : e.reason._tag === "Unavailable" ? "Unavailable" : "Failed",
  detail: e.message
})

const isConflict = (e: JournalError.JournalError): boolean => e.reason._tag === "Conflict"

const encodeEvent = Schema.encodeUnknownExit(Schema.toCodecJson(Event.Event))

/** An event as the journal writes it: equal texts, equal events. */
const eventText = (event: Event.Event): string | undefined => {
  const encoded = encodeEvent(event)
  return Exit.isSuccess(encoded) ? JSON.stringify(encoded.value) : undefined
}

/**
 * A conflict, after a try that failed out of reach, that is this run's own earlier writes:
 * tries whose replies were lost wrote what it commits now, or a first part of it (a
 * connection cut after each commit, until the barrier gave up; the next one sends all
 * again). When the journal holds exactly those events after `fromSeq` (and the same result,
 * if any), only the rest is committed. Anything else is another writer: the conflict stands (R9).
 */
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
  exists: boolean
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
        const head = RunHeader.make(events[0], prints)
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
        return settle(Effect.andThen(create, append))
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

/**
 * A run as its journal holds it: finished (its result), or open (its log to go on from;
 * `started` is absent when the process died before the first events were committed, and
 * the run starts over under its id, from the header's goal).
 */
export type Loaded =
  | { readonly _tag: "Finished"; readonly result: RunResult.RunResult }
  | {
      readonly _tag: "Open"
      readonly runId: string
      readonly goal: string
      readonly system: string | undefined
      readonly events: ReadonlyArray<Event.Event>
      readonly started: Event.Of<"run.started"> | undefined
      /**
       * When the log has no `run.started` (the process died between creating the run's row
       * and its first commit), the one its header kept: the run starts again under its
       * options and its deadline.
       */
      readonly startedAs?: Event.Of<"run.started"> | undefined
    }

const resumeError = (runId: string, e: JournalError.JournalError): ResumeError =>
  new ResumeError({
    runId,
    // A store that refuses the read for any other reason is out of use for now: resuming later may work.
    reason: e.reason._tag === "Incompatible" ? "incompatible" : e.reason._tag === "Corrupt" ? "corrupt" : "unavailable",
    detail: e.message
  })

/**
 * The result of a finished run as its journal holds it, decoded, with the log put back as
 * its timeline (an empty stored timeline stands for it: every run's log has its
 * `run.started`); `undefined` while the run is not finished.
 */
export const storedResult = (stored: Journal.Stored): Exit.Exit<RunResult.RunResult, unknown> | undefined => {
  if (Option.isNone(stored.result)) return undefined
  return Exit.map(decodeResult(stored.result.value), (result) =>
    result.timeline.length === 0 ? { ...result, timeline: stored.events } : result
  )
}

/**
 * Reads a run back and checks that the code fits its log: every tool it used is there
 * with the same fingerprint, and the model is the same one. A finished run gives its
 * stored result.
 */
export const load = Effect.fnUntraced(function* (
  journal: Journal.Service,
  runId: string,
  tools: Iterable<Tool.Any<unknown>>,
  modelName: string | undefined
) {
  const fail = (reason: ResumeError["reason"], detail: string) =>
    Effect.fail(new ResumeError({ runId, reason, detail }))
  // An id no run can have is no run's: refused before the store is asked (which would say it cannot read it).
  if (!isRunId(runId)) {
    return yield* fail("not_found", `no run can have this id (${runIdRule})`)
  }
  const found = yield* Effect.mapError(journal.read(runId), (e) => resumeError(runId, e))
  if (Option.isNone(found)) return yield* fail("not_found", "the journal has no run of this id")
  const stored = found.value
  const finished = storedResult(stored)
  if (finished !== undefined) {
    if (Exit.isFailure(finished)) return yield* fail("corrupt", "the stored result does not decode")
    const loaded: Loaded = { _tag: "Finished", result: finished.value }
    return loaded
  }
  const started = stored.events[0]
  if (started !== undefined && started._tag !== "run.started") {
    return yield* fail("corrupt", "the log does not begin with run.started")
  }
  const header = RunHeader.decode(stored.header)
  if (Exit.isFailure(header)) return yield* fail("corrupt", "the run's header does not decode")
  const now = RunHeader.fingerprints(tools)
  for (const [name, print] of Object.entries(header.value.tools)) {
    const current = now.get(name)
    if (current === undefined) {
      return yield* fail("incompatible", `the run was started with the tool "${name}", which is not given`)
    }
    if (current !== print) {
      return yield* fail(
        "incompatible",
        `the tool "${name}" changed (its input schema, its side-effect class or whether it needs approval)`
      )
    }
  }
  const model = header.value.model
  if (modelName !== undefined && model !== "" && modelName !== model) {
    return yield* fail("incompatible", `the run used the model ${model}, not ${modelName}`)
  }
  const loaded: Loaded = {
    _tag: "Open",
    runId,
    goal: header.value.goal,
    system: header.value.system,
    events: stored.events,
    started,
    ...(started === undefined ? { startedAs: RunHeader.startedIn(header.value) } : {})
  }
  return loaded
})

/** The journal in the context, if any: a run commits to it when it is there. */
export const journalOf = Journal.Journal

const timeNames = [
  ["step", "stepTimeoutMillis"],
  ["attempt", "attemptTimeoutMillis"],
  ["approval", "approvalTimeoutMillis"],
  ["stopGrace", "stopGraceMillis"]
] as const

/** `recorded`'s entries under `names`, where `given` does not set them. */
const fill = (
  given: object | undefined,
  recorded: Readonly<Record<string, number>>,
  names: ReadonlyArray<readonly [string, string]>
): Record<string, unknown> => {
  const filled: Record<string, unknown> = { ...given }
  for (const [name, key] of names) {
    const value = recorded[key]
    if (filled[name] === undefined && value !== undefined) filled[name] = value
  }
  return filled
}

const recoveryNames = [
  ["maxRecoveries", "maxRecoveries"],
  ["correctionBudget", "correctionBudget"]
] as const

/**
 * The options of a resumed run: what the caller gave, and where it is silent, the limits,
 * step, attempt and approval time limits, recovery counts and concurrency the run started
 * with (its `run.started`), so that a run resumed with only its tools goes on as it began.
 * The run deadline is the log's already (absolute).
 */
export const startedWith = <
  Options extends {
    readonly policies?: unknown
    readonly limits?: object | undefined
    readonly time?: object | undefined
    readonly recovery?: object | undefined
    readonly concurrency?: number | undefined
  }
>(
  options: Options,
  started: Event.Of<"run.started"> | undefined
): Options => {
  const recorded = started?.limits
  if (recorded === undefined) return options
  return {
    ...options,
    // A list of policies given carries its own limits: the recorded ones of the policies
    // the run started with are not theirs.
    limits: fill(
      options.limits,
      recorded,
      (Array.isArray(options.policies) ? RunOptionsSchema.pipelineLimitNames : RunOptionsSchema.limitNames).map(
        (name) => [name, name] as const
      )
    ),
    time: fill(options.time, recorded, timeNames),
    recovery: fill(options.recovery, recorded, recoveryNames),
    concurrency: options.concurrency ?? recorded.concurrency
  }
}

/**
 * Withdraws the calls a finished run left on the approvals table (a cancel while it was
 * parked; a deadline that passed while its process was down, so that it never asked
 * again), once `stored`, the journal's copy of the run, holds its ending: a run fenced off
 * by another process (which owns it now, and may wait on approvals of its own) touches
 * nothing. Best effort: a store out of reach leaves them, listed as pending.
 */
export const withdrawLeftovers = (
  journal: Journal.Service,
  stored: Option.Option<Journal.Stored>
): Effect.Effect<void> =>
  Option.isSome(stored) && Option.isSome(stored.value.result)
    ? Effect.ignore(
        Effect.gen(function* () {
          const runId = stored.value.runId
          const rows = yield* journal.pendingApprovals({ runId })
          const at = yield* Clock.currentTimeMillis
          yield* Effect.forEach(rows, (row) => journal.withdraw(runId, row.callId, at), { discard: true })
        })
      )
    : Effect.void

/**
 * {@link withdrawLeftovers} for every finished run that has a call on the approvals table
 * (what `Run.recover`, which goes over the unfinished runs, would never reach). Best effort,
 * for a few seconds at most.
 */
export const withdrawFinishedLeftovers = (journal: Journal.Service): Effect.Effect<void> =>
  Effect.gen(function* () {
    const rows = yield* journal.pendingApprovals()
    for (const runId of new Set(rows.map((row) => row.runId))) {
      // One run that cannot be read is left for the next time; the others go on.
      yield* Effect.ignoreCause(Effect.flatMap(journal.read(runId), (stored) => withdrawLeftovers(journal, stored)))
    }
  }).pipe(
    // A store that does not answer holds no recovery up.
    Effect.timeout(sweepMillis),
    Effect.ignoreCause
  )

/** How long {@link withdrawFinishedLeftovers} may take. */
const sweepMillis = 5_000
