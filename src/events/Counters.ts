/**
 * The termination counters of a run (R2.1), as a pure fold over its events.
 *
 * `step` folds one event in constant time (persistent maps for the per-signature
 * tallies), and `fold(timeline)` recomputes exactly the same value from the log: the
 * counters are never a second source of truth. A run keeps its counters current as
 * it appends events with `Live`, the same fold done in place, which builds the
 * persistent maps only for someone who reads them.
 *
 * @since 0.1.0
 */
import { HashMap, Option } from "effect"
import * as Signature from "../tools/Signature.ts"
import { type Event, isCorrection } from "./Event.ts"
import type { Counters } from "./internal/CountersShape.ts"
import type * as RunState from "./RunState.ts"

export { plain, type Snapshot, snapshot } from "./internal/CountersPlain.ts"
export type { Counters } from "./internal/CountersShape.ts"

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
  cachedInputTokens: 0,
  reasoningTokens: 0,
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
  const found = HashMap.get(map, key)
  const next = (Option.isSome(found) ? found.value : 0) + 1
  return [HashMap.set(map, key, next), next]
}

/** The per-key tallies a run bumps at every step; `reminders` changes rarely and stays a plain map. */
type Keyed = "callSignatures" | "failureSignatures" | "observationKeys"

/** What the fold writes: every field but the per-key tallies, which it bumps through a `Bump`. */
type Fold = { -readonly [K in Exclude<keyof Counters, Keyed>]: Counters[K] }

/** Counts one more `key` in the tally `field` of `target`, returning the new count. */
type Bump<T> = (target: T, field: Keyed, key: string) => number

const failureStep = <T extends Fold>(
  c: T,
  count: Bump<T>,
  name: string,
  code: string,
  message: string,
  maxRetries: number
): void => {
  const n = count(c, "failureSignatures", Signature.failure(name, code, message))
  c.toolErrors = c.toolErrors + 1
  c.repeatedFailureCount = Math.max(c.repeatedFailureCount, n)
  c.repeatedFailureOverLimit = Math.max(c.repeatedFailureOverLimit, n - maxRetries)
  c.sameClassStreak = c.sameClassCode === code ? c.sameClassStreak + 1 : 1
  c.sameClassCode = code
}

/** The fold itself, in place; `step` and `Live` differ only in how they keep the per-key tallies. */
const onEvent = <T extends Fold>(c: T, count: Bump<T>, e: Event): void => {
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
      // An answer cut off by the output token limit is neither final nor empty (R11).
      const truncated = e.finishReason === "length"
      const empty = noCalls && !truncated && e.text.trim() === ""
      c.iterations = c.iterations + 1
      c.toolCalls = c.toolCalls + e.toolCalls.length
      c.finalAnswerReceived = noCalls && !empty && !truncated
      c.emptyOutputs = c.emptyOutputs + (empty ? 1 : 0)
      c.repeatedToolCallCount = repeated
      c.inputTokens = c.inputTokens + e.usage.inputTokens
      c.outputTokens = c.outputTokens + e.usage.outputTokens
      c.cachedInputTokens = c.cachedInputTokens + (e.usage.cachedInputTokens ?? 0)
      c.reasoningTokens = c.reasoningTokens + (e.usage.reasoningTokens ?? 0)
      c.costUsd = c.costUsd + (e.usage.costUsd ?? 0)
      break
    }
    case "tool.succeeded": {
      const n = count(c, "observationKeys", `${e.name}|${e.observationDigest}|${c.stateVersion}`)
      const changesState = e.sideEffect === "write" || e.sideEffect === "external"
      c.unchangedObservations = c.unchangedObservations + (n > 1 ? 1 : 0)
      c.stateVersion = c.stateVersion + (changesState ? 1 : 0)
      c.sameClassStreak = 0
      c.sameClassCode = ""
      break
    }
    case "tool.failed":
      // The class of a handler failure is its own code (`not_found`), not the pipeline's `tool_failed`.
      failureStep(c, count, e.name, e.error.failure?.code ?? e.error.code, e.error.message, e.maxRetries)
      break
    case "tool.blocked":
      // A denial is feedback, not a failure of the tool: it spends the error budget but
      // never counts against the tool's retry limit.
      failureStep(c, count, e.name, e.error.code, e.error.message, Number.POSITIVE_INFINITY)
      break
    case "recovery.started":
      c.recoveryAttempts = c.recoveryAttempts + 1
      if (isCorrection(e.kind)) c.toolCorrectionAttempts = c.toolCorrectionAttempts + 1
      break
    case "recovery.failed":
      if (e.scope === "run") c.recoveryExhausted = true
      break
    case "reminder.injected":
      c.reminders = bump(c.reminders, e.kind)[0]
      break
  }
  c.lastEventAt = e.at
  c.elapsedMillis = e.at - c.startedAt
}

