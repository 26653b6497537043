/**
 * The payment service's own books for the real-crash suite (R9): a SQLite file beside the
 * journal, one row per payment applied, written (and synced) before the service answers.
 * Rows are never deduplicated, so a payment made twice shows as two rows: the hazard the
 * suite looks for. The child pays through it; the parent counts after the child is dead.
 */
import { DatabaseSync } from "node:sqlite"

export interface Payment {
  readonly n: number
  readonly key: string
  readonly runId: string
  readonly callId: string
  readonly tool: string
  readonly pid: number
}

export interface Ledger {
  /** Applies a payment: one more row under its idempotency key. */
  readonly pay: (payment: Omit<Payment, "n" | "pid">) => Payment
  /** The first payment made under `key`, if any: what a status query answers from. */
  readonly find: (key: string) => Payment | undefined
  /** How many payments each key has. */
  readonly counts: () => ReadonlyMap<string, number>
  readonly close: () => void
}

export const open = (filename: string): Ledger => {
  const db = new DatabaseSync(filename)
  db.exec(`PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
PRAGMA busy_timeout = 5000;
CREATE TABLE IF NOT EXISTS payments (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL,
  run_id TEXT NOT NULL,
  call_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  pid INTEGER NOT NULL
)`)
  const insert = db.prepare("INSERT INTO payments (key, run_id, call_id, tool, pid) VALUES (?, ?, ?, ?, ?) RETURNING n")
  const first = db.prepare("SELECT n, key, run_id, call_id, tool, pid FROM payments WHERE key = ? ORDER BY n LIMIT 1")
  const all = db.prepare("SELECT key, COUNT(*) AS count FROM payments GROUP BY key")
  return {
    pay: (payment) => {
      const row = insert.get(payment.key, payment.runId, payment.callId, payment.tool, process.pid) as { n: number }
      return { ...payment, n: row.n, pid: process.pid }
    },
    find: (key) => {
      const row = first.get(key) as
        | { n: number; key: string; run_id: string; call_id: string; tool: string; pid: number }
        | undefined
      return row === undefined
        ? undefined
        : { n: row.n, key: row.key, runId: row.run_id, callId: row.call_id, tool: row.tool, pid: row.pid }
    },
    counts: () => new Map((all.all() as Array<{ key: string; count: number }>).map((r) => [r.key, r.count])),
    close: () => db.close()
  }
}
