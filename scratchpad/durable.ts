// Durable runs (R9), runnable: `npm run example:durable`.
// A run on a SQLite journal pays an invoice. Its process is killed (SIGKILL) in the middle
// of the payment tool: the payment went through, its result was never committed. This
// process then recovers the run: the payment service's status query says the payment was
// applied, so it is not sent again, and the run finishes. Both halves of the timeline print.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer, Option, Schema } from "effect"
import { Run, Timeline, Tool } from "effect-agent-runtime"
import { Journal } from "effect-agent-runtime/journal"
import { ScriptedModel } from "effect-agent-runtime/testing"

const [, script = "", role, dir = fs.mkdtempSync(path.join(os.tmpdir(), "durable-demo-"))] = process.argv
const journal = Journal.layerSqlite({ filename: path.join(dir, "journal.db") })
// The payment service's own books: one line per payment, under its idempotency key.
const ledger = path.join(dir, "payments.txt")
const payments = () => (fs.existsSync(ledger) ? fs.readFileSync(ledger, "utf8").split("\n").filter(Boolean) : [])

const pay = Tool.make({
  name: "pay",
  description: "Pay an invoice",
  input: Schema.Struct({ invoice: Schema.String, amount: Schema.Finite }),
  output: Schema.String,
  sideEffect: "external",
  handler: ({ invoice }, { idempotencyKey }) =>
    Effect.gen(function* () {
      fs.appendFileSync(ledger, `${idempotencyKey} ${invoice}\n`)
      console.log("paid") // the parent kills this process now, before the tool returns
      return yield* Effect.never
    }),
  // The status query a resumed run asks instead of paying again blindly (R3.8).
  reconcile: (_, { idempotencyKey }) =>
    Effect.sync(() => {
      const found = payments().find((line) => line.startsWith(`${idempotencyKey} `))
      return found === undefined ? { _tag: "NotApplied" } : { _tag: "Applied", output: `paid (${found})` }
    })
})

const model = ScriptedModel.layerFunction((request) =>
  request.iteration === 1
    ? ScriptedModel.toolCall("pay", { invoice: "INV-7", amount: 120 }, "call_pay")
    : ScriptedModel.finalAnswer("INV-7 is paid.")
)
const layers = Layer.merge(journal, model)

if (role === "child") {
  // The first process: runs until it is killed.
  await Effect.runPromise(
    Run.run({ goal: "Pay invoice INV-7", runId: "run-7", tools: [pay] }).pipe(Effect.provide(layers))
  )
} else {
  const child = spawn(process.execPath, [...process.execArgv, script, "child", dir], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  await new Promise<void>((resolve) => child.stdout.on("data", (chunk) => String(chunk).includes("paid") && resolve()))
  child.kill("SIGKILL")
  await new Promise((resolve) => child.once("exit", resolve))
  console.log(`process ${child.pid} killed with SIGKILL inside the pay tool; payments so far: ${payments().length}\n`)

  const committed = await Effect.runPromise(
    Effect.flatMap(Journal.Journal, (j) => j.read("run-7")).pipe(Effect.provide(journal))
  )
  const before = Option.match(committed, { onNone: () => [], onSome: (run) => run.events })
  const startedAt = before[0]?.at ?? 0
  console.log(`-- what the journal kept (${before.length} events) --`)
  console.log(Timeline.format(before))

  // This process takes over: every unfinished run of the journal goes on.
  const [recovered] = await Effect.runPromise(Run.recover({ tools: [pay] }).pipe(Effect.provide(layers)))
  if (recovered?._tag !== "Success") throw new Error(`not recovered: ${JSON.stringify(recovered)}`)
  const result = recovered.success
  console.log(`\n-- resumed in process ${process.pid} --`)
  console.log(
    result.timeline
      .slice(before.length)
      .map((e) => Timeline.formatEvent(e, startedAt))
      .join("\n")
  )
  console.log(`\nresult: ${result.status} (${result.stopReason}): ${result.finalAnswer}`)
  console.log(`payments made: ${payments().length} (${payments().join(", ")})`)
  fs.rmSync(dir, { recursive: true, force: true })
}
