/** What a durable runner process (`runner.ts`) is told to do (its one argument, as JSON), and what it prints. */

/** Where the process's engine and journal are, and what it is. */
export type Mode =
  /** `DurableRun.layerEmbedded` on one SQLite file: its host, or (`clientOnly`) a process beside the host. */
  | { readonly _tag: "embedded"; readonly filename: string; readonly clientOnly?: boolean | undefined }
  /** `DurableRun.layerCluster` on PostgreSQL: a runner listening on 127.0.0.1:`port`. */
  | { readonly _tag: "runner"; readonly pg: string; readonly port: number }
  /** `DurableRun.layerCluster({ clientOnly: true })` + `layerClient`: starts, approves and cancels, hosts nothing. */
  | { readonly _tag: "client"; readonly pg: string }

export interface Config {
  readonly mode: Mode
  /** The payment service's ledger, a SQLite file. */
  readonly ledger: string
  /** The cluster's settings (shards, lock expiry, polls), the same on every process. */
  readonly shardingConfig?: Readonly<Record<string, number | string>> | undefined
  /** Runs this process starts (by `DurableRuns.start`), once it is ready. */
  readonly start?: ReadonlyArray<string> | undefined
  /** Runs whose results this process prints, and whose waiting calls it reports. */
  readonly watch?: ReadonlyArray<string> | undefined
  /** Runs whose waiting calls this process approves (watched too). */
  readonly approve?: ReadonlyArray<string> | undefined
  /** Runs this process cancels once they wait for approval (watched too). */
  readonly cancel?: ReadonlyArray<string> | undefined
  /** A marker line at which the process stops dead, waiting for its `kill -9`. */
  readonly hold?: string | undefined
  /** How long the model takes to answer. Default 10 ms. */
  readonly modelMillis?: number | undefined
  /** How long the payment service takes before it books a payment. Default 5 ms. */
  readonly payMillis?: number | undefined
  /** How long the payment service takes after it booked one, before it answers. Default 5 ms. */
  readonly answerMillis?: number | undefined
}

/** A run's result as the process prints it (`result <json>`). */
export interface Result {
  readonly runId: string
  readonly status: string
  readonly stopReason: string
  readonly detail: string
  /** The calls of unknown outcome it ended with. */
  readonly pending: ReadonlyArray<string>
  readonly tags: ReadonlyArray<string>
  /** Each `run.resumed`: where it went on from, and the calls in doubt there. */
  readonly resumed: ReadonlyArray<{ readonly fromSeq: number; readonly inDoubt: ReadonlyArray<string> }>
  readonly reconciled: ReadonlyArray<{ readonly callId: string; readonly verdict: string }>
  readonly succeeded: ReadonlyArray<string>
}

/**
 * The payments a run's model asks for, from its id: `pay<N>-…` pays N invoices one by one
 * (calls `c1` … `cN`); `approve-…` and `expire-…` pay one invoice (`c1`), then make a
 * transfer that needs a person's approval (`c2`); an `expire-…` run's approvals expire
 * after 3 seconds.
 */
export const planned = (runId: string): ReadonlyArray<string> => {
  const [, kind = "", count = "1"] = /^(pay|approve|expire)(\d*)-/.exec(runId) ?? []
  const calls = kind === "pay" ? Number(count) : kind === "" ? 0 : 2
  return Array.from({ length: calls }, (_, i) => `c${i + 1}`)
}
