/**
 * What the live view draws, as pure functions of the events so far and the time: the
 * frame a terminal redraws in place, and the line plain output prints per event. Private
 * to `observability/` (see `LiveView`).
 */
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import * as Timeline from "../../events/Timeline.ts"
import * as Explain from "../../explain/Explain.ts"

const seconds = (millis: number): string => `${(Math.max(0, millis) / 1000).toFixed(1)}s`

const countdown = (deadlineAt: number | undefined, now: number): string =>
  deadlineAt === undefined ? "" : deadlineAt > now ? `, deadline in ${seconds(deadlineAt - now)}` : ", deadline passed"

/** The iteration the run is in: that of its last model request; unknown (`?`) to a view that began after the start and has seen none. */
const iterationOf = (events: ReadonlyArray<Event.Event>, fromStart: boolean): string => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e?._tag === "model.requested") return String(e.iteration)
  }
  return fromStart ? "0" : "?"
}

/**
 * The frame at `now`: the run and its phase, iteration, elapsed time and the run's deadline
 * countdown; each budget beside its limit (those with a limit); what is in flight, each with
 * its own countdown; and how the run ended, once it has. A resumed run is seen from its
 * `run.resumed` on: its time since the resume, and no budgets (the counts before it are in
 * its log, not in these events); its deadline only when the resume set a closer one. With
 * `given`, it ends as its caller was told (a run another process took over, review 166).
 */
export const frame = (
  events: ReadonlyArray<Event.Event>,
  now: number,
  given?: Pick<Event.Of<"run.finished">, "status" | "stopReason">
): ReadonlyArray<string> => frameLines(events, now, given).map(Timeline.visible)

/** The ending the run's caller was given, where its log's may differ (see `Explain.explain`). */
export type Given = Pick<Event.Of<"run.finished">, "status" | "stopReason">

const frameLines = (
  events: ReadonlyArray<Event.Event>,
  now: number,
  given: Given | undefined
): ReadonlyArray<string> => {
  const first = events[0]
  if (first === undefined) return ["run: waiting for its first event"]
  const started = first._tag === "run.started" ? first : undefined
  const explanation = Explain.explain(events, given)
  const finished = events[events.length - 1]?._tag === "run.finished"
  const until = finished ? (events[events.length - 1]?.at ?? now) : now
  // The deadline in force: the start's, or the closer one a resume set (a resumed run's view
  // knows it only then: its start is not among these events).
  const deadlineAt = RunLog.deadlineOf(events)
  const since =
    started !== undefined ? "" : first._tag === "run.resumed" ? " since its resume" : ` since event ${first.seq}`
  // A view that began after the start knows the run's phase from its next move only (review 166:
  // a run resumed in its tool batch read `created`, iteration 0).
  const phase =
    started === undefined && !events.some((e) => e._tag === "state.changed")
      ? first._tag === "run.resumed"
        ? "resumed"
        : "running"
      : explanation.state
  const lines = [
    `run ${first.runId}  ${phase}  iteration ${iterationOf(events, started !== undefined)}  elapsed ${seconds(until - first.at)}${since}${
      finished || !Number.isFinite(deadlineAt) ? "" : countdown(deadlineAt, now)
    }`,
    started === undefined
      ? "budgets  counted in the run's log: this view began after its start"
      : `budgets  ${explanation.gauges
          .filter((g) => g.max !== undefined)
          .map((g) => `${g.counter} ${Number.isInteger(g.value) ? g.value : g.value.toFixed(4)}/${g.max}`)
          .join("  ")}`
  ]
  if (finished) {
    lines.push(`ended  ${explanation.status ?? "?"}  ${explanation.stopReason ?? "?"}: ${explanation.summary}`)
    return lines
  }
  if (explanation.inFlight.length === 0) lines.push("in flight  nothing")
  explanation.inFlight.forEach((f, i) => {
    const call = f.callId === undefined ? "" : ` (${f.callId})`
    const attempt = f.attempt === undefined ? "" : ` attempt ${f.attempt}`
    const layer = f.layer === undefined ? "" : ` ${f.layer}`
    const running = seconds(now - (first.at + f.sinceMillis))
    lines.push(
      `${i === 0 ? "in flight" : "         "}  ${f.kind} ${f.name}${call}${attempt}  for ${running}${countdown(f.deadlineAt, now)}${
        f.deadlineAt === undefined ? "" : layer
      }`
    )
  })
  return lines
}

/** The line plain output prints for an event: its time since the start, its tag and what it says. */
export const line = (event: Event.Event, startedAt: number): string => Timeline.formatEvent(event, startedAt)
