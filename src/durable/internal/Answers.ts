/**
 * How an operation of `DurableRuns` gets its store's answer: within a bound, with the store's
 * errors said as the operation's, and, for those that wait, through an outage. Private to
 * `durable/`.
 */
import { Effect, Fiber, Schedule } from "effect"
import { ClusterError } from "effect/cluster"
import type * as JournalError from "../../journal/JournalError.ts"
import { DurableRunError } from "../DurableRuns.ts"

/** The store out of reach, as an operation says it. */
export const storeUnavailable = (runId: string, detail: string) =>
  new DurableRunError({ runId, reason: "unavailable", detail })

/** A store's error as the operation's: out of reach, holding what cannot be read, or refusing. */
export const storeError = (runId: string) => (e: JournalError.JournalError) =>
  new DurableRunError({
    runId,
    reason: e.isRetryable
      ? "unavailable"
      : e.reason._tag === "Corrupt" || e.reason._tag === "Incompatible"
        ? "corrupt"
        : "failed",
    detail: e.message
  })

/** How long one operation waits for its store's answer: a store that does not answer (a hung server) is out of reach. */
const answerMillis = 10_000

/**
 * The store's answer within {@link answerMillis}, else `unavailable`; the engine's storage
 * out of reach (a defect the engine makes of it, `PersistenceError`) is `unavailable` too.
 * The operation runs in a fiber of its own, which is let go at the bound: interrupting a
 * query on a hung server waits for its connection to time out (5 s more).
 */
export const answered =
  (runId: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | DurableRunError, R> =>
    Effect.flatMap(Effect.forkDetach(effect, { startImmediately: true }), (fiber) =>
      Fiber.join(fiber).pipe(
        Effect.onInterrupt(() => Effect.forkDetach(Fiber.interrupt(fiber))),
        Effect.catchDefect((defect) =>
          defect instanceof ClusterError.PersistenceError
            ? Effect.fail(
                new DurableRunError({ runId, reason: "unavailable", detail: `the engine's storage: ${defect.message}` })
              )
            : Effect.die(defect)
        ),
        Effect.timeoutOrElse({
          duration: answerMillis,
          orElse: () =>
            Effect.andThen(
              Effect.forkDetach(Fiber.interrupt(fiber)),
              Effect.fail(
                new DurableRunError({
                  runId,
                  reason: "unavailable",
                  detail: `the store did not answer within ${answerMillis / 1000} s; what was asked may still take effect when it does: try again under the same run id (a start under an id starts once; a decision recorded already is NotPending)`
                })
              )
            )
        })
      )
    )

/** How long an operation that waits (`result`, `watch`) reads a store out of reach again before it gives up. */
const outage = Schedule.max([
  Schedule.min([Schedule.exponential("200 millis", 1.5), Schedule.spaced("5 seconds")]),
  Schedule.during("30 seconds")
])

/** `read`, tried again while the store is out of reach, for up to 30 seconds. */
export const patiently = <A>(read: Effect.Effect<A, DurableRunError>): Effect.Effect<A, DurableRunError> =>
  Effect.retry(read, { while: (e) => e.reason === "unavailable", schedule: outage })
