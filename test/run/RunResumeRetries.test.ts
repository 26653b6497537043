/**
 * A call's retries across the process's stops (R3.4, R3.3, R9): an attempt a stop cut off
 * is no failure of the call, and spends no retry, nor a step of its backoff; a retry's
 * episode run again after two stops is closed when it succeeds (review 113).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1 ? ScriptedModel.toolCall("ship", { box: 1 }, "c1") : ScriptedModel.finalAnswer("shipped")
)
const budget: Properties.Budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2 }

/**
 * An idempotent write (`maxRetries: 2`) refused `failures` times before it applies, run as
 * `r1`, each process dying at its commit in `crashes`, then resumed to its end.
 */
const shipWithCrashes = (crashes: ReadonlyArray<FaultyJournal.Faults["crashAt"]>, failures: number) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(0)
    const store = yield* Journal.Journal
    const ship = FaultyTools.ledgered({
      name: "ship",
      idempotent: true,
      sideEffect: "write",
      behaviour: [...Array<"fail_before_apply">(failures).fill("fail_before_apply"), "apply"],
      maxRetries: 2
    })
    const go = (first: boolean) =>
      first
        ? Run.run({ goal: "ship", runId: "r1", tools: [ship.tool] })
        : Run.resume("r1", { tools: [ship.tool] }, "restart")
    for (const [i, crashAt] of crashes.entries()) {
      const faulty = FaultyJournal.make(store, { crashAt })
      yield* Effect.exit(
        TestClockDriver.drive(go(i === 0).pipe(Effect.provideService(Journal.Journal, faulty.journal)))
      )
      assert.isTrue(faulty.crashed())
      yield* TestClock.setTime(faulty.crashedAt() ?? 0)
    }
    const result = yield* TestClockDriver.drive(go(crashes.length === 0))
    return { result, ship }
  }).pipe(Effect.provide([Journal.layerMemory, model]))

describe("a call's retries across the process's stops (R3.4, R9)", () => {
  it.effect(
    "R3.4 R9 attempts the process's stops cut off spend no retry: the write that succeeds on its third try still does",
    () =>
      Effect.gen(function* () {
        const uncrashed = yield* shipWithCrashes([], 2)
        assert.strictEqual(uncrashed.result.status, "completed")
        // Commit 3 is the first attempt's intent: the process dies there, the handler never ran; the
        // next one dies at its first commit (run.resumed and the attempt run again).
        for (const crashes of [
          [{ commit: 3, when: "after" }],
          [
            { commit: 3, when: "after" },
            { commit: 1, when: "after" }
          ]
        ] as const) {
          const { result, ship } = yield* shipWithCrashes(crashes, 2)
          // Before, each stop spent a retry: failed tool_error after two real tries.
          assert.strictEqual(result.status, "completed", result.detail)
          assert.strictEqual(ship.ledger.total, 1)
          assert.strictEqual(ship.calls.count, 3)
          assert.deepStrictEqual(Properties.check(result, budget), [])
        }
      })
  )

  it.effect("R3.3 R9 a retry cut off by two stops, run again and answered, closes its episode", () =>
    Effect.gen(function* () {
      // Commits: 1 start, 2 response, 3 intent 1, 4 the failure and its retry, 5 intent 2 (the retry).
      const { result } = yield* shipWithCrashes(
        [
          { commit: 5, when: "after" },
          { commit: 1, when: "after" }
        ],
        1
      )
      assert.strictEqual(result.status, "completed", result.detail)
      // Before, no recovery.completed: "the tool_retry episode of seq 9 never closed".
      assert.deepStrictEqual(Properties.check(result, budget), [])
    })
  )
})
