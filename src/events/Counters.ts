/**
 * The termination counters of a run (R2.1), as a pure fold over its events.
 *
 * `step` folds one event into an immutable value (persistent maps for the
 * per-signature tallies), and `fold(timeline)` recomputes exactly the same value from
 * the log: the counters are never a second source of truth. A run keeps its counters
 * by applying `step` to each event it appends; every policy, hook and reader sees that
 * same value.
 *
 * @since 0.1.0
 */
import { HashMap, Option } from "effect"
import * as Model from "../model/Model.ts"
import * as Signature from "../tools/Signature.ts"
import * as Tool from "../tools/Tool.ts"
import { type Event, isCorrection } from "./Event.ts"
import type { Counters } from "./internal/CountersShape.ts"

export type { Counters } from "./internal/CountersShape.ts"
export { type Snapshot, snapshot } from "./internal/CountersSnapshot.ts"

/** No failure yet this turn: one frozen array, shared. */
const noFailures: ReadonlyArray<string> = Object.freeze([])

/** No call yet: shared and frozen. */
const noCalls = Object.freeze({ callIds: Object.freeze([]), toolCalls: Object.freeze([]) })

/** An empty tally: immutable, so every run's counters share it until they count something. */
const noCounts: HashMap.HashMap<string, number> = HashMap.empty()

/**
 * The counters of a run that has not started, as a new object: what a fold starts from.
 * ({@link empty} is the same, frozen.)
 *
 * @category constructors
 * @since 0.3.0
 */
export const fresh = (): Counters => ({
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
  overLimitFailure: undefined,
  toolErrors: 0,
  emptyOutputs: 0,
  recoveryAttempts: 0,
  toolCorrectionAttempts: 0,
  recoveryExhausted: false,
  inputTokens: 0,
  outputTokens: 0,
  cachedInputTokens: 0,
  reasoningTokens: 0,
  costUsd: 0,
  unchangedObservations: 0,
  unchangedWhenWarned: 0,
  stateVersion: 0,
  sameClassStreak: 0,
  sameClassWhenWarned: 0,
  sameClassCode: "",
  lastCalls: noCalls,
  reminders: noCounts,
  callSignatures: noCounts,
  failureSignatures: noCounts,
  failuresOfTurn: noFailures,
  observationKeys: noCounts
})

/**
 * The counters of a run that has not started. Frozen, nested parts included: a policy is
 * handed the counters (a frozen copy of their top), and no user code may change them for
 * the other runs (R12). A fold starts from {@link fresh}: every step copies the counters,
 * and copies made from a frozen object made every later step of a run slower.
 *
 * @category constructors
 * @since 0.1.0
 */
export const empty: Counters = Object.freeze(fresh())

const bump = (map: HashMap.HashMap<string, number>, key: string): [HashMap.HashMap<string, number>, number] => {
  const found = HashMap.get(map, key)
  const next = (Option.isSome(found) ? found.value : 0) + 1
  return [HashMap.set(map, key, next), next]
}

type Draft = { -readonly [K in keyof Counters]: Counters[K] }

/** Counts one more `key` in the tally `field` of the draft, returning the new count. */
const count = (c: Draft, field: "callSignatures" | "failureSignatures" | "observationKeys", key: string): number => {
  const [map, n] = bump(c[field], key)
  c[field] = map
  return n
}

const failureStep = (c: Draft, name: string, code: string, message: string, maxRetries: number): void => {
  const signature = Signature.failure(name, code, message)
  // Calls of one response failing alike are one failure to repeat: the model saw none of them before it asked.
  const again = c.failuresOfTurn.includes(signature)
  const n = again
    ? (Option.getOrUndefined(HashMap.get(c.failureSignatures, signature)) ?? 1)
    : count(c, "failureSignatures", signature)
  // Frozen: the policies are handed the counters, and none may change them for the others (R12).
  if (!again) c.failuresOfTurn = Object.freeze([...c.failuresOfTurn, signature])
  c.toolErrors = c.toolErrors + 1
  c.repeatedFailureCount = Math.max(c.repeatedFailureCount, n)
  // A failure seen once is no repeat, whatever the retry limit (0: the model sees it once, and may act on it).
  const over = n - Math.max(maxRetries, 1)
  // Frozen, as every part of the counters a policy is handed.
  if (over > c.repeatedFailureOverLimit) c.overLimitFailure = Object.freeze({ name, code, times: n, maxRetries })
  c.repeatedFailureOverLimit = Math.max(c.repeatedFailureOverLimit, over)
  const same = c.sameClassCode === code
  c.sameClassStreak = same ? c.sameClassStreak + 1 : 1
  c.sameClassWhenWarned = same ? c.sameClassWhenWarned : 0
  c.sameClassCode = code
}

