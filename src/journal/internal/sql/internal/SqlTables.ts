/**
 * The tables of one SQL journal, named with a configurable prefix. Private to `journal/internal/sql/`.
 */
import { Effect } from "effect"
import * as JournalError from "../../../JournalError.ts"

/** The tables of one journal. */
export interface Tables {
  readonly runs: string
  readonly commits: string
  readonly approvals: string
  readonly migrations: string
  /** The first layout's table of one row per event, moved into `commits` by the second migration. */
  readonly events: string
}

const prefixPattern = /^[A-Za-z_][A-Za-z0-9_]{0,40}$/

/** The table names for a prefix (default `agent_`); a prefix that is not a plain SQL name is refused. */
export const tables = (prefix = "agent_"): Effect.Effect<Tables, JournalError.JournalError> =>
  prefixPattern.test(prefix)
    ? Effect.succeed({
        runs: `${prefix}runs`,
        commits: `${prefix}commits`,
        approvals: `${prefix}approvals`,
        migrations: `${prefix}migrations`,
        events: `${prefix}events`
      })
    : Effect.fail(
        JournalError.make(
          new JournalError.StoreFailed({
            operation: "configure",
            detail: `table prefix ${JSON.stringify(prefix)} must match ${prefixPattern.source}`
          })
        )
      )
