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

/** Where a body's read stands, for {@link idleWatch}: when bytes last came, and when the answer was whole. */
export interface Reading {
  lastBytesAt: number
  doneAt: number | undefined
}

/** A body read's limits from `now`: the idle-read period, and the whole read's, the deadline's. */
export const idleLimits = (idleMillis: number, deadline: Deadline, now: number) => ({
  idle: cap("idle_read", idleMillis, deadline, now),
  whole: cap(deadline.layer, Number.POSITIVE_INFINITY, deadline, now)
})

/**
 * The timer of a body's read until the answer is whole: it fails once no byte has come for
 * the idle-read period (`idle`), or at the request's deadline (`whole`), whichever is first.
 * Each byte that comes starts the idle period again: a provider that keeps the connection
 * alive while it works (empty lines before a plain answer, comments in a stream) is not idle.
 */
export const idleWatch = (
  reading: Reading,
  limits: { readonly idle: Phase; readonly whole: Phase },
  deadline: Deadline
): Effect.Effect<never, Failure.Retryable> =>
  Effect.clockWith((clock) =>
    Effect.gen(function* () {
      while (reading.doneAt === undefined) {
        const now = clock.currentTimeMillisUnsafe()
        const idleAt = reading.lastBytesAt + limits.idle.millis
        const at = Math.min(idleAt, deadline.at)
        if (Instants.hasPassed(at, now)) return yield* timedOut(deadline.at < idleAt ? limits.whole : limits.idle)
        yield* Effect.sleep(at - now)
      }
      return yield* Effect.never
    })
  )

/** What a transport reported about the request's connection (see `ConnectionProgress.Progress`). */
export interface Connection {
  /** When the connect phase began, by the run's `Clock`; `undefined` for a transport that does not report. */
  startedAt: number | undefined
  /** The request waits for a free connection: its connect phase has not begun. */
  queued: boolean
  /** When it reported the connection, by the run's `Clock`. */
  connectedAt: number | undefined
}

/**
 * Fails once a phase passes without headers: connect (from when it began), then first byte
 * (from the connection). A transport that never reports connections (`startedAt` stays
 * unset) gets one wait for both: connect, then first byte. A request queued for a free
 * connection is bounded by the deadline alone until it leaves the queue. One fiber, no
 * signal: it wakes at the end of a phase, and, while a reporting transport has not
 * connected, at least once per connect or first-byte period, whichever is shorter, so it
 * never misses the end of a phase that began meanwhile.
 */
export const headersTimer = (
  limits: { readonly connectMillis: number; readonly firstByteMillis: number },
  deadline: Deadline,
  connection: Connection
): Effect.Effect<never, Failure.Retryable> =>
  Effect.clockWith((clock) =>
    Effect.gen(function* () {
      const start = deadline.start
      const poll = Math.min(limits.connectMillis, limits.firstByteMillis)
      while (true) {
        const now = clock.currentTimeMillisUnsafe()
        const { connectedAt, startedAt } = connection
        const connect = cap("connect", limits.connectMillis, deadline, startedAt ?? start)
        const connectEnd = (startedAt ?? start) + connect.millis
        let wake: number
        if (connectedAt !== undefined || (startedAt === undefined && Instants.hasPassed(connectEnd, now))) {
          const from = connectedAt ?? connectEnd
          const firstByte = cap("first_byte", limits.firstByteMillis, deadline, from)
          if (Instants.hasPassed(from + firstByte.millis, now)) {
            // One wait for both phases (no connection reported): it says how long it was, all of it.
            return yield* timedOut(
              connectedAt === undefined ? { ...firstByte, reportedMillis: from + firstByte.millis - start } : firstByte
            )
          }
          wake = from + firstByte.millis
        } else if (connection.queued) {
          // Busy, not unreachable: only the deadline bounds the wait for a free connection.
          const queued = cap("connect", Number.POSITIVE_INFINITY, deadline, start)
          if (Instants.hasPassed(start + queued.millis, now)) return yield* timedOut(queued)
          wake = Math.min(start + queued.millis, now + poll)
        } else if (Instants.hasPassed(connectEnd, now)) {
          return yield* timedOut(connect)
        } else {
          wake = startedAt === undefined ? connectEnd : Math.min(connectEnd, now + poll)
        }
        // Until the phase's end (at least a nanosecond off, see `Deadline.hasPassed`); a
        // millisecond's poll when no end is set yet.
        yield* Effect.sleep(wake > now ? wake - now : 1)
      }
    })
  )
