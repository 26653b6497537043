/**
 * The journal's semantics over any {@link Store}: what `append` accepts, how events are
 * encoded (the `Event` schema's JSON codec, one row per commit holding its events), and
 * how a stored run is read back and checked (format version, sequence without gaps, every
 * row decodes).
 */
import { Clock, Effect, Option, Predicate, Result, Schema } from "effect"
import * as Event from "../../events/Event.ts"
import * as RunState from "../../events/RunState.ts"
import * as SchemaIssues from "../../failure/SchemaIssues.ts"
import * as Text from "../../failure/Text.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as JournalError from "../JournalError.ts"
import * as ApprovalRows from "./ApprovalRows.ts"
import * as LiveRuns from "./LiveRuns.ts"
import {
  type Append,
  type ApprovalDecision,
  type ApprovalRequest,
  FORMAT_VERSION,
  type NewRun,
  type ReadOptions,
  type Service,
  type Stored
} from "./Models.ts"
import type { ApprovalRow, CommitRow, RunRow, Store } from "./Store.ts"

const EventJson = Schema.toCodecJson(Event.Event)
const encodeEvent = Schema.encodeUnknownResult(EventJson)
const decodeEvent = Schema.decodeUnknownResult(EventJson)
const isJson = Schema.is(Schema.Json)
const isState = Schema.is(RunState.State)

const invalid = (runId: string, detail: string) => JournalError.make(new JournalError.InvalidAppend({ runId, detail }))
const corrupt = (runId: string, detail: string, seq?: number) =>
  JournalError.make(new JournalError.Corrupt({ runId, detail, ...(seq === undefined ? {} : { seq }) }))

/** `f()`, or `undefined` when the value it walks is nested too deeply for the stack (a `RangeError`). */
const withinStack = <A>(f: () => A): A | undefined => {
  try {
    return f()
  } catch (error) {
    if (error instanceof RangeError) return undefined
    throw error
  }
}

/** JSON text of a value that must be JSON; `undefined` when it is not (NaN, a function, a cycle, too deep…). */
const jsonText = (value: unknown): string | undefined =>
  withinStack(() => (isJson(value) ? JSON.stringify(value) : undefined))

const parseJson = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(`not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
}

/** The `runId` of a request object, which must be one (callers from plain JavaScript may pass anything). */
const runIdOf = (request: unknown): unknown =>
  typeof request === "object" && request !== null && "runId" in request ? request.runId : undefined

const checkRunId = (runId: unknown): Effect.Effect<string, JournalError.JournalError> =>
  typeof runId === "string" && runId.length > 0
    ? Effect.succeed(runId)
    : Effect.fail(invalid(String(runId), "the run id must be a non-empty string"))

/** The events of an append, checked and encoded: the JSON text of the commit row's array. */
const encodeEvents = (runId: string, append: Append): Result.Result<string, JournalError.JournalError> => {
  if (typeof append !== "object" || append === null || !Array.isArray(append.events)) {
    return Result.fail(invalid(runId, "an append is { expectedSeq, events: [...], state, result? }"))
  }
  if (!Number.isSafeInteger(append.expectedSeq) || append.expectedSeq < 0) {
    return Result.fail(invalid(runId, `expectedSeq must be a non-negative integer, got ${append.expectedSeq}`))
  }
  if (append.expectedSeq + append.events.length > maxSeq) {
    return Result.fail(invalid(runId, `a run's log holds at most ${maxSeq} events`))
  }
  if (!isState(append.state)) return Result.fail(invalid(runId, `unknown run state ${UserCode.shown(append.state)}`))
  const encoded: Array<unknown> = []
  for (const [index, event] of append.events.entries()) {
    const seq = append.expectedSeq + index
    if (typeof event !== "object" || event === null)
      return Result.fail(invalid(runId, `event ${index} is not an event`))
    if (event.seq !== seq) {
      return Result.fail(invalid(runId, `event ${index} has seq ${event.seq}; expected ${seq}`))
    }
    if (event.runId !== runId) return Result.fail(invalid(runId, `event seq ${seq} belongs to run ${event.runId}`))
    const json = withinStack(() => encodeEvent(event))
    if (json === undefined) return Result.fail(invalid(runId, `event seq ${seq} is nested too deeply to encode`))
    if (Result.isFailure(json)) {
      const detail = SchemaIssues.describe(json.failure.issue, "event").message
      return Result.fail(invalid(runId, `event seq ${seq} does not encode: ${detail}`))
    }
    encoded.push(json.success)
  }
  const text = withinStack(() => JSON.stringify(encoded))
  return text === undefined
    ? Result.fail(invalid(runId, "the events are nested too deeply to encode"))
    : Result.succeed(text)
}

