/**
 * The state of a run as a fold over its log (principle 3, R9): everything the run
 * keeps and decides by — its phase and counters, the conversation it sends the model,
 * the model in use after fallbacks, the corrections outstanding, and what its calls
 * wait on — is recomputed from its events by {@link fold}. A live run keeps this state
 * by applying {@link step} to each event it appends, so folding any prefix of its
 * timeline gives exactly the state the run had at that event; a resumed run starts
 * from the fold of its stored log.
 *
 * @since 0.3.0
 */
import { HashMap, Option } from "effect"
import type * as Model from "../model/Model.ts"
import * as ToolResult from "../tools/ToolResult.ts"
import * as Counters from "./Counters.ts"
import type * as Event from "./Event.ts"
import * as BatchSchedule from "./internal/BatchSchedule.ts"

/**
 * The calls of the last model response, in the order the model sent them, and the
 * conversation entries waiting for the batch to end: the tool messages go to the model
 * in call order, and a reminder injected meanwhile goes after them (a provider requires
 * the tool messages right after the assistant message that asked for them).
 *
 * @category models
 * @since 0.3.0
 */
export interface Batch {
  /** The calls as the conversation sends them back (see `sentBack`): their names and the ids their results answer. */
  readonly calls: ReadonlyArray<Model.ToolCall>
  /** The run's identity of each call (`callId`), by the call's position. */
  readonly callIds: ReadonlyArray<string>
  /** The observation of each call that has its result, by the call's position, and whether the call failed. */
  readonly observations: ReadonlyArray<{ readonly content: string; readonly failed: boolean } | undefined>
  /** Reminders injected while results were outstanding. */
  readonly reminders: ReadonlyArray<Model.Message>
  /** Whether every call has its result (the tool messages are in `messages`). */
  readonly closed: boolean
}

/**
 * An append-only conversation. States of one run share a buffer: each sees its first
 * `length` entries, which never change, so a state stays what it was; appending to the
 * newest state extends the buffer in place, and appending to an older one copies.
 *
 * @category models
 * @since 0.3.0
 */
export interface Conversation {
  readonly buffer: Array<Model.Message>
  readonly length: number
}

const append = (c: Conversation, messages: ReadonlyArray<Model.Message>): Conversation => {
  // An empty conversation may be the shared `empty` state's: it is never extended in place.
  const buffer = c.length > 0 && c.length === c.buffer.length ? c.buffer : c.buffer.slice(0, c.length)
  // The model is handed these: a model that edits its request cannot edit the run's conversation.
  for (const m of messages) buffer.push(Object.freeze(m))
  return { buffer, length: buffer.length }
}

const fresh = (messages: Array<Model.Message>): Conversation => append({ buffer: [], length: 0 }, messages)

/**
 * The conversation of a state, as the model is sent it: a copy the run never changes.
 *
 * @category getters
 * @since 0.3.0
 */
export const messages = (state: State): ReadonlyArray<Model.Message> =>
  state.conversation.buffer.slice(0, state.conversation.length)

/**
 * @category models
 * @since 0.3.0
 */
export interface State {
  readonly counters: Counters.Counters
  /** The conversation as the model is sent it at the next request (read it with {@link messages}). */
  readonly conversation: Conversation
  /** The calls of the last response that asked for tools (see {@link Batch}). */
  readonly batch: Batch | undefined
  /** The name of the model in use. */
  readonly model: string
  /** How many times the run fell back to the next model (the index of the model in use). */
  readonly fallbacks: number
  /** The tools with an argument correction outstanding, and the correction's attempt (R3.5). */
  readonly corrections: HashMap.HashMap<string, number>
  /** The attempt of the correction asked for an answer the output token limit cut off, until one is whole (R11). */
  readonly truncation: number | undefined
  /** The attempt of the correction asked for a final answer that did not decode, until one does. */
  readonly outputCorrection: number | undefined
  /** The calls waiting for a person now (R7). */
  readonly approvals: ReadonlyArray<string>
  /** The retries sleeping now, by owner: a call's id, or `""` for the model call. */
  readonly retries: ReadonlyArray<string>
  /** How the run is being stopped from outside its loop, once it is. */
  readonly stopping: Event.Of<"run.stopping"> | undefined
  /** Whether `run.finished` is in the log: the log is then closed. */
  readonly finished: boolean
}

