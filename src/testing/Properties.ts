/**
 * Property-test helpers (R10, R3): generate fault sequences, turn each into a run, and
 * check the invariants recovery must keep whatever happens.
 *
 * - {@link Case} is a `Schema` (a falsified case prints, shrinks and decodes back
 *   readably), and {@link arbitrary} generates it with a mix weighted toward runs that get
 *   far enough to retry; `it.effect.prop` takes either. A case is a script of model steps
 *   (retryable provider faults: 429 with `Retry-After` 0–3 s, 500, timeout, connection
 *   reset, corrupt JSON, a hang; permanent ones: 400, 401; tool batches whose calls
 *   succeed, fail retryably, permanently, with an unknown outcome, are refused by the
 *   permission policy, send invalid arguments or are slow), and the budgets: run deadline
 *   1–120 s, `maxRecoveries` 0–10, schedule retries per episode 0–4, and more.
 * - {@link toScenario} builds the `FaultyModel`, the tools (with their inspection
 *   handles) and the run options of a case; {@link runScenario} runs it on `TestClock`.
 * - {@link check} returns the invariants a `RunResult` violates against a {@link Budget}:
 *   retries within the run budget, the episode's schedule and the tool's `maxRetries`;
 *   no wait past the run deadline; permanent, unknown-outcome and blocked results never
 *   retried; exactly one terminal `run.finished`, last, with a `StopReason` of the
 *   enumeration; counters equal to the fold of the timeline.
 *   {@link checkScenario} adds what only the tools saw (handler invocations, the ledger).
 *
 * ```ts
 * it.effect.prop("R3 recovery invariants", [Properties.arbitrary], ([c]) =>
 *   Effect.gen(function* () {
 *     const scenario = Properties.toScenario(c)
 *     const result = yield* Properties.runScenario(scenario)
 *     assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
 *   }).pipe(Effect.provide(NodeServices.layer)),
 *   { arbitrary: { runs: 1000 } })
 * ```
 *
 * @since 0.1.0
 */
