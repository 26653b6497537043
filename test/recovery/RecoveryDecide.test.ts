import { assert, describe, it } from "@effect/vitest"
import * as Failure from "../../src/failure/Failure.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"

const fieldsOf = (fields: { category?: Failure.Category; attempts?: number; retryAfterMillis?: number }) => ({
  source: "tool" as const,
  category: fields.category ?? "transient_http",
  code: fields.category ?? "http_503",
  attempts: fields.attempts ?? 1,
  hint: "the service is unavailable",
  ...(fields.retryAfterMillis === undefined ? {} : { retryAfterMillis: fields.retryAfterMillis })
})

/** A retryable failure; under a circuit's category, the refusal the runtime's breaker makes. */
const retryable = (fields: { category?: Failure.Category; attempts?: number; retryAfterMillis?: number } = {}) =>
  fields.category === "circuit_open" || fields.category === "circuit_half_open"
    ? new Failure.Refusal(fieldsOf(fields))
    : new Failure.Retryable(fieldsOf(fields))

/** The same failure made by a tool or a model of its own: no refusal, whatever its category. */
const forged = (fields: { category?: Failure.Category; attempts?: number; retryAfterMillis?: number }) =>
  new Failure.Retryable(fieldsOf(fields))
const permanent = new Failure.Permanent({
  source: "tool",
  category: "invalid_argument",
  code: "invalid",
  attempts: 1,
  hint: "bad request"
})
const unknown = new Failure.UnknownOutcome({
  source: "tool",
  category: "timeout",
  code: "tool_timeout",
  attempts: 1,
  hint: "cut off"
})

const rules: Recovery.Rules = { maxRecoveries: 8, maxRetries: 3, allowed: true, neverRetried: ["conflict"] }
const facts: Recovery.Facts = {
  failure: retryable(),
  attempt: 1,
  recoveriesSpent: 0,
  nextDelayMillis: 50,
  timeLeft: { millis: 10_000, layer: "run" }
}