/**
 * A successful call's observation as loop detection keys it: its tool, and its text less
 * what echoes the call's own arguments (see `Signature.observation`).
 *
 * @category getters
 * @since 0.3.0
 */
export const observationOf = (counters: Counters, e: Extract<Event, { readonly _tag: "tool.succeeded" }>): string =>
  `${e.name}|${Signature.observation(e.observation, argumentsOf(counters, e.callId))}`

/**
 * Every key loop detection counts a successful call's observation under (see
 * `Signature.observationKeys`), with its tool and the state it was seen in: it is seen again
 * when one of them is.
 *
 * @category getters
 * @since 0.3.0
 */
export const observationKeysOf = (
  counters: Counters,
  e: Extract<Event, { readonly _tag: "tool.succeeded" }>
): ReadonlyArray<string> =>
  Signature.observationKeys(e.observation, argumentsOf(counters, e.callId)).map(
    (key) => `${e.name}|${key}|${counters.stateVersion}`
  )

/** The arguments the model sent for a call of its last response. */
const argumentsOf = (counters: Counters, callId: string): unknown => {
  const { callIds, toolCalls } = counters.lastCalls
  const at = callIds.indexOf(callId)
  return at < 0 ? undefined : toolCalls[at]?.arguments
}

/** Adds what a model call cost to the run's tokens and cost. */
const spend = (c: Draft, usage: Model.Usage): void => {
  c.inputTokens = c.inputTokens + usage.inputTokens
  c.outputTokens = c.outputTokens + usage.outputTokens
  c.cachedInputTokens = c.cachedInputTokens + (usage.cachedInputTokens ?? 0)
  c.reasoningTokens = c.reasoningTokens + (usage.reasoningTokens ?? 0)
  c.costUsd = c.costUsd + (usage.costUsd ?? 0)
}

