/**
 * The failures a replay plays back, rebuilt from what the recording kept of them. Private
 * to `testing/` (see `Replay`).
 */
import type * as Event from "../../events/Event.ts"
import * as Failure from "../../failure/Failure.ts"

/** A failure of the playback's own: a request the recording does not answer. */
export const refused = (code: string, hint: string) =>
  new Failure.Permanent({ source: "runtime", category: "script", code, attempts: 1, hint })

/**
 * A failure back from its summary, as the recording kept it; `attempts` as the one attempt
 * played (a tool's last failure counts the call's attempts, its handler failed once).
 */
export const fromSummary = (
  summary: Failure.Summary,
  attempts = summary.attempts,
  usage?: Failure.Failure["usage"]
): Failure.Failure => {
  const fields = {
    source: summary.source,
    category: summary.category,
    code: summary.code,
    attempts,
    hint: summary.hint,
    ...(summary.timeout === undefined ? {} : { timeout: summary.timeout }),
    ...(usage === undefined ? {} : { usage })
  }
  if (summary.classification === "retryable") {
    // Its `Retry-After` as recorded: the run waits it before the next attempt.
    const retryable =
      summary.retryAfterMillis === undefined ? fields : { ...fields, retryAfterMillis: summary.retryAfterMillis }
    // A refusal of the recorded run's breaker is played back as one: it spends no retry either (R3.9).
    return summary.refused === true ? new Failure.Refusal(retryable) : new Failure.Retryable(retryable)
  }
  if (summary.classification === "unknown") return new Failure.UnknownOutcome(fields)
  return new Failure.Permanent(fields)
}

/** What a call's status query answered (R3.8), and when; `output` is an applied action's result. */
export interface Answer {
  readonly at: number
  readonly name: string
  readonly verdict: Event.Of<"tool.reconciled">["verdict"]
  readonly detail: string
  output?: unknown
}

/**
 * The failure of an attempt whose outcome was unknown, which the recording shows only by the
 * status query that followed it: its hint as the call's last failure quotes it, whatever the
 * query found (found not applied with no retry left: `<tool> did not take effect (<hint>); …`;
 * undecidable: `<hint>; <detail>`), else one of our own; its code as recorded (see
 * {@link lostCode}), else `outcome_unknown`.
 */
export const lost = (final: Failure.Summary | undefined, answer: Answer, code = "outcome_unknown"): Failure.Failure => {
  const hint = final === undefined ? undefined : quoted(final, answer)
  if (final !== undefined && hint !== undefined) {
    // Undecidable: the call's last failure is the lost attempt's own, its hint extended.
    if (answer.verdict === "undecidable") return fromSummary({ ...final, hint }, 1)
    return new Failure.UnknownOutcome({ source: "tool", category: "other", code, attempts: 1, hint })
  }
  return new Failure.UnknownOutcome({
    source: "tool",
    category: "other",
    code,
    attempts: 1,
    hint: "replayed: the outcome of this attempt was unknown"
  })
}

/**
 * The code of a lost attempt, as the `recovery.failed` its episode ended with before the
 * status query names it (`<code>: <why>`; review 175: a resent payment lost again was played
 * back under a code of our own).
 */
export const lostCode = (cause: string): string | undefined => {
  const end = cause.indexOf(": ")
  return end > 0 ? cause.slice(0, end) : undefined
}

/** The lost attempt's hint as the call's last failure quotes it after the query's verdict (see `Reconcile`). */
const quoted = (final: Failure.Summary, answer: Answer): string | undefined => {
  if (answer.verdict === "undecidable") {
    const suffix = `; ${answer.detail}`
    return final.classification === "unknown" && final.hint.endsWith(suffix)
      ? final.hint.slice(0, -suffix.length)
      : undefined
  }
  const prefix = `${answer.name} did not take effect (`
  const suffix = "); calling it again with the same arguments is safe"
  const { hint } = final
  return final.code === "not_applied" && hint.startsWith(prefix) && hint.endsWith(suffix)
    ? hint.slice(prefix.length, -suffix.length)
    : undefined
}
