// The handlers of the API: each route is one operation of `DurableRuns`, its errors mapped to
// the API's (not_found → 404, unavailable → 503, NotPending → 409, InvalidRunOptions → 400).
import { Effect, Option, Stream } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Counters, type Event } from "effect-agent-runtime"
import { DurableRun } from "effect-agent-runtime/durable"
import { Viewer } from "effect-agent-runtime/observability"
import {
  AlreadyFinished,
  Api,
  InvalidDecision,
  InvalidStart,
  NotWaiting,
  RunNotFound,
  StoreUnavailable
} from "./Api.ts"

/** A `DurableRunError` as the API's error: an unknown run, or the store out of reach. */
const lookupError = (error: DurableRun.DurableRunError) =>
  error.reason === "not_found"
    ? new RunNotFound({ runId: error.runId })
    : new StoreUnavailable({ detail: error.message, runId: error.runId })

const counters = (events: ReadonlyArray<Event.Event>, waiting: number) => ({
  events: events.length,
  lastSeq: events.at(-1)?.seq ?? -1,
  modelCalls: events.filter((e) => e._tag === "model.requested").length,
  // The calls the model asked for, as the run counts them (a retry is no new call).
  toolCalls: Counters.fold(events).toolCalls,
  waitingApprovals: waiting
})

export const RunsHandlers = HttpApiBuilder.group(
  Api,
  "runs",
  Effect.fn(function* (handlers) {
    const runs = yield* DurableRun.DurableRuns

    return handlers.handleAll({
      // The id is made here when the request names none, so that a start the store did not
      // answer in time can be tried again under it (a start under an id starts once).
      start: ({ payload }) =>
        runs.start({ ...payload, runId: payload.runId ?? crypto.randomUUID() }).pipe(
          Effect.map((runId) => ({ runId })),
          Effect.catchTags({
            InvalidRunOptions: (e) => Effect.fail(new InvalidStart({ field: e.field, message: e.reason })),
            // A run of this id began with another goal: the start would start nothing.
            DurableRunError: (e) =>
              Effect.fail(
                e.reason === "invalid"
                  ? new InvalidStart({ field: "runId", message: e.detail })
                  : new StoreUnavailable({ detail: e.message, runId: e.runId })
              )
          })
        ),

      get: ({ params }) =>
        Effect.gen(function* () {
          const events = yield* runs.events(params.id)
          const result = yield* runs.poll(params.id)
          const waiting = Option.isSome(result) ? [] : yield* runs.pending(params.id)
          return {
            runId: params.id,
            state: Option.isSome(result) ? "finished" : waiting.length > 0 ? "waiting" : "running",
            counters: counters(events, waiting.length),
            ...(Option.isSome(result) ? { result: result.value } : {})
          } as const
        }).pipe(Effect.mapError(lookupError)),

      events: ({ params, headers }) =>
        Effect.gen(function* () {
          // An unknown run is a 404 before the stream starts, not an error event inside it.
          yield* runs.events(params.id)
          const last = headers["last-event-id"]
          const fromSeq = last === undefined || last === "" ? 0 : Number(last) + 1
          return runs.watch(params.id, { fromSeq }).pipe(
            Stream.map((event) => ({ id: String(event.seq), event: event._tag, data: event })),
            Stream.mapError(lookupError)
          )
        }).pipe(Effect.mapError(lookupError)),

      approvals: ({ params }) =>
        Effect.gen(function* () {
          yield* runs.events(params.id) // 404 for an unknown run, not an empty list
          return yield* runs.pending(params.id)
        }).pipe(Effect.mapError(lookupError)),

      decide: ({ params, payload }) => {
        const options = { by: payload.by }
        const decided =
          payload.decision === "approve"
            ? runs.approve(params.id, params.callId, options)
            : runs.reject(params.id, params.callId, payload.reason ?? "rejected", options)
        // An unknown run is a 404, not a call that is not waiting.
        return Effect.andThen(runs.events(params.id), decided).pipe(
          Effect.catchTags({
            NotPending: () => Effect.fail(new NotWaiting({ runId: params.id, callId: params.callId })),
            // The body's schema refuses such text first; the library says so too.
            InvalidDecision: (e) => Effect.fail(new InvalidDecision({ field: e.field, message: e.message })),
            DurableRunError: (e) => Effect.fail(lookupError(e))
          })
        )
      },

      cancel: ({ params }) =>
        Effect.gen(function* () {
          // A cancel of a run that had finished changes nothing: the client is told so.
          if (Option.isSome(yield* runs.poll(params.id))) return yield* new AlreadyFinished({ runId: params.id })
          yield* runs.cancel(params.id)
        }).pipe(Effect.catchTag("DurableRunError", (e) => Effect.fail(lookupError(e)))),

      view: ({ params }) =>
        Effect.gen(function* () {
          const result = yield* runs.poll(params.id)
          if (Option.isSome(result)) return Viewer.html(result.value)
          return Viewer.html(yield* runs.events(params.id))
        }).pipe(Effect.mapError(lookupError))
    })
  })
)
