/**
 * What a replay plays back: the model's answers and the tools' results of a recorded
 * timeline, each at the time it was recorded. Private to `testing/` (see `Replay`).
 */
import { Clock, Effect, Schema } from "effect"
import type * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import * as Failure from "../../failure/Failure.ts"
import * as Model from "../../model/Model.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import type * as Tool from "../../tools/Tool.ts"
import type * as ToolResult from "../../tools/ToolResult.ts"
import { canonical } from "./ReplayCompare.ts"
import { type Answer, fromSummary, lost, lostCode, refused } from "./ReplayFailures.ts"

/** A divergence the playback itself found: a request the recording does not answer. */
export interface Refusal {
  readonly seq: number
  readonly detail: string
}

/** Sleeps until the recorded time `at` (the replay's clock starts where the recording did). */
export const until = (at: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => (at > now ? Effect.sleep(at - now) : Effect.void))

/** A recorded request: where it is, the conversation it was sent, and what answered it first. */
interface Request {
  readonly index: number
  readonly conversation: RunLog.Conversation
  answer: Event.Event | undefined
}

/**
 * The recording's requests, its log folded once: the conversation each was sent (states of
 * one fold share their conversation's buffer, so keeping each costs nothing), and the first
 * `model.responded`, `model.failed` or next `model.requested` after it.
 */
const requestsOf = (recorded: ReadonlyArray<Event.Event>): ReadonlyArray<Request> => {
  const requests: Array<Request> = []
  let state = RunLog.fold([])
  let unanswered: Request | undefined
  for (const [index, e] of recorded.entries()) {
    if (e._tag === "model.responded" || e._tag === "model.failed" || e._tag === "model.requested") {
      if (unanswered !== undefined) unanswered.answer = e
      unanswered = undefined
    }
    if (e._tag === "model.requested") {
      unanswered = { index, conversation: state.conversation, answer: undefined }
      requests.push(unanswered)
    }
    state = RunLog.step(state, e)
  }
  return requests
}

/**
 * Whether `sent` is the conversation `recorded` holds, message by message as canonical JSON
 * (so field order never matters). A run sends the same message objects again at each
 * request, and a fold keeps its own: each is made canonical once, and a pair found equal is
 * not compared again, so a replay takes time linear in its recording.
 */
const sameConversation = () => {
  const canonicals = new WeakMap<object, string>()
  const matched = new WeakMap<object, object>()
  const canonicalOf = (message: Model.Message): string => {
    const known = canonicals.get(message)
    if (known !== undefined) return known
    const text = canonical(message)
    canonicals.set(message, text)
    return text
  }
  return (sent: ReadonlyArray<Model.Message>, recorded: RunLog.Conversation): boolean => {
    if (sent.length !== recorded.length) return false
    for (let i = 0; i < sent.length; i++) {
      const a = sent[i]
      const b = recorded.buffer[i]
      if (a === undefined || b === undefined) return false
      if (matched.get(a) === b) continue
      if (canonicalOf(a) !== canonicalOf(b)) return false
      matched.set(a, b)
    }
    return true
  }
}

/**
 * The model of a replay: the n-th request gets the recording's n-th answer (`model.responded`,
 * or the failure of `model.failed`), at the time it came. A request with another conversation
 * than the recorded one, or one the recording never made, is refused (`replay_diverged`,
 * `replay_exhausted`) and noted, so the run stops instead of waiting.
 */
