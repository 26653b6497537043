/**
 * What a replay plays back: the model's answers and the tools' results of a recorded
 * timeline, each at the time it was recorded. Private to `testing/` (see `Replay`).
 */
import { Clock, Effect, Schema } from "effect"
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import * as Failure from "../../failure/Failure.ts"
import type * as Model from "../../model/Model.ts"
import type * as Tool from "../../tools/Tool.ts"
import { canonical } from "./ReplayCompare.ts"

/** A divergence the playback itself found: a request the recording does not answer. */
export interface Refusal {
  readonly seq: number
  readonly detail: string
}

/** Sleeps until the recorded time `at` (the replay's clock starts where the recording did). */
const until = (at: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => (at > now ? Effect.sleep(at - now) : Effect.void))

const refused = (code: string, hint: string) =>
  new Failure.Permanent({ source: "runtime", category: "script", code, attempts: 1, hint })

/**
 * A failure back from its summary, as the recording kept it; `attempts` as the one attempt
 * played (a tool's last failure counts the call's attempts, its handler failed once).
 */
const fromSummary = (summary: Failure.Summary, attempts = summary.attempts): Failure.Failure => {
  const fields = {
    source: summary.source,
    category: summary.category,
    code: summary.code,
    attempts,
    hint: summary.hint,
    ...(summary.timeout === undefined ? {} : { timeout: summary.timeout })
  }
  if (summary.classification === "retryable") return new Failure.Retryable(fields)
  if (summary.classification === "unknown") return new Failure.UnknownOutcome(fields)
  return new Failure.Permanent(fields)
}

/**
 * The model of a replay: the n-th request gets the recording's n-th answer (`model.responded`,
 * or the failure of `model.failed`), at the time it came. A request with another conversation
 * than the recorded one, or one the recording never made, is refused (`replay_diverged`,
 * `replay_exhausted`) and noted, so the run stops instead of waiting.
 */
export const model = (recorded: ReadonlyArray<Event.Event>, refusals: Array<Refusal>): Model.Model["Service"] => {
  const requests = recorded.flatMap((e, i) => (e._tag === "model.requested" ? [i] : []))
  let next = 0
  return {
    generate: (request) =>
      Effect.suspend(() => {
        const index = requests[next]
        const n = ++next
        if (index === undefined) {
          const detail = `the model was asked a ${n}th time; the recording asked it ${requests.length} times`
          refusals.push({ seq: recorded.length, detail })
          return Effect.fail(refused("replay_exhausted", detail))
        }
        const expected = canonical(RunLog.messages(RunLog.fold(recorded.slice(0, index))))
        if (canonical(request.messages) !== expected) {
          const detail = `model request ${n} was sent another conversation than the recorded one`
          refusals.push({ seq: index, detail })
          return Effect.fail(refused("replay_diverged", detail))
        }
        const answer = recorded
          .slice(index + 1)
          .find((e) => e._tag === "model.responded" || e._tag === "model.failed" || e._tag === "model.requested")
        if (answer?._tag === "model.responded") {
          const response: Model.Response = {
            text: answer.text,
            toolCalls: answer.toolCalls,
            usage: answer.usage,
            ...(answer.finishReason === undefined ? {} : { finishReason: answer.finishReason }),
            ...(answer.reasoning === undefined ? {} : { reasoning: answer.reasoning })
          }
          return Effect.as(until(answer.at), response)
        }
        if (answer?._tag === "model.failed")
          return Effect.andThen(until(answer.at), Effect.fail(fromSummary(answer.failure)))
        // The recorded run stopped while this request waited: the replay waits as it did.
        return Effect.never
      })
  }
}

/** What one attempt of a recorded call came to, and when. */
type Outcome =
  | { readonly _tag: "Succeeded"; readonly at: number; readonly output: unknown }
  | { readonly _tag: "Failed"; readonly at: number; readonly failure: Failure.Failure }
  | { readonly _tag: "Waited" }

/** The outcome of each attempt of each recorded call, by call id, in attempt order. */
const outcomes = (recorded: ReadonlyArray<Event.Event>): Map<string, Array<Outcome>> => {
  const byCall = new Map<string, Array<Outcome>>()
  const open = new Set<string>()
  const settle = (callId: string, outcome: Outcome) => {
    if (!open.delete(callId)) return
    byCall.get(callId)?.push(outcome)
  }
  for (const e of recorded) {
    if (e._tag === "tool.attempted") {
      if (!byCall.has(e.callId)) byCall.set(e.callId, [])
      open.add(e.callId)
    } else if (e._tag === "recovery.started" && e.callId !== undefined) {
      const failure = new Failure.Retryable({
        source: "tool",
        category: "other",
        code: e.cause,
        attempts: 1,
        hint: `replayed: attempt ${e.attempt} failed with ${e.cause}`
      })
      settle(e.callId, { _tag: "Failed", at: e.at, failure })
    } else if (e._tag === "tool.succeeded") {
      settle(e.callId, { _tag: "Succeeded", at: e.at, output: e.output })
    } else if (e._tag === "tool.failed") {
      const failure =
        e.error.failure === undefined ? refused(e.error.code, e.error.message) : fromSummary(e.error.failure, 1)
      settle(e.callId, { _tag: "Failed", at: e.at, failure })
    }
  }
  // An attempt the recording never saw end (the run stopped while it ran) waits as it did.
  for (const callId of open) byCall.get(callId)?.push({ _tag: "Waited" })
  return byCall
}

/**
 * The tools of a replay: each the caller's tool (its name, schemas, metadata) with a handler
 * that plays the recorded result of each attempt of the call (its output, decoded with the
 * tool's output schema, or its failure) at the time it came. The status query and the
 * postcondition are not run: the recording holds what they found.
 */
export const tools = <T extends Tool.Any>(
  recorded: ReadonlyArray<Event.Event>,
  given: ReadonlyArray<T>,
  refusals: Array<Refusal>
): ReadonlyArray<T> => {
  const byCall = outcomes(recorded)
  const attempts = new Map<string, number>()
  return given.map((tool) => {
    const decode = Schema.decodeUnknownEffect(tool.output)
    const handler = (_input: unknown, context: Tool.CallContext): Effect.Effect<unknown, Failure.Failure> =>
      Effect.suspend(() => {
        const n = attempts.get(context.callId) ?? 0
        attempts.set(context.callId, n + 1)
        const outcome = byCall.get(context.callId)?.[n]
        if (outcome === undefined) {
          const detail = `${tool.name} call ${context.callId} ran an attempt ${n + 1} the recording does not have`
          refusals.push({ seq: recorded.length, detail })
          return Effect.fail(refused("replay_unrecorded", detail))
        }
        if (outcome._tag === "Waited") return Effect.never
        if (outcome._tag === "Failed") return Effect.andThen(until(outcome.at), Effect.fail(outcome.failure))
        return Effect.andThen(
          until(outcome.at),
          Effect.mapError(decode(outcome.output), (issue) => refused("replay_undecodable", issue.message))
        )
      })
    return Object.freeze({ ...tool, handler, postcondition: undefined, reconcile: undefined }) as T
  })
}