/** The state before the first event, as a new object: what a fold starts from (see `Counters.fresh`). */
const initial = (): State => ({
  counters: Counters.fresh(),
  conversation: noConversation,
  batch: undefined,
  model: "model",
  fallbacks: 0,
  corrections: noCorrections,
  truncation: undefined,
  outputCorrection: undefined,
  approvals: none,
  retries: none,
  stopping: undefined,
  finished: false
})

// What every fold starts from and no step changes in place (each returns new ones): shared.
const noConversation = fresh([])
const noCorrections: HashMap.HashMap<string, number> = HashMap.empty()
const none: ReadonlyArray<string> = Object.freeze([])

/**
 * The state before the first event. Frozen, as `Counters.empty` is: no user code changes
 * it for the other runs (R12); `fold([])` gives a new one.
 *
 * @category constructors
 * @since 0.3.0
 */
export const empty: State = Object.freeze({ ...initial(), counters: Counters.empty })

/** The owner of a retry: the call it retries, or the model call. */
const ownerOf = (e: { readonly callId?: string | undefined }): string => e.callId ?? ""

const without = (list: ReadonlyArray<string>, item: string): ReadonlyArray<string> => {
  const i = list.indexOf(item)
  return i < 0 ? list : [...list.slice(0, i), ...list.slice(i + 1)]
}

/** The name of a call of the last batch, from its run identity. */
const nameOf = (batch: Batch | undefined, callId: string | undefined): string | undefined => {
  if (batch === undefined || callId === undefined) return undefined
  const i = batch.callIds.indexOf(callId)
  return batch.calls[i]?.name
}

/**
 * A response's calls as the conversation sends them back to the model (R3.8, R11): each
 * under the id the model gave it (some models need theirs back as they wrote them), but a
 * repeat of an id in one answer, or an empty one, under the call's run identity instead: an
 * API takes a `tool_call_id` once in a turn (a model that repeats one, or a made-up id that
 * meets a real one), and each result must answer its own call.
 */
const sentBack = (e: Event.Of<"model.responded">): ReadonlyArray<Model.ToolCall> => {
  const ids = new Set(e.toolCalls.map((call) => call.id))
  if (ids.size === e.toolCalls.length && !ids.has("")) return e.toolCalls
  const sent = new Set<string>()
  return e.toolCalls.map((call, i) => {
    let id = call.id !== "" && !sent.has(call.id) ? call.id : (e.callIds[i] ?? "call")
    // An identity is never an id the model may keep, unless the model sent an odd one (`a#2`).
    while (sent.has(id) || (id !== call.id && ids.has(id))) id = `${id}#`
    sent.add(id)
    return id === call.id ? call : { ...call, id }
  })
}

/** A call's result came: kept in its place, and the batch's messages sent once all are in. */
const settle = (s: State, callId: string, content: string, failed: boolean): Partial<State> | undefined => {
  const batch = s.batch
  if (batch === undefined || batch.closed) return undefined
  const i = batch.callIds.indexOf(callId)
  if (i < 0 || batch.observations[i] !== undefined) return undefined
  const observations = batch.observations.slice()
  observations[i] = { content, failed }
  if (observations.some((o) => o === undefined)) return { batch: { ...batch, observations } }
  const results: Array<Model.Message> = batch.calls.map((call, j) => ({
    _tag: "tool",
    toolCallId: call.id,
    name: call.name,
    content: observations[j]?.content ?? "",
    ...(observations[j]?.failed === true ? { failed: true } : {})
  }))
  return {
    batch: { ...batch, observations, reminders: [], closed: true },
    conversation: append(s.conversation, [...results, ...batch.reminders])
  }
}