import { Arbitrary, Effect, Fiber, type FileSystem, Layer, type Path, Random, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Counters from "../Counters.ts"
import type * as Event from "../Event.ts"
import * as Failure from "../Failure.ts"
import * as Permission from "../Permission.ts"
import * as Recovery from "../Recovery.ts"
import * as Run from "../Run.ts"
import type * as RunResult from "../RunResult.ts"
import * as StopReason from "../StopReason.ts"
import * as Tool from "../Tool.ts"
import * as FaultyModel from "./FaultyModel.ts"
import * as FaultyTools from "./FaultyTools.ts"
import * as ScriptedModel from "./ScriptedModel.ts"

const between = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

/**
 * A provider fault the model plays instead of answering.
 *
 * @category models
 * @since 0.1.0
 */
export const ModelFault = Schema.Union([
  Schema.TaggedStruct("RateLimited", { retryAfterSeconds: Schema.NullOr(between(0, 3)) }),
  Schema.TaggedStruct("ServerError", {}),
  Schema.TaggedStruct("Timeout", {}),
  Schema.TaggedStruct("ConnectionReset", {}),
  Schema.TaggedStruct("CorruptJson", {}),
  Schema.TaggedStruct("BadRequest", {}),
  Schema.TaggedStruct("Unauthorized", {}),
  Schema.TaggedStruct("Hang", {})
])

/**
 * @category models
 * @since 0.1.0
 */
export type ModelFault = typeof ModelFault.Type

/**
 * What one tool call the model asks for will do.
 *
 * - `Succeeds`: an idempotent read answers at once.
 * - `Retryable`: fails `failures` times with a retryable failure, then succeeds; on an
 *   idempotent tool (the runtime may retry it) or a non-idempotent one (it may not).
 * - `Permanent`: an idempotent tool fails permanently (code `rejected`).
 * - `UnknownOutcome`: a payment whose answer is lost; `reconcile` says what its status
 *   query answers (`none`: it has none).
 * - `PermissionDenied`: a tool the permission policy refuses.
 * - `InvalidArgument`: arguments that fail the tool's input schema.
 * - `Slow`: an idempotent read that answers after `millis`.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolOutcome = Schema.Union([
  Schema.TaggedStruct("Succeeds", {}),
  Schema.TaggedStruct("Retryable", { failures: between(1, 5), idempotent: Schema.Boolean }),
  Schema.TaggedStruct("Permanent", {}),
  Schema.TaggedStruct("UnknownOutcome", {
    reconcile: Schema.Literals(["none", "applied", "not_applied", "undecidable"])
  }),
  Schema.TaggedStruct("PermissionDenied", {}),
  Schema.TaggedStruct("InvalidArgument", {}),
  Schema.TaggedStruct("Slow", { millis: between(0, 5_000) })
])

/**
 * @category models
 * @since 0.1.0
 */
export type ToolOutcome = typeof ToolOutcome.Type

/**
 * One model call of the script: a fault, or a response calling one or two tools.
 *
 * @category models
 * @since 0.1.0
 */
export const Step = Schema.Union([
  ModelFault,
  Schema.TaggedStruct("CallTools", { calls: Schema.Array(ToolOutcome).check(Schema.isBetweenLength(1, 2)) })
])

/**
 * @category models
 * @since 0.1.0
 */
export type Step = typeof Step.Type

/**
 * A generated case: the model's script, how it ends (a final answer, or the script runs
 * out and every further call fails permanently), and the run's budgets.
 *
 * @category models
 * @since 0.1.0
 */
export const Case = Schema.Struct({
  steps: Schema.Array(Step).check(Schema.isMaxLength(8)),
  ending: Schema.Literals(["final_answer", "script_exhausted"]),
  runTimeoutSeconds: between(1, 120),
  maxRecoveries: between(0, 10),
  /** Retries one recovery episode's schedule allows. */
  scheduleRetries: between(0, 4),
  /** `maxRetries` of every tool in the case. */
  toolMaxRetries: between(0, 4),
  correctionBudget: between(0, 3),
  maxIterations: between(1, 10),
  maxToolCalls: between(1, 10),
  /** Whether the tools opt in to recovering their errors as observations. */
  recoverErrors: Schema.Boolean,
  jitter: Schema.Boolean,
  /** Seeds `Random`, so the jittered delays are the same every time a case is replayed. */
  seed: between(0, 2_147_483_647)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Case = typeof Case.Type

/** Picks one of `choices` by weight; shrinks toward the first. */
const weighted = <A>(choices: ReadonlyArray<readonly [weight: number, value: Arbitrary.Arbitrary<A>]>) => {
  const total = choices.reduce((sum, [w]) => sum + w, 0)
  return Arbitrary.flatMap(Arbitrary.schema(between(0, total - 1)), (n) => {
    let left = n
    for (const [w, value] of choices) {
      if (left < w) return value
      left -= w
    }
    return (choices[choices.length - 1] as readonly [number, Arbitrary.Arbitrary<A>])[1]
  })
}

const member = <S extends Schema.Top>(schema: S) => Arbitrary.schema(schema)

const toolOutcome: Arbitrary.Arbitrary<ToolOutcome> = weighted<ToolOutcome>([
  [2, Arbitrary.Constant({ _tag: "Succeeds" })],
  [2, member(ToolOutcome.members[1]).pipe(Arbitrary.map((o) => ({ ...o, idempotent: true })))],
  [1, member(ToolOutcome.members[1]).pipe(Arbitrary.map((o) => ({ ...o, idempotent: false })))],
  [1, Arbitrary.Constant({ _tag: "Permanent" })],
  [2, member(ToolOutcome.members[3])],
  [1, Arbitrary.Constant({ _tag: "PermissionDenied" })],
  [1, Arbitrary.Constant({ _tag: "InvalidArgument" })],
  [1, member(ToolOutcome.members[6])]
])

const retryableFault: Arbitrary.Arbitrary<ModelFault> = weighted<ModelFault>([
  [2, member(ModelFault.members[0])],
  [1, Arbitrary.Constant({ _tag: "ServerError" })],
  [1, Arbitrary.Constant({ _tag: "Timeout" })],
  [1, Arbitrary.Constant({ _tag: "ConnectionReset" })],
  [1, Arbitrary.Constant({ _tag: "CorruptJson" })]
])

const step: Arbitrary.Arbitrary<Step> = weighted<Step>([
  [
    9,
    Arbitrary.all({
      _tag: Arbitrary.Constant("CallTools" as const),
      calls: Arbitrary.array(toolOutcome, { minLength: 1, maxLength: 2 })
    })
  ],
  [7, retryableFault],
  [1, Arbitrary.Constant({ _tag: "BadRequest" })],
  [1, Arbitrary.Constant({ _tag: "Unauthorized" })],
  [1, Arbitrary.Constant({ _tag: "Hang" })]
])

/**
 * Generated cases, for `it.effect.prop` or `Arbitrary.checkEffect`. Every value is a
 * valid {@link Case}; the mix is weighted so that most runs get far enough to retry:
 * about half the steps call tools, a third are retryable provider faults, and a tenth
 * are permanent faults or hangs; nine cases in ten end with a final answer.
 * `Arbitrary.schema(Case)` gives the unweighted mix.
 *
 * @category constructors
 * @since 0.1.0
 */
export const arbitrary: Arbitrary.Arbitrary<Case> = Arbitrary.all({
  steps: Arbitrary.array(step, { minLength: 1, maxLength: 8 }),
  ending: weighted<Case["ending"]>([
    [9, Arbitrary.Constant("final_answer" as const)],
    [1, Arbitrary.Constant("script_exhausted" as const)]
  ]),
  runTimeoutSeconds: member(Case.fields.runTimeoutSeconds),
  maxRecoveries: member(Case.fields.maxRecoveries),
  scheduleRetries: member(Case.fields.scheduleRetries),
  toolMaxRetries: member(Case.fields.toolMaxRetries),
  correctionBudget: member(Case.fields.correctionBudget),
  maxIterations: member(Case.fields.maxIterations),
  maxToolCalls: member(Case.fields.maxToolCalls),
  recoverErrors: member(Case.fields.recoverErrors),
  jitter: member(Case.fields.jitter),
  seed: member(Case.fields.seed)
})

/**
 * The limits a run was given, for {@link check}.
 *
 * @category models
 * @since 0.1.0
 */
export interface Budget {
  readonly runTimeoutMillis: number
  readonly maxRecoveries: number
  /** Retries the schedule allows in one episode. */
  readonly scheduleRetries: number
  readonly correctionBudget?: number | undefined
  readonly maxIterations?: number | undefined
  readonly maxToolCalls?: number | undefined
  /** Each tool's `maxRetries`, by name. */
  readonly toolMaxRetries?: Readonly<Record<string, number>> | undefined
  /** Failure codes that are permanent or of unknown outcome: a retry caused by one is a violation. */
  readonly neverRetried?: ReadonlyArray<string> | undefined
}

/**
 * The failure codes of permanent and unknown-outcome results produced by `FaultyModel`,
 * `FaultyTools` and the tools of {@link toScenario}, plus the pipeline's own refusals.
 *
 * @category constructors
 * @since 0.1.0
 */
export const neverRetriedCodes: ReadonlyArray<string> = [
  "http_400",
  "http_401",
  "script_exhausted",
  "rejected",
  "connection_lost",
  "permission_denied",
  "input_validation_failed",
  "invalid_arguments",
  "unknown_tool"
]

/**
 * An invariant a run broke: which one (named by its SPEC id) and how.
 *
 * @category models
 * @since 0.1.0
 */
export interface Violation {
  readonly invariant: string
  readonly detail: string
}

/**
 * The invariant an argument correction breaks when it spends the run's retry budget:
 * the budget is then declared spent before `maxRecoveries` retries were made.
 *
 * @category checks
 * @since 0.1.0
 */
export const correctionsSpendRetries = "R3.4 corrections do not spend the retry budget"

/**
 * The invariant a run breaks when a call of unknown outcome does not end it
 * `unknown_outcome` (R3.8): it ended with some other, guessed, stop reason.
 *
 * @category checks
 * @since 0.1.0
 */
export const unknownOutcomeEndsRun = "R3.8 an unknown outcome ends the run unknown_outcome"

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

const terminal: ReadonlySet<string> = new Set(["completed", "partial", "failed", "cancelled", "unknown_outcome"])

/** The tool call each event belongs to, for runs whose batches run one call at a time. */
const callOf = (timeline: ReadonlyArray<Event.Event>): Map<number, Event.Of<"tool.started">> => {
  const owner = new Map<number, Event.Of<"tool.started">>()
  let current: Event.Of<"tool.started"> | undefined
  for (const e of timeline) {
    if (e._tag === "tool.started") current = e
    else if (e._tag === "model.requested") current = undefined
    if (current !== undefined) owner.set(e.seq, current)
  }
  return owner
}

/**
 * The invariants of R3 (and R2.5, R8) a result violates, or `[]`:
 *
 * - `R3.4 run budget`: provider and tool retries ≤ `maxRecoveries`, and
 *   `counters.recoveryAttempts` ≤ `maxRecoveries` + the argument corrections made; and
 *   ({@link correctionsSpendRetries}) the run budget is never declared spent before
 *   `maxRecoveries` retries were made.
 * - `R3.5 correction budget`: argument corrections ≤ `correctionBudget`.
 * - `R3.3 episode`: every retry's attempt number ≤ the schedule's retries, and a tool's ≤
 *   its `maxRetries`.
 * - `R3.3 deadline`: every retry's wait ends before the deadline; the waits add up to
 *   no more than the run timeout; `elapsedMillis` ≤ the run timeout; no event after the
 *   deadline.
 * - `R3.1 never retried`: no retry caused by a permanent or unknown-outcome failure
 *   (a provider retry must follow a retryable `model.failed`), no retry of a blocked or
 *   argument-refused call.
 * - `R2.3 hard limits`: model responses ≤ `maxIterations`, tool calls started ≤ `maxToolCalls`.
 * - `R3.3 episode` also: every episode that retried ends with `recovery.completed` or
 *   `recovery.failed`, unless the deadline or a cancel stopped the run inside it.
 * - `R3.8 unknown outcome`: a tool result of unknown outcome ends the run
 *   `unknown_outcome` (or the deadline or a cancel ended it first), the model is not
 *   asked again, and the call is among the result's `pendingActions`.
 * - `R8 timeline`: each tool call starts once and ends (succeeded, failed or blocked) at
 *   most once, after its start.
 * - `R2.5 ending`: `run.started` first, exactly one `run.finished`, last, agreeing with
 *   the result; a terminal status and a `StopReason` from `StopReason.all`; `completed`
 *   exactly when `goal_reached`; `seq` numbered without gaps.
 * - `R8 counters`: the result's counters equal `Counters.snapshot(Counters.fold(timeline))`.
 *
 * Tool retries are attributed to the call started last, so a run with `concurrency` > 1
 * should not use the per-call checks.
 *
 * @category checks
 * @since 0.1.0
 */
export const check = (result: RunResult.RunResult, budget: Budget): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  const timeline = result.timeline
  const retries = ofTag(timeline, "recovery.started").filter((e) => e.kind !== "tool_argument_correction")
  const corrections = ofTag(timeline, "recovery.started").filter((e) => e.kind === "tool_argument_correction")

  // R3.4: one run budget of attempts.
  if (retries.length > budget.maxRecoveries) {
    violate("R3.4 run budget", `${retries.length} retries, over maxRecoveries ${budget.maxRecoveries}`)
  }
  if (result.counters.recoveryAttempts > budget.maxRecoveries + corrections.length) {
    violate(
      "R3.4 run budget",
      `counters.recoveryAttempts is ${result.counters.recoveryAttempts}, over maxRecoveries ${budget.maxRecoveries} plus ${corrections.length} corrections`
    )
  }
  // A budget of retries is spent by retries: an argument correction is not one (R3.5 has its own budget).
  for (const e of ofTag(timeline, "recovery.failed")) {
    if (e.scope !== "run" || e.kind === "tool_argument_correction") continue
    const made = retries.filter((r) => r.seq < e.seq).length
    if (made < budget.maxRecoveries) {
      violate(
        correctionsSpendRetries,
        `${e.kind} gave up (seq ${e.seq}) on a spent run budget after ${made} of ${budget.maxRecoveries} retries`
      )
    }
  }
  if (budget.correctionBudget !== undefined && result.counters.toolCorrectionAttempts > budget.correctionBudget) {
    violate(
      "R3.5 correction budget",
      `${result.counters.toolCorrectionAttempts} corrections, over the budget of ${budget.correctionBudget}`
    )
  }

  // R3.3: per episode, per tool.
  const owner = callOf(timeline)
  for (const e of retries) {
    if (e.attempt > budget.scheduleRetries) {
      violate(
        "R3.3 episode",
        `${e.kind} attempt ${e.attempt} (seq ${e.seq}) past the schedule's ${budget.scheduleRetries}`
      )
    }
    if (e.kind === "tool_retry") {
      const call = owner.get(e.seq)
      const limit = call === undefined ? undefined : budget.toolMaxRetries?.[call.name]
      if (call === undefined) violate("R3.3 episode", `tool retry (seq ${e.seq}) outside any tool call`)
      else if (limit !== undefined && e.attempt > limit) {
        violate("R3.3 episode", `${call.name} (${call.callId}) retry ${e.attempt}, past its maxRetries ${limit}`)
      }
    }
  }

  // R3.3, R4: the run deadline.
  const started = timeline[0]
  const deadlineAt = started?._tag === "run.started" ? started.deadlineAt : undefined
  if (deadlineAt !== undefined) {
    for (const e of retries) {
      if (e.at + e.delayMillis >= deadlineAt) {
        violate(
          "R3.3 deadline",
          `${e.kind} at ${e.at} waits ${e.delayMillis} ms, to or past the deadline ${deadlineAt}`
        )
      }
    }
    const late = timeline.find((e) => e.at > deadlineAt)
    if (late !== undefined)
      violate("R3.3 deadline", `${late._tag} (seq ${late.seq}) at ${late.at}, after the deadline ${deadlineAt}`)
  }
  const slept = retries.reduce((sum, e) => sum + e.delayMillis, 0)
  if (slept > budget.runTimeoutMillis) {
    violate("R3.3 deadline", `retries slept ${slept} ms in all, over the run timeout of ${budget.runTimeoutMillis} ms`)
  }
  if (result.elapsedMillis > budget.runTimeoutMillis) {
    violate(
      "R3.3 deadline",
      `the run took ${result.elapsedMillis} ms, over its timeout of ${budget.runTimeoutMillis} ms`
    )
  }

  // R3.1, R3.6, R3.8: what is never retried.
  const never = new Set(budget.neverRetried ?? neverRetriedCodes)
  for (const e of retries) {
    if (never.has(e.cause)) violate("R3.1 never retried", `${e.kind} (seq ${e.seq}) retried a ${e.cause} failure`)
  }
  for (const e of ofTag(retries, "recovery.started").filter((r) => r.kind === "provider_retry")) {
    const before = timeline
      .slice(0, e.seq)
      .reverse()
      .find((x) => x._tag !== "state.changed")
    if (before?._tag !== "model.failed" || before.failure.classification !== "retryable") {
      violate("R3.1 never retried", `provider retry (seq ${e.seq}) does not follow a retryable model failure`)
    } else if (before.failure.code !== e.cause) {
      violate(
        "R3.1 never retried",
        `provider retry (seq ${e.seq}) names ${e.cause}, the failure was ${before.failure.code}`
      )
    }
  }
  const refused = new Set(
    timeline.flatMap((e) =>
      e._tag === "tool.blocked" || (e._tag === "tool.failed" && e.error.correctable) ? [e.callId] : []
    )
  )
  for (const e of retries) {
    const call = owner.get(e.seq)
    if (e.kind === "tool_retry" && call !== undefined && refused.has(call.callId)) {
      violate("R3.1 never retried", `${call.name} (${call.callId}) was refused, then retried (seq ${e.seq})`)
    }
  }
  for (const e of ofTag(timeline, "tool.failed")) {
    const failure = e.error.failure
    if (failure !== undefined && failure.classification !== "retryable" && failure.attempts > 1) {
      violate(
        "R3.1 never retried",
        `${e.name} (${e.callId}) ended ${failure.classification} after ${failure.attempts} attempts`
      )
    }
  }

  // R8: each call starts once and ends once.
  const starts = new Map<string, number>()
  const ends = new Map<string, number>()
  for (const e of timeline) {
    if (e._tag === "tool.started") starts.set(e.callId, (starts.get(e.callId) ?? 0) + 1)
    if (e._tag === "tool.succeeded" || e._tag === "tool.failed" || e._tag === "tool.blocked") {
      ends.set(e.callId, (ends.get(e.callId) ?? 0) + 1)
      if (!starts.has(e.callId)) violate("R8 timeline", `${e._tag} for ${e.callId} before its tool.started`)
    }
  }
  for (const [callId, n] of starts) if (n > 1) violate("R8 timeline", `${callId} started ${n} times`)
  for (const [callId, n] of ends) if (n > 1) violate("R8 timeline", `${callId} ended ${n} times`)

  // R3.3: every episode that retried ends with recovery.completed or recovery.failed,
  // unless the run was stopped from outside (deadline, cancel) while it was in it.
  let open: Event.Of<"recovery.started"> | undefined
  const closeOpen = (e: Event.Event) => {
    if (open !== undefined)
      violate("R3.3 episode", `the ${open.kind} episode of seq ${open.seq} never closed before seq ${e.seq}`)
  }
  for (const e of timeline) {
    if (e._tag === "recovery.started" && e.kind !== "tool_argument_correction") {
      if (e.attempt === 1) closeOpen(e)
      open = e
    } else if (
      (e._tag === "recovery.completed" || e._tag === "recovery.failed") &&
      e.kind !== "tool_argument_correction"
    ) {
      if (open === undefined && e._tag === "recovery.completed") {
        violate("R3.3 episode", `recovery.completed (seq ${e.seq}) without a retry`)
      }
      open = undefined
    } else if (e._tag === "termination.decided" && open !== undefined) {
      if (e.reason !== "run_timeout" && e.reason !== "cancelled") closeOpen(e)
      open = undefined
    }
  }

  // R3.8: an unknown outcome that was not reconciled ends the run, never guessed away.
  const unknown = ofTag(timeline, "tool.failed").find((e) => e.error.failure?.classification === "unknown")
  if (unknown !== undefined) {
    if (
      result.stopReason !== "unknown_outcome" &&
      result.stopReason !== "run_timeout" &&
      result.stopReason !== "cancelled"
    ) {
      violate(
        unknownOutcomeEndsRun,
        `${unknown.name} (${unknown.callId}) had an unknown outcome, the run ended ${result.stopReason}`
      )
    }
    const later = timeline.find((e) => e.seq > unknown.seq && e._tag === "model.requested")
    if (later !== undefined)
      violate(
        "R3.8 unknown outcome",
        `the model was asked again (seq ${later.seq}) after ${unknown.callId}'s unknown outcome`
      )
    if (!result.pendingActions.some((a) => a.callId === unknown.callId)) {
      violate("R3.8 unknown outcome", `${unknown.callId} is not among the result's pending actions`)
    }
  }

  // R2.3: hard limits.
  const responses = ofTag(timeline, "model.responded").length
  if (budget.maxIterations !== undefined && responses > budget.maxIterations) {
    violate("R2.3 hard limits", `${responses} model responses, over maxIterations ${budget.maxIterations}`)
  }
  const calls = ofTag(timeline, "tool.started").length
  if (budget.maxToolCalls !== undefined && calls > budget.maxToolCalls) {
    violate("R2.3 hard limits", `${calls} tool calls started, over maxToolCalls ${budget.maxToolCalls}`)
  }

  // R2.5, R8: the ending.
  if (started?._tag !== "run.started") violate("R2.5 ending", `the first event is ${started?._tag ?? "missing"}`)
  const finished = ofTag(timeline, "run.finished")
  const last = timeline[timeline.length - 1]
  if (finished.length !== 1) violate("R2.5 ending", `${finished.length} run.finished events`)
  if (last?._tag !== "run.finished") violate("R2.5 ending", `the last event is ${last?._tag ?? "missing"}`)
  else if (last.status !== result.status || last.stopReason !== result.stopReason) {
    violate(
      "R2.5 ending",
      `run.finished says ${last.status}/${last.stopReason}, the result ${result.status}/${result.stopReason}`
    )
  }
  if (!terminal.has(result.status)) violate("R2.5 ending", `status ${result.status} is not terminal`)
  if (!StopReason.all.includes(result.stopReason))
    violate("R2.5 ending", `stop reason ${result.stopReason} is not in StopReason.all`)
  if ((result.status === "completed") !== (result.stopReason === "goal_reached")) {
    violate("R2.5 ending", `status ${result.status} with stop reason ${result.stopReason}`)
  }
  if ((result.status === "unknown_outcome") !== (result.stopReason === "unknown_outcome")) {
    violate("R2.5 ending", `status ${result.status} with stop reason ${result.stopReason}`)
  }
  const gap = timeline.findIndex((e, i) => e.seq !== i)
  if (gap >= 0) violate("R8 timeline", `event ${gap} has seq ${timeline[gap]?.seq}`)
  const folded = Counters.snapshot(Counters.fold(timeline))
  for (const key of Object.keys(folded) as Array<keyof Counters.Snapshot>) {
    if (folded[key] !== result.counters[key]) {
      violate("R8 counters", `${key}: the result says ${result.counters[key]}, the timeline folds to ${folded[key]}`)
    }
  }
  return violations
}

/**
 * The tools of a scenario and what they saw.
 *
 * @category models
 * @since 0.1.0
 */
export interface Tools {
  /** Idempotent read: succeeds, fails retryably or permanently, or is slow, as its call's plan says. */
  readonly lookup: FaultyTools.Calls
  /** Not idempotent: fails retryably as its call's plan says. */
  readonly submit: FaultyTools.Ledgered
  /** Payments of unknown outcome: no status query, one from the ledger, one that cannot decide. */
  readonly pay: FaultyTools.Ledgered
  readonly payChecked: FaultyTools.Ledgered
  readonly payUndecidable: FaultyTools.Ledgered
  /** Refused by the permission policy: its handler must never run. */
  readonly forbidden: FaultyTools.Flaky
}

/**
 * A case made runnable.
 *
 * @category models
 * @since 0.1.0
 */
export interface Scenario {
  readonly case: Case
  readonly model: FaultyModel.FaultyModel
  readonly tools: Tools
  readonly options: Run.Options<Tool.Any<never>>
  readonly permission: Permission.Options
  readonly budget: Budget
  /** What each tool call id was scripted to do. */
  readonly plan: ReadonlyMap<string, ToolOutcome>
}

const rejected = (name: string) =>
  new Failure.Permanent({
    source: "tool",
    category: "rejected",
    code: "rejected",
    attempts: 1,
    hint: `${name}: the request was rejected`
  })

const busy = (name: string, n: number) =>
  new Failure.Retryable({
    source: "tool",
    category: "unavailable",
    code: "unavailable",
    attempts: 1,
    hint: `${name}: the service is busy (failure ${n})`
  })

const toolFor = (outcome: ToolOutcome): string => {
  switch (outcome._tag) {
    case "Succeeds":
    case "Permanent":
    case "InvalidArgument":
    case "Slow":
      return "lookup"
    case "Retryable":
      return outcome.idempotent ? "lookup" : "submit"
    case "UnknownOutcome":
      switch (outcome.reconcile) {
        case "none":
          return "pay"
        case "applied":
        case "not_applied":
          return "pay_checked"
        case "undecidable":
          return "pay_undecidable"
      }
      return "pay"
    case "PermissionDenied":
      return "forbidden"
  }
}

const faultStep = (fault: ModelFault): FaultyModel.Step => {
  switch (fault._tag) {
    case "RateLimited":
      return FaultyModel.rateLimited(fault.retryAfterSeconds === null ? undefined : String(fault.retryAfterSeconds))
    case "ServerError":
      return FaultyModel.httpError(500)
    case "Timeout":
      return FaultyModel.timeout
    case "ConnectionReset":
      return FaultyModel.connectionReset
    case "CorruptJson":
      return FaultyModel.corruptJson
    case "BadRequest":
      return FaultyModel.httpError(400)
    case "Unauthorized":
      return FaultyModel.httpError(401)
    case "Hang":
      return FaultyModel.hang
  }
}

/**
 * Builds the model script, the tools and the run options of a case. Every call makes
 * fresh tools and a fresh model, so build the scenario inside each property evaluation.
 *
 * Tool calls are numbered `c1`, `c2`, … in script order; each call's arguments name its
 * id, so no two calls share a signature. The run id is `"prop"`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toScenario = (c: Case): Scenario => {
  const plan = new Map<string, ToolOutcome>()
  const failuresSeen = new Map<string, number>()
  const script: Array<FaultyModel.Step> = []
  let next = 0
  for (const step of c.steps) {
    if (step._tag !== "CallTools") {
      script.push(faultStep(step))
      continue
    }
    const calls = step.calls.map((outcome): readonly [string, unknown, string] => {
      const id = `c${++next}`
      plan.set(id, outcome)
      const args = outcome._tag === "InvalidArgument" ? { q: 42 } : { q: id }
      return [toolFor(outcome), args, id]
    })
    script.push(FaultyModel.respond(ScriptedModel.toolCalls(...calls)))
  }
  if (c.ending === "final_answer") script.push(FaultyModel.respond(ScriptedModel.finalAnswer("done")))

  const common = { maxRetries: c.toolMaxRetries, recoverErrors: c.recoverErrors }
  // Fails the first `failures` invocations of a call, counted per call id.
  const failing = (callId: string): number | undefined => {
    const outcome = plan.get(callId)
    if (outcome?._tag !== "Retryable") return undefined
    const seen = (failuresSeen.get(callId) ?? 0) + 1
    failuresSeen.set(callId, seen)
    return seen <= outcome.failures ? seen : undefined
  }

  const lookupCalls: Array<FaultyTools.Call> = []
  const lookup = Tool.make({
    name: "lookup",
    description: "an idempotent read",
    input: Schema.Struct({ q: Schema.String }),
    output: Schema.String,
    idempotent: true,
    sideEffect: "read",
    ...common,
    handler: (input, context) =>
      Effect.gen(function* () {
        const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        lookupCalls.push({
          n: lookupCalls.length + 1,
          callId: context.callId,
          idempotencyKey: context.idempotencyKey,
          attempt: lookupCalls.filter((x) => x.idempotencyKey === context.idempotencyKey).length + 1,
          input,
          at
        })
        const outcome = plan.get(context.callId)
        if (outcome?._tag === "Permanent") return yield* rejected("lookup")
        if (outcome?._tag === "Slow") yield* Effect.sleep(outcome.millis)
        const failure = failing(context.callId)
        if (failure !== undefined) return yield* busy("lookup", failure)
        return `found ${input.q}`
      })
  })
  const lookupHandle: FaultyTools.Calls = {
    all: lookupCalls,
    get count() {
      return lookupCalls.length
    },
    forKey: (key) => lookupCalls.filter((x) => x.idempotencyKey === key),
    forCall: (callId) => lookupCalls.filter((x) => x.callId === callId),
    get keys() {
      return [...new Set(lookupCalls.map((x) => x.idempotencyKey))]
    }
  }

  const submit = FaultyTools.ledgered({
    name: "submit",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: (call) => (failing(call.callId) !== undefined ? "fail_before_apply" : "apply")
  })
  const pay = FaultyTools.ledgered({
    name: "pay",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: ["apply_then_lose"],
    reconcile: false
  })
  const loses = (call: FaultyTools.Call): FaultyTools.Behaviour => {
    const outcome = plan.get(call.callId)
    return outcome?._tag === "UnknownOutcome" && outcome.reconcile === "not_applied"
      ? "lose_before_apply"
      : "apply_then_lose"
  }
  const payChecked = FaultyTools.ledgered({
    name: "pay_checked",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: loses,
    reconcile: true
  })
  const payUndecidable = FaultyTools.ledgered({
    name: "pay_undecidable",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: loses,
    reconcile: () => ({ _tag: "Undecidable", detail: "the payment service has no record yet" })
  })
  const forbidden = FaultyTools.flaky({ name: "forbidden", failures: 0, ...common })

  const tools: ReadonlyArray<Tool.Any<never>> = [
    lookup,
    submit.tool,
    pay.tool,
    payChecked.tool,
    payUndecidable.tool,
    forbidden.tool
  ]
  const runTimeoutMillis = c.runTimeoutSeconds * 1000
  return {
    case: c,
    model: FaultyModel.make(script),
    tools: { lookup: lookupHandle, submit, pay, payChecked, payUndecidable, forbidden },
    options: {
      goal: "a generated case",
      runId: "prop",
      tools,
      recovery: Recovery.backoff({ retries: c.scheduleRetries, jitter: c.jitter }),
      limits: {
        runTimeout: runTimeoutMillis,
        maxRecoveries: c.maxRecoveries,
        correctionBudget: c.correctionBudget,
        maxIterations: c.maxIterations,
        maxToolCalls: c.maxToolCalls
      }
    },
    permission: { allowTools: tools.filter((t) => t.name !== "forbidden").map((t) => t.name) },
    budget: {
      runTimeoutMillis,
      maxRecoveries: c.maxRecoveries,
      scheduleRetries: c.scheduleRetries,
      correctionBudget: c.correctionBudget,
      maxIterations: c.maxIterations,
      maxToolCalls: c.maxToolCalls,
      toolMaxRetries: Object.fromEntries(tools.map((t) => [t.name, t.metadata.maxRetries]))
    },
    plan
  }
}

/**
 * Runs `run` in the background on `TestClock` (which `it.effect` provides), moving the
 * clock in steps of `step` until it ends, at most `maxSteps` times; fails with a defect
 * if it has not ended by then. Every sleep wakes at its own time, so the timeline's
 * times are exact whatever the step.
 *
 * @category combinators
 * @since 0.1.0
 */
export const drive = <A, E, R>(
  run: Effect.Effect<A, E, R>,
  options: { readonly step: number; readonly maxSteps?: number | undefined }
): Effect.Effect<A, E, R> =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(run, { startImmediately: true })
    const maxSteps = options.maxSteps ?? 3
    for (let i = 0; i < maxSteps && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust(options.step)
    if (fiber.pollUnsafe() === undefined) {
      yield* Fiber.interrupt(fiber)
      return yield* Effect.die(new Error(`the run did not end within ${maxSteps} clock steps of ${options.step} ms`))
    }
    return yield* Fiber.join(fiber)
  })

/**
 * Runs a scenario on `TestClock` with its model, its permission policy and `Random`
 * seeded from the case. The clock moves by the run timeout plus a second at a time, so
 * a run that keeps going past its deadline fails the check with a defect.
 *
 * @category combinators
 * @since 0.1.0
 */
export const runScenario = (
  scenario: Scenario
): Effect.Effect<RunResult.RunResult, never, FileSystem.FileSystem | Path.Path> =>
  drive(Run.run(scenario.options), { step: scenario.budget.runTimeoutMillis + 1000, maxSteps: 3 }).pipe(
    Random.withSeed(scenario.case.seed),
    Effect.provide(Layer.merge(FaultyModel.layer(scenario.model), Permission.layer(scenario.permission)))
  )

/**
 * {@link check}, plus what only the scenario's tools saw:
 *
 * - `R1.2`: the run never ends `internal_error` (a defect);
 * - `R3.8`: every handler invocation carried its call's key, `runId:callId`;
 * - `R3.6`: the refused tool's handler never ran;
 * - `R3.8`: each payment key was sent once and applied at most once (never retried
 *   blindly), and a key the status query found not applied was never applied;
 * - `R3.7`: a non-idempotent call was sent once, a permanent failure once, and an
 *   idempotent call at most 1 + min(schedule retries, `maxRetries`) times.
 *
 * @category checks
 * @since 0.1.0
 */
export const checkScenario = (scenario: Scenario, result: RunResult.RunResult): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = [...check(result, scenario.budget)]
  const violate = (invariant: string, detail: string) => violations.push({ invariant, detail })
  const { tools, plan, budget } = scenario
  if (result.stopReason === "internal_error")
    violate("R1.2 no defect", `the run ended internal_error: ${result.detail}`)
  const handles = [
    tools.lookup,
    tools.submit.calls,
    tools.pay.calls,
    tools.payChecked.calls,
    tools.payUndecidable.calls
  ]
  for (const calls of handles) {
    for (const call of calls.all) {
      if (call.idempotencyKey !== `${result.runId}:${call.callId}`) {
        violate("R3.8 idempotency key", `${call.callId} was sent with key ${call.idempotencyKey}`)
      }
    }
  }
  if (tools.forbidden.calls.count > 0) {
    violate("R3.6 permission", `the refused tool ran ${tools.forbidden.calls.count} times`)
  }
  for (const ledgered of [tools.pay, tools.payChecked, tools.payUndecidable]) {
    for (const key of ledgered.calls.keys) {
      const sent = ledgered.calls.forKey(key).length
      if (sent !== 1) violate("R3.8 unknown outcome", `${ledgered.tool.name} ${key} was sent ${sent} times`)
      if (ledgered.ledger.count(key) > 1) {
        violate("R3.8 unknown outcome", `${ledgered.tool.name} ${key} was applied ${ledgered.ledger.count(key)} times`)
      }
    }
  }
  for (const call of tools.payChecked.calls.all) {
    const outcome = plan.get(call.callId)
    const applied = tools.payChecked.ledger.count(call.idempotencyKey)
    if (outcome?._tag === "UnknownOutcome" && outcome.reconcile === "not_applied" && applied > 0) {
      violate(
        "R3.8 unknown outcome",
        `pay_checked ${call.idempotencyKey} was lost before applying, yet applied ${applied} times`
      )
    }
  }
  for (const key of tools.submit.calls.keys) {
    const sent = tools.submit.calls.forKey(key).length
    if (sent !== 1) violate("R3.7 idempotent only", `submit (not idempotent) ${key} was sent ${sent} times`)
  }
  const limit = 1 + Math.min(budget.scheduleRetries, scenario.case.toolMaxRetries)
  for (const key of tools.lookup.keys) {
    const sent = tools.lookup.forKey(key)
    const outcome = plan.get(sent[0]?.callId ?? "")
    if (outcome?._tag === "Permanent" && sent.length !== 1) {
      violate("R3.1 never retried", `lookup ${key} failed permanently and was sent ${sent.length} times`)
    }
    if (sent.length > limit) violate("R3.7 maxRetries", `lookup ${key} was sent ${sent.length} times, over ${limit}`)
  }
  return violations
}