/** The most events a run's log holds: sequence numbers are 32-bit `INTEGER`s in SQL. */
const maxSeq = 2 ** 31 - 1

/** The events of one commit row, which must continue the log at `next`. */
const decodeCommit = (
  runId: string,
  row: CommitRow,
  next: number,
  into: Array<Event.Event>
): JournalError.JournalError | undefined => {
  if (row.seq !== next) return corrupt(runId, `gap in the events: seq ${next} is missing`, next)
  if (!Number.isSafeInteger(row.count) || row.count < 1) {
    return corrupt(runId, `the commit's row says it holds ${row.count} events`, row.seq)
  }
  if (!Number.isFinite(row.at)) return corrupt(runId, "the commit's time is not a time", row.seq)
  const json = parseJson(row.body)
  if (Result.isFailure(json)) return corrupt(runId, `the commit's body is ${json.failure}`, row.seq)
  const bodies = json.success
  if (!Array.isArray(bodies)) return corrupt(runId, "the commit's body is not an array of events", row.seq)
  if (bodies.length !== row.count) {
    return corrupt(runId, `the commit holds ${bodies.length} events, its row says ${row.count}`, row.seq)
  }
  if (!isState(row.state)) return corrupt(runId, `unknown run state ${row.state}`, row.seq)
  for (const [index, body] of bodies.entries()) {
    const seq = row.seq + index
    const decoded = decodeEvent(body)
    if (Result.isFailure(decoded)) {
      // A kind of event this code does not know: a newer version's, not damage (review 88).
      const tag = Predicate.hasProperty(body, "_tag") ? body._tag : undefined
      if (typeof tag === "string" && !Event.kinds.has(tag)) {
        const eventTag = Text.clip(tag, 80)
        return JournalError.make(
          new JournalError.Incompatible({ runId, version: FORMAT_VERSION, supported: FORMAT_VERSION, eventTag })
        )
      }
      const detail = SchemaIssues.describe(decoded.failure.issue, "event").message
      return corrupt(runId, `event body does not decode: ${detail}`, seq)
    }
    const event = decoded.success
    if (event.runId !== runId) return corrupt(runId, `the row holds an event of run ${event.runId}`, seq)
    if (event.seq !== seq) return corrupt(runId, `the commit's event #${seq} says it is #${event.seq}`, seq)
    into.push(event)
  }
  return undefined
}

