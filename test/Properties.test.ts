import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Event from "../src/Event.ts"
import type * as RunResult from "../src/RunResult.ts"
import * as Properties from "../src/testing/Properties.ts"

/** At least 1,000 generated cases per property; `PROPERTY_RUNS=20000` for a deeper local search. */
const runs = Math.max(1_000, Number(process.env.PROPERTY_RUNS ?? 1_000))
const options = { timeout: 120_000, arbitrary: { runs } }

/** Runs a generated case and returns the violations of the invariants named by `prefixes`. */
const violations = (c: Properties.Case, prefixes: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const scenario = Properties.toScenario(c)
    const result = yield* Properties.runScenario(scenario)
    return Properties.checkScenario(scenario, result).filter((v) => prefixes.some((p) => v.invariant.startsWith(p)))
  }).pipe(Effect.provide(NodeServices.layer))

/** How many generated cases each property evaluated. */
const evaluated = new Map<string, number>()

const holds =
  (name: string, prefixes: ReadonlyArray<string>) =>
  ([c]: readonly [Properties.Case]) =>
    Effect.map(violations(c, prefixes), (found) => {
      evaluated.set(name, (evaluated.get(name) ?? 0) + 1)
      assert.deepStrictEqual(found, [], JSON.stringify(found))
    })

describe("Properties", () => {
  it.effect.prop(
    "R3.4 R3.5 R3.7 R2.3 attempts never exceed the configured budget",
    [Properties.arbitrary],
    holds("budget", ["R3.4", "R3.5", "R3.3 episode", "R3.7", "R2.3"]),
    options
  )

  it.effect.prop(
    "R3.3 R4.1 total time slept never passes the run deadline",
    [Properties.arbitrary],
    holds("deadline", ["R3.3 deadline"]),
    options
  )

  it.effect.prop(
    "R3.1 R3.6 R3.8 permanent, unknown-outcome and permission results are never retried",
    [Properties.arbitrary],
    holds("never retried", ["R3.1", "R3.6", "R3.8"]),
    options
  )

  it.effect.prop(
    "R2.5 R1.2 every run ends with a terminal status and a StopReason from the enumeration",
    [Properties.arbitrary],
    holds("ending", ["R2.5", "R1.2", "R8 timeline"]),
    options
  )

  it.effect.prop(
    "R8 the timeline's counters equal the result's counters",
    [Properties.arbitrary],
    holds("counters", ["R8 counters"]),
    options
  )

  it("R10 each property ran at least 1,000 generated cases", () => {
    assert.deepStrictEqual(
      ["budget", "deadline", "never retried", "ending", "counters"].map((name) => (evaluated.get(name) ?? 0) >= 1_000),
      [true, true, true, true, true],
      JSON.stringify([...evaluated])
    )
  })
})

const base: Properties.Case = {
  steps: [],
  ending: "final_answer",
  runTimeoutSeconds: 60,
  maxRecoveries: 8,
  scheduleRetries: 2,
  toolMaxRetries: 2,
  correctionBudget: 3,
  maxIterations: 10,
  maxToolCalls: 10,
  recoverErrors: true,
  jitter: false,
  seed: 1
}

const run = (c: Properties.Case) =>
  Effect.gen(function* () {
    const scenario = Properties.toScenario(c)
    const result = yield* Properties.runScenario(scenario)
    return { scenario, result }
  }).pipe(Effect.provide(NodeServices.layer))

const invariants = (found: ReadonlyArray<Properties.Violation>) => found.map((v) => v.invariant)

const edit = (result: RunResult.RunResult, timeline: ReadonlyArray<Event.Event>): RunResult.RunResult => ({
  ...result,
  timeline: timeline.map((e, seq) => ({ ...e, seq }))
})

