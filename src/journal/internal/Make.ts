/**
 * The journal's semantics over any {@link Store}: what `append` accepts, how events are
 * encoded (the `Event` schema's JSON codec, one row per event), and how a stored run is
 * read back and checked (format version, sequence without gaps, every row decodes).
 */
import { Clock, Effect, Option, Result, Schema } from "effect"
import * as Event from "../../events/Event.ts"
import * as RunState from "../../events/RunState.ts"
import * as SchemaIssues from "../../failure/SchemaIssues.ts"
import * as JournalError from "../JournalError.ts"
import {
  type Append,
  type ApprovalDecision,
  type ApprovalRequest,
  FORMAT_VERSION,
  type NewRun,
  type Service,
  type Stored
} from "./Models.ts"
import type { ApprovalRow, EventRow, RunRow, Store } from "./Store.ts"

const EventJson = Schema.toCodecJson(Event.Event)
const encodeEvent = Schema.encodeUnknownResult(EventJson)
const decodeEvent = Schema.decodeUnknownResult(EventJson)
const isJson = Schema.is(Schema.Json)
const isState = Schema.is(RunState.State)
const decisions: ReadonlyArray<string> = ["approve", "reject"]

const invalid = (runId: string, detail: string) => JournalError.make(new JournalError.InvalidAppend({ runId, detail }))
const corrupt = (runId: string, detail: string, seq?: number) =>
  JournalError.make(new JournalError.Corrupt({ runId, detail, ...(seq === undefined ? {} : { seq }) }))

/** JSON text of a value that must be JSON; `undefined` when it is not (NaN, a function, a cycle…). */
const jsonText = (value: unknown): string | undefined => (isJson(value) ? JSON.stringify(value) : undefined)

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

const encodeEvents = (
  runId: string,
  append: Append
): Result.Result<ReadonlyArray<EventRow>, JournalError.JournalError> => {
  if (typeof append !== "object" || append === null || !Array.isArray(append.events)) {
    return Result.fail(invalid(runId, "an append is { expectedSeq, events: [...], state, result? }"))
  }
  if (!Number.isSafeInteger(append.expectedSeq) || append.expectedSeq < 0) {
    return Result.fail(invalid(runId, `expectedSeq must be a non-negative integer, got ${append.expectedSeq}`))
  }
  if (!isState(append.state)) return Result.fail(invalid(runId, `unknown run state ${String(append.state)}`))
  const rows: Array<EventRow> = []
  for (const [index, event] of append.events.entries()) {
    const seq = append.expectedSeq + index
    if (typeof event !== "object" || event === null)
      return Result.fail(invalid(runId, `event ${index} is not an event`))
    if (event.seq !== seq) {
      return Result.fail(invalid(runId, `event ${index} has seq ${event.seq}; expected ${seq}`))
    }
    if (event.runId !== runId) return Result.fail(invalid(runId, `event seq ${seq} belongs to run ${event.runId}`))
    const encoded = encodeEvent(event)
    if (Result.isFailure(encoded)) {
      const detail = SchemaIssues.describe(encoded.failure.issue, "event").message
      return Result.fail(invalid(runId, `event seq ${seq} does not encode: ${detail}`))
    }
    rows.push({ seq, tag: event._tag, at: event.at, body: JSON.stringify(encoded.success) })
  }
  return Result.succeed(rows)
}

const decodeEvents = (
  runId: string,
  rows: ReadonlyArray<EventRow>
): Result.Result<ReadonlyArray<Event.Event>, JournalError.JournalError> => {
  const events: Array<Event.Event> = []
  for (const [index, row] of rows.entries()) {
    if (row.seq !== index) return Result.fail(corrupt(runId, `gap in the events: seq ${index} is missing`, index))
    const json = parseJson(row.body)
    if (Result.isFailure(json)) return Result.fail(corrupt(runId, `event body is ${json.failure}`, row.seq))
    const decoded = decodeEvent(json.success)
    if (Result.isFailure(decoded)) {
      const detail = SchemaIssues.describe(decoded.failure.issue, "event").message
      return Result.fail(corrupt(runId, `event body does not decode: ${detail}`, row.seq))
    }
    const event = decoded.success
    if (event.runId !== runId)
      return Result.fail(corrupt(runId, `the row holds an event of run ${event.runId}`, row.seq))
    if (event.seq !== row.seq || event._tag !== row.tag) {
      return Result.fail(
        corrupt(runId, `the row says ${row.tag} #${row.seq}, its body ${event._tag} #${event.seq}`, row.seq)
      )
    }
    events.push(event)
  }
  return Result.succeed(events)
}

