/**
 * `checkScenario` of a scenario resumed more than once (R9, R10): each process is held to
 * the retry limits on its own (reviews 175, 176), its uncommitted attempts sent again.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import * as Journal from "../../src/journal/Journal.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as Properties from "../../src/testing/Properties.ts"
import { base } from "../support/properties.ts"

/** The invariants the kit says to check per process of a resumed run: what each model and gate saw. */
const perProcess = (v: Properties.Violation) => v.invariant === "R2.1 paid" || v.invariant === "R7 approvals"

/** The scenario run in a process that dies before its commit `at`, in the journal `store`. */
const dies = (scenario: Properties.Scenario, store: Journal.Service, at: number, resume: boolean) =>
  Effect.gen(function* () {
    const faulty = FaultyJournal.make(store, { crashAt: { commit: at, when: "before" } })
    const run = resume ? Properties.resumeScenario(scenario) : Properties.runScenario(scenario)
    const exit = yield* Effect.exit(run.pipe(Effect.provideService(Journal.Journal, faulty.journal)))
    const died = faulty.crashed() && Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)
    if (died) yield* TestClock.setTime(faulty.crashedAt() ?? 0)
    return died
  })

describe("Properties.checkScenario of a run resumed twice", () => {
  it.effect("R9 R3.1 R3.7 a read sent again by each of three processes, none of which committed it: no alarm", () =>
    Effect.gen(function* () {
      let tried = 0
      for (const step of [{ _tag: "Permanent" }, { _tag: "Retryable", failures: 5, idempotent: true }] as const) {
        const c: Properties.Case = {
          ...base,
          maxIterations: 2,
          maxToolCalls: 3,
          recoverErrors: false,
          scheduleRetries: 4,
          toolMaxRetries: 1,
          seed: 18,
          steps: [{ _tag: "CallTools", calls: [step] }]
        }
        for (const second of [1, 2, 3, 4]) {
          yield* TestClock.setTime(0)
          const store = yield* Effect.provide(Effect.service(Journal.Journal), Journal.layerMemory)
          const first = Properties.toScenario(c)
          if (!(yield* dies(first, store, 3, false))) continue
          const restarted = Properties.restart(first)
          if (!(yield* dies(restarted, store, second, true))) continue
          const third = Properties.restart(restarted)
          const resumed = yield* Properties.resumeScenario(third).pipe(Effect.provideService(Journal.Journal, store))
          if (third.tools.lookup.all.length < 3) continue
          tried++
          // Before: the first two processes' sends held to one limit (R3.1 sent 2 times, R3.7 over its limit).
          assert.deepStrictEqual(
            Properties.checkScenario(third, resumed).filter((v) => !perProcess(v)),
            [],
            `${step._tag}, the second process died before its commit ${second}`
          )
        }
      }
      assert.isAbove(tried, 0)
    }).pipe(Effect.provide(NodeServices.layer))
  )
})