/** Each row: what differs from the rules and facts above, and the decision expected. */
const table: ReadonlyArray<{
  readonly name: string
  readonly rules?: Partial<Recovery.Rules>
  readonly facts?: Partial<Recovery.Facts>
  readonly expect: { readonly _tag: "Retry"; readonly delayMillis: number } | Recovery.GiveUp
}> = [
  {
    name: "a retryable failure with time and budget left is retried after the schedule's delay",
    expect: { _tag: "Retry", delayMillis: 50 }
  },
  {
    name: "Retry-After longer than the schedule's delay wins",
    facts: { failure: retryable({ retryAfterMillis: 400 }) },
    expect: { _tag: "Retry", delayMillis: 400 }
  },
  {
    name: "Retry-After shorter than the schedule's delay does not shorten it",
    facts: { failure: retryable({ retryAfterMillis: 10 }) },
    expect: { _tag: "Retry", delayMillis: 50 }
  },
  {
    name: "R2.1 a failure after which the run's policies stopped it (a budget a paid answer spent) is not retried",
    facts: { halted: true },
    expect: "halted"
  },
  {
    name: "R2.1 halted whatever else would say no: the policies' stop is the reason",
    facts: { halted: true, failure: permanent, timeLeft: { millis: 0, layer: "run" } },
    expect: "halted"
  },
  { name: "a permanent failure is never retried", facts: { failure: permanent }, expect: "not_retryable" },
  { name: "an unknown outcome is never retried", facts: { failure: unknown }, expect: "not_retryable" },
  {
    name: "R3.10 a conflict is never retried (a category listed in neverRetried)",
    facts: { failure: retryable({ category: "conflict" }) },
    expect: "not_retryable"
  },
  {
    name: "any category can be listed as never retried",
    rules: { neverRetried: ["transient_http"] },
    expect: "not_retryable"
  },
  {
    name: "R3.4 a failure its owner already retried is not retried again, on any attempt",
    facts: { failure: retryable({ attempts: 3 }), attempt: 2 },
    expect: "owner_retried"
  },
  {
    name: "R3.7 a call that may not be retried (not idempotent) is not",
    rules: { allowed: false },
    expect: "not_allowed"
  },
  {
    name: "R3.9 an open circuit with a fallback hands over at once",
    rules: { handOff: true },
    facts: { failure: retryable({ category: "circuit_open" }) },
    expect: "circuit_open"
  },
  {
    name: "R3.9 an open circuit without a fallback waits until it resumes, spending no retry (review 121)",
    facts: {
      failure: retryable({ category: "circuit_open", retryAfterMillis: 1000 }),
      attempt: 4,
      recoveriesSpent: 8,
      nextDelayMillis: 1000
    },
    expect: { _tag: "Retry", delayMillis: 1000 }
  },
  {
    name: "R3.9 a call refused while another call is the circuit's trial waits, whatever retries are spent (review 121)",
    facts: {
      failure: retryable({ category: "circuit_half_open", retryAfterMillis: 250 }),
      attempt: 4,
      recoveriesSpent: 8,
      nextDelayMillis: 500
    },
    expect: { _tag: "Retry", delayMillis: 500 }
  },
  {
    name: "R3.9 a wait for the circuit's trial past the deadline is the circuit's stop",
    facts: {
      failure: retryable({ category: "circuit_half_open", retryAfterMillis: 250 }),
      nextDelayMillis: 2000,
      timeLeft: { millis: 1000, layer: "step" }
    },
    expect: "circuit_open"
  },
  {
    name: "R3.4 R3.9 a tool's own failure under a circuit's category is no refusal: it spends its retries (review 140)",
    facts: {
      failure: forged({ category: "circuit_half_open", retryAfterMillis: 0 }),
      attempt: 4,
      nextDelayMillis: 0
    },
    expect: "schedule_exhausted"
  },
  {
    name: "R3.4 R3.9 a model's own failure under a circuit's category is no refusal: it spends the run's recoveries (review 140)",
    facts: {
      failure: forged({ category: "circuit_open", retryAfterMillis: 10 }),
      recoveriesSpent: 8,
      nextDelayMillis: 10
    },
    expect: "run_budget"
  },
  {
    name: "R3.7 R3.9 a call that may not be sent twice, refused by its circuit, waits for it: it never ran (review 189)",
    rules: { allowed: false },
    facts: { failure: retryable({ category: "circuit_half_open", retryAfterMillis: 250 }), nextDelayMillis: 250 },
    expect: { _tag: "Retry", delayMillis: 250 }
  },
  {
    name: "R3.8 R3.9 the resend a status query vouched for, refused by an open circuit, waits for it (review 189)",
    rules: { allowed: true, allowedUpTo: 1 },
    facts: {
      failure: retryable({ category: "circuit_open", retryAfterMillis: 1000 }),
      attempt: 2,
      nextDelayMillis: 1000
    },
    expect: { _tag: "Retry", delayMillis: 1000 }
  },
  {
    name: "R3.9 a call refused during another call's trial waits for it, a fallback or not: the trial is over in moments (review 189)",
    rules: { handOff: true },
    facts: { failure: retryable({ category: "circuit_half_open", retryAfterMillis: 250 }), nextDelayMillis: 250 },
    expect: { _tag: "Retry", delayMillis: 250 }
  },
  {
    name: "R3.9 with a fallback, a trial polled twice already hands over (review 191)",
    rules: { handOff: true },
    facts: { failure: retryable({ category: "circuit_half_open", retryAfterMillis: 250 }), nextDelayMillis: 1000 },
    expect: "circuit_open"
  },
  {
    name: "R3.9 an open circuit that resumes within the time left is waited for: 100 ms of 200 (review 189)",
    facts: {
      failure: retryable({ category: "circuit_open", retryAfterMillis: 100 }),
      nextDelayMillis: 100,
      timeLeft: { millis: 200, layer: "run" }
    },
    expect: { _tag: "Retry", delayMillis: 100 }
  },
  {
    name: "R3.9 a circuit open for ever is the circuit's stop at once: there is no time to wait for",
    facts: { failure: retryable({ category: "circuit_open" }) },
    expect: "circuit_open"
  },
  { name: "the episode's own retry limit", facts: { attempt: 4 }, expect: "schedule_exhausted" },
  { name: "the last retry the limit allows", facts: { attempt: 3 }, expect: { _tag: "Retry", delayMillis: 50 } },
  { name: "R3.4 the run's shared budget, spent by other calls", facts: { recoveriesSpent: 8 }, expect: "run_budget" },
  { name: "a schedule with no next delay", facts: { nextDelayMillis: undefined }, expect: "schedule_exhausted" },
  {
    name: "R4.2 a delay that does not fit in the run is not slept",
    facts: { timeLeft: { millis: 50, layer: "run" } },
    expect: "deadline"
  },
  {
    name: "R4.2 a delay that does not fit in the step says so",
    facts: { timeLeft: { millis: 20, layer: "step" } },
    expect: "step_deadline"
  },
  {
    name: "R4.2 nothing left of the step is why, even with the retry limit reached",
    facts: { attempt: 4, timeLeft: { millis: 0, layer: "step" } },
    expect: "step_deadline"
  },
  {
    name: "R4.2 nothing left of the step is why, even when the schedule has no next delay",
    facts: { nextDelayMillis: undefined, timeLeft: { millis: 0, layer: "step" } },
    expect: "step_deadline"
  },
  {
    name: "R4.2 nothing left of the run is why, even with the run's budget spent",
    facts: { recoveriesSpent: 8, timeLeft: { millis: 0, layer: "run" } },
    expect: "deadline"
  },
  {
    name: "a permanent failure is not retried, whatever time is left",
    facts: { failure: permanent, timeLeft: { millis: 0, layer: "step" } },
    expect: "not_retryable"
  },
  {
    name: "a circuit open past the deadline is the circuit's stop",
    facts: {
      failure: retryable({ category: "circuit_open", retryAfterMillis: 5000 }),
      timeLeft: { millis: 1000, layer: "run" }
    },
    expect: "circuit_open"
  }
]

