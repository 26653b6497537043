/**
 * What the processes the crash suites kill share: their marker lines (one a line on
 * stdout, the parent reads them) and the payment tool, not idempotent, booked in the
 * ledger (see ledger.ts).
 */
import * as fs from "node:fs"
import { Effect, Schema } from "effect"
import * as Tool from "../../../src/tools/Tool.ts"
import type * as Ledger from "./ledger.ts"

/**
 * Prints a marker line (synchronously: stdout is a pipe). At the `hold` line the whole
 * process stops, its event loop blocked, so that nothing more happens before the parent's
 * `kill -9` lands.
 */
export const marker = (hold: string | undefined) => {
  const blocker = new Int32Array(new SharedArrayBuffer(4))
  return (...words: ReadonlyArray<string>): void => {
    const line = words.join(" ")
    fs.writeSync(1, `${line}\n`)
    if (line === hold) {
      Atomics.wait(blocker, 0, 0, 60_000)
      process.exit(3) // never killed: the parent gave up
    }
  }
}

const Invoice = Schema.Struct({ invoice: Schema.String, amount: Schema.Number })
const Receipt = Schema.Struct({ receipt: Schema.Number })

export interface PaymentOptions {
  readonly ledger: Ledger.Ledger
  readonly mark: (...words: ReadonlyArray<string>) => void
  /** With a status query that reads the ledger by idempotency key. */
  readonly reconcile: boolean
  readonly needsApproval?: boolean | undefined
  /** How long the service takes before it books the payment. */
  readonly payMillis: number
  /** How long it takes after, before it answers. */
  readonly answerMillis: number
}

/**
 * A payment that is not idempotent: the service books it every time it is sent. Marks
 * `paying <run> <call>` as its handler starts and `paid <run> <call>` once booked.
 */
export const payment = (name: string, options: PaymentOptions) => {
  const { ledger, mark } = options
  return Tool.make({
    name,
    description: "Pays an invoice",
    input: Invoice,
    output: Receipt,
    sideEffect: "external",
    idempotent: false,
    needsApproval: options.needsApproval ?? false,
    handler: (_input, { runId, callId, idempotencyKey }) =>
      Effect.gen(function* () {
        mark("paying", runId, callId)
        yield* Effect.sleep(options.payMillis)
        const booked = ledger.pay({ key: idempotencyKey, runId, callId, tool: name })
        mark("paid", runId, callId)
        yield* Effect.sleep(options.answerMillis)
        return { receipt: booked.n }
      }),
    ...(options.reconcile
      ? {
          reconcile: (_input: typeof Invoice.Type, { idempotencyKey }: Tool.CallContext) =>
            Effect.sync((): Tool.Reconciliation<typeof Receipt.Type> => {
              const booked = ledger.find(idempotencyKey)
              return booked === undefined ? { _tag: "NotApplied" } : { _tag: "Applied", output: { receipt: booked.n } }
            })
        }
      : {})
  })
}
