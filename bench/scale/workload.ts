/**
 * What the scale benchmark runs: a run whose model makes two lookups (idempotent, no
 * approval), then asks a payment that needs approval at its third iteration, where the run
 * parks. The runner processes and the embedded case register the same definitions.
 */
import { Effect, Schema } from "effect"
import type { DurableRun } from "../../src/durable/index.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"

const lookup = Tool.make({
  name: "lookup",
  description: "Looks an invoice up.",
  input: Schema.Struct({ invoice: Schema.Number }),
  output: Schema.Struct({ amount: Schema.Number }),
  sideEffect: "read",
  idempotent: true,
  handler: ({ invoice }) => Effect.succeed({ amount: invoice * 10 })
})

const pay = Tool.make({
  name: "pay",
  description: "Pays an amount.",
  input: Schema.Struct({ amount: Schema.Number }),
  output: Schema.Struct({ receipt: Schema.String }),
  sideEffect: "external",
  needsApproval: true,
  handler: ({ amount }) => Effect.succeed({ receipt: `r-${amount}` })
})

/** Two lookups, then the payment (the run parks on it), then the answer once approved. */
export const model = ScriptedModel.layerFunction((request) =>
  request.iteration <= 2
    ? ScriptedModel.toolCall("lookup", { invoice: request.iteration })
    : request.iteration === 3
      ? ScriptedModel.toolCall("pay", { amount: 30 })
      : ScriptedModel.finalAnswer("paid")
)

/** The runs' code; the approval waits two days, so nothing expires while the benchmark looks. */
export const definitions = {
  tools: [lookup, pay],
  time: { run: "7 days", approval: "2 days" }
} satisfies DurableRun.Definitions

/** The goal every run is started with. */
export const goal = "pay invoice 1 once its amount is known"
