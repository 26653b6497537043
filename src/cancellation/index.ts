/**
 * Deadlines and cancellation for tool authors, for `effect-agent-runtime/cancellation`:
 * `Deadline` (bound a wait of your own by the run's layers, and read what is left),
 * `Abortable` (a promise-based handler that gets the cancel signal) and `Subprocess` (a
 * child process group ended with its run: SIGTERM, grace, SIGKILL, reaped).
 *
 * @module effect-agent-runtime/cancellation
 * @since 0.3.0
 */

/** @since 0.3.0 */
export * as Deadline from "../time/Deadline.ts"
export * as RealTime from "../time/RealTime.ts"
/** @since 0.1.0 */
export * as Abortable from "./Abortable.ts"
/** @since 0.1.0 */
export * as Subprocess from "./Subprocess.ts"