/** The fold of one event, written into a fresh copy of the counters. */
const onEvent = (c: Draft, e: Event): void => {
  switch (e._tag) {
    case "run.started":
      c.startedAt = e.at
      break
    case "state.changed":
      c.state = e.to
      break
    case "model.responded": {
      let repeated = c.repeatedToolCallCount
      for (const signature of e.signatures) repeated = Math.max(repeated, count(c, "callSignatures", signature))
      const noCalls = e.toolCalls.length === 0
      // An answer cut off by the output token limit, or one that says it calls tools and carries
      // none, is unfinished: neither final nor empty (R11).
      const unfinished = e.finishReason === "length" || (noCalls && e.finishReason === "tool_calls")
      const empty = noCalls && !unfinished && Model.isBlank(e.text)
      c.iterations = c.iterations + 1
      c.toolCalls = c.toolCalls + e.toolCalls.length
      c.finalAnswerReceived = noCalls && !empty && !unfinished
      c.emptyOutputs = c.emptyOutputs + (empty ? 1 : 0)
      c.repeatedToolCallCount = repeated
      spend(c, e.usage)
      c.lastCalls = e
      if (c.failuresOfTurn.length > 0) c.failuresOfTurn = noFailures
      break
    }
    case "model.failed":
      // An answer the provider stopped unfinished was paid for all the same (R2.1).
      if (e.usage !== undefined) spend(c, e.usage)
      // The model's latest word is this failure: an earlier answer not taken is not its final one (R6.1).
      c.finalAnswerReceived = false
      break
    case "tool.succeeded": {
      let n = 0
      for (const key of observationKeysOf(c, e)) n = Math.max(n, count(c, "observationKeys", key))
      const changesState = Tool.mayChangeWorld(e.sideEffect)
      c.unchangedObservations = c.unchangedObservations + (n > 1 ? 1 : 0)
      c.stateVersion = c.stateVersion + (changesState ? 1 : 0)
      c.sameClassStreak = 0
      c.sameClassWhenWarned = 0
      c.sameClassCode = ""
      break
    }
    case "tool.failed":
      // The class of a handler failure is its own code (`not_found`), not the pipeline's `tool_failed`.
      failureStep(c, e.name, e.error.failure?.code ?? e.error.code, e.error.message, e.maxRetries)
      // A handler that returned before the call failed did what it does: the world may have changed.
      if (Tool.mayChangeWorld(e.sideEffect)) c.stateVersion = c.stateVersion + 1
      break
    case "tool.blocked":
      // A denial is feedback, not a failure of the tool: it spends the error budget but
      // never counts against the tool's retry limit.
      failureStep(c, e.name, e.error.code, e.error.message, Number.POSITIVE_INFINITY)
      break
    case "tool.interrupted":
      // A call whose action took place (its handler had finished) changed the world.
      if (Tool.mayChangeWorld(e.sideEffect)) c.stateVersion = c.stateVersion + 1
      break
    case "recovery.started":
      if (isCorrection(e.kind)) {
        // The corrections one turn of the model is asked for share their attempt: one of the budget (R3.5).
        const made = Math.max(c.toolCorrectionAttempts, e.attempt)
        c.recoveryAttempts = c.recoveryAttempts + (made - c.toolCorrectionAttempts)
        c.toolCorrectionAttempts = made
      } else if (e.circuit === undefined) {
        // A retry; a wait for the circuit that refused the call (it never ran) spends none (R3.9).
        c.recoveryAttempts = c.recoveryAttempts + 1
      }
      // A final answer sent back because it does not decode is no longer the final answer.
      if (e.kind === "output_correction") c.finalAnswerReceived = false
      break
    case "recovery.failed":
      if (e.scope === "run") c.recoveryExhausted = true
      break
    case "reminder.injected":
      c.reminders = bump(c.reminders, e.kind)[0]
      if (e.kind === "loop_warning") c.unchangedWhenWarned = c.unchangedObservations
      if (e.kind === "same_class_errors") c.sameClassWhenWarned = c.sameClassStreak
      break
  }
  c.lastEventAt = e.at
  // Never below 0: a wall clock stepped back reads a short elapsed time, not a negative one.
  c.elapsedMillis = Math.max(0, e.at - c.startedAt)
}

/**
 * Folds one event into the counters.
 *
 * @category combinators
 * @since 0.1.0
 */
export const step = (counters: Counters, event: Event): Counters => {
  const next: Draft = { ...counters }
  onEvent(next, event)
  return next
}

/**
 * The counters of a whole timeline. A timeline without its beginning (a recording whose
 * head was cut: `tail -n`, a rotated log) counts its time from its first event, not from
 * 1970 (review 187: it was explained as a run of 56 years).
 *
 * @category combinators
 * @since 0.1.0
 */
export const fold = (events: Iterable<Event>): Counters => {
  let counters = fresh()
  let first = true
  for (const event of events) {
    if (first && event._tag !== "run.started") counters = { ...counters, startedAt: event.at }
    first = false
    counters = step(counters, event)
  }
  return counters
}

/**
 * How many reminders of a kind were injected.
 *
 * @category getters
 * @since 0.1.0
 */
export const reminderCount = (counters: Counters, kind: string): number => {
  const found = HashMap.get(counters.reminders, kind)
  return Option.isSome(found) ? found.value : 0
}

/**
 * How many calls of the tool `name` the model asked for so far, every call of every
 * response, refused ones included: for a policy of your own ("at most 3 refunds"). Read
 * from the call signatures: only calls named `name` exactly (the model's made-up `refund:2` is no `refund`).
 *
 * @category getters
 * @since 0.3.0
 */
export const callsOf = (counters: Counters, name: string): number => {
  let calls = 0
  for (const [signature, count] of counters.callSignatures) if (Signature.toolName(signature) === name) calls += count
  return calls
}
