/**
 * What replay compares of two events, and the first place two timelines part. Private to
 * `testing/` (see `Replay`).
 */
import type * as Event from "../../events/Event.ts"
import * as Timeline from "../../events/Timeline.ts"
import type * as Failure from "../../failure/Failure.ts"
import * as Text from "../../failure/Text.ts"
import * as Model from "../../model/Model.ts"

/**
 * The fields no event is compared on: the run's identity, the event's place and time, and
 * the deadlines and waits derived from the clock and the backoff's jitter (and the
 * times a given-up retry's cause names, see {@link clockTimes}).
 */
const ignoredEverywhere = new Set(["runId", "seq", "at", "deadlineAt", "expiresAt", "delayMillis"])

/**
 * The fields of a `tool.succeeded` derived from its call's arguments, which its
 * `model.responded` holds and is compared on: `input`, which logs of development builds before 0.3.0
 * carry for every call and later ones only masked.
 */
const ignoredInSuccess = new Set(["input"])

/**
 * What the caller of a replay changes on purpose, in `run.started`: its limits, policies
 * and permission. Their effect is what a replay shows, so they are not compared themselves.
 */
const ignoredInStart = new Set(["limits", "policies", "permission", "unguardedTools"])

/**
 * The fields of a `model.responded` derived from its calls, which it is compared on:
 * `signatures`, which for a sensitive tool's call are keyed by the run's own secret key
 * (each run has another).
 */
const ignoredInResponse = new Set(["signatures"])

/**
 * The fields of a `termination.decided` derived from the policy it names, which it is
 * compared on: `own`, which recordings made before 0.3.0 do not hold.
 */
const ignoredInDecision = new Set(["own"])

/**
 * The times a text names, measured or drawn on the clock: those of a `recovery.failed`
 * cause (`retry 1 would wait 45 ms but only 90.1 ms of the step are left`: the wait drawn
 * with the backoff's jitter, as `delayMillis` is, and what earlier jittered waits left), of a
 * `termination.decided` detail that quotes them, and those of a timeout's hint (see {@link timeless}).
 */
const clockTimes = /\d+(?:\.\d+)?(?:e[+-]?\d+)? ms/g

/**
 * How long a wait took, when its hint says it apart from its limit: a recording in real time
 * says it for a wait held a millisecond past its limit, where a replay on its exact clock is
 * on time. And a deadline's hint as recordings before 0.3.0 wrote it (`the step deadline of
 * 700 ms`, the time the wait took), as it reads now once its time is left out.
 */
const heldPast = / \(cut off after \(a time\) ms\)/g
const deadlineOf = / deadline of \(a time\) ms/g

/**
 * A wait never begun, its limit passed, as a model request's hint says it since 0.3.0: before,
 * `(cut off after 0 ms)`, a time left out as {@link heldPast} says it.
 */
const notAsked = /, which had passed \(it was not asked\)/g

/** `text` with the times it names left out (see {@link clockTimes}, {@link heldPast}, {@link notAsked}). */
const withoutTimes = (text: string): string =>
  text.replace(clockTimes, "(a time) ms").replace(heldPast, "").replace(deadlineOf, " deadline").replace(notAsked, "")

/**
 * A timeout's failure as compared: how long its wait took (`elapsedMillis`, the times its
 * hint names) is measured on the clock, as `at` is, and a recording made in real time holds
 * the host's overshoot of a few milliseconds, which a replay on its exact clock has not. Its
 * layer, code and classification are compared.
 */
const timeless = (failure: Failure.Summary): unknown => ({
  ...failure,
  // A failure that quotes a timeout's (a call found not applied after one) names its times too.
  hint: withoutTimes(failure.hint),
  ...(failure.timeout === undefined ? {} : { timeout: { ...failure.timeout, elapsedMillis: "(a time)" } })
})

