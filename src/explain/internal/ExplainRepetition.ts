/**
 * What repeated in a run's log, for an explanation of a stop by a repetition policy: the
 * call, the unchanged observation or the failure. Pure functions of the timeline. Private
 * to `explain/`.
 */
import { HashMap, Option } from "effect"
import * as Counters from "../../events/Counters.ts"
import type * as Event from "../../events/Event.ts"
import * as Redaction from "../../tools/Redaction.ts"
import * as Signature from "../../tools/Signature.ts"
import type { Repetition } from "./ExplainModel.ts"

type Timeline = ReadonlyArray<Event.Event>

/** The call, observation or failure that repeated most. */
export const repetitionOf = (timeline: Timeline, kind: "call" | "observation" | "failure"): Repetition | undefined => {
  if (kind === "call") return repeatedCall(timeline)
  if (kind === "observation") return unchangedObservation(timeline)
  return repeatedFailure(timeline)
}

const top = (map: HashMap.HashMap<string, number>): [string, number] | undefined => {
  let best: [string, number] | undefined
  for (const [key, n] of map) if (best === undefined || n > best[1]) best = [key, n]
  return best
}

const repeatedCall = (timeline: Timeline): Repetition | undefined => {
  const best = top(Counters.fold(timeline).callSignatures)
  if (best === undefined) return undefined
  const [signature, count] = best
  let last: { readonly name: string; readonly arguments: unknown } | undefined
  for (const e of timeline) {
    if (e._tag !== "model.responded") continue
    e.signatures.forEach((s, i) => {
      if (s === signature && e.toolCalls[i] !== undefined) last = e.toolCalls[i]
    })
  }
  // A sensitive call's arguments hold its secrets as the model sent them: not shown.
  const shown = Signature.isKeyed(signature) ? Redaction.mask : last?.arguments
  return { _tag: "call", name: last?.name ?? "", signature, arguments: shown, count }
}

/** The observation seen again most often with no state change: found by the counters' own fold. */
const unchangedObservation = (timeline: Timeline): Repetition | undefined => {
  const groups = new Map<string, { first: Event.Of<"tool.succeeded">; callIds: Array<string> }>()
  const firsts = new Map<string, Event.Of<"tool.succeeded">>()
  let counters = Counters.fresh()
  for (const e of timeline) {
    const before = counters.unchangedObservations
    // Keyed as the counters key it (a change of the state starts the observation afresh): by
    // the key under which it was seen before, if one was.
    const keys = e._tag === "tool.succeeded" ? Counters.observationKeysOf(counters, e) : []
    const key = keys.find((k) => firsts.has(k)) ?? keys[0] ?? ""
    counters = Counters.step(counters, e)
    if (e._tag !== "tool.succeeded") continue
    for (const k of keys) if (!firsts.has(k)) firsts.set(k, e)
    // A repeat adds one; a change of the state sets the count back to 0, and is no repeat.
    if (counters.unchangedObservations !== before + 1) continue
    const first = firsts.get(key) ?? e
    const group = groups.get(key) ?? { first, callIds: [first.callId] }
    group.callIds.push(e.callId)
    groups.set(key, group)
  }
  let best: { first: Event.Of<"tool.succeeded">; callIds: Array<string> } | undefined
  for (const group of groups.values())
    if (best === undefined || group.callIds.length > best.callIds.length) best = group
  if (best === undefined) return undefined
  return {
    _tag: "observation",
    name: best.first.name,
    observation: best.first.observation,
    digest: Signature.digest(best.first.observation),
    count: best.callIds.length,
    callIds: best.callIds
  }
}

/**
 * The failure that repeated: the one that went past its tool's retry limit, else the tool
 * failure that occurred most (a refusal, `tool.blocked`, is never one: it counts against no
 * retry limit).
 */
const repeatedFailure = (timeline: Timeline): Repetition | undefined => {
  const counters = Counters.fold(timeline)
  const signatureOf = (e: Event.Of<"tool.failed">) =>
    Signature.failure(e.name, e.error.failure?.code ?? e.error.code, e.error.message)
  const over = counters.overLimitFailure
  let failed: Event.Of<"tool.failed"> | undefined
  let count = 0
  for (const e of timeline) {
    if (e._tag !== "tool.failed") continue
    const n = Option.getOrElse(HashMap.get(counters.failureSignatures, signatureOf(e)), () => 0)
    const passed = e.name === over?.name && (e.error.failure?.code ?? e.error.code) === over.code
    if (passed || (over === undefined && n >= count)) {
      failed = e
      count = passed ? over.times : n
    }
  }
  if (failed === undefined) return undefined
  return {
    _tag: "failure",
    name: failed.name,
    code: failed.error.failure?.code ?? failed.error.code,
    message: failed.error.message,
    count,
    maxRetries: failed.maxRetries
  }
}
