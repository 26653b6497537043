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
import * as Signature from "../../tools/Signature.ts"
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
 * so nobody can test a guess against it. Text that shows nothing stands in as blank text
 * (the counters read an empty answer): spaces and tabs spelling the digest's bits, since
 * characters that show nothing may still say something (review 187: a model's answer in
 * Unicode tag characters was kept, and read back as "db-password=hunter2"). Empty stays empty.
 */
const keyedDigest = (text: string): string =>
  createHmac("sha256", standInKey).update(text).digest("base64url").slice(0, 16)

const blankStandIn = (text: string): string =>
  createHmac("sha256", standInKey)
    .update(text)
    .digest()
    .subarray(0, 8)
    .reduce((spelled, byte) => spelled + byte.toString(2).padStart(8, "0"), "")
    .replaceAll("0", " ")
    .replaceAll("1", "\t")

const standIn = (text: string): string =>
  text.length === 0 ? text : Model.isBlank(text) ? blankStandIn(text) : `${omitted.slice(0, -1)} #${keyedDigest(text)}>`

/** The tools a run has (its `run.started`): a name the model gave is content unless it is one of them. */
export type Known = ReadonlySet<string> | undefined

/** The tools of the run whose events these are, when they hold its `run.started`. */
export const knownTools = (events: ReadonlyArray<Event.Event>): Known => {
  const started = events.find((e): e is Event.Of<"run.started"> => e._tag === "run.started")
  return started === undefined ? undefined : new Set(started.tools)
}

/** A tool name the model gave: kept when it names one of the run's tools (or they are not known), else its stand-in. */
const nameOf = (name: string, known: Known): string => (known === undefined || known.has(name) ? name : standIn(name))

/**
 * A call's signature without its content: the digest of the arguments (unkeyed, so a guess
 * of them could be tested against it, review 120) becomes a keyed one, after the tool's
 * name. Equal signatures keep equal stand-ins, and a stand-in reads as a sensitive call's.
 */
const signatureWithoutContent = (signature: string, known: Known): string =>
  `${nameOf(Signature.toolName(signature), known)}:#${keyedDigest(signature)}`

/**
 * The stops whose detail is counts and limits only (the runtime's words, or a policy's own).
 * Every other stop's detail may quote content: a failure's message naming the path the
 * model gave, a reviewer's reason (`pay (call_1) was rejected by bob: <reason>`), a check,
 * the name of the tool whose failure repeated (one the model made up, review 122).
 */
const countedStops: ReadonlySet<StopReason.StopReason | undefined> = new Set<StopReason.StopReason | undefined>([
  "goal_reached",
  "max_tool_calls",
  "max_iterations",
  "repeated_tool_call",
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
  // Its field paths may hold keys the model chose.
  ...(error.fieldPaths === undefined ? {} : { fieldPaths: error.fieldPaths.map(standIn) }),
  ...(error.failure === undefined ? {} : { failure: { ...error.failure, hint: omitted } })
})

/**
 * The event without its message content; the events that carry none are returned as they
 * are. Tool names the model gave that are not among `known` (the run's tools) are content too.
 */
export const withoutContent = (event: Event.Event, known?: Known): Event.Event => {
  switch (event._tag) {
    case "run.started":
      return { ...event, goal: omitted, ...(event.system === undefined ? {} : { system: omitted }) }
    case "plan.set":
      return { ...event, steps: event.steps.map((step) => ({ ...step, description: omitted })) }
    case "model.responded":
      return {
        ...event,
        text: standIn(event.text),
        // What a provider attached (a signature, encrypted reasoning) is content too (review 186).
        toolCalls: event.toolCalls.map(({ metadata: _, ...call }, i) => ({
          ...call,
          // The model's own id where the run did not take it as the call's (too long, or of other
          // characters: review 187, a 100 KB id was kept): the run's id for the call instead.
          id: event.callIds[i] ?? call.id,
          name: nameOf(call.name, known),
          arguments: omitted
        })),
        signatures: event.signatures.map((signature) => signatureWithoutContent(signature, known)),
        ...(event.reasoning === undefined ? {} : { reasoning: omitted }),
        ...(event.reasoningParts === undefined
          ? {}
          : { reasoningParts: event.reasoningParts.map(() => ({ text: omitted })) })
      }
    case "tool.succeeded": {
      // An older log's digest of the observation, as unkeyed as a signature's: the fold computes it.
      const { observationDigest: _, ...rest } = event
      return { ...rest, observation: standIn(event.observation), input: omitted, output: omitted }
    }
    case "tool.failed":
      // A success its postcondition contradicted keeps what the tool reported.
      return {
        ...event,
        name: nameOf(event.name, known),
        error: errorWithoutContent(event.error),
        ...(event.output === undefined ? {} : { output: omitted })
      }
    case "tool.blocked":
      return { ...event, name: nameOf(event.name, known), error: errorWithoutContent(event.error) }
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
      // A failure after the query carries its hint, which may quote them too (review 187).
      return {
        ...event,
        detail: omitted,
        ...(event.after === undefined ? {} : { after: { ...event.after, hint: omitted } })
      }
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
