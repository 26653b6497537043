/**
 * The time phases of one request (R4.1, R4.2): connect, first byte and idle read, each
 * its own timeout capped by what is left before the request's deadline. When the cap is
 * what binds, the timeout reports the deadline's layer (`attempt`, `step`, `run`).
 */
import { Effect } from "effect"
import type * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import type * as Model from "../../model/Model.ts"
import * as Instants from "../../time/Deadline.ts"

const source = "provider" as const

/**
 * A phase: the layer reported if it fires, how long it may last, and how long its
 * timeout says was waited (R4.3): the phase's own limit, or, when the deadline binds, the
 * whole wait from the request's start (a deadline that fires after the headers came has
 * still been waited for since then).
 */
export interface Phase {
  readonly layer: FailureBoundary.TimeoutLayer
  readonly millis: number
  readonly reportedMillis: number
}

/** The request's deadline, the time layer it belongs to, and when the request started. */
export interface Deadline {
  readonly at: number
  readonly layer: FailureBoundary.TimeoutLayer
  readonly start: number
}

export const deadlineOf = (request: Model.Request, start: number): Deadline => ({
  at: request.deadlineAt,
  layer: request.deadlineLayer ?? "attempt",
  start
})

/** A phase's own limit, or what is left before the deadline (named by its layer) if that is shorter. */
export const cap = (layer: FailureBoundary.TimeoutLayer, own: number, deadline: Deadline, now: number): Phase => {
  const left = deadline.at - now
  return own <= left
    ? { layer, millis: own, reportedMillis: own }
    : { layer: deadline.layer, millis: Math.max(0, left), reportedMillis: Math.max(0, deadline.at - deadline.start) }
}

export const timedOut = (phase: Phase) =>
  FailureBoundary.timeout({
    source,
    layer: phase.layer,
    limitMillis: phase.reportedMillis,
    afterMillis: phase.reportedMillis
  })

/** Fails with the phase's timeout once it passes. */
export const within = <A>(effect: Effect.Effect<A, Failure.Failure>, phase: Phase) =>
  Effect.timeoutOrElse(effect, { duration: phase.millis, orElse: () => Effect.fail(timedOut(phase)) })

/** What a transport reported about the request's connection (see `ConnectionProgress.Progress`). */
export interface Connection {
  /** The transport reports connections (set as the request starts). */
  started: boolean
  /** When it reported the connection, by the run's `Clock`. */
  connectedAt: number | undefined
}

/**
 * Fails once a phase passes without headers: connect (from `start`), then first byte
 * (from the connection). A transport that never reports connections (`started` stays
 * false) gets one wait for both: connect, then first byte. One fiber, no signal: it wakes
 * at the end of a phase, and, while a reporting transport has not connected, at least
 * once per first-byte period, so it never misses the end of the first-byte phase.
 */
export const headersTimer = (
  limits: { readonly connectMillis: number; readonly firstByteMillis: number },
  deadline: Deadline,
  connection: Connection
): Effect.Effect<never, Failure.Retryable> =>
  Effect.clockWith((clock) =>
    Effect.gen(function* () {
      const start = deadline.start
      const connect = cap("connect", limits.connectMillis, deadline, start)
      const connectEnd = start + connect.millis
      while (true) {
        const now = clock.currentTimeMillisUnsafe()
        const connectedAt = connection.connectedAt
        let wake: number
        if (connectedAt !== undefined || (!connection.started && Instants.hasPassed(connectEnd, now))) {
          const from = connectedAt ?? connectEnd
          const firstByte = cap("first_byte", limits.firstByteMillis, deadline, from)
          if (Instants.hasPassed(from + firstByte.millis, now)) {
            // One wait for both phases (no connection reported): it says how long it was, all of it.
            return yield* timedOut(
              connectedAt === undefined ? { ...firstByte, reportedMillis: from + firstByte.millis - start } : firstByte
            )
          }
          wake = from + firstByte.millis
        } else if (Instants.hasPassed(connectEnd, now)) {
          return yield* timedOut(connect)
        } else {
          wake = connection.started ? Math.min(connectEnd, now + limits.firstByteMillis) : connectEnd
        }
        // Until the phase's end (at least a nanosecond off, see `Deadline.hasPassed`); a
        // millisecond's poll when no end is set yet.
        yield* Effect.sleep(wake > now ? wake - now : 1)
      }
    })
  )
