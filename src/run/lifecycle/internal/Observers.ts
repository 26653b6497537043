/**
 * A run's observers (`RunObserver`): each attached before the run's first event, and what
 * the run awaits of them before it gives its result. Private to the lifecycle.
 */
import { Effect, Predicate } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import type * as RunContext from "../../internal/RunContext.ts"
import type * as RunObserver from "../../RunObserver.ts"
import { withinRealTime } from "./RealTimeBound.ts"

/** The least an observer's `settled` is waited for, whatever the stop grace. */
const minimumSettleMillis = 5_000

/** An observer's attachment to the run, or why it gave none (user code: it may throw, or give what it likes). */
const attachOne = (observer: RunObserver.Observer, runId: string): RunObserver.Attached | string => {
  try {
    // An `async` attach gives a Promise: no attachment, its rejection handled.
    const attached: unknown = UserCode.letGo(observer.attach(runId))
    if (!Predicate.isObject(attached)) return "its attach gave no event function"
    // Each read once, here: a getter that answers once and throws the next time is read no more (review 120).
    const event: unknown = Reflect.get(attached, "event")
    const settled: unknown = Reflect.get(attached, "settled")
    if (!Predicate.isFunction(event)) return "its attach gave no event function"
    if (!Effect.isEffect(settled)) return "its attach gave no settled effect"
    // Checked just above: a function and an effect (what they give is not looked at).
    return { event: event as RunObserver.Attached["event"], settled: settled as RunObserver.Attached["settled"] }
  } catch (error) {
    return `its attach threw ${Failure.describeDefect(error).type}`
  }
}

/**
 * Attaches the run to each observer (`RunObserver`) before its first event: what sees each
 * event, and what the run awaits before it gives its result, for the stop grace at most
 * (in real time, as the grace itself), and at least 5 seconds. An observer cannot break the run it watches: one
 * that gives no attachment is left out (and logged), an event it throws on is dropped, a
 * `settled` that fails is let go.
 */
export const attach = (
  ctx: RunContext.RunContext,
  observers: ReadonlyArray<RunObserver.Observer>,
  graceMillis: number
): Effect.Effect<void> => {
  if (observers.length === 0) return Effect.void
  const settles: Array<Effect.Effect<void>> = []
  for (const observer of observers) {
    const attached = attachOne(observer, ctx.runId)
    if (typeof attached === "string") {
      settles.push(Effect.logWarning(`a run observer was left out of run ${ctx.runId}: ${attached}`))
      continue
    }
    const { event, settled } = attached
    ctx.listeners.push((e) => {
      try {
        UserCode.letGo(event(e))
      } catch {
        // Dropped: the run goes on.
      }
    })
    settles.push(Effect.ignoreCause(settled))
  }
  const all = Effect.forEach(settles, (settle) => settle, { discard: true, concurrency: "unbounded" })
  // A `settled` that cannot be interrupted holds the result no longer than this. A short stop
  // grace is for cancels: a recorder on a slow disk still gets its seconds.
  return withinRealTime(all, Math.max(graceMillis, minimumSettleMillis))
}
