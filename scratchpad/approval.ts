// Approvals (R7), runnable: `npm run example:approval`.
// A payment tool needs a person's approval. The first run is approved and pays once; the
// second is rejected and never pays.
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Schema, Stream } from "effect"
import { Approval, Run, Timeline, Tool } from "effect-agent-runtime"
import { ScriptedModel } from "effect-agent-runtime/testing"

const payments: Array<string> = []

const pay = Tool.make({
  name: "pay",
  description: "Pay an invoice",
  input: Schema.Struct({ invoice: Schema.String, amount: Schema.Finite }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: ({ invoice, amount }, { idempotencyKey }) =>
    Effect.sync(() => {
      payments.push(`${invoice}: ${amount} (key ${idempotencyKey})`)
      return `paid ${amount} for ${invoice}`
    })
})

const model = ScriptedModel.layer([
  ScriptedModel.toolCall("pay", { invoice: "INV-7", amount: 120 }, "call_pay"),
  ScriptedModel.finalAnswer("INV-7 is paid.")
])

/** Starts a run, waits until it asks for approval, shows the request, and lets `decide` answer. */
const runWith = (
  decide: (
    handle: Run.Handle
  ) => Effect.Effect<void, Approval.NotPending | Approval.InvalidDecision | Approval.Unavailable>
) =>
  Effect.gen(function* () {
    const handle = yield* Run.start({
      goal: "Pay invoice INV-7",
      tools: [pay],
      time: { approval: "5 minutes" }
    })
    yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
    const [request] = yield* handle.pendingApprovals
    console.log(
      `waiting for approval: ${request?.tool} ${JSON.stringify(request?.arguments)} (state: ${yield* handle.state})`
    )
    yield* decide(handle)
    return yield* handle.result
  }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(model, NodeServices.layer, Approval.layerMemory)))

const approved = await Effect.runPromise(runWith((handle) => handle.approve("call_pay", { by: "alice" })))
console.log(`\napproved → ${approved.status} (${approved.stopReason}); payments: ${payments.join(", ")}`)
console.log(Timeline.format(approved.timeline))

const rejected = await Effect.runPromise(
  runWith((handle) => handle.reject("call_pay", "duplicate invoice", { by: "bob" }))
)
console.log(`\nrejected → ${rejected.status} (${rejected.stopReason}): ${rejected.detail}`)
console.log(`payments still: ${payments.length}`)
console.log(`model calls in the rejected run: ${rejected.counters.iterations} (the model never saw a guessed decision)`)
