/**
 * The plan checks of a validation (R6.1, R6.2): each step holds when all its criteria are
 * observed in the timeline, and the evidence index then asks that every completed step be
 * backed by a tool result of this timeline. Private to `validation/`.
 */
import { Option, Result, Schema } from "effect"
import type * as Event from "../../events/Event.ts"
import * as Text from "../../failure/Text.ts"
import * as UserCode from "../../failure/UserCode.ts"
import type { Criterion } from "../Criterion.ts"
import { describeDefect, type Evidence, type Part, part } from "./Parts.ts"

/** A plan step as these checks read it (`Validation.PlanStep`). */
export interface Step {
  readonly id: string
  readonly description: string
  readonly required: boolean
  readonly criteria: ReadonlyArray<Criterion>
}

type Outcome =
  | { readonly _tag: "held"; readonly detail: string; readonly callId: string | undefined }
  | { readonly _tag: "unmet"; readonly reason: string }

const checkObservation = UserCode.check(
  Schema.Option(Schema.Struct({ detail: Schema.String, callId: Schema.optional(Schema.String) })),
  "the criterion's answer"
)

/** What a criterion observes in the timeline: a criterion reads it alone, synchronously (user code: it may throw). */
const observe = (criterion: Criterion, timeline: ReadonlyArray<Event.Event>): Outcome => {
  let checked: ReturnType<typeof checkObservation>
  try {
    checked = checkObservation(criterion.observe(timeline))
  } catch (defect) {
    // A contract the criterion broke, as its constructor names it (an `async` decide), says so as it is.
    const why = UserCode.isUserCodeDefect(defect) ? defect.safeMessage : `criterion died (${describeDefect(defect)})`
    return { _tag: "unmet", reason: `${criterion.description}: ${why}` }
  }
  return Result.isFailure(checked)
    ? { _tag: "unmet", reason: `${criterion.description}: ${checked.failure}` }
    : Option.match(checked.success, {
        onNone: (): Outcome => ({ _tag: "unmet", reason: `not observed: ${criterion.description}` }),
        // Cut to what the run keeps: the detail is copied into the log and the result (R12, review 118).
        onSome: (o): Outcome => ({
          _tag: "held",
          detail: UserCode.cutWords(o.detail),
          callId: o.callId === undefined ? undefined : UserCode.cutWords(o.callId)
        })
      })
}

export interface StepResult<S extends Step> extends Part {
  readonly step: S
  readonly done: boolean
  readonly reason: string
  /** Call ids the step cites that are not a `tool.succeeded` event of this timeline. */
  readonly dangling: ReadonlyArray<string>
  /** What its criteria that held without citing a call said: each backs nothing. */
  readonly uncited: ReadonlyArray<string>
}

/** A plan step checked against the timeline, synchronously: its criteria read the timeline alone. */
export const checkStep = <S extends Step>(
  step: S,
  timeline: ReadonlyArray<Event.Event>,
  succeededCalls: ReadonlySet<string>
): StepResult<S> => {
  const name = `plan:${step.id}`
  const outcomes = step.criteria.map((criterion) => observe(criterion, timeline))
  const unmet = outcomes.flatMap((o) => (o._tag === "unmet" ? [o.reason] : []))
  const held = outcomes.flatMap((o) => (o._tag === "held" ? [o] : []))
  const done = unmet.length === 0
  const evidence: Array<Evidence> = []
  const dangling: Array<string> = []
  const uncited: Array<string> = []
  for (const { callId, detail } of held) {
    // A criterion that holds citing nothing backs nothing, whatever the others cite (review 90).
    if (callId === undefined) uncited.push(detail)
    else if (!succeededCalls.has(callId)) dangling.push(callId)
    else {
      // One entry per result: two criteria citing one call are one piece of evidence (review 132).
      const cited = evidence.findIndex((e) => e.ref === callId)
      const same = evidence[cited]
      if (same === undefined) evidence.push({ item: name, kind: "tool_result", ref: callId, detail })
      else evidence[cited] = { ...same, detail: `${same.detail}; ${detail}` }
    }
  }
  const reason = unmet.join("; ")
  const clause = done
    ? `done: ${held.map((o) => o.detail).join("; ")}`
    : step.required
      ? `not done: ${reason}`
      : `optional step not done (does not fail validation): ${reason}`
  const base = part(name, "plan_step", done, clause)
  const check = done ? { ...base, backed: evidence.length > 0 && dangling.length === 0 && uncited.length === 0 } : base
  return {
    step,
    done,
    reason,
    dangling,
    uncited,
    check,
    blocking: step.required,
    evidence: done ? evidence : []
  }
}

/**
 * What keeps a done step from being backed by the timeline: no evidence, calls it cites
 * that are not results, or a criterion that held citing no call.
 */
const unbacked = (s: StepResult<Step>): ReadonlyArray<string> => [
  ...(s.evidence.length === 0 ? [`${s.check.name} passed without evidence`] : []),
  ...s.dangling.map((callId) => `${s.check.name} cites call ${callId}, which is not a tool.succeeded event`),
  ...(s.evidence.length === 0
    ? []
    : s.uncited.map((detail) => `${s.check.name}: ${JSON.stringify(Text.clip(detail, 80))} cites no call`))
]

/**
 * Whether a step is done with evidence (R6.2, R6.3): its criteria hold, and the results
 * they cite are tool results of the timeline. Only such a step counts as completed.
 */
export const backed = (s: StepResult<Step>): boolean => s.done && unbacked(s).length === 0

/** Why a step is not completed: its criteria's reason, or, when they held, what its evidence lacks. */
export const notCompleted = (s: StepResult<Step>): string => (s.done ? unbacked(s).join("; ") : s.reason)

/** The `evidence:index` check over the plan's results. */
export const evidenceIndex = (steps: ReadonlyArray<StepResult<Step>>): Part => {
  const done = steps.filter((s) => s.done)
  // An optional step's unbacked success does not fail validation, as its failure would not:
  // it is not counted completed, and the clause says why (review 79).
  const problems = done.filter((s) => s.step.required).flatMap(unbacked)
  const optional = done.filter((s) => !s.step.required).flatMap(unbacked)
  const counted = done.filter((s) => unbacked(s).length === 0)
  // Distinct results: one call backing two steps is one tool result.
  const backed = new Set(counted.flatMap((s) => s.evidence.map((e) => e.ref))).size
  const clause =
    problems.length === 0
      ? `${counted.length} completed plan step(s) backed by ${backed} tool result(s)${
          optional.length === 0 ? "" : `; optional, not counted completed: ${optional.join("; ")}`
        }`
      : `unbacked success: ${problems.join("; ")}`
  return { check: part("evidence:index", "evidence", problems.length === 0, clause), blocking: true, evidence: [] }
}