/** What one event changes, apart from the counters. */
const change = (s: State, e: Event.Event): Partial<State> | undefined => {
  switch (e._tag) {
    case "run.started":
      return {
        model: e.model,
        // The run's conversation starts here, in a buffer of its own.
        conversation: fresh([
          ...(e.system === undefined ? [] : [{ _tag: "system", content: e.system } as const]),
          { _tag: "user", content: e.goal }
        ])
      }
    case "model.requested":
      return s.retries.includes("") ? { retries: without(s.retries, "") } : undefined
    case "model.responded": {
      const calls = sentBack(e)
      const assistant: Model.Message = {
        _tag: "assistant",
        content: e.text,
        toolCalls: calls,
        ...(e.reasoning === undefined ? {} : { reasoning: e.reasoning }),
        ...(e.reasoningParts === undefined ? {} : { reasoningParts: e.reasoningParts })
      }
      const asked = e.toolCalls.length > 0
      return {
        conversation: append(s.conversation, [assistant]),
        batch: asked
          ? {
              calls,
              callIds: e.callIds,
              observations: e.toolCalls.map(() => undefined),
              reminders: [],
              closed: false
            }
          : s.batch
      }
    }
    case "model.fallback":
      return { model: e.to, fallbacks: s.fallbacks + 1 }
    case "reminder.injected": {
      const reminder: Model.Message = { _tag: "user", content: `[runtime reminder: ${e.kind}] ${e.text}` }
      const batch = s.batch
      return batch !== undefined && !batch.closed
        ? { batch: { ...batch, reminders: [...batch.reminders, reminder] } }
        : { conversation: append(s.conversation, [reminder]) }
    }
    case "tool.started":
      return s.retries.includes(e.callId) ? { retries: without(s.retries, e.callId) } : undefined
    case "tool.succeeded":
      return settle(s, e.callId, e.observation, false)
    case "tool.failed":
      return settle(s, e.callId, ToolResult.refusalObservation(e.error, false), true)
    case "tool.blocked":
      return settle(s, e.callId, ToolResult.refusalObservation(e.error, true), true)
    case "tool.interrupted":
      return s.retries.includes(e.callId) ? { retries: without(s.retries, e.callId) } : undefined
    case "approval.requested":
      return { approvals: [...s.approvals, e.callId] }
    case "approval.decided":
      return { approvals: without(s.approvals, e.callId) }
    case "recovery.started": {
      if (e.kind === "output_truncation") return { truncation: e.attempt }
      if (e.kind === "output_correction") return { outputCorrection: e.attempt }
      if (e.kind === "tool_argument_correction") {
        const name = nameOf(s.batch, e.callId)
        return name === undefined ? undefined : { corrections: HashMap.set(s.corrections, name, e.attempt) }
      }
      return { retries: [...s.retries, ownerOf(e)] }
    }
    case "recovery.completed": {
      if (e.kind === "output_truncation") return { truncation: undefined }
      if (e.kind === "output_correction") return { outputCorrection: undefined }
      if (e.kind === "tool_argument_correction") {
        const name = nameOf(s.batch, e.callId)
        return name === undefined ? undefined : { corrections: HashMap.remove(s.corrections, name) }
      }
      return undefined
    }
    case "run.stopping":
      // The run's own wait for a retry of the model call ends with the stop: nothing else ends it.
      return { stopping: e, retries: without(s.retries, "") }
    case "run.finished":
      return { finished: true }
    default:
      return undefined
  }
}

/**
 * Folds one event into the state.
 *
 * @category combinators
 * @since 0.3.0
 */
export const step = (state: State, event: Event.Event): State => {
  const changed = change(state, event)
  const counters = Counters.step(state.counters, event)
  return changed === undefined ? { ...state, counters } : { ...state, ...changed, counters }
}

/**
 * The state of a whole timeline (or of any prefix of it).
 *
 * @category combinators
 * @since 0.3.0
 */
