/**
 * The journal on PostgreSQL, for `effect-agent-runtime/journal/pg`: its own entry point, so
 * that only its users need the optional peer dependency `@effect/sql-pg` (pure JavaScript, no
 * native build). Same schema and contract as the SQLite journal; several processes or
 * machines can share one database.
 *
 * @module effect-agent-runtime/journal/pg
 * @since 0.3.0
 */

/** @since 0.3.0 */
export * as JournalPg from "./JournalPg.ts"