/** The value of `key` in `event` as compared (see {@link timeless}). */
const comparedValue = (event: Event.Event, key: string, value: unknown): unknown => {
  if (event._tag === "recovery.failed" && key === "cause" && typeof value === "string") return withoutTimes(value)
  // A stop's detail quotes the same: a timeout's hint, the wait a refused retry would have taken.
  if (event._tag === "termination.decided" && key === "detail" && typeof value === "string") return withoutTimes(value)
  if ((event._tag === "model.failed" || event._tag === "model.fallback") && key === "failure")
    return timeless(event.failure)
  if (event._tag === "tool.failed" && key === "error") {
    const failure = event.error.failure
    return {
      ...event.error,
      message: withoutTimes(event.error.message),
      ...(failure === undefined ? {} : { failure: timeless(failure) })
    }
  }
  // The failure an idempotent call's retries gave up on before its status query: a timeout's, often.
  if (event._tag === "tool.reconciled" && key === "after" && event.after !== undefined) return timeless(event.after)
  return value
}

/** Entries by key, as `sort()` orders strings. */
const byKey = ([a]: [string, unknown], [b]: [string, unknown]): number => (a < b ? -1 : a > b ? 1 : 0)

/** The fields of `event` replay compares, in a canonical order. */
export const comparable = (event: Event.Event): Record<string, unknown> => {
  const fields: Record<string, unknown> = {}
  const entries: Array<[string, unknown]> = Object.entries(event)
  for (const [key, value] of entries.sort(byKey)) {
    if (ignoredEverywhere.has(key)) continue
    if (event._tag === "run.started" && ignoredInStart.has(key)) continue
    if (event._tag === "tool.succeeded" && ignoredInSuccess.has(key)) continue
    if (event._tag === "model.responded" && ignoredInResponse.has(key)) continue
    if (event._tag === "termination.decided" && ignoredInDecision.has(key)) continue
    if (value === undefined) continue
    // A blank `by`, which recordings made before it was refused may hold, names nobody: as none (a replay decides without it).
    if (event._tag === "approval.decided" && key === "by" && typeof value === "string" && Model.isBlank(value)) continue
    fields[key] = comparedValue(event, key, value)
  }
  return fields
}

/** A value as canonical JSON: object keys sorted, so that field order never matters. */
export const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(byKey)) : v
  )

/** The compared fields whose values differ, by name (`_tag` first when the tags differ). */
export const differences = (expected: Event.Event, actual: Event.Event): ReadonlyArray<string> => {
  const a = comparable(expected)
  const b = comparable(actual)
  if (a._tag !== b._tag) return ["_tag"]
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()
  return keys.filter((key) => canonical(a[key]) !== canonical(b[key]))
}

/** Where two timelines first part, or `undefined` when they agree event for event. */
export interface Parting {
  readonly seq: number
  readonly expected: Event.Event | undefined
  readonly actual: Event.Event | undefined
  readonly detail: string
}

const describe = (event: Event.Event | undefined): string => (event === undefined ? "nothing" : event._tag)

// Control and bidirectional characters written out, as `Explain.format` writes them (review 187).
const shown = (value: unknown): string => {
  const text = value === undefined ? "(absent)" : Timeline.visible(canonical(value))
  return text.length > 120 ? `${Text.head(text, 117)}...` : text
}

/** The first event at which `actual` differs from `expected`, with what differs. */
export const firstParting = (
  expected: ReadonlyArray<Event.Event>,
  actual: ReadonlyArray<Event.Event>
): Parting | undefined => {
  const length = Math.max(expected.length, actual.length)
  for (let seq = 0; seq < length; seq++) {
    const e = expected[seq]
    const a = actual[seq]
    if (e === undefined || a === undefined) {
      return {
        seq,
        expected: e,
        actual: a,
        detail: `the recording has ${describe(e)} at seq ${seq}, the replay ${describe(a)}`
      }
    }
    const fields = differences(e, a)
    if (fields.length === 0) continue
    const recorded = comparable(e)
    const replayed = comparable(a)
    const detail =
      fields[0] === "_tag"
        ? `the recording has ${e._tag} at seq ${seq}, the replay ${a._tag}`
        : `${e._tag} at seq ${seq} differs in ${fields
            .map((field) => `${field} (recorded ${shown(recorded[field])}, replayed ${shown(replayed[field])})`)
            .join(", ")}`
    return { seq, expected: e, actual: a, detail }
  }
  return undefined
}
