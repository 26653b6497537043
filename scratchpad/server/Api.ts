// The HTTP API over durable runs, as one `HttpApi` definition: the routes, their bodies and
// their errors. The handlers are in Handlers.ts; `GET /openapi.json` is generated from this.
import { Schema } from "effect"
import { Sse } from "effect/encoding"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "effect/http-api"
import { Event, RunResult } from "effect-agent-runtime"

/** No run of this id. */
export class RunNotFound extends Schema.TaggedError<RunNotFound>()(
  "RunNotFound",
  { runId: Schema.String },
  { httpApiStatus: 404 }
) {}

/** The call is not waiting for a decision (decided already, expired, or never asked). */
export class NotWaiting extends Schema.TaggedError<NotWaiting>()(
  "NotWaiting",
  { runId: Schema.String, callId: Schema.String },
  { httpApiStatus: 409 }
) {}

/**
 * The store of runs is out of reach: try again. `runId`, when the request named or made one:
 * what it asked may still take effect, so a start is tried again under that id (it starts once).
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()(
  "StoreUnavailable",
  { detail: Schema.String, runId: Schema.optional(Schema.String) },
  { httpApiStatus: 503 }
) {}

/** A decision whose text no store keeps whole. `field` names it. */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>()(
  "InvalidDecision",
  { field: Schema.String, message: Schema.String },
  { httpApiStatus: 400 }
) {}

/** The run had finished already: the cancel changed nothing. */
export class AlreadyFinished extends Schema.TaggedError<AlreadyFinished>()(
  "AlreadyFinished",
  { runId: Schema.String },
  { httpApiStatus: 409 }
) {}

/** A start the runtime refuses: a bad limit, an unregistered tool. `field` names it. */
export class InvalidStart extends Schema.TaggedError<InvalidStart>()(
  "InvalidStart",
  { field: Schema.String, message: Schema.String },
  { httpApiStatus: 400 }
) {}

export const StartRun = Schema.Struct({
  goal: Schema.NonEmptyString,
  /**
   * The run's id, to start it at most once: a start answered 503 is tried again under the
   * id its error names, or the one given here. Default: a new one.
   */
  runId: Schema.optional(Schema.String),
  /** Names of tools the server registers; default: all of them. */
  tools: Schema.optional(Schema.Array(Schema.String)),
  /** As `Run.Options.limits`, e.g. `{ "maxIterations": 10 }`. */
  limits: Schema.optional(Schema.Record(Schema.String, Schema.Finite)),
  /** As `Run.Options.time`: milliseconds or a duration such as `"2 minutes"`. */
  time: Schema.optional(Schema.Record(Schema.String, Schema.Union([Schema.Finite, Schema.String])))
})

/** Text a store keeps whole: no NUL character (PostgreSQL refuses one, SQLite cuts the text there). */
const StoredText = Schema.String.check(
  Schema.makeFilter((text) => !text.includes("\u0000") || "Expected no NUL character")
)

export const Decision = Schema.Struct({
  decision: Schema.Literals(["approve", "reject"]),
  reason: Schema.optional(StoredText),
  by: Schema.optional(StoredText)
})

/**
 * What `Last-Event-ID` may be: an event's id (its `seq`), or empty / `-1` for none. The
 * stream goes on after it.
 */
export const LastEventId = Schema.String.check(
  Schema.makeFilter((id) => /^(-1|0|[1-9][0-9]{0,14})?$/.test(id) || "Expected an event id: a seq, or -1 for none")
)

export const PendingCall = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  arguments: Schema.Record(Schema.String, Schema.Unknown),
  sideEffect: Schema.String,
  requestedAt: Schema.Finite,
  expiresAt: Schema.Finite
})

export const RunStatus = Schema.Struct({
  runId: Schema.String,
  state: Schema.Literals(["running", "waiting", "finished"]),
  /** What the committed log holds so far. */
  counters: Schema.Struct({
    events: Schema.Int,
    lastSeq: Schema.Int,
    modelCalls: Schema.Int,
    toolCalls: Schema.Int,
    waitingApprovals: Schema.Int
  }),
  result: Schema.optional(RunResult.RunResult)
})

/** One event of the run's timeline: `id` is its `seq`, `event` its tag, `data` the event as JSON. */
export const TimelineEvent = Schema.Struct({
  ...Sse.EventEncoded.fields,
  data: Schema.fromJsonString(Schema.toCodecJson(Event.Event))
})

const runId = { id: Schema.String }
const lookups = [RunNotFound, StoreUnavailable]

export class RunsGroup extends HttpApiGroup.make("runs")
  .add(
    HttpApiEndpoint.post("start", "/runs", {
      payload: StartRun,
      success: Schema.Struct({ runId: Schema.String }).pipe(HttpApiSchema.status(202)),
      error: [InvalidStart, StoreUnavailable]
    }),
    HttpApiEndpoint.get("get", "/runs/:id", { params: runId, success: RunStatus, error: lookups }),
    HttpApiEndpoint.get("events", "/runs/:id/events", {
      params: runId,
      // A reconnecting `EventSource` sends the last id it saw: the stream goes on after it.
      headers: { "last-event-id": Schema.optional(LastEventId) },
      // A store out of reach mid-stream ends it with an error event; the client reconnects.
      success: HttpApiSchema.StreamSse({ events: TimelineEvent, error: Schema.Union(lookups) }),
      error: lookups
    }),
    HttpApiEndpoint.get("approvals", "/runs/:id/approvals", {
      params: runId,
      success: Schema.Array(PendingCall),
      error: lookups
    }),
    HttpApiEndpoint.post("decide", "/runs/:id/approvals/:callId", {
      params: { id: Schema.String, callId: Schema.String },
      payload: Decision,
      success: HttpApiSchema.NoContent,
      error: [...lookups, NotWaiting, InvalidDecision]
    }),
    HttpApiEndpoint.post("cancel", "/runs/:id/cancel", {
      params: runId,
      success: HttpApiSchema.Accepted,
      error: [...lookups, AlreadyFinished]
    }),
    HttpApiEndpoint.get("view", "/runs/:id/view", {
      params: runId,
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/html" })),
      error: lookups
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Runs", description: "Durable agent runs" })) {}

export class Api extends HttpApi.make("runs-api")
  .add(RunsGroup)
  // A body that fails its schema is a 400 problem listing each field and what is wrong with it.
  .middleware(HttpApiMiddleware.ProblemDetails)
  // A request body with a field its schema does not name is refused, as the OpenAPI document says.
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error" })
  .annotateMerge(OpenApi.annotations({ title: "effect-agent-runtime runs" })) {}
