/**
 * Calls a circuit refused (R3.9): they never ran, so waiting for the circuit spends no retry
 * of the call nor of the run. Re-exported from `Recovery`; the poll is `Breakers`' too.
 */
import * as Failure from "../../failure/Failure.ts"

/**
 * How long a call refused while another call is its circuit's trial (`circuit_half_open`)
 * waits before it asks again, the first time: the refusal's `retryAfterMillis`.
 *
 * @category models
 * @since 0.3.0
 */
export const trialPollMillis = 250

/**
 * The longest wait between two asks of a call refused while the trial call runs.
 *
 * @category models
 * @since 0.3.0
 */
export const trialPollCapMillis = 2_000

/**
 * Whether the call's circuit refused it, open or half-open: it never ran (R3.9). Only a
 * `Failure.Refusal` is.
 *
 * @category predicates
 * @since 0.3.0
 */
export const isRefusal = (failure: Failure.Failure): failure is Failure.Refusal =>
  failure instanceof Failure.Refusal &&
  (failure.category === "circuit_open" || failure.category === "circuit_half_open")

/**
 * How long a call its circuit refused waits before it asks again, the episode's schedule
 * left as it is: an open circuit's refusal until its open time ends (its
 * `retryAfterMillis`, 1 ms at least); a half-open one's poll ({@link trialPollMillis} at
 * least). Each is doubled for each refusal of its kind in a row before it (`before`), at most
 * {@link trialPollCapMillis}: a long trial call is not asked about every 250 ms, and a circuit
 * that says it opens at once and refuses again (one made by hand) is no storm of asks (review
 * 141). `undefined` for a circuit open for ever: there is no time to wait for.
 *
 * @category combinators
 * @since 0.3.0
 */
export const refusalDelay = (failure: Failure.Retryable, before: number): number | undefined => {
  // `millis` doubled `times` times, at most the cap (or the refusal's own wait, if longer).
  const doubled = (millis: number, times: number) =>
    Math.min(
      millis * 2 ** Math.min(Math.max(0, times), 16),
      Math.max(trialPollCapMillis, failure.retryAfterMillis ?? 0)
    )
  if (failure.category === "circuit_open") {
    if (failure.retryAfterMillis === undefined) return undefined
    // Its open time as it says, the first time (review 189: floored to 250 ms, a circuit that
    // resumed in 100 ms did not fit in 200 ms left); polled like a trial when it refuses again.
    return before <= 0
      ? Math.max(1, failure.retryAfterMillis)
      : Math.max(failure.retryAfterMillis, doubled(trialPollMillis, before - 1))
  }
  return doubled(Math.max(trialPollMillis, failure.retryAfterMillis ?? 0), before)
}
