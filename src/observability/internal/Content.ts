/**
 * The message content of events: what the model was asked and said, the arguments and
 * results of tool calls, and the text people wrote (the goal, the plan, a reviewer's
 * reason). A recording may leave it out (`Recorder.layer({ content: false })`); each such
 * field then holds {@link omitted} (or its stand-in, for a text the counters compare), so
 * that the event still decodes and a viewer can say that it was not recorded. Codes, names, counts and times stay (a reminder's kind, a check's
 * name and verdict). Private to `observability/`.
 */
import { createHmac } from "node:crypto"
import * as Event from "../../events/Event.ts"
import type * as StopReason from "../../events/StopReason.ts"
import * as Model from "../../model/Model.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"

/** What stands in for content a recording left out. */
export const omitted = Event.notRecorded

/** The key of this process's stand-ins: random, kept in memory only. */
const standInKey = crypto.getRandomValues(new Uint8Array(32))

/**
 * What stands in for a text whose sameness the run's counters read (an observation seen
 * again, a failure repeated, an answer that was blank): {@link omitted} with a keyed digest
 * of the text (`<not recorded #…>`). Equal texts get one stand-in, different texts
 * different ones, so that a view folds the counters the run had; the key stays in memory,
 * so nobody can test a guess against it. Blank text is no content: kept as it is.
 */
const standIn = (text: string): string =>
  Model.isBlank(text)
    ? text
    : `${omitted.slice(0, -1)} #${createHmac("sha256", standInKey).update(text).digest("base64url").slice(0, 16)}>`

/**
 * The stops whose detail is counts and limits only (the runtime's words, or a policy's own).
 * Every other stop's detail may quote content: a failure's message naming the path the
 * model gave, a reviewer's reason (`pay (call_1) was rejected by bob: <reason>`), a check.
 */
const countedStops: ReadonlySet<StopReason.StopReason | undefined> = new Set<StopReason.StopReason | undefined>([
  "goal_reached",
  "max_tool_calls",
  "max_iterations",
  "repeated_tool_call",
  "repeated_tool_failure",
  "max_tool_errors",
  "empty_output",
  "loop_detected",
  "budget_exhausted",
  "cancelled"
])

/** A stop's detail without its content (see `countedStops`). */
export const detailWithoutContent = (reason: StopReason.StopReason | undefined, detail: string): string =>
  countedStops.has(reason) ? detail : omitted

/**
 * A tool's error without its content: its message and its failure's hint may quote what
 * the call was given (`read_file` names the path) or what a reviewer wrote; its code says
 * what it was.
 */
const errorWithoutContent = (error: ToolResult.ToolError): ToolResult.ToolError => ({
  ...error,
  message: standIn(error.message),
  ...(error.failure === undefined ? {} : { failure: { ...error.failure, hint: omitted } })
})

/** The event without its message content; the events that carry none are returned as they are. */
export const withoutContent = (event: Event.Event): Event.Event => {
  switch (event._tag) {
    case "run.started":
      return { ...event, goal: omitted, ...(event.system === undefined ? {} : { system: omitted }) }
    case "plan.set":
      return { ...event, steps: event.steps.map((step) => ({ ...step, description: omitted })) }
    case "model.responded":
      return {
        ...event,
        text: standIn(event.text),
        toolCalls: event.toolCalls.map((call) => ({ ...call, arguments: omitted })),
        ...(event.reasoning === undefined ? {} : { reasoning: omitted })
      }
    case "tool.succeeded":
      return { ...event, observation: standIn(event.observation), input: omitted, output: omitted }
    case "tool.failed":
      // A success its postcondition contradicted keeps what the tool reported.
      return {
        ...event,
        error: errorWithoutContent(event.error),
        ...(event.output === undefined ? {} : { output: omitted })
      }
    case "tool.blocked":
      return { ...event, error: errorWithoutContent(event.error) }
    case "approval.requested":
      return { ...event, arguments: omitted }
    case "approval.decided":
      return event.reason === undefined ? event : { ...event, reason: omitted }
    case "termination.decided":
      return { ...event, detail: detailWithoutContent(event.reason, event.detail) }
    // A reminder may quote what the model sent (the keys of an answer its output schema
    // refused), and a check's detail what a criterion, a hook, a file or the answer said.
    case "reminder.injected":
      return { ...event, text: omitted }
    // A status query's own words may quote the call's arguments, and so may what a handler said
    // of its interrupted action (`context.settle`); a provider's hint, what it was sent.
    case "tool.reconciled":
    case "tool.interrupted":
      return { ...event, detail: omitted }
    case "model.failed":
    case "model.fallback":
      return { ...event, failure: { ...event.failure, hint: omitted } }
    case "validation.checked":
      return { ...event, check: { ...event.check, detail: omitted } }
    default:
      return event
  }
}
