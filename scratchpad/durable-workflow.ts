// Durable runs on effect's workflow engine (R9, R7), runnable: `npm run example:workflow`.
// A process starts a run that must pay an invoice with a person's approval, and is killed
// (SIGKILL) while the run waits for that approval: the run is parked in the SQLite file,
// holding no memory anywhere. A second process on the same file approves the call; the
// engine wakes the run there, it pays once and finishes. Nothing calls `resume`.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer, Schema } from "effect"
import { Timeline, Tool } from "effect-agent-runtime"
import { DurableRun } from "effect-agent-runtime/durable"
import { ScriptedModel } from "effect-agent-runtime/testing"

const [, script = "", role, dir = fs.mkdtempSync(path.join(os.tmpdir(), "workflow-demo-"))] = process.argv
// The payment service's own books: one line per payment, under its idempotency key.
const ledger = path.join(dir, "payments.txt")

const pay = Tool.make({
  name: "pay",
  description: "Pay an invoice",
  input: Schema.Struct({ invoice: Schema.String, amount: Schema.Finite }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: ({ invoice }, { idempotencyKey }) =>
    Effect.sync(() => {
      fs.appendFileSync(ledger, `${idempotencyKey} ${invoice}\n`)
      return `paid ${invoice}`
    })
})

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1
    ? ScriptedModel.toolCall("pay", { invoice: "INV-9", amount: 980 }, "call_pay")
    : ScriptedModel.finalAnswer("INV-9 is paid.")
)

// The runs' code, the engine and the journal, all on one SQLite file.
const runtime = DurableRun.layer({ tools: [pay] }).pipe(
  Layer.provideMerge(DurableRun.layerEmbedded({ filename: path.join(dir, "runs.db") })),
  Layer.provide(model)
)

/** Waits until the run has a call waiting for approval. */
const waitingCall = (runs: DurableRun.Service, runId: string) =>
  Effect.gen(function* () {
    while (true) {
      const [first] = yield* runs.pending(runId)
      if (first !== undefined) return first
      yield* Effect.sleep(50)
    }
  })

if (role === "child") {
  // The first process: starts the run, says when it waits for approval, then is killed.
  await Effect.runPromise(
    Effect.gen(function* () {
      const runs = yield* DurableRun.DurableRuns
      const runId = yield* runs.start({ goal: "Pay invoice INV-9", runId: "run-9" })
      const call = yield* waitingCall(runs, runId)
      console.log(`waiting ${call.callId} ${call.tool} ${JSON.stringify(call.arguments)}`)
      yield* Effect.never
    }).pipe(Effect.scoped, Effect.provide(runtime))
  )
} else {
  const child = spawn(process.execPath, [...process.execArgv, script, "child", dir], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  const line = await new Promise<string>((resolve) =>
    child.stdout.on("data", (chunk) => String(chunk).startsWith("waiting") && resolve(String(chunk).trim()))
  )
  child.kill("SIGKILL")
  await new Promise((resolve) => child.once("exit", resolve))
  console.log(`process ${child.pid}: ${line}; killed with SIGKILL while the run waited\n`)

  await Effect.runPromise(
    Effect.gen(function* () {
      const runs = yield* DurableRun.DurableRuns
      // Another process, on the same file: the pending call is on the journal's table.
      const [call] = yield* runs.pending("run-9")
      if (call === undefined) throw new Error("no pending call")
      console.log(`process ${process.pid} approves ${call.callId}`)
      yield* runs.approve("run-9", call.callId, { by: "ops@example.com" })
      const result = yield* runs.result("run-9")
      console.log(`\n-- the whole timeline of run-9 --`)
      console.log(Timeline.format(result.timeline))
      const payments = fs.readFileSync(ledger, "utf8").split("\n").filter(Boolean)
      console.log(`\n${result.status} ${result.stopReason}; payments made: ${payments.length} (${payments.join(", ")})`)
    }).pipe(Effect.scoped, Effect.provide(runtime))
  )
  fs.rmSync(dir, { recursive: true, force: true })
  process.exit(0)
}