export const model = (recorded: ReadonlyArray<Event.Event>, refusals: Array<Refusal>): Model.Model["Service"] => {
  const requests = requestsOf(recorded)
  const same = sameConversation()
  const cancelledAt =
    recorded.find((e) => e._tag === "run.stopping" && e.by === "cancel")?.seq ?? Number.POSITIVE_INFINITY
  let next = 0
  return {
    generate: (request) =>
      Effect.suspend(() => {
        const recordedRequest = requests[next]
        const n = ++next
        if (recordedRequest === undefined) {
          const detail = `the model was asked a ${n}th time; the recording asked it ${requests.length} times`
          refusals.push({ seq: recorded.length, detail })
          return Effect.fail(refused("replay_exhausted", detail))
        }
        const { index, conversation, answer } = recordedRequest
        if (!same(request.messages, conversation)) {
          const detail = `model request ${n} was sent another conversation than the recorded one`
          refusals.push({ seq: index, detail })
          return Effect.fail(refused("replay_diverged", detail))
        }
        if (answer?._tag === "model.responded") {
          // Every field of the response the event keeps (review 186: the reasoning's parts were missed).
          const response: Model.Response = Model.response({
            text: answer.text,
            toolCalls: answer.toolCalls,
            usage: answer.usage,
            finishReason: answer.finishReason,
            reasoning: answer.reasoning,
            reasoningParts: answer.reasoningParts
          })
          return Effect.as(until(answer.at), response)
        }
        // The run's own record of an answer its cancel cut off (after the cancel's `run.stopping`), not
        // the model's: the replay waits for its cancel, as the recorded run did, and reports the cost
        // as the model did (review 159). A model's own failure of that category is played as it came.
        if (answer?._tag === "model.failed" && answer.failure.category === "cancelled" && answer.seq > cancelledAt)
          return Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff(answer.usage)))
        if (answer?._tag === "model.failed")
          return Effect.andThen(
            until(answer.at),
            Effect.fail(fromSummary(answer.failure, answer.failure.attempts, answer.usage))
          ).pipe(
            // Cut off by the run's own timer at that time, as recorded: what it cost is reported as the model did.
            Effect.onInterrupt(() => Model.reportCutOff(answer.usage))
          )
        // The recorded run stopped while this request waited: the replay waits as it did.
        return Effect.never
      })
  }
}

/**
 * What one attempt of a recorded call came to, and when. `held`: it came past the attempt's
 * deadline (its `tool.started`'s), so the recorded handler could not be interrupted and held
 * its step (or its timeout) until then; played back so, it holds the replay's too.
 */
type Outcome =
  | { readonly _tag: "Succeeded"; readonly at: number; readonly output: unknown; readonly held?: boolean }
  | { readonly _tag: "Failed"; readonly at: number; readonly failure: Failure.Failure; readonly held?: boolean }
  /** Cut off (its timeout, a deadline, a cancel), then settled as the recording says, at `at`. */
  | {
      readonly _tag: "Cut"
      readonly at: number
      readonly settlement: Tool.Settlement
      readonly detail: string
      readonly held?: boolean
    }
  /** Still running when the stop grace ran out: the run left it behind, and the replay leaves it too. */
  | { readonly _tag: "LeftBehind" }
  /** The handler returned what the tool's checks refused, which the recording does not keep. */
  | { readonly _tag: "Unkept"; readonly seq: number; readonly code: string }
  | { readonly _tag: "Waited" }

/** Times closer than this are the same instant (jittered delays make fractional sums). */
const heldPast = 1e-6

/**
 * Whether a call's `tool.interrupted` is the run's record of an attempt it left behind
 * after the stop grace (`RunEnd.leftBehind`), not what the attempt said of itself.
 */
const isLeftBehind = (e: Event.Of<"tool.interrupted">): boolean =>
  e.settlement === "outcome_unknown" && e.detail.startsWith("still running: it did not stop within the stop grace")

/**
 * The outcome of each attempt of each recorded call, and the answers of its status query,
 * by call id, in order.
 */
