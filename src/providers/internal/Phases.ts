/**
 * The time phases of one request (R4.1, R4.2): connect, first byte and idle read, each
 * its own timeout capped by what is left before the request's deadline. When the cap is
 * what binds, the timeout reports the deadline's layer (`attempt`, `step`, `run`).
 */
import { Deferred, Effect, Option } from "effect"
import type * as Failure from "../../failure/Failure.ts"
import * as FailureBoundary from "../../failure/FailureBoundary.ts"
import type * as Model from "../../model/Model.ts"

const source = "provider" as const

/** A phase: the layer reported if it fires, and how long it may last. */
export interface Phase {
  readonly layer: FailureBoundary.TimeoutLayer
  readonly millis: number
}

/** The request's deadline and the time layer it belongs to. */
export interface Deadline {
  readonly at: number
  readonly layer: FailureBoundary.TimeoutLayer
}

export const deadlineOf = (request: Model.Request): Deadline => ({
  at: request.deadlineAt,
  layer: request.deadlineLayer ?? "attempt"
})

/** A phase's own limit, or what is left before the deadline (named by its layer) if that is shorter. */
export const cap = (layer: FailureBoundary.TimeoutLayer, own: number, deadline: Deadline, now: number): Phase => {
  const left = deadline.at - now
  return own <= left ? { layer, millis: own } : { layer: deadline.layer, millis: Math.max(0, Math.floor(left)) }
}

export const timedOut = (phase: Phase) =>
  FailureBoundary.timeout({ source, layer: phase.layer, afterMillis: phase.millis })

/** Fails with the phase's timeout once it passes. */
export const within = <A>(effect: Effect.Effect<A, Failure.Failure>, phase: Phase) =>
  Effect.timeoutOrElse(effect, { duration: phase.millis, orElse: () => Effect.fail(timedOut(phase)) })

const now = Effect.clockWith((clock) => clock.currentTimeMillis)

/**
 * Fails once a phase passes without headers: connect, then first byte. A transport that
 * never reports connections (`started` stays false) gets one wait for both.
 */
export const headersTimer = Effect.fnUntraced(function* (
  limits: { readonly connectMillis: number; readonly firstByteMillis: number },
  deadline: Deadline,
  connected: Deferred.Deferred<void>,
  transport: { started: boolean }
) {
  const connect = cap("connect", limits.connectMillis, deadline, yield* now)
  const reported = yield* Effect.timeoutOption(Deferred.await(connected), connect.millis)
  if (Option.isNone(reported) && transport.started) return yield* timedOut(connect)
  const firstByte = cap("first_byte", limits.firstByteMillis, deadline, yield* now)
  yield* Effect.sleep(firstByte.millis)
  return yield* timedOut(firstByte)
})
