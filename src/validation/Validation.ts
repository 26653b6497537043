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
import { Cause, Effect, FileSystem, Option, Path, Result, Schema } from "effect"
import type * as Counters from "../events/Counters.ts"
import * as Event from "../events/Event.ts"
import * as Failure from "../failure/Failure.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Artifact from "./Artifact.ts"
import type { Criterion } from "./Criterion.ts"

/**
 * One entry of the evidence index: the check (`item`, a check name such as
 * `plan:write-report`) and what backs it (`ref`: a tool call id, an artifact path or
 * a stop hook name).
 *
 * @category models
 * @since 0.1.0
 */
export const Evidence = Schema.Struct({
  item: Schema.String,
  kind: Schema.Literals(["tool_result", "artifact", "stop_hook"]),
  ref: Schema.String,
  detail: Schema.String
})

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
  unfinished: Schema.Array(Item)
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
export const empty: Spec = {}

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

interface Part {
  readonly check: Event.Check
  /** Whether a failure of this check fails the validation. */
  readonly blocking: boolean
  readonly evidence: ReadonlyArray<Evidence>
}

const part = (name: string, kind: Event.Check["kind"], passed: boolean, clause: string): Event.Check => ({
  name,
  kind,
  passed,
  detail: `${name}: ${clause}`
})

// A defect's message may carry private data: only its type, code and safe message are shown (R3.1).
const describeDefect = (defect: unknown): string => Failure.safeDescription(defect)

type Outcome =
  | { readonly _tag: "held"; readonly detail: string; readonly callId: string | undefined }
  | { readonly _tag: "unmet"; readonly reason: string }

const checkObservation = UserCode.check(
  Schema.Option(Schema.Struct({ detail: Schema.String, callId: Schema.optional(Schema.String) })),
  "the criterion's answer"
)

const observe = (criterion: Criterion, timeline: ReadonlyArray<Event.Event>): Effect.Effect<Outcome> =>
  Effect.sync(() => checkObservation(criterion.observe(timeline))).pipe(
    Effect.map(
      (checked): Outcome =>
        Result.isFailure(checked)
          ? { _tag: "unmet", reason: `${criterion.description}: ${checked.failure}` }
          : Option.match(checked.success, {
              onNone: (): Outcome => ({ _tag: "unmet", reason: `not observed: ${criterion.description}` }),
              onSome: (o): Outcome => ({ _tag: "held", detail: o.detail, callId: o.callId })
            })
    ),
    Effect.catchDefect((defect) =>
      Effect.succeed<Outcome>({
        _tag: "unmet",
        reason: `${criterion.description}: criterion died (${describeDefect(defect)})`
      })
    )
  )

interface StepResult extends Part {
  readonly step: PlanStep
  readonly done: boolean
  readonly reason: string
  /** Call ids the step cites that are not a `tool.succeeded` event of this timeline. */
  readonly dangling: ReadonlyArray<string>
}

const checkStep = Effect.fnUntraced(function* (
  step: PlanStep,
  timeline: ReadonlyArray<Event.Event>,
  succeededCalls: ReadonlySet<string>
) {
  const name = `plan:${step.id}`
  const outcomes = yield* Effect.forEach(step.criteria, (criterion) => observe(criterion, timeline))
  const unmet = outcomes.flatMap((o) => (o._tag === "unmet" ? [o.reason] : []))
  const held = outcomes.flatMap((o) => (o._tag === "held" ? [o] : []))
  const done = unmet.length === 0
  const evidence: Array<Evidence> = []
  const dangling: Array<string> = []
  for (const { callId, detail } of held) {
    if (callId === undefined) continue
    if (!succeededCalls.has(callId)) dangling.push(callId)
    else evidence.push({ item: name, kind: "tool_result", ref: callId, detail })
  }
  const reason = unmet.join("; ")
  const clause = done
    ? `done: ${held.map((o) => o.detail).join("; ")}`
    : step.required
      ? `not done: ${reason}`
      : `optional step not done (does not fail validation): ${reason}`
  const check = part(name, "plan_step", done, clause)
  return {
    step,
    done,
    reason,
    dangling,
    check,
    blocking: step.required,
    evidence: done ? evidence : []
  } satisfies StepResult
})

const checkVerdict = UserCode.check(
  Schema.Struct({ passed: Schema.Boolean, detail: Schema.String }),
  "the stop hook's verdict"
)

