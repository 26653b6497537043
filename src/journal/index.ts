/**
 * The journal store for durable runs, for `effect-agent-runtime/journal`: `Journal` (the
 * service and its memory, SQL and SQLite layers) and `JournalError`. PostgreSQL is
 * `effect-agent-runtime/journal/pg`, so that only its users need `@effect/sql-pg`.
 *
 * @module effect-agent-runtime/journal
 * @since 0.3.0
 */

/** @since 0.3.0 */
export * as Journal from "./Journal.ts"
export * as JournalApprovals from "./JournalApprovals.ts"
/** @since 0.3.0 */
export * as JournalError from "./JournalError.ts"
