/**
 * Why a run cannot be resumed from its journal (R9): the run is not there, its log was
 * written by code that no longer fits (a tool changed or is gone, a newer journal
 * format), the stored rows are damaged, or the store cannot be read now. Never a defect,
 * and nothing in the journal is overwritten.
 *
 * @since 0.3.0
 */
import { Schema } from "effect"

/**
 * - `not_found`: no run of that id in the journal.
 * - `incompatible`: the log does not fit the code: a newer journal format, a tool gone or
 *   changed (its input schema or its side-effect class), another model.
 * - `corrupt`: a stored row does not decode, or the log does not start as a run does.
 * - `unavailable`: the store cannot be reached now; resuming later may work.
 * - `failed`: the store refused the run's commits for a reason a retry does not change (a
 *   permission, a broken schema): driving it again would only repeat its model calls.
 * - `running`: this process drives the run now (`Run.run`, `Run.start`, `Run.resume`, a
 *   host): a second driver would find the call it runs in doubt and could send it again.
 *   Wait for its result, or cancel it first.
 * - `taken`: from `RunHost.drive`, another process took the run over (this one's commits
 *   were fenced off) and has not ended it yet: the run is that process's. Driving it again
 *   would take it back and fence that process off in turn; do so only once it is gone.
 * - `invalid`: the resume's own arguments cannot be read (options that are no object, a
 *   getter that throws, a reason that is neither `restart` nor `manual`), or they cannot
 *   work (a limit of 0, a negative time): nothing was written, the run is as it was.
 *
 * @category models
 * @since 0.3.0
 */
export const Reason = Schema.Literals([
  "not_found",
  "incompatible",
  "corrupt",
  "unavailable",
  "failed",
  "running",
  "taken",
  "invalid"
])

/**
 * @category models
 * @since 0.3.0
 */
export type Reason = typeof Reason.Type

/**
 * @category errors
 * @since 0.3.0
 */
export class ResumeError extends Schema.TaggedError<ResumeError>()("ResumeError", {
  runId: Schema.String,
  reason: Reason,
  detail: Schema.String
}) {
  override get message(): string {
    return `run ${this.runId} cannot be resumed (${this.reason}): ${this.detail}`
  }
}

/**
 * @category guards
 * @since 0.3.0
 */
export const isResumeError = (u: unknown): u is ResumeError => u instanceof ResumeError
