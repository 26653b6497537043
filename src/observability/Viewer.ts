/**
 * The viewer: a run as one self-contained HTML file (CSS and script inline, no network, no
 * framework), to open in any browser, attach to a ticket or keep beside a CI log. It shows
 * why the run stopped (status, stop reason, the deciding policy and its detail), a Gantt
 * of each iteration (the model's attempts, each tool call's attempts, the backoffs and the
 * approval waits), the time layers (the run deadline across the chart, each step's,
 * attempt's and approval's on its row), the budgets consumed beside their limits (those
 * `run.started` recorded), and every event, whose details a click shows.
 *
 * The page shows what the run recorded: message content (the goal, what the model said,
 * the arguments and results of tool calls) appears only when the recording holds it
 * (`Recorder.layer({ content: false })` leaves it out), and `content: false` here leaves
 * it out of the page too. The CLI: `effect-agent-runtime view <run.json|run.jsonl> [-o out.html]`.
 *
 * @since 0.3.0
 */
import { Schema } from "effect"
import * as Event from "../events/Event.ts"
import * as RunLog from "../events/RunLog.ts"
import * as Explain from "../explain/Explain.ts"
import * as Text from "../failure/Text.ts"
import type * as RunResult from "../run/RunResult.ts"
import { detailWithoutContent, knownTools, withoutContent } from "./internal/Content.ts"
import { layout } from "./internal/Layout.ts"
import { duration, render } from "./internal/Page.ts"
import type * as Recording from "./Recording.ts"

/**
 * What the page is made with: `content: false` leaves the message content out of it
 * (default: shown when recorded); `explanation`, the explanation of the stop in words
 * (default: `Explain.format` of the events shown);
 * `title`, the page's title (default `run <runId>`).
 *
 * @category models
 * @since 0.3.0
 */
export interface Options {
  readonly content?: boolean | undefined
  readonly explanation?: string | undefined
  readonly title?: string | undefined
}

/**
 * A run as the viewer takes it: its timeline (a whole run, or what a recording holds so
 * far), a `RunResult`, or a `Recording` read from a file.
 *
 * @category models
 * @since 0.3.0
 */
export type Input = ReadonlyArray<Event.Event> | RunResult.RunResult | Recording.Recording

const encodeEvent = Schema.encodeSync(Schema.toCodecJson(Event.Event))

/** `Array.isArray` narrows to a mutable array only: a timeline is a `ReadonlyArray`. */
const isTimeline = (input: Input): input is ReadonlyArray<Event.Event> => Array.isArray(input)

const recordingOf = (input: Input): Recording.Recording => {
  if (isTimeline(input)) return { events: input, torn: false, replaced: 0 }
  if ("timeline" in input) return { events: input.timeline, result: input, torn: false, replaced: 0 }
  return input
}

/**
 * A time as a date, or, for one no `Date` holds (a timeline made by hand: `Recording` refuses
 * it in a file), its milliseconds as they are.
 */
const dated = (at: number): string => {
  const date = new Date(at)
  return Number.isNaN(date.getTime()) ? `${at} ms since 1970 (no date)` : date.toISOString()
}

/**
 * The page of a run, as one HTML document.
 *
 * @category rendering
 * @since 0.3.0
 */
export const html = (input: Input, options: Options = {}): string => {
  const recording = recordingOf(input)
  const known = knownTools(recording.events)
  const events =
    options.content === false ? recording.events.map((event) => withoutContent(event, known)) : recording.events
  const picture = layout(events)
  const result = recording.result
  // A result says how the run ended after validation; the log's decision may have been overruled.
  const stop =
    result === undefined
      ? picture.stop
      : {
          ...picture.stop,
          finished: true,
          status: result.status,
          stopReason: result.stopReason,
          policy: result.policy,
          detail: options.content === false ? detailWithoutContent(result.stopReason, result.detail) : result.detail
        }
  const started = events.find((e) => e._tag === "run.started")
  const runId = result?.runId ?? events[0]?.runId ?? "?"
  const facts: Array<readonly [string, string]> = [["run", runId]]
  if (started?._tag === "run.started") {
    // The model in use after fallbacks, as the log folds it (review 166: the start's was named).
    facts.push(["model", result?.model ?? RunLog.fold(events).model])
    facts.push(["started", dated(started.at)])
    facts.push(["goal", started.goal.length > 160 ? `${Text.head(started.goal, 159)}…` : started.goal])
  }
  facts.push(["elapsed", duration(picture.endedAt - picture.startedAt)])
  facts.push(["events", String(events.length)])
  const notices: Array<string> = []
  if (recording.torn)
    notices.push("The recording's last line was cut short (a crash, or still being written): skipped.")
  const first = events[0]
  if (first !== undefined && first._tag !== "run.started")
    notices.push(
      `The recording does not begin with the run's start: its first event is seq ${first.seq} (its head was cut off). Times count from that event, and counts leave out what came before it.`
    )
  if (!stop.finished) notices.push("The run had not finished when this was read: open bars run to the last event.")
  if (options.content === false || Event.contentLeftOut(events))
    notices.push(
      "Message content was not recorded: the goal, the model's text and the tools' arguments and results are left out."
    )
  return render({
    title: options.title ?? `run ${runId}`,
    layout: { ...picture, stop },
    events,
    encoded: events.map((e) => encodeEvent(e)),
    facts,
    notices,
    // From the events the page shows: content left out of them is left out of it too.
    // A result's ending where its log's differs (a run another process took over, review 166).
    explanation:
      options.explanation ??
      Explain.format(
        Explain.explain(
          events,
          result === undefined ? undefined : { status: result.status, stopReason: result.stopReason }
        )
      )
  })
}
