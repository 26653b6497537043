/**
 * Validation: "the model said done" is only a candidate (R6).
 *
 * When the loop stops on a final answer, the run enters `validating` and asks
 * `validate` whether the work is really done, against what was observed rather than
 * what the model claims:
 *
 * 1. plan progress: each plan step holds when all its `Criterion`s are observed in
 *    the timeline; every required step must hold;
 * 2. stop hooks: your own effectful checks, run in order; a hook that dies becomes a
 *    failed check, never a crashed validation;
 * 3. artifact contracts (see `Artifact`): required files exist under `root`, are
 *    files, are non-empty, parse, and match their schema;
 * 4. the evidence index: every completed plan step must be backed by a tool result
 *    that is in the timeline (R6.2).
 *
 * The `Report` lists the checks in that fixed order (one `validation.checked` event
 * each), the evidence behind every passing check, and the completed and unfinished
 * plan steps (R6.3). Validation never fails: every problem is a failed check.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import type * as Counters from "../events/Counters.ts"
import * as Event from "../events/Event.ts"
import * as Artifact from "./Artifact.ts"
import type { Criterion } from "./Criterion.ts"
import { checkArtifacts } from "./internal/ArtifactChecks.ts"
import * as Parts from "./internal/Parts.ts"
import { backed, checkStep, evidenceIndex, notCompleted } from "./internal/PlanChecks.ts"
import { runHook } from "./internal/StopHooks.ts"

/**
 * One entry of the evidence index: the check (`item`, a check name such as
 * `plan:write-report`) and what backs it (`ref`: a tool call id, an artifact path or
 * a stop hook name).
 *
 * @category models
 * @since 0.1.0
 */
export const Evidence = Parts.Evidence

/**
 * @category models
 * @since 0.1.0
 */
export type Evidence = typeof Evidence.Type

/**
 * A plan step in the report: completed, or unfinished with the `reason`.
 *
 * @category models
 * @since 0.1.0
 */