describe("Properties.check catches broken runs", () => {
  it.effect("R3.4 R3.3 a retry past the budget, the schedule or the deadline is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "ServerError" }, { _tag: "RateLimited", retryAfterSeconds: 2 }]
      })
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      assert.include(invariants(Properties.check(result, { ...scenario.budget, maxRecoveries: 1 })), "R3.4 run budget")
      assert.include(invariants(Properties.check(result, { ...scenario.budget, scheduleRetries: 1 })), "R3.3 episode")
      assert.include(
        invariants(Properties.check(result, { ...scenario.budget, runTimeoutMillis: 1_000 })),
        "R3.3 deadline"
      )
    })
  )

  it.effect("R3.1 a retry caused by a permanent failure is reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({ ...base, steps: [{ _tag: "ServerError" }] })
      const doctored = edit(
        result,
        result.timeline.map((e) =>
          e._tag === "model.failed" ? { ...e, failure: { ...e.failure, classification: "permanent" as const } } : e
        )
      )
      assert.include(invariants(Properties.check(doctored, scenario.budget)), "R3.1 never retried")
      const renamed = edit(
        result,
        result.timeline.map((e) => (e._tag === "recovery.started" ? { ...e, cause: "http_400" } : e))
      )
      assert.include(invariants(Properties.check(renamed, scenario.budget)), "R3.1 never retried")
    })
  )

  it.effect("R2.5 R8 a missing or early run.finished and counters off the timeline are reported", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [{ _tag: "Succeeds" }] }]
      })
      const unfinished = edit(result, result.timeline.slice(0, -1))
      assert.include(invariants(Properties.check(unfinished, scenario.budget)), "R2.5 ending")
      const last = result.timeline[result.timeline.length - 1] as Event.Event
      const early = edit(result, [...result.timeline.slice(0, 1), last, ...result.timeline.slice(1)])
      assert.include(invariants(Properties.check(early, scenario.budget)), "R2.5 ending")
      const miscounted = { ...result, counters: { ...result.counters, toolCalls: result.counters.toolCalls + 1 } }
      assert.deepStrictEqual(Properties.check(miscounted, scenario.budget), [
        { invariant: "R8 counters", detail: "toolCalls: the result says 2, the timeline folds to 1" }
      ])
      const unknownReason = { ...result, stopReason: "gave_up" } as unknown as RunResult.RunResult
      assert.include(invariants(Properties.check(unknownReason, scenario.budget)), "R2.5 ending")
    })
  )

  it.effect("R3.8 a payment sent twice under one key is reported by checkScenario", () =>
    Effect.gen(function* () {
      const { scenario, result } = yield* run({
        ...base,
        steps: [{ _tag: "CallTools", calls: [{ _tag: "UnknownOutcome", reconcile: "none" }] }]
      })
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
      const context = { runId: "prop", callId: "c1", idempotencyKey: "prop:c1", settle: () => {} }
      yield* Effect.exit(scenario.tools.pay.tool.handler({ q: "c1" }, context))
      assert.includeMembers(invariants(Properties.checkScenario(scenario, result)), ["R3.8 unknown outcome"])
    })
  )

  it.effect("R2.3 R3.8 a case turns into the script, tools and limits it describes", () =>
    Effect.gen(function* () {
      const scenario = Properties.toScenario({
        ...base,
        steps: [
          { _tag: "RateLimited", retryAfterSeconds: 1 },
          { _tag: "CallTools", calls: [{ _tag: "PermissionDenied" }, { _tag: "InvalidArgument" }] },
          { _tag: "Unauthorized" }
        ],
        ending: "script_exhausted",
        maxRecoveries: 3
      })
      assert.deepStrictEqual([...scenario.plan.keys()], ["c1", "c2"])
      assert.notInclude(scenario.permission.allowTools ?? [], "forbidden")
      assert.strictEqual(scenario.budget.maxRecoveries, 3)
      assert.strictEqual(scenario.budget.toolMaxRetries?.lookup, 2)
      const result = yield* Properties.runScenario(scenario)
      assert.strictEqual(result.stopReason, "model_error")
      assert.deepStrictEqual(scenario.model.calls, [0, 1000, 1000])
      assert.strictEqual(scenario.tools.forbidden.calls.count, 0)
      assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
    }).pipe(Effect.provide(NodeServices.layer))
  )
})

describe("regressions the properties found", () => {
  it.effect("R3.4 an argument correction must not spend the run's retry budget", () =>
    Effect.gen(function* () {
      // Minimal: one invalid-argument call (a correction), then one 429, with maxRecoveries 1.
      const { scenario, result } = yield* run({
        ...base,
        steps: [
          { _tag: "CallTools", calls: [{ _tag: "InvalidArgument" }] },
          { _tag: "RateLimited", retryAfterSeconds: null }
        ],
        maxRecoveries: 1
      })
      // Today: recovery_exhausted, "the run's recovery budget of 1 retries is spent", after 0 retries.
      assert.strictEqual(result.stopReason, "goal_reached")
      assert.deepStrictEqual(invariants(Properties.check(result, scenario.budget)), [])
    })
  )

  it.effect("R3.8 a batch with an unknown outcome ends unknown_outcome whatever the order of its calls", () =>
    Effect.gen(function* () {
      // Minimal: a failing call that does not recover its errors, then a payment whose answer was lost.
      const { result } = yield* run({
        ...base,
        steps: [
          {
            _tag: "CallTools",
            calls: [{ _tag: "Permanent" }, { _tag: "UnknownOutcome", reconcile: "none" }]
          }
        ],
        recoverErrors: false
      })
      // Today: failed / tool_error, decided by the first call; the payment is only in pendingActions.
      assert.strictEqual(result.stopReason, "unknown_outcome")
      assert.strictEqual(result.status, "unknown_outcome")
    })
  )
})
