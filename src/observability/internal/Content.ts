/**
 * The message content of events: what the model was asked and said, the arguments and
 * results of tool calls, and the text people wrote (the goal, the plan, a reviewer's
 * reason). A recording may leave it out (`Recorder.layer({ content: false })`); each such
 * field then holds {@link omitted}, so that the event still decodes and a viewer can say
 * that it was not recorded. Codes, names, counts and times stay. Private to `observability/`.
 */
import * as Event from "../../events/Event.ts"
import type * as StopReason from "../../events/StopReason.ts"

/** What stands in for content a recording left out. */
export const omitted = Event.notRecorded

/**
 * A stop's detail without its content: a rejection's detail quotes the reviewer's reason
 * (`pay (call_1) was rejected by bob: <reason>`); every other stop's detail is the runtime's
 * or a policy's own text.
 */
export const detailWithoutContent = (reason: StopReason.StopReason | undefined, detail: string): string =>
  reason === "approval_rejected" ? omitted : detail

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
        text: omitted,
        toolCalls: event.toolCalls.map((call) => ({ ...call, arguments: omitted })),
        ...(event.reasoning === undefined ? {} : { reasoning: omitted })
      }
    case "tool.succeeded":
      return { ...event, observation: omitted, input: omitted, output: omitted }
    case "tool.failed":
      // A success its postcondition contradicted keeps what the tool reported.
      return event.output === undefined ? event : { ...event, output: omitted }
    case "tool.blocked":
      // A refusal's message quotes what the call was given (a permission denial names the
      // path) or what a reviewer wrote (a rejection's reason); its code says what it was.
      return { ...event, error: { ...event.error, message: omitted } }
    case "approval.requested":
      return { ...event, arguments: omitted }
    case "approval.decided":
      return event.reason === undefined ? event : { ...event, reason: omitted }
    case "termination.decided":
      return { ...event, detail: detailWithoutContent(event.reason, event.detail) }
    default:
      return event
  }
}