const decodeRun = (run: RunRow, rows: ReadonlyArray<EventRow>): Result.Result<Stored, JournalError.JournalError> => {
  const runId = run.runId
  if (!Number.isSafeInteger(run.version) || run.version < 1) {
    return Result.fail(corrupt(runId, `format version ${run.version} is not a version`))
  }
  if (run.version > FORMAT_VERSION) {
    return Result.fail(
      JournalError.make(new JournalError.Incompatible({ runId, version: run.version, supported: FORMAT_VERSION }))
    )
  }
  const header = parseJson(run.header)
  if (Result.isFailure(header) || !isJson(header.success)) return Result.fail(corrupt(runId, "the header is not JSON"))
  if (!isState(run.state)) return Result.fail(corrupt(runId, `unknown run state ${run.state}`))
  const result = run.result === null ? undefined : parseJson(run.result)
  if (result !== undefined && (Result.isFailure(result) || !isJson(result.success))) {
    return Result.fail(corrupt(runId, "the result is not JSON"))
  }
  const events = decodeEvents(runId, rows)
  if (Result.isFailure(events)) return Result.fail(events.failure)
  if (rows.length !== run.nextSeq) {
    return Result.fail(corrupt(runId, `${rows.length} events stored, but next_seq is ${run.nextSeq}`))
  }
  return Result.succeed({
    runId,
    version: run.version,
    header: header.success as Schema.Json,
    state: run.state as RunState.State,
    nextSeq: run.nextSeq,
    events: events.success,
    result: result === undefined ? Option.none() : Option.some(result.success as Schema.Json),
    createdAt: run.createdAt,
    updatedAt: run.updatedAt
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
    arguments: args.success as Schema.Json,
    requestedAt: row.requestedAt,
    expiresAt: row.expiresAt,
    ...(row.sideEffect === null ? {} : { sideEffect: row.sideEffect })
  })
}

const toDecision = (row: ApprovalRow): Option.Option<ApprovalDecision> =>
  row.decision === "approve" || row.decision === "reject"
    ? Option.some({
        runId: row.runId,
        callId: row.callId,
        decision: row.decision,
        ...(row.reason === null ? {} : { reason: row.reason }),
        ...(row.decidedBy === null ? {} : { by: row.decidedBy }),
        at: row.decidedAt ?? 0
      })
    : Option.none()

const isTime = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/** The journal over one backend. */
export const make = (store: Store): Service => ({
  create: Effect.fn("Journal.create")(function* (run: NewRun) {
    const runId = yield* checkRunId(runIdOf(run))
    if (!isState(run.state)) return yield* invalid(runId, `unknown run state ${String(run.state)}`)
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
  append: Effect.fn("Journal.append")(function* (runId: string, append: Append) {
    yield* checkRunId(runId)
    const events = encodeEvents(runId, append)
    if (Result.isFailure(events)) return yield* events.failure
    const result = append.result === undefined ? undefined : jsonText(append.result)
    if (append.result !== undefined && result === undefined) {
      return yield* invalid(runId, "the result is not a JSON value")
    }
    const at = yield* Clock.currentTimeMillis
    yield* store.commit({
      runId,
      expectedSeq: append.expectedSeq,
      events: events.success,
      state: append.state,
      result,
      at
    })
  }),
  read: Effect.fn("Journal.read")(function* (runId: string) {
    const found = yield* store.readRun(yield* checkRunId(runId))
    if (Option.isNone(found)) return Option.none<Stored>()
    const stored = decodeRun(found.value.run, found.value.events)
    if (Result.isFailure(stored)) return yield* stored.failure
    return Option.some(stored.success)
  }),
  unfinished: store.unfinished,
  requestApproval: Effect.fn("Journal.requestApproval")(function* (request: ApprovalRequest) {
    const runId = yield* checkRunId(runIdOf(request))
    if (typeof request.callId !== "string" || request.callId.length === 0) {
      return yield* invalid(runId, "the call id must be a non-empty string")
    }
    if (!isTime(request.requestedAt) || !isTime(request.expiresAt)) {
      return yield* invalid(runId, "requestedAt and expiresAt must be finite epoch milliseconds")
    }
    const args = jsonText(request.arguments)
    if (args === undefined) return yield* invalid(runId, `the arguments of call ${request.callId} are not JSON`)
    const row: ApprovalRow = {
      runId,
      callId: request.callId,
      tool: request.tool,
      arguments: args,
      requestedAt: request.requestedAt,
      expiresAt: request.expiresAt,
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
  pendingApprovals: Effect.fn("Journal.pendingApprovals")(function* (filter) {
    const rows = yield* store.pendingApprovals(filter?.runId)
    const requests: Array<ApprovalRequest> = []
    for (const row of rows) {
      const request = toRequest(row)
      if (Result.isFailure(request)) return yield* request.failure
      requests.push(request.success)
    }
    return requests
  }),
  decide: Effect.fn("Journal.decide")(function* (decision: ApprovalDecision) {
    const runId = yield* checkRunId(runIdOf(decision))
    if (!decisions.includes(decision.decision)) {
      return yield* invalid(runId, `a decision is approve or reject, got ${String(decision.decision)}`)
    }
    if (!isTime(decision.at)) return yield* invalid(runId, "the decision's time must be finite epoch milliseconds")
    yield* store.decide({
      runId,
      callId: decision.callId,
      decision: decision.decision,
      reason: decision.reason ?? null,
      decidedBy: decision.by ?? null,
      decidedAt: decision.at
    })
  }),
  withdraw: Effect.fn("Journal.withdraw")(function* (runId: string, callId: string, at: number) {
    const checked = yield* checkRunId(runId)
    if (!isTime(at)) return yield* invalid(checked, "the withdrawal's time must be finite epoch milliseconds")
    yield* store
      .decide({ runId: checked, callId, decision: "withdrawn", reason: null, decidedBy: null, decidedAt: at })
      .pipe(Effect.catchReason("JournalError", "NotPending", () => Effect.void))
  }),
  decision: Effect.fn("Journal.decision")(function* (runId: string, callId: string) {
    const row = yield* store.approval(yield* checkRunId(runId), callId)
    return Option.flatMap(row, toDecision)
  })
})