const runHook = <R>(hook: StopHook<R>, context: Context): Effect.Effect<Part, never, R> =>
  Effect.suspend(() => {
    // A hook is user code (R12): a throw or a return that is not an Effect is a failed check.
    // Typed as declared; at run time it may be anything (JavaScript callers), hence the checks.
    let out: ReturnType<StopHook<R>["check"]>
    try {
      out = hook.check(context)
    } catch (defect) {
      return Effect.succeed({ passed: false, detail: `threw ${describeDefect(defect)}` })
    }
    if (!UserCode.isEffect(out)) {
      return Effect.succeed({ passed: false, detail: `returned ${UserCode.kindOf(out)}, not an Effect` })
    }
    return out
  }).pipe(
    Effect.map((verdict) => {
      const checked = checkVerdict(verdict)
      return Result.isSuccess(checked) ? checked.success : { passed: false, detail: checked.failure }
    }),
    // Typed as infallible, but a cast may hide a failure: anything but interruption becomes a failed check.
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause)
        : Effect.succeed({ passed: false, detail: `died: ${describeDefect(Cause.squash(cause))}` })
    ),
    Effect.map(({ passed, detail }): Part => {
      const name = `hook:${hook.name}`
      const evidence: ReadonlyArray<Evidence> = passed
        ? [{ item: name, kind: "stop_hook", ref: hook.name, detail }]
        : []
      return { check: part(name, "stop_hook", passed, detail), blocking: true, evidence }
    })
  )

const evidenceIndex = (steps: ReadonlyArray<StepResult>): Part => {
  const done = steps.filter((s) => s.done)
  const problems = done.flatMap((s) => [
    ...(s.evidence.length === 0 ? [`${s.check.name} passed without evidence`] : []),
    ...s.dangling.map((callId) => `${s.check.name} cites call ${callId}, which is not a tool.succeeded event`)
  ])
  const backed = done.reduce((n, s) => n + s.evidence.length, 0)
  const clause =
    problems.length === 0
      ? `${done.length} completed plan step(s) backed by ${backed} tool result(s)`
      : `unbacked success: ${problems.join("; ")}`
  return { check: part("evidence:index", "evidence", problems.length === 0, clause), blocking: true, evidence: [] }
}

/** The artifact checks, with the file system the caller provided, if any. */
const checkArtifacts = (
  contracts: ReadonlyArray<ArtifactContract>,
  root: string
): Effect.Effect<ReadonlyArray<Part>> =>
  contracts.length === 0
    ? Effect.succeed([])
    : Effect.gen(function* () {
        const fs = yield* Effect.serviceOption(FileSystem.FileSystem)
        const path = yield* Effect.serviceOption(Path.Path)
        if (Option.isNone(fs) || Option.isNone(path)) {
          return contracts.map((contract) => {
            const clause =
              "cannot be checked: no FileSystem and Path services (provide NodeServices.layer from @effect/platform-node)"
            return { check: part(`artifact:${contract.path}`, "artifact", false, clause), blocking: true, evidence: [] }
          })
        }
        return yield* Effect.forEach(contracts, (contract) =>
          Artifact.check(contract, root).pipe(
            Effect.provideService(FileSystem.FileSystem, fs.value),
            Effect.provideService(Path.Path, path.value)
          )
        )
      })

/**
 * Validates a completion candidate. The checks come in a fixed order: plan steps
 * (`plan:<id>`), stop hooks (`hook:<name>`), artifacts (`artifact:<path>`), then
 * `evidence:index`. Every check's detail starts with its name.
 *
 * Artifact contracts read files through the `FileSystem` and `Path` services (on Node,
 * `NodeServices.layer` from `@effect/platform-node`). They are not a requirement of the
 * type, since only a spec with artifacts needs them: without them, each artifact check
 * fails saying what to provide, and nothing else is affected.
 *
 * @category validation
 * @since 0.1.0
 */
export const validate = <R = never>(spec: Spec<R>, context: Context): Effect.Effect<Report, never, R> =>
  Effect.gen(function* () {
    const plan = spec.plan ?? []
    // Only plan criteria cite calls; a spec without a plan need not index the timeline.
    const succeededCalls = new Set<string>()
    if (plan.length > 0) for (const e of context.timeline) if (e._tag === "tool.succeeded") succeededCalls.add(e.callId)
    const steps = yield* Effect.forEach(plan, (s) => checkStep(s, context.timeline, succeededCalls))
    const hooks = yield* Effect.forEach(spec.stopHooks ?? [], (hook) => runHook(hook, context))
    const artifacts = yield* checkArtifacts(spec.artifacts ?? [], spec.root ?? ".")
    const parts: ReadonlyArray<Part> = [...steps, ...hooks, ...artifacts, evidenceIndex(steps)]
    const failed = parts.filter((p) => p.blocking && !p.check.passed).map((p) => p.check)
    return {
      passed: failed.length === 0,
      checks: parts.map((p) => p.check),
      failed,
      evidence: parts.flatMap((p) => p.evidence),
      completed: steps.filter((s) => s.done).map((s) => ({ id: s.step.id, description: s.step.description })),
      unfinished: steps
        .filter((s) => !s.done)
        .map((s) => ({
          id: s.step.id,
          description: s.step.description,
          reason: s.step.required ? s.reason : `optional: ${s.reason}`
        }))
    }
  })
