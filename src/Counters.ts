/**
 * The termination counters of a run (R2.1), as a pure fold over its events.
 *
 * `step` folds one event in constant time (persistent maps for the per-signature
 * tallies), so the run keeps its counters current as it appends events, and
 * `fold(timeline)` recomputes exactly the same value from the log: the counters are
 * never a second source of truth.
 *
 * @since 0.1.0
 */
import { HashMap, Option } from "effect"
import type * as Event from "./Event.ts"
import type * as RunState from "./RunState.ts"
import * as Signature from "./Signature.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Counters {
  /** The run's current state: the target of the last `state.changed`. */
  readonly state: RunState.State
  /** Model responses received. */
  readonly iterations: number
  /** Tool calls requested by the model, counted when the response arrives. */
  readonly toolCalls: number
  readonly startedAt: number
  readonly lastEventAt: number
  /** `lastEventAt - startedAt`, by the run's `Clock`. */
  readonly elapsedMillis: number
  readonly finalAnswerReceived: boolean
  /** The highest number of times any one tool-call signature was requested. */
  readonly repeatedToolCallCount: number
  /** The highest number of times any one failure signature (tool, code, message) occurred. */
  readonly repeatedFailureCount: number
  /** The most any failure signature went past its tool's `maxRetries` (0 when none did). */
  readonly repeatedFailureOverLimit: number
  /** Failed and blocked tool results. */
  readonly toolErrors: number
  readonly emptyOutputs: number
  readonly recoveryAttempts: number
  readonly toolCorrectionAttempts: number
  readonly recoveryExhausted: boolean
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd: number
  /** Successful calls whose tool, observation and world state had all been seen before. */
  readonly unchangedObservations: number
  /** Successful `write` or `external` calls: the "relevant state" version of R2.3. */
  readonly stateVersion: number
  /** Failures in a row sharing one error code, and that code. */
  readonly sameClassStreak: number
  readonly sameClassCode: string
  readonly reminders: HashMap.HashMap<string, number>
  readonly callSignatures: HashMap.HashMap<string, number>
  readonly failureSignatures: HashMap.HashMap<string, number>
  readonly observationKeys: HashMap.HashMap<string, number>
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const empty: Counters = {
  state: "created",
  iterations: 0,
  toolCalls: 0,
  startedAt: 0,
  lastEventAt: 0,
  elapsedMillis: 0,
  finalAnswerReceived: false,
  repeatedToolCallCount: 0,
  repeatedFailureCount: 0,
  repeatedFailureOverLimit: 0,
  toolErrors: 0,
  emptyOutputs: 0,
  recoveryAttempts: 0,
  toolCorrectionAttempts: 0,
  recoveryExhausted: false,
  inputTokens: 0,
  outputTokens: 0,
  costUsd: 0,
  unchangedObservations: 0,
  stateVersion: 0,
  sameClassStreak: 0,
  sameClassCode: "",
  reminders: HashMap.empty(),
  callSignatures: HashMap.empty(),
  failureSignatures: HashMap.empty(),
  observationKeys: HashMap.empty()
}

const bump = (map: HashMap.HashMap<string, number>, key: string): [HashMap.HashMap<string, number>, number] => {
  const next = Option.getOrElse(HashMap.get(map, key), () => 0) + 1
  return [HashMap.set(map, key, next), next]
}

const failureStep = (c: Counters, name: string, code: string, message: string, maxRetries: number): Counters => {
  const [failureSignatures, count] = bump(c.failureSignatures, Signature.failure(name, code, message))
  const streak = c.sameClassCode === code ? c.sameClassStreak + 1 : 1
  return {
    ...c,
    toolErrors: c.toolErrors + 1,
    failureSignatures,
    repeatedFailureCount: Math.max(c.repeatedFailureCount, count),
    repeatedFailureOverLimit: Math.max(c.repeatedFailureOverLimit, count - maxRetries),
    sameClassStreak: streak,
    sameClassCode: code
  }
}

