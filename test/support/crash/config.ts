/** What the crash suite's child is told to do (its one argument, as JSON), and the journal both sides open. */
import type { Layer } from "effect"
import * as Journal from "../../../src/journal/Journal.ts"
import type * as JournalError from "../../../src/journal/JournalError.ts"
import { JournalPg } from "../../../src/journal/pg/index.ts"

/** Where the journal is: a SQLite file, or a PostgreSQL database and the prefix of its tables. */
export type Where = { readonly sqlite: string } | { readonly pg: string; readonly tablePrefix: string }

export interface Config {
  readonly journal: Where
  /** The payment service's ledger, a SQLite file. */
  readonly ledger: string
  /** Resume every unfinished run of the journal first (`Run.recover`). */
  readonly recover?: boolean | undefined
  /** New runs to start (after the recovery), concurrently. */
  readonly runs?: ReadonlyArray<string> | undefined
  /** Approve every pending approval of the journal, once `expect` of them are there, and exit. */
  readonly decide?: { readonly expect: number } | undefined
  /** A marker line at which the child stops dead, waiting for its `kill -9`. */
  readonly hold?: string | undefined
  /** How long the model takes to answer. Default 10 ms. */
  readonly modelMillis?: number | undefined
  /** How long the payment service takes, before and after it books a payment. Default 5 ms. */
  readonly payMillis?: number | undefined
}

export const journalLayer = (where: Where): Layer.Layer<Journal.Journal, JournalError.JournalError> =>
  "sqlite" in where
    ? Journal.layerSqlite({ filename: where.sqlite })
    : JournalPg.layer({ url: where.pg, tablePrefix: where.tablePrefix, maxConnections: 4 })
