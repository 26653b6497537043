// The tools this server registers, and the scripted demo model that calls them. A client picks
// tools by these names; it cannot add one, nor give one a file root.
import { Effect, Schema } from "effect"
import { type Model, Tool } from "effect-agent-runtime"
import { ScriptedModel } from "effect-agent-runtime/testing"

const lookupInvoice = Tool.make({
  name: "lookup_invoice",
  description: "Look up an invoice by its number",
  input: Schema.Struct({ invoice: Schema.String }),
  output: Schema.String,
  sideEffect: "read",
  handler: ({ invoice }) => Effect.succeed(`${invoice}: 120 EUR, due`)
})

const payInvoice = Tool.make({
  name: "pay_invoice",
  description: "Pay an invoice (a person approves each payment)",
  input: Schema.Struct({ invoice: Schema.String, amount: Schema.Finite }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: ({ invoice }, { idempotencyKey }) => Effect.succeed(`paid ${invoice} (${idempotencyKey})`)
})

const wait = Tool.make({
  name: "wait",
  description: "Wait for a while (a slow step)",
  input: Schema.Struct({ millis: Schema.Int }),
  output: Schema.String,
  sideEffect: "read",
  handler: ({ millis }) => Effect.as(Effect.sleep(millis), `waited ${millis} ms`)
})

export const tools = [lookupInvoice, payInvoice, wait]

/** What the demo model sends each tool. */
const demoArguments: Record<string, unknown> = {
  lookup_invoice: { invoice: "INV-7" },
  pay_invoice: { invoice: "INV-7", amount: 120 },
  wait: { millis: Number(process.env.DEMO_WAIT_MILLIS ?? 3000) }
}

/**
 * The demo model: calls each tool the run offers once, in order, then answers. It stands in
 * for a real model (set OPENAI_API_KEY) so that the server runs with no account.
 */
export const demoModel = ScriptedModel.layerFunction((request: Model.Request) => {
  const next = request.tools[request.iteration - 1]
  return next === undefined
    ? ScriptedModel.finalAnswer(`Done: ${request.tools.map((t) => t.name).join(", ") || "nothing to do"}.`)
    : ScriptedModel.toolCall(next.name, demoArguments[next.name] ?? {})
})
