/**
 * The failures a circuit breaker hands back for a call it did not run (R3.9): a refusal of
 * an open or half-open circuit (`Failure.Refusal`: it never ran), or a store out of reach.
 * Private to `Breakers`.
 */
import { Duration } from "effect"
import type { CircuitBreaker } from "effect/persistence"
import * as Failure from "../../failure/Failure.ts"
import { trialPollMillis } from "./Refusal.ts"

/** The refusal of a call by the circuit `kind:name`, as effect's breaker reported it. */
export const rejection = (
  kind: "provider" | "tool",
  name: string,
  error: CircuitBreaker.CircuitBreakerError
): Failure.Retryable => {
  const fields = { source: kind, attempts: 1 }
  const reason = error.reason
  switch (reason._tag) {
    case "CircuitOpen": {
      const millis = Math.max(0, Math.ceil(Duration.toMillis(reason.retryAfter)))
      // An open time of forever (`openDuration: Duration.infinity`) has no time to resume: a failure's wait is finite.
      if (!Number.isFinite(millis)) {
        return new Failure.Refusal({
          ...fields,
          category: "circuit_open",
          code: "circuit_open",
          hint: `the ${kind} circuit for ${name} is open, and stays open`
        })
      }
      return new Failure.Refusal({
        ...fields,
        category: "circuit_open",
        code: "circuit_open",
        hint: `the ${kind} circuit for ${name} is open; calls resume in ${millis} ms`,
        retryAfterMillis: millis
      })
    }
    case "CircuitHalfOpen":
      return new Failure.Refusal({
        ...fields,
        category: "circuit_half_open",
        code: "circuit_half_open",
        hint: `the ${kind} circuit for ${name} is half-open while a trial call runs; calls resume when it succeeds`,
        retryAfterMillis: trialPollMillis
      })
    case "CircuitBreakerStoreError":
      return storeFailure(reason.message)
  }
}

// Only reachable when the store cannot be read (`state`); a call is run unrecorded then.
export const storeFailure = (diagnostic: string): Failure.Retryable =>
  new Failure.Retryable({
    source: "store",
    category: "circuit_store",
    code: "circuit_store_unavailable",
    attempts: 1,
    hint: "the circuit breaker store is unavailable",
    diagnostic
  })
