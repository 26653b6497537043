import { NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as Properties from "../../src/testing/Properties.ts"

/** A case with nothing in it: tests spread their own steps and limits over it. */
export const base: Properties.Case = {
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

/** Runs a case's scenario on the TestClock. */
export const run = (c: Properties.Case) =>
  Effect.gen(function* () {
    const scenario = Properties.toScenario(c)
    const result = yield* Properties.runScenario(scenario)
    return { scenario, result }
  }).pipe(Effect.provide(NodeServices.layer))

export const invariants = (found: ReadonlyArray<Properties.Violation>) => found.map((v) => v.invariant)

/** A call that needs approval, decided (or not) after `afterMillis`. */
export const approval = (
  decision: "approve" | "reject" | "never",
  afterMillis: number,
  rest: Partial<Extract<Properties.ToolOutcome, { _tag: "NeedsApproval" }>> = {}
): Properties.ToolOutcome => ({
  _tag: "NeedsApproval",
  decision,
  afterMillis,
  idempotent: true,
  millis: 0,
  failures: 0,
  ...rest
})

/** The tags of the events naming `callId`, in order. */
export const tagsOf = (result: RunResult.RunResult, callId: string) =>
  result.timeline.flatMap((e) => ("callId" in e && e.callId === callId ? [e._tag] : []))