type Draft = { -readonly [K in keyof Counters]: Counters[K] }

const bumpDraft: Bump<Draft> = (c, field, key) => {
  const [map, n] = bump(c[field], key)
  c[field] = map
  return n
}

/**
 * Folds one event into the counters, in constant time.
 *
 * @category combinators
 * @since 0.1.0
 */
export const step = (counters: Counters, event: Event): Counters => {
  const next: Draft = { ...counters }
  onEvent(next, bumpDraft, event)
  return next
}

/**
 * The counters of a whole timeline.
 *
 * @category combinators
 * @since 0.1.0
 */
export const fold = (events: Iterable<Event>): Counters => {
  const counters: Draft = { ...empty }
  for (const event of events) onEvent(counters, bumpDraft, event)
  return counters
}

/**
 * The counters of one growing log, folded in place: what a run keeps while it runs.
 * Its fields are the counters' own (read them, never write them), and `counters()`
 * hands out an immutable value as of the last event. The per-key counts live in
 * mutable maps; the persistent `HashMap`s of the `Counters` type are built only for
 * someone who reads them, by `fold` itself over the log up to that point.
 *
 * @category models
 * @since 0.1.0
 */
export class Live implements Fold {
  state: RunState.State = "created"
  iterations = 0
  toolCalls = 0
  startedAt = 0
  lastEventAt = 0
  elapsedMillis = 0
  finalAnswerReceived = false
  repeatedToolCallCount = 0
  repeatedFailureCount = 0
  repeatedFailureOverLimit = 0
  toolErrors = 0
  emptyOutputs = 0
  recoveryAttempts = 0
  toolCorrectionAttempts = 0
  recoveryExhausted = false
  inputTokens = 0
  outputTokens = 0
  cachedInputTokens = 0
  reasoningTokens = 0
  costUsd = 0
  unchangedObservations = 0
  stateVersion = 0
  sameClassStreak = 0
  sameClassCode = ""
  reminders: HashMap.HashMap<string, number> = empty.reminders
  /** Per-key counts, made at the first key. */
  callCounts: Map<string, number> | undefined = undefined
  failureCounts: Map<string, number> | undefined = undefined
  observationCounts: Map<string, number> | undefined = undefined
  /** The log this folds: the run appends to it, then calls `step`. */
  readonly log: ReadonlyArray<Event>
  /** `fold` of the first `foldedAt` events of the log, for the per-key maps. */
  private folded: Counters = empty
  private foldedAt = 0
  /** The last value handed out, until the next event. */
  private current: Counters | undefined = undefined

  constructor(log: ReadonlyArray<Event>) {
    this.log = log
  }

  /** Folds the log's newest event, in place and in constant time. */
  step(event: Event): void {
    onEvent(this, bumpLive, event)
    this.current = undefined
  }

  /** The counters as of the last event. */
  counters(): Counters {
    if (this.current === undefined) this.current = new View(this, this.log.length)
    return this.current
  }

