/**
 * The message content of events: what the model was asked and said, the arguments and
 * results of tool calls. A recording may leave it out (`Recorder.layer({ content: false })`);
 * each such field then holds {@link omitted}, so that the event still decodes and a viewer
 * can say that it was not recorded. Private to `observability/`.
 */
import * as Event from "../../events/Event.ts"

/** What stands in for content a recording left out. */
export const omitted = Event.notRecorded

/** The event without its message content; the events that carry none are returned as they are. */
export const withoutContent = (event: Event.Event): Event.Event => {
  switch (event._tag) {
    case "run.started":
      return { ...event, goal: omitted, ...(event.system === undefined ? {} : { system: omitted }) }
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
    case "approval.requested":
      return { ...event, arguments: omitted }
    default:
      return event
  }
}