/** The run as stored, with its events from `fromSeq` on (the commits begin with the one that holds it). */
const decodeRun = (
  run: RunRow,
  commits: ReadonlyArray<CommitRow>,
  fromSeq: number
): Result.Result<Stored, JournalError.JournalError> => {
  const runId = run.runId
  if (!Number.isSafeInteger(run.version) || run.version < 1) {
    return Result.fail(corrupt(runId, `format version ${run.version} is not a version`))
  }
  if (run.version !== FORMAT_VERSION) {
    return Result.fail(
      JournalError.make(new JournalError.Incompatible({ runId, version: run.version, supported: FORMAT_VERSION }))
    )
  }
  const header = parseJson(run.header)
  if (Result.isFailure(header) || !isJson(header.success)) return Result.fail(corrupt(runId, "the header is not JSON"))
  if (!isState(run.state)) return Result.fail(corrupt(runId, `unknown run state ${run.state}`))
  const events: Array<Event.Event> = []
  const last = commits.at(-1)
  // The first commit read holds `fromSeq`, or ends before it; one that starts after it
  // means no commit starts at or before it: the log's start is missing.
  const first = commits[0]
  let next = first !== undefined && first.seq <= fromSeq ? first.seq : 0
  for (const row of commits) {
    const failed = decodeCommit(runId, row, next, events)
    if (failed !== undefined) return Result.fail(failed)
    next = row.seq + row.count
    if (row !== last && row.result !== null) {
      return Result.fail(corrupt(runId, "a commit before the last holds a result", row.seq))
    }
  }
  // The state, count and result are the last commit's (the run row's until there is one).
  const resultText = last === undefined ? run.result : last.result
  let result = Option.none<Schema.Json>()
  if (resultText !== null) {
    const parsed = parseJson(resultText)
    if (Result.isFailure(parsed) || !isJson(parsed.success)) {
      return Result.fail(corrupt(runId, "the result is not JSON", last?.seq))
    }
    result = Option.some(parsed.success)
  }
  if ((run.result === null) !== Option.isNone(result)) {
    return Result.fail(
      corrupt(
        runId,
        run.result === null
          ? "the last commit holds a result, but the run row says the run has not ended"
          : "the run row says the run ended, but its last commit holds no result",
        last?.seq
      )
    )
  }
  return Result.succeed({
    runId,
    version: run.version,
    header: header.success,
    // Checked: the run row's state by `isState` above, each commit's by `decodeCommit`.
    state: (last?.state ?? run.state) as RunState.State,
    nextSeq: next,
    events: fromSeq === 0 ? events : events.filter((event) => event.seq >= fromSeq),
    result,
    createdAt: run.createdAt,
    updatedAt: last?.at ?? run.updatedAt
  })
}

const toRequest = (row: ApprovalRow): Result.Result<ApprovalRequest, JournalError.JournalError> => {
  const args = parseJson(row.arguments)
  if (Result.isFailure(args) || !isJson(args.success)) {
    return Result.fail(corrupt(row.runId, `the arguments of approval ${row.callId} are not JSON`))
  }
  return Result.succeed({
    runId: row.runId,
    callId: row.callId,
    tool: row.tool,
    arguments: args.success,
    requestedAt: row.requestedAt,
    expiresAt: row.expiresAt,
    ...(row.sideEffect === null ? {} : { sideEffect: row.sideEffect })
  })
}