  /** `fold` of the first `length` events: forward from the last one built, or from the start for an older one. */
  foldAt(length: number): Counters {
    if (length === this.foldedAt) return this.folded
    const forward = length > this.foldedAt
    const draft: Draft = { ...(forward ? this.folded : empty) }
    for (let i = forward ? this.foldedAt : 0; i < length; i++) onEvent(draft, bumpDraft, this.log[i] as Event)
    if (forward) {
      this.folded = draft
      this.foldedAt = length
    }
    return draft
  }
}

const countIn = (counts: Map<string, number>, key: string): number => {
  const n = (counts.get(key) ?? 0) + 1
  counts.set(key, n)
  return n
}

const bumpLive: Bump<Live> = (c, field, key) => {
  switch (field) {
    case "callSignatures":
      if (c.callCounts === undefined) c.callCounts = new Map()
      return countIn(c.callCounts, key)
    case "failureSignatures":
      if (c.failureCounts === undefined) c.failureCounts = new Map()
      return countIn(c.failureCounts, key)
    case "observationKeys":
      if (c.observationCounts === undefined) c.observationCounts = new Map()
      return countIn(c.observationCounts, key)
  }
}

/**
 * `Live.counters()`: the fields copied; the per-key maps, as of the same event, built
 * on first read (getters on the prototype, so not own properties: see `plain`).
 */
class View implements Counters {
  readonly state: RunState.State
  readonly iterations: number
  readonly toolCalls: number
  readonly startedAt: number
  readonly lastEventAt: number
  readonly elapsedMillis: number
  readonly finalAnswerReceived: boolean
  readonly repeatedToolCallCount: number
  readonly repeatedFailureCount: number
  readonly repeatedFailureOverLimit: number
  readonly toolErrors: number
  readonly emptyOutputs: number
  readonly recoveryAttempts: number
  readonly toolCorrectionAttempts: number
  readonly recoveryExhausted: boolean
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
  readonly costUsd: number
  readonly unchangedObservations: number
  readonly stateVersion: number
  readonly sameClassStreak: number
  readonly sameClassCode: string
  readonly reminders: HashMap.HashMap<string, number>
  readonly #live: Live
  /** How many events of the log this value covers. */
  readonly #events: number
  constructor(live: Live, events: number) {
    this.state = live.state
    this.iterations = live.iterations
    this.toolCalls = live.toolCalls
    this.startedAt = live.startedAt
    this.lastEventAt = live.lastEventAt
    this.elapsedMillis = live.elapsedMillis
    this.finalAnswerReceived = live.finalAnswerReceived
    this.repeatedToolCallCount = live.repeatedToolCallCount
    this.repeatedFailureCount = live.repeatedFailureCount
    this.repeatedFailureOverLimit = live.repeatedFailureOverLimit
    this.toolErrors = live.toolErrors
    this.emptyOutputs = live.emptyOutputs
    this.recoveryAttempts = live.recoveryAttempts
    this.toolCorrectionAttempts = live.toolCorrectionAttempts
    this.recoveryExhausted = live.recoveryExhausted
    this.inputTokens = live.inputTokens
    this.outputTokens = live.outputTokens
    this.cachedInputTokens = live.cachedInputTokens
    this.reasoningTokens = live.reasoningTokens
    this.costUsd = live.costUsd
    this.unchangedObservations = live.unchangedObservations
    this.stateVersion = live.stateVersion
    this.sameClassStreak = live.sameClassStreak
    this.sameClassCode = live.sameClassCode
    this.reminders = live.reminders
    this.#live = live
    this.#events = events
  }
  get callSignatures(): HashMap.HashMap<string, number> {
    return this.#live.foldAt(this.#events).callSignatures
  }
  get failureSignatures(): HashMap.HashMap<string, number> {
    return this.#live.foldAt(this.#events).failureSignatures
  }
  get observationKeys(): HashMap.HashMap<string, number> {
    return this.#live.foldAt(this.#events).observationKeys
  }
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