describe("Recovery.decide", () => {
  for (const row of table) {
    it(row.name, () => {
      const decision = Recovery.decide({ ...rules, ...row.rules }, { ...facts, ...row.facts })
      if (typeof row.expect === "string") {
        assert.strictEqual(decision._tag, "GiveUp")
        if (decision._tag === "GiveUp") {
          assert.strictEqual(decision.why, row.expect)
          assert.isAbove(decision.detail.length, 0)
        }
      } else assert.deepStrictEqual(decision, row.expect)
    })
  }

  it("R3.9 a refused call waits for its circuit: an open one until it resumes (review 189), a trial 250 ms doubling to 2 s", () => {
    const halfOpen = retryable({ category: "circuit_half_open", retryAfterMillis: Recovery.trialPollMillis })
    assert.deepStrictEqual(
      [0, 1, 2, 3, 4, 40].map((before) => Recovery.refusalDelay(halfOpen, before)),
      [250, 500, 1000, 2000, 2000, 2000]
    )
    assert.strictEqual(Recovery.refusalDelay(retryable({ category: "circuit_half_open" }), 1), 500)
    // An open circuit's first refusal waits its open time as it is, under the trial's poll too
    // (review 189: floored to 250 ms); one that refuses again is polled as a trial is.
    const open = (retryAfterMillis: number) => retryable({ category: "circuit_open", retryAfterMillis })
    assert.strictEqual(Recovery.refusalDelay(open(700), 0), 700)
    assert.strictEqual(Recovery.refusalDelay(open(100), 0), 100)
    assert.strictEqual(Recovery.refusalDelay(open(100), 1), 250)
    assert.strictEqual(Recovery.refusalDelay(open(700), 3), 1000)
    assert.strictEqual(Recovery.refusalDelay(open(30_000), 3), 30_000)
    assert.isUndefined(Recovery.refusalDelay(retryable({ category: "circuit_open" }), 0))
    assert.isTrue(Recovery.isRefusal(halfOpen))
    assert.isFalse(Recovery.isRefusal(retryable()))
  })

  it("R3.4 R3.9 a refusal of no wait (one made by hand) is polled, the trial's poll doubling: no storm of asks (reviews 141, 189)", () => {
    assert.deepStrictEqual(
      [0, 1, 2, 3].map((before) =>
        Recovery.refusalDelay(retryable({ category: "circuit_half_open", retryAfterMillis: 0 }), before)
      ),
      [250, 500, 1000, 2000]
    )
    // An open circuit that says it resumes at once is asked again in 1 ms, then polled: 250 ms doubling.
    assert.deepStrictEqual(
      [0, 1, 2, 3, 4, 40].map((before) =>
        Recovery.refusalDelay(retryable({ category: "circuit_open", retryAfterMillis: 0 }), before)
      ),
      [1, 250, 500, 1000, 2000, 2000]
    )
    // The same failure, not the breaker's: no refusal at all.
    assert.isFalse(Recovery.isRefusal(forged({ category: "circuit_half_open", retryAfterMillis: 0 })))
  })

  it("the checks come in order: a permanent failure is not_retryable even when every limit is also spent", () => {
    const decision = Recovery.decide(
      { ...rules, allowed: false },
      { ...facts, failure: permanent, recoveriesSpent: 99, nextDelayMillis: undefined }
    )
    assert.deepInclude(decision, { _tag: "GiveUp", why: "not_retryable" })
  })

  it("giving up is recorded after a retry, and on the first attempt only when a limit stopped a retry", () => {
    assert.isFalse(Recovery.recordsGiveUp("not_retryable", 1))
    assert.isFalse(Recovery.recordsGiveUp("not_allowed", 1))
    assert.isTrue(Recovery.recordsGiveUp("not_retryable", 2))
    for (const why of ["schedule_exhausted", "run_budget", "deadline", "step_deadline", "circuit_open"] as const) {
      assert.isTrue(Recovery.recordsGiveUp(why, 1), why)
    }
  })
})
