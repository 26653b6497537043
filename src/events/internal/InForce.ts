/**
 * What a run's log says is in force when it goes on (R9): its deadline, its limits, and the
 * attempts of a call the process's stops cut off. Re-exported from `RunLog`.
 */
import type * as Event from "../Event.ts"

/**
 * The run's deadline as its log says it (R9): the closer one the last resume that set one
 * recorded (`run.resumed`'s `deadlineAt`), else its start's; infinite when the log has no
 * start.
 *
 * @category getters
 * @since 0.3.0
 */
export const deadlineOf = (events: ReadonlyArray<Event.Event>): number => {
  let at = Number.POSITIVE_INFINITY
  for (const event of events) {
    if (event._tag === "run.started") at = event.deadlineAt
    else if (event._tag === "run.resumed" && event.deadlineAt !== undefined) at = Math.min(at, event.deadlineAt)
  }
  return at
}

/**
 * The number of attempts of the call `callId` the process's stops cut off, before `seq` (R3.4):
 * the distinct attempts a `run.resumed` found in doubt (several resumes may find the same
 * one, when each process stopped before it ran again). They are no failures of the call.
 *
 * @category getters
 * @since 0.3.0
 */
export const restartsOf = (
  events: ReadonlyArray<Event.Event>,
  callId: string,
  seq = Number.POSITIVE_INFINITY
): number => {
  const cutOff = new Set<number>()
  let attempt: number | undefined
  for (const e of events) {
    if (e.seq >= seq) break
    if (e._tag === "tool.started" && e.callId === callId) attempt = e.attempt
    else if (e._tag === "run.resumed" && attempt !== undefined && e.inDoubt.includes(callId)) cutOff.add(attempt)
  }
  return cutOff.size
}

/**
 * The waits for its circuit the call `callId` made (`recovery.started` with `circuit`: the
 * attempts its circuit refused, which never ran, R3.9), and the half-open ones among the last
 * in a row: a resumed run's episode counts them as the live one did, spending no retry on them
 * (review 142). With `callId` `undefined`, the model's (its `provider_retry` waits), from `fromSeq`
 * on: the episode of the model in use (review 156).
 *
 * @category getters
 * @since 0.3.0
 */
export const refusalsOf = (
  events: ReadonlyArray<Event.Event>,
  callId: string | undefined,
  fromSeq = 0
): { readonly count: number; readonly halfOpenInARow: number } => {
  let count = 0
  let halfOpenInARow = 0
  for (const e of events) {
    if (e.seq < fromSeq || e._tag !== "recovery.started" || e.callId !== callId) continue
    if (callId === undefined && e.kind !== "provider_retry") continue
    if (e.circuit !== undefined) count++
    halfOpenInARow = e.circuit === "half_open" ? halfOpenInARow + 1 : 0
  }
  return { count, halfOpenInARow }
}

/**
 * The limits in force, by name: those `run.started` recorded, with those each resume that
 * went on under others recorded laid over them (its `run.resumed`), but for the run's time limit
 * once a resume brought its deadline closer (`time.run` given to `Run.resume`): then the
 * time from the start to that deadline ({@link deadlineOf}), which the run's elapsed time is
 * measured against. `undefined` when the log has no start.
 *
 * @category getters
 * @since 0.3.0
 */
export const limitsOf = (events: ReadonlyArray<Event.Event>): Readonly<Record<string, number>> | undefined => {
  const started = events.find((e) => e._tag === "run.started")
  if (started?._tag !== "run.started") return undefined
  // A resume that went on under other limits recorded them: in force from then on, over those
  // the run started with (a limit a resume's record lacks is not lifted by it).
  let limits = started.limits
  for (const e of events) {
    if (e._tag === "run.resumed" && e.limits !== undefined) {
      const { runTimeoutMillis: _, ...given } = e.limits
      limits = { ...limits, ...given }
    }
  }
  const deadlineAt = deadlineOf(events)
  return deadlineAt < started.deadlineAt ? { ...limits, runTimeoutMillis: deadlineAt - started.at } : limits
}