const onEvent = (c: Counters, e: Event.Event): Counters => {
  switch (e._tag) {
    case "run.started":
      return { ...c, startedAt: e.at }
    case "state.changed":
      return { ...c, state: e.to }
    case "model.responded": {
      let callSignatures = c.callSignatures
      let repeated = c.repeatedToolCallCount
      for (const signature of e.signatures) {
        const [next, count] = bump(callSignatures, signature)
        callSignatures = next
        repeated = Math.max(repeated, count)
      }
      const noCalls = e.toolCalls.length === 0
      const empty = noCalls && e.text.trim() === ""
      return {
        ...c,
        iterations: c.iterations + 1,
        toolCalls: c.toolCalls + e.toolCalls.length,
        finalAnswerReceived: noCalls && !empty,
        emptyOutputs: c.emptyOutputs + (empty ? 1 : 0),
        callSignatures,
        repeatedToolCallCount: repeated,
        inputTokens: c.inputTokens + e.usage.inputTokens,
        outputTokens: c.outputTokens + e.usage.outputTokens,
        costUsd: c.costUsd + (e.usage.costUsd ?? 0)
      }
    }
    case "tool.succeeded": {
      const [observationKeys, count] = bump(c.observationKeys, `${e.name}|${e.observationDigest}|${c.stateVersion}`)
      const changesState = e.sideEffect === "write" || e.sideEffect === "external"
      return {
        ...c,
        observationKeys,
        unchangedObservations: c.unchangedObservations + (count > 1 ? 1 : 0),
        stateVersion: c.stateVersion + (changesState ? 1 : 0),
        sameClassStreak: 0,
        sameClassCode: ""
      }
    }
    case "tool.failed":
      // The class of a handler failure is its own code (`not_found`), not the pipeline's `tool_failed`.
      return failureStep(c, e.name, e.error.failure?.code ?? e.error.code, e.error.message, e.maxRetries)
    case "tool.blocked":
      // A denial is feedback, not a failure of the tool: it spends the error budget but
      // never counts against the tool's retry limit.
      return failureStep(c, e.name, e.error.code, e.error.message, Number.POSITIVE_INFINITY)
    case "recovery.started":
      return {
        ...c,
        recoveryAttempts: c.recoveryAttempts + 1,
        toolCorrectionAttempts: c.toolCorrectionAttempts + (e.kind === "tool_argument_correction" ? 1 : 0)
      }
    case "recovery.failed":
      return e.scope === "run" ? { ...c, recoveryExhausted: true } : c
    case "reminder.injected":
      return { ...c, reminders: bump(c.reminders, e.kind)[0] }
    default:
      return c
  }
}

/**
 * Folds one event into the counters, in constant time.
 *
 * @category combinators
 * @since 0.1.0
 */
export const step = (counters: Counters, event: Event.Event): Counters => {
  const next = onEvent(counters, event)
  const elapsedMillis = event.at - next.startedAt
  if (next.lastEventAt === event.at && next.elapsedMillis === elapsedMillis) return next
  // `onEvent` already copied: stamp the copy instead of copying again.
  if (next !== counters) {
    const stamped = next as { -readonly [K in keyof Counters]: Counters[K] }
    stamped.lastEventAt = event.at
    stamped.elapsedMillis = elapsedMillis
    return stamped
  }
  return { ...next, lastEventAt: event.at, elapsedMillis }
}

/**
 * The counters of a whole timeline.
 *
 * @category combinators
 * @since 0.1.0
 */
export const fold = (events: Iterable<Event.Event>): Counters => {
  let counters = empty
  for (const event of events) counters = step(counters, event)
  return counters
}

/**
 * How many reminders of a kind were injected.
 *
 * @category getters
 * @since 0.1.0
 */
export const reminderCount = (counters: Counters, kind: string): number =>
  Option.getOrElse(HashMap.get(counters.reminders, kind), () => 0)

/**
 * The counters as plain data, for the run result and for JSON.
 *
 * @category models
 * @since 0.1.0
 */
export interface Snapshot {
  readonly iterations: number
  readonly toolCalls: number
  readonly elapsedMillis: number
  readonly finalAnswerReceived: boolean
  readonly repeatedToolCallCount: number
  readonly repeatedFailureCount: number
  readonly toolErrors: number
  readonly emptyOutputs: number
  readonly recoveryAttempts: number
  readonly toolCorrectionAttempts: number
  readonly recoveryExhausted: boolean
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd: number
  readonly unchangedObservations: number
}

/**
 * @category combinators
 * @since 0.1.0
 */
export const snapshot = (c: Counters): Snapshot => ({
  iterations: c.iterations,
  toolCalls: c.toolCalls,
  elapsedMillis: c.elapsedMillis,
  finalAnswerReceived: c.finalAnswerReceived,
  repeatedToolCallCount: c.repeatedToolCallCount,
  repeatedFailureCount: c.repeatedFailureCount,
  toolErrors: c.toolErrors,
  emptyOutputs: c.emptyOutputs,
  recoveryAttempts: c.recoveryAttempts,
  toolCorrectionAttempts: c.toolCorrectionAttempts,
  recoveryExhausted: c.recoveryExhausted,
  inputTokens: c.inputTokens,
  outputTokens: c.outputTokens,
  costUsd: c.costUsd,
  unchangedObservations: c.unchangedObservations
})
