/**
 * The run's event log: the single source of truth (principle 3, R8).
 *
 * Every transition, model call, tool call, recovery step, reminder, termination
 * decision and validation check appends one typed event. The run's state is a fold
 * over this log (see `RunLog.fold`: its phase, counters, the conversation sent to the
 * model, the active model, pending corrections and the waits in flight), a live
 * subscriber reads it as a `Stream`, and the result carries it as the timeline.
 *
 * Order within a run: `run.started` first and `run.finished` last, exactly once each.
 * Each `model.requested` (one per attempt) is followed by `model.responded` or
 * `model.failed`, or the run stops while it waits. Each tool call is announced by its
 * `model.responded` (`callIds`); a call with events of its own has exactly one of
 * `tool.succeeded`, `tool.failed` or `tool.blocked` (blocked: the permission policy or an
 * approval refused it), or a `tool.interrupted` that settles it; before it, one
 * `tool.started` per attempt of its handler. A run stopped from outside records
 * `run.stopping` when it is found, before what it interrupts records its own ending.
 * `seq` numbers the events from 0 without gaps.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as ToolArguments from "../tools/ToolArguments.ts"
import { CircuitChanged, ModelFailed, ModelFallback, ModelRequested, ModelResponded } from "./internal/ModelEvents.ts"
import {
  isCorrection,
  RecoveryCompleted,
  RecoveryFailed,
  RecoveryKind,
  RecoveryStarted
} from "./internal/RecoveryEvents.ts"
import {
  Check,
  PlanSet,
  ReminderInjected,
  RunFinished,
  RunResumed,
  RunStarted,
  RunStopping,
  StateChanged,
  TerminationDecided,
  ValidationChecked
} from "./internal/RunEvents.ts"
import {
  ApprovalDecided,
  ApprovalRequested,
  ToolBlocked,
  ToolFailed,
  ToolInterrupted,
  ToolReconciled,
  ToolStarted,
  ToolSucceeded
} from "./internal/ToolEvents.ts"

export {
  ApprovalDecided,
  ApprovalRequested,
  Check,
  CircuitChanged,
  isCorrection,
  ModelFailed,
  ModelFallback,
  ModelRequested,
  ModelResponded,
  PlanSet,
  RecoveryCompleted,
  RecoveryFailed,
  RecoveryKind,
  RecoveryStarted,
  ReminderInjected,
  RunFinished,
  RunResumed,
  RunStarted,
  RunStopping,
  StateChanged,
  TerminationDecided,
  ToolBlocked,
  ToolFailed,
  ToolInterrupted,
  ToolReconciled,
  ToolStarted,
  ToolSucceeded,
  ValidationChecked
}

/**
 * @category models
 * @since 0.1.0
 */
export const Event = Schema.Union([
  RunStarted,
  StateChanged,
  PlanSet,
  RunStopping,
  RunResumed,
  ReminderInjected,
  TerminationDecided,
  ValidationChecked,
  RunFinished,
  ModelRequested,
  ModelResponded,
  ModelFailed,
  ModelFallback,
  CircuitChanged,
  ToolStarted,
  ToolSucceeded,
  ToolFailed,
  ToolBlocked,
  ToolInterrupted,
  ToolReconciled,
  ApprovalRequested,
  ApprovalDecided,
  RecoveryStarted,
  RecoveryCompleted,
  RecoveryFailed
])

/**
 * @category models
 * @since 0.1.0
 */
export type Event = typeof Event.Type

/**
 * The kinds of event this version writes (their `_tag`s): one a log holds that is not
 * among them was written by a newer version.
 *
 * @category models
 * @since 0.3.0
 */
export const kinds: ReadonlySet<string> = new Set(Event.members.map((member) => member.fields._tag.schema.literal))

/**
 * An event before the run stamps it with its id, sequence number and time.
 *
 * @category models
 * @since 0.1.0
 */
export type Draft = Event extends infer E ? (E extends Event ? Omit<E, "runId" | "seq" | "at"> : never) : never

/**
 * The events of one tag.
 *
 * @category models
 * @since 0.1.0
 */
export type Of<Tag extends Event["_tag"]> = Extract<Event, { readonly _tag: Tag }>

/**
 * What stands in for message content that a recording left out (`Recorder.layer({
 * content: false })`): the goal, the model's text and tool arguments, the tools' inputs,
 * outputs and observations.
 *
 * @category constants
 * @since 0.3.0
 */
export const notRecorded = "<not recorded>"

/**
 * Whether `events` were recorded without their message content (their `run.started` goal
 * says so).
 *
 * @category predicates
 * @since 0.3.0
 */
export const contentLeftOut = (events: ReadonlyArray<Event>): boolean =>
  events.some((e) => e._tag === "run.started" && e.goal === notRecorded)

/**
 * The arguments of a successful call, parsed, as evidence criteria match on them: the
 * event's own `input` where it has one (a sensitive tool's, masked), else the arguments
 * its `model.responded` in `timeline` holds for the call. `undefined` when neither is
 * there (a timeline cut before the call's response).
 *
 * @category getters
 * @since 0.3.0
 */
const readBack: ToolArguments.Limits = {
  ...ToolArguments.defaultLimits,
  maxArgumentChars: Number.POSITIVE_INFINITY,
  maxArgumentDepth: Number.POSITIVE_INFINITY
}

export const inputOf = (timeline: ReadonlyArray<Event>, event: Of<"tool.succeeded">): unknown => {
  if (event.input !== undefined) return event.input
  for (let i = timeline.length - 1; i >= 0; i--) {
    const e = timeline[i]
    if (e?._tag !== "model.responded") continue
    const index = e.callIds.indexOf(event.callId)
    if (index === -1) continue
    // Accepted when the call ran, under the run's limits: read back without them.
    const parsed = ToolArguments.parseArguments(e.toolCalls[index]?.arguments, readBack)
    return parsed._tag === "Ok" ? parsed.value : undefined
  }
  return undefined
}

/**
 * The tool calls a `model.responded` asked for, in call order: each with the run's own
 * identity of the call (the `callId` its later events carry) and the tool's name.
 *
 * @category accessors
 * @since 0.3.0
 */
export const callsOf = (
  event: Of<"model.responded">
): ReadonlyArray<{ readonly callId: string; readonly name: string }> =>
  event.callIds.map((callId, i) => ({ callId, name: event.toolCalls[i]?.name ?? "" }))

/**
 * The tool call an event is about: its `callId`, or `undefined` for an event of the run or
 * of the model (a model retry's `recovery.started` has none).
 *
 * @category accessors
 * @since 0.3.0
 */
export const callIdOf = (event: Event): string | undefined => ("callId" in event ? event.callId : undefined)

/**
 * Whether an event is a call's result: `tool.succeeded`, `tool.failed` or `tool.blocked`
 * (a call has at most one).
 *
 * @category guards
 * @since 0.3.0
 */
export const isResult = (event: Event): event is Of<"tool.succeeded" | "tool.failed" | "tool.blocked"> =>
  event._tag === "tool.succeeded" || event._tag === "tool.failed" || event._tag === "tool.blocked"