export const Item = Schema.Struct({
  id: Schema.String,
  description: Schema.String,
  reason: Schema.optionalKey(Schema.String)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Item = typeof Item.Type

/**
 * `passed` is true when `failed` is empty. `failed` holds the checks that fail the
 * validation: every failed check except those of optional plan steps, which only
 * appear in `unfinished`.
 *
 * @category models
 * @since 0.1.0
 */
export const Report = Schema.Struct({
  passed: Schema.Boolean,
  checks: Schema.Array(Event.Check),
  failed: Schema.Array(Event.Check),
  evidence: Schema.Array(Evidence),
  completed: Schema.Array(Item),
  unfinished: Schema.Array(Item),
  /** The description of the first unfinished required step, when there is one: where the work should go on. */
  nextStep: Schema.optionalKey(Schema.String)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Report = typeof Report.Type

/**
 * What validation looks at.
 *
 * @category models
 * @since 0.1.0
 */
export interface Context {
  readonly timeline: ReadonlyArray<Event.Event>
  readonly finalAnswer: string | undefined
  readonly counters: Counters.Counters
}

/**
 * @category models
 * @since 0.1.0
 */
export interface PlanStep {
  readonly id: string
  readonly description: string
  /** An optional step that is not done is listed as unfinished but does not fail validation. */
  readonly required: boolean
  /** All must hold. */
  readonly criteria: ReadonlyArray<Criterion>
}

/**
 * @category models
 * @since 0.1.0
 */
export interface StopHook<R = never> {
  readonly name: string
  readonly check: (context: Context) => Effect.Effect<{ readonly passed: boolean; readonly detail: string }, never, R>
}

/**
 * Alias of `Artifact.Format`.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactFormat = Artifact.Format

/**
 * A file the run must deliver: alias of `Artifact.Contract`.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactContract = Artifact.Contract

/**
 * What to validate. Artifact paths are resolved against `root`, which defaults to
 * the process's working directory.
 *
 * @category models
 * @since 0.1.0
 */
export interface Spec<R = never> {
  readonly plan?: ReadonlyArray<PlanStep> | undefined
  readonly stopHooks?: ReadonlyArray<StopHook<R>> | undefined
  readonly artifacts?: ReadonlyArray<ArtifactContract> | undefined
  readonly root?: string | undefined
}

/**
 * Nothing to check beyond the (then trivially passing) evidence index.
 *
 * @category constructors
 * @since 0.1.0
 */
export const empty: Spec = Object.freeze({})

const requireNonEmpty = (where: string, what: string, value: string): void => {
  if (value.trim() === "") {
    throw new RangeError(`${where}: ${what} must be a non-empty string, got ${JSON.stringify(value)}`)
  }
}

/**
 * A plan step. Throws a `RangeError` for an empty id or an empty list of criteria (a
 * step with no criterion could never be verified).
 *
 * @category constructors
 * @since 0.1.0
 */
export const step = (
  id: string,
  description: string,
  criteria: ReadonlyArray<Criterion>,
  options?: { readonly required?: boolean | undefined }
): PlanStep => {
  requireNonEmpty("Validation.step", "id", id)
  if (criteria.length === 0) {
    throw new RangeError(`Validation.step: step ${JSON.stringify(id)} needs at least one criterion`)
  }
  return { id, description, required: options?.required ?? true, criteria }
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const stopHook = <R = never>(name: string, check: StopHook<R>["check"]): StopHook<R> => {
  requireNonEmpty("Validation.stopHook", "name", name)
  return { name, check }
}

/**
 * An artifact contract: `Artifact.make`. The format defaults from the extension
 * (`.md` → markdown, `.json` → json, else text) and `nonEmpty` to true. Throws a
 * `RangeError` for an empty path or a schema on a format other than json.
 *
 * @category constructors
 * @since 0.1.0
 */
export const artifact: typeof Artifact.make = Artifact.make

/**
 * Validates a completion candidate. The checks come in a fixed order: plan steps
 * (`plan:<id>`), stop hooks (`hook:<name>`), artifacts (`artifact:<path>`), then
 * `evidence:index`. Every check's detail starts with its name.
 *
 * Artifact contracts need the `Path` service (on Node, `NodeServices.layer` from
 * `@effect/platform-node`) and read files as the file tools do. It is not a requirement of
 * the type, since only a spec with artifacts needs it: without it, each artifact check
 * fails saying what to provide, and nothing else is affected.
 *
 * @category validation
 * @since 0.1.0
 */
export const validate = <R = never>(spec: Spec<R>, context: Context): Effect.Effect<Report, never, R> =>
  Effect.gen(function* () {
    const steps = planSteps(spec.plan ?? [], context)
    const hooks = yield* Effect.forEach(spec.stopHooks ?? [], (hook) => runHook(hook, context))
    const artifacts = yield* checkArtifacts(spec.artifacts ?? [], spec.root ?? ".")
    return reportOf(steps, [...hooks, ...artifacts])
  })

/**
 * {@link validate} of the plan alone, at once: plan criteria read the timeline alone,
 * synchronously. What a run judges by when it has no time left for stop hooks and
 * artifacts (past its deadline).
 *
 * @category validation
 * @since 0.3.0
 */
export const validatePlan = (plan: ReadonlyArray<PlanStep>, context: Context): Report =>
  reportOf(planSteps(plan, context), [])

const planSteps = (plan: ReadonlyArray<PlanStep>, context: Context) => {
  // Only plan criteria cite calls; a spec without a plan need not index the timeline.
  const succeededCalls = new Set<string>()
  if (plan.length > 0) for (const e of context.timeline) if (e._tag === "tool.succeeded") succeededCalls.add(e.callId)
  return plan.map((s) => checkStep(s, context.timeline, succeededCalls))
}

/** The report of the plan's steps and the other checks, in their fixed order (the evidence index last). */
const reportOf = (
  steps: ReadonlyArray<ReturnType<typeof checkStep<PlanStep>>>,
  others: ReadonlyArray<Parts.Part>
): Report => {
  const parts: ReadonlyArray<Parts.Part> = [...steps, ...others, evidenceIndex(steps)]
  const failed = parts.filter((p) => p.blocking && !p.check.passed).map((p) => p.check)
  const next = steps.find((s) => s.step.required && !backed(s))
  return {
    passed: failed.length === 0,
    checks: parts.map((p) => p.check),
    failed,
    evidence: parts.flatMap((p) => p.evidence),
    // Completed means done with evidence (R6.3): a step whose criteria held without it is unfinished, saying so.
    completed: steps.filter(backed).map((s) => ({ id: s.step.id, description: s.step.description })),
    unfinished: steps
      .filter((s) => !backed(s))
      .map((s) => ({
        id: s.step.id,
        description: s.step.description,
        reason: s.step.required ? notCompleted(s) : `optional: ${notCompleted(s)}`
      })),
    ...(next === undefined ? {} : { nextStep: next.step.description })
  }
}