export const fold = (events: Iterable<Event.Event>): State => {
  let state = initial()
  for (const event of events) state = step(state, event)
  return state
}

/**
 * The attempt of the argument correction outstanding for a tool, if any.
 *
 * @category getters
 * @since 0.3.0
 */
export const correctionOf = (state: State, tool: string): number | undefined =>
  Option.getOrUndefined(HashMap.get(state.corrections, tool))

/**
 * The phase a run whose current work is `base` is in: `awaiting_approval` while any call
 * waits for a person, else `recovering` while any retry sleeps, else `base` (R1.3).
 * Calls of one batch run concurrently, so these overlap.
 *
 * @category getters
 * @since 0.3.0
 */
export const phaseOf = <P extends string>(
  state: { readonly approvals: ReadonlyArray<string>; readonly retries: ReadonlyArray<string> },
  base: P
): P | "awaiting_approval" | "recovering" =>
  state.approvals.length > 0 ? "awaiting_approval" : state.retries.length > 0 ? "recovering" : base

/**
 * When each call of a batch was taken up, by the end of `events` (which begin with the
 * batch's `model.responded`): the batch takes its calls in call order, `concurrency` at a
 * time, from the phase change that starts it, and each call's result lets the next one in
 * until the run is stopping.
 * A resumed run takes up again, in order, the calls its log left unfinished. A call with an
 * event of its own was taken up by then, whatever the count says. Read with the run's
 * `concurrency` (the one in force before the batch, {@link concurrencyOf}); a resume inside
 * the batch that lays another takes up calls by it.
 *
 * @category getters
 * @since 0.3.0
 */
export const takenUp: (events: ReadonlyArray<Event.Event>, concurrency: number) => ReadonlyMap<string, number> =
  BatchSchedule.takenUp

/**
 * The calls of a batch that hold one of its places by the end of `events` (which begin with
 * the batch's `model.responded`): taken up, by this process or since its resume, and not
 * ended. Read as {@link takenUp} is.
 *
 * @category getters
 * @since 0.3.0
 */
export const inPlace: (events: ReadonlyArray<Event.Event>, concurrency: number) => ReadonlySet<string> =
  BatchSchedule.inPlace

/**
 * The calls of a batch that the process which wrote `events` may have taken up before it
 * stopped, when `events` are only what it committed (R9): those {@link takenUp} finds, and
 * every one it could have reached with nothing more committed. A call ends with nothing
 * committed (a refusal, or the result of a call that cannot act twice, waits for the
 * iteration's commit), so each call may have let the next one in, unless the log shows it
 * still in its place: a call for which `commitsAtOnce` holds (one that may act twice commits
 * its attempt before its handler and its ending at once), or whose approval is requested and
 * not decided. A batch begins once its start is in the log (a call that may act commits its
 * attempt, and the start with it, before its handler), and takes up nothing once the run is
 * stopping.
 *
 * @category getters
 * @since 0.3.0
 */
export const mayHaveTakenUp: (
  events: ReadonlyArray<Event.Event>,
  concurrency: number,
  commitsAtOnce: (name: string) => boolean
) => ReadonlySet<string> = BatchSchedule.mayHaveTakenUp

/**
 * The batch concurrency in force at the end of `events`: `run.started`'s `limits`, or the
 * last resume's that laid one (`run.resumed`'s), 1 when none says. A batch starts with the
 * one in force before its `model.responded`, and {@link takenUp} follows a resume inside it.
 *
 * @category getters
 * @since 0.3.0
 */
export const concurrencyOf: (events: ReadonlyArray<Event.Event>) => number = BatchSchedule.concurrencyOf

/**
 * The run's deadline as its log says it (R9), the limits in force, and the attempts of a
 * call the process's stops cut off: what a resumed run goes on under, read from its log.
 */
export { deadlineOf, limitsOf, refusalsOf, restartsOf } from "./internal/InForce.ts"