const outcomes = (recorded: ReadonlyArray<Event.Event>) => {
  const byCall = new Map<string, Array<Outcome>>()
  const answers = new Map<string, Array<Answer>>()
  const finals = new Map<string, Failure.Summary>()
  for (const e of recorded)
    if (e._tag === "tool.failed" && e.error.failure !== undefined) finals.set(e.callId, e.error.failure)
  const open = new Set<string>()
  // The code of each call's attempt now running, once a `recovery.failed` named it.
  const failedWith = new Map<string, string>()
  // The deadline of each call's attempt now running, and whether the run was being stopped (deadline, cancel).
  const deadlines = new Map<string, number>()
  let stopping = false
  // An applied action's result is the call's success that follows its status query.
  const applied = new Map<string, Answer>()
  // The calls whose postcondition contradicted their success, with the result that said so.
  const contradicted = new Map<string, ToolResult.ToolError>()
  const settle = (callId: string, outcome: Outcome) => {
    if (!open.delete(callId)) return
    byCall.get(callId)?.push(outcome)
  }
  /** An attempt's ending at `at` (its result, a failure it was retried for, its cut): held when past its deadline. */
  const ended = (callId: string, outcome: Extract<Outcome, { readonly at: number }>) =>
    settle(callId, { ...outcome, held: outcome.at > (deadlines.get(callId) ?? Number.POSITIVE_INFINITY) + heldPast })
  for (const e of recorded) {
    if (e._tag === "run.stopping") stopping = true
    if (e._tag === "tool.started") {
      if (!byCall.has(e.callId)) byCall.set(e.callId, [])
      open.add(e.callId)
      deadlines.set(e.callId, e.deadlineAt)
      failedWith.delete(e.callId)
    } else if (e._tag === "recovery.failed" && e.callId !== undefined) {
      const code = lostCode(e.cause)
      if (code !== undefined) failedWith.set(e.callId, code)
    } else if (e._tag === "tool.reconciled") {
      const answer: Answer = { at: e.at, name: e.name, verdict: e.verdict, detail: e.detail }
      answers.set(e.callId, [...(answers.get(e.callId) ?? []), answer])
      if (e.verdict === "applied") applied.set(e.callId, answer)
      // Asked after its retries gave up, the query says what the last attempt failed with.
      const failure =
        e.after === undefined ? lost(finals.get(e.callId), answer, failedWith.get(e.callId)) : fromSummary(e.after, 1)
      settle(e.callId, { _tag: "Failed", at: e.at, failure })
    } else if (e._tag === "recovery.started" && e.callId !== undefined) {
      // A refusal of its circuit (it never ran) as the breaker gives it, so the replay spends no retry on it either (R3.9).
      const refusal = e.circuit === undefined ? undefined : e.circuit === "open" ? "circuit_open" : "circuit_half_open"
      const fields = {
        source: "tool",
        category: refusal ?? "other",
        code: e.cause,
        attempts: 1,
        hint: `replayed: attempt ${e.attempt} failed with ${e.cause}`,
        // Its retry waited as recorded (a `Retry-After` the failure named): the replay's waits as long.
        // A half-open refusal's wait doubles from the breaker's poll, as the run's did.
        retryAfterMillis: refusal === "circuit_half_open" ? Recovery.trialPollMillis : e.delayMillis
      } as const
      const failure = refusal === undefined ? new Failure.Retryable(fields) : new Failure.Refusal(fields)
      ended(e.callId, { _tag: "Failed", at: e.at, failure })
    } else if (e._tag === "tool.succeeded") {
      const answer = applied.get(e.callId)
      if (answer !== undefined) {
        answer.output = e.output
        applied.delete(e.callId)
      }
      ended(e.callId, { _tag: "Succeeded", at: e.at, output: e.output })
    } else if (e._tag === "tool.interrupted" && e.attempt > 0 && stopping && isLeftBehind(e)) {
      settle(e.callId, { _tag: "LeftBehind" })
    } else if (e._tag === "tool.interrupted" && e.attempt > 0) {
      // The replay's handler waits until the same layer cuts it off, and says what the recorded one said.
      ended(e.callId, { _tag: "Cut", at: e.at, settlement: e.settlement, detail: e.detail })
    } else if (e._tag === "tool.failed" && e.output !== undefined) {
      // The handler gave this output, and what the run did with it failed: its postcondition
      // contradicted it, or its observation could not be rendered. The replay does it again.
      if (e.error.code === "inconsistent_result") contradicted.set(e.callId, e.error)
      settle(e.callId, { _tag: "Succeeded", at: e.at, output: e.output })
    } else if (e._tag === "tool.failed" && e.sideEffect !== undefined) {
      // The handler returned, and the output's checks refused what it gave (not JSON, not its schema).
      settle(e.callId, { _tag: "Unkept", seq: e.seq, code: e.error.code })
    } else if (e._tag === "tool.failed") {
      const failure =
        e.error.failure === undefined ? refused(e.error.code, e.error.message) : fromSummary(e.error.failure, 1)
      ended(e.callId, { _tag: "Failed", at: e.at, failure })
    }
  }
  // An attempt the recording never saw end (the run stopped while it ran) waits as it did.
  for (const callId of open) byCall.get(callId)?.push({ _tag: "Waited" })
  return { byCall, answers, contradicted }
}

/**
 * The postcondition's answer as the recording tells it: it held, unless the call's result
 * is `inconsistent_result`, whose failure says what the check did: it failed (its failure),
 * ran out of time (a timeout), or, with none, answered false.
 */