/** The journal over one backend. */
export const make = (store: Store): Service => ({
  live: LiveRuns.make(),
  create: Effect.fnUntraced(function* (run: NewRun) {
    const runId = yield* checkRunId(runIdOf(run))
    if (!isState(run.state)) return yield* invalid(runId, `unknown run state ${UserCode.shown(run.state)}`)
    const header = jsonText(run.header)
    if (header === undefined) return yield* invalid(runId, "the header is not a JSON value")
    const now = yield* Clock.currentTimeMillis
    yield* store.insertRun({
      runId,
      version: FORMAT_VERSION,
      header,
      state: run.state,
      nextSeq: 0,
      result: null,
      createdAt: now,
      updatedAt: now
    })
  }),
  // Untraced, as every operation here: a span is made even with no tracer installed (the
  // runtime makes none then, R13), and `append` runs at every barrier, two or more per step
  // (its span cost about 5 µs a commit, a tenth of a SQLite step).
  append: Effect.fnUntraced(function* (runId: string, append: Append) {
    yield* checkRunId(runId)
    const body = encodeEvents(runId, append)
    if (Result.isFailure(body)) return yield* body.failure
    const result = append.result === undefined ? null : jsonText(append.result)
    if (result === undefined) return yield* invalid(runId, "the result is not a JSON value")
    if (result !== null && append.events.length === 0) {
      return yield* invalid(runId, "a result is committed with the run's last events (run.finished), not alone")
    }
    const at = yield* Clock.currentTimeMillis
    yield* store.commit({
      runId,
      row: { seq: append.expectedSeq, count: append.events.length, state: append.state, at, body: body.success, result }
    })
  }),
  read: Effect.fnUntraced(function* (runId: string, options?: ReadOptions) {
    const id = yield* checkRunId(runId)
    // `null` is no default: the value is checked as it came (a caller's JavaScript, a query
    // string), read once (a getter that throws is the caller's, review 89).
    let fromSeq: unknown
    try {
      const given = options?.fromSeq
      fromSeq = given === undefined ? 0 : given
    } catch (defect) {
      return yield* invalid(id, `its options cannot be read (${UserCode.kindOf(defect)} thrown)`)
    }
    if (typeof fromSeq !== "number" || !Number.isSafeInteger(fromSeq) || fromSeq < 0) {
      const given = typeof fromSeq === "number" ? String(fromSeq) : UserCode.kindOf(fromSeq)
      return yield* invalid(id, `fromSeq must be a non-negative integer, not ${given}`)
    }
    // No log reaches past `maxSeq`; SQL's INTEGER does not either.
    const from = Math.min(fromSeq, maxSeq)
    const found = yield* store.readRun(id, from)
    if (Option.isNone(found)) return Option.none<Stored>()
    const stored = decodeRun(found.value.run, found.value.commits, from)
    if (Result.isFailure(stored)) return yield* stored.failure
    return Option.some(stored.success)
  }),
  unfinished: store.unfinished,
  requestApproval: Effect.fnUntraced(function* (request: ApprovalRequest) {
    const runId = yield* checkRunId(runIdOf(request))
    if (typeof request.callId !== "string" || request.callId.length === 0) {
      return yield* invalid(runId, "the call id must be a non-empty string")
    }
    if (!ApprovalRows.isTime(request.requestedAt) || !ApprovalRows.isTime(request.expiresAt)) {
      return yield* invalid(runId, ApprovalRows.timeRule("requestedAt and expiresAt"))
    }
    const args = jsonText(request.arguments)
    if (args === undefined) return yield* invalid(runId, `the arguments of call ${request.callId} are not JSON`)
    const row: ApprovalRow = {
      runId,
      callId: request.callId,
      tool: request.tool,
      arguments: args,
      requestedAt: ApprovalRows.stored(request.requestedAt),
      expiresAt: ApprovalRows.stored(request.expiresAt),
      sideEffect: typeof request.sideEffect === "string" ? request.sideEffect : null,
      decision: null,
      reason: null,
      decidedBy: null,
      decidedAt: null
    }
    // A call withdrawn earlier (its run stopped waiting, then resumed) is put up again.
    yield* store
      .insertApproval(row)
      .pipe(
        Effect.catchReason("JournalError", "Conflict", (conflict) =>
          Effect.flatMap(store.reopenApproval(row), (reopened) =>
            reopened ? Effect.void : Effect.fail(JournalError.make(conflict))
          )
        )
      )
  }),
  pendingApprovals: Effect.fnUntraced(function* (filter) {
    const rows = yield* store.pendingApprovals(filter?.runId)
    const requests: Array<ApprovalRequest> = []
    for (const row of rows) {
      const request = toRequest(row)
      if (Result.isSuccess(request)) requests.push(request.success)
      // One run's damaged row fails that run's list; the list of every run goes on without it.
      else if (filter?.runId !== undefined) return yield* request.failure
      else
        yield* Effect.logWarning(`the approvals list leaves out a row that cannot be read: ${request.failure.message}`)
    }
    return requests
  }),
  decide: Effect.fnUntraced(function* (decision: ApprovalDecision) {
    const runId = yield* checkRunId(runIdOf(decision))
    const issue = ApprovalRows.decisionIssue(runId, decision)
    if (issue !== undefined) return yield* invalid(runId, issue)
    yield* store.decide({
      runId,
      callId: decision.callId,
      decision: decision.decision,
      reason: decision.reason ?? null,
      decidedBy: decision.by ?? null,
      decidedAt: ApprovalRows.stored(decision.at)
    })
  }),
  withdraw: Effect.fnUntraced(function* (runId: string, callId: string, at: number) {
    const checked = yield* checkRunId(runId)
    if (!ApprovalRows.isTime(at)) return yield* invalid(checked, ApprovalRows.timeRule("the withdrawal's time"))
    yield* store
      .decide({
        runId: checked,
        callId,
        decision: "withdrawn",
        reason: null,
        decidedBy: null,
        decidedAt: ApprovalRows.stored(at)
      })
      .pipe(Effect.catchReason("JournalError", "NotPending", () => Effect.void))
  }),
  decision: Effect.fnUntraced(function* (runId: string, callId: string) {
    const row = yield* store.approval(yield* checkRunId(runId), callId)
    return Option.flatMap(row, ApprovalRows.toDecision)
  })
})