const check = (contradiction: ToolResult.ToolError | undefined): Effect.Effect<boolean, Failure.Failure> => {
  if (contradiction === undefined) return Effect.succeed(true)
  const failure = contradiction.failure
  if (failure === undefined) return Effect.succeed(false)
  if (failure.timeout !== undefined) return Effect.never
  return Effect.fail(fromSummary(failure))
}

/**
 * The tools of a replay: each the caller's tool (its name, schemas, metadata) with a handler
 * that plays the recorded result of each attempt of the call (its output, decoded with the
 * tool's output schema, or its failure) at the time it came, and, for a tool with a status
 * query, a query that answers as the recorded `tool.reconciled` did; for a tool with a
 * postcondition, one that holds unless the recording found the success contradicted.
 */
export const tools = <T extends Tool.Any>(
  recorded: ReadonlyArray<Event.Event>,
  given: ReadonlyArray<T>,
  refusals: Array<Refusal>
): ReadonlyArray<T> => {
  const { byCall, answers, contradicted } = outcomes(recorded)
  const attempts = new Map<string, number>()
  const queries = new Map<string, number>()
  return given.map((tool) => {
    // The recording keeps an output as the run stored it, in its JSON form (a `Date` as its ISO text).
    const decode = Schema.decodeUnknownEffect(Schema.toCodecJson(tool.output))
    const decoded = (output: unknown) =>
      Effect.mapError(decode(output), (issue) => refused("replay_undecodable", issue.message))
    // The status query answers as recorded; a query the recording does not have is refused.
    const reconcile = (
      _input: unknown,
      context: Tool.CallContext
    ): Effect.Effect<Tool.Reconciliation<unknown>, Failure.Failure> =>
      Effect.suspend(() => {
        const n = queries.get(context.callId) ?? 0
        queries.set(context.callId, n + 1)
        const answer = answers.get(context.callId)?.[n]
        if (answer === undefined) {
          const detail = `${tool.name} call ${context.callId} asked a status query ${n + 1} the recording does not have`
          refusals.push({ seq: recorded.length, detail })
          return Effect.fail(refused("replay_unrecorded", detail))
        }
        const found: Effect.Effect<Tool.Reconciliation<unknown>, Failure.Failure> = answer.verdict === "applied"
          ? Effect.map(decoded(answer.output), (output) => ({ _tag: "Applied", output }))
          : Effect.succeed(
              answer.verdict === "not_applied" ? { _tag: "NotApplied" } : { _tag: "Undecidable", detail: answer.detail }
            )
        return Effect.andThen(until(answer.at), found)
      })
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
        // Past the stop grace, as the recorded one was: nothing interrupts it.
        if (outcome._tag === "LeftBehind") return Effect.uninterruptible(Effect.never)
        if (outcome._tag === "Unkept") {
          const detail = `${tool.name} call ${context.callId} returned output its checks refused (${outcome.code}), which the recording does not keep: it cannot be played back`
          refusals.push({ seq: outcome.seq, detail })
          return Effect.fail(refused("replay_unrecorded", detail))
        }
        // An attempt that held its step is not interrupted before its recorded end.
        const wait = outcome.held === true ? Effect.uninterruptible(until(outcome.at)) : until(outcome.at)
        if (outcome._tag === "Cut") {
          // Waits until the same layer cuts it off (once it has held as long as recorded), and says what the recorded one said.
          const { settlement, detail } = outcome
          const cut = outcome.held === true ? Effect.andThen(wait, Effect.never) : Effect.never
          return Effect.onInterrupt(cut, () => Effect.sync(() => context.settle(settlement, detail)))
        }
        if (outcome._tag === "Failed") return Effect.andThen(wait, Effect.fail(outcome.failure))
        return Effect.andThen(wait, decoded(outcome.output))
      })
    const postcondition = (_input: unknown, _output: unknown, context: Tool.CallContext) =>
      check(contradicted.get(context.callId))
    // Erased boundary: `tool` with its functions swapped for ones that take whatever input comes and answer
    // from the recording (the output decoded by its own schema); `T` narrows only those types.
    return Object.freeze({
      ...tool,
      handler,
      postcondition: tool.postcondition === undefined ? undefined : postcondition,
      reconcile: tool.reconcile === undefined ? undefined : reconcile
    }) as T
  })
}
