/**
 * Run options resolved once: checked and read by their Schema (`RunOptionsSchema`),
 * then made into the tool registry, the loop's configuration, the run deadline and the
 * validation spec. Options that cannot work are an `InvalidRunOptions` naming the field.
 * Private to the runtime.
 */
import { Result } from "effect"
import * as Recovery from "../../../recovery/Recovery.ts"
import type * as Termination from "../../../termination/Termination.ts"
import type * as Tool from "../../../tools/Tool.ts"
import * as Validation from "../../../validation/Validation.ts"
import type * as Loop from "../../loop/Loop.ts"
import * as ToolExecutor from "../../pipeline/ToolExecutor.ts"
import type * as RunOptions from "../../RunOptions.ts"
import * as OwnCopy from "../OwnCopy.ts"
import type * as RunOptionsSchema from "../options/RunOptionsSchema.ts"
import { defaultCorrectionBudget, defaultStopGraceMillis, defaultTimeoutMillis } from "./internal/Defaults.ts"
import { check } from "./internal/OptionIssues.ts"
import { type From, policiesOf } from "./internal/Policies.ts"

export { defaultStopGraceMillis } from "./internal/Defaults.ts"
export type { From } from "./internal/Policies.ts"

export interface Resolved<RV, R = unknown> {
  readonly runId: string | undefined
  readonly goal: string
  readonly system: string | undefined
  readonly modelName: string
  readonly registry: ToolExecutor.Registry<R>
  readonly loop: Loop.Config<R>
  readonly timeoutMillis: number
  /** See `RunOptions.Time.stopGrace`. */
  readonly stopGraceMillis: number
  readonly validation: Validation.Spec<RV>
  /** The `limits` option as given (the termination policies' and the pipeline's), for `run.started`. */
  readonly limits: RunOptions.Limits
}

/** No limits given: shared by every run that gives none. */
const noLimits: RunOptions.Limits = {}

/** One model, named `"model"`, and no fallbacks: shared by every run that sets neither. */
const defaultModels: Loop.Models = { name: "model", fallbacks: [] }

/** The step, attempt and approval layers (R4.1). */
const timeLimits = (time: NonNullable<RunOptionsSchema.Checked["time"]>): ToolExecutor.TimeLimits =>
  time.step === undefined && time.attempt === undefined && time.approval === undefined
    ? ToolExecutor.noTimeLimits
    : { stepMillis: time.step, attemptMillis: time.attempt, approvalMillis: time.approval }

/** The limits on what the model sends and sees (R3.5). */
const toolLimits = (limits: RunOptions.Limits): ToolExecutor.Limits => {
  const defaults = ToolExecutor.defaultLimits
  if (
    limits.maxArgumentChars === undefined &&
    limits.maxObservationChars === undefined &&
    limits.maxArgumentDepth === undefined
  ) {
    return defaults
  }
  return {
    maxArgumentChars: limits.maxArgumentChars ?? defaults.maxArgumentChars,
    maxObservationChars: limits.maxObservationChars ?? defaults.maxObservationChars,
    maxArgumentDepth: limits.maxArgumentDepth ?? defaults.maxArgumentDepth
  }
}

/** The recovery settings of the pipeline and the loop (R3.3, R3.4). */
const recoverySettings = (recovery: NonNullable<RunOptionsSchema.Checked["recovery"]>): Recovery.Settings =>
  recovery.backoff === undefined && recovery.maxRecoveries === undefined
    ? Recovery.defaults
    : {
        ...Recovery.defaults,
        schedule: recovery.backoff ?? Recovery.defaults.schedule,
        maxRecoveries: recovery.maxRecoveries ?? Recovery.defaults.maxRecoveries
      }

/**
 * The options resolved once, or the first field that cannot work. Never throws:
 * options built by hostile or broken code (a getter that throws, a Proxy) are invalid
 * options.
 */
export const resolve = <T extends Tool.Any, RV, O = never>(
  options: RunOptions.Options<T, RV, O>,
  from: From = "fresh",
  /** The key a resumed run signed its sensitive calls under; a new one by default. */
  secretKey: string = ToolExecutor.randomSecretKey()
): Result.Result<Resolved<RV, Tool.Requirements<T>>, RunOptions.InvalidRunOptions> =>
  Result.flatMap(check(options), (checked) => {
    const limits = checked.limits ?? noLimits
    // Erased boundary: the Schema reads the tools and hooks of `options` as `unknown`; the
    // registry holds them, and they need `Tool.Requirements<T>` and `RV`.
    return Result.map(
      policiesOf(checked.policies, limits, from),
      (policies) => build(checked, limits, policies, secretKey) as Resolved<RV, Tool.Requirements<T>>
    )
  })

const build = (
  checked: RunOptionsSchema.Checked,
  limits: RunOptions.Limits,
  policies: ReadonlyArray<Termination.Policy>,
  secretKey: string
): Resolved<unknown> => {
  const time = checked.time ?? {}
  const recoveryOptions = checked.recovery ?? {}
  const recovery = recoverySettings(recoveryOptions)
  const fallbacks = recoveryOptions.fallbackModels ?? []
  const models: Loop.Models =
    checked.modelName === undefined && fallbacks.length === 0
      ? defaultModels
      : { name: checked.modelName ?? defaultModels.name, fallbacks }
  const registry: ToolExecutor.Registry = {
    tools: new Map(checked.tools.map((tool) => [tool.name, tool])),
    limits: toolLimits(limits),
    recovery,
    time: timeLimits(time),
    secretKey
  }
  return {
    runId: checked.runId,
    goal: checked.goal,
    system: checked.system,
    modelName: models.name,
    registry,
    timeoutMillis: time.run ?? defaultTimeoutMillis,
    stopGraceMillis: time.stopGrace ?? defaultStopGraceMillis,
    validation: checked.validation ?? Validation.empty,
    limits,
    loop: {
      registry,
      // Handed to the model with every request, and shared by every run of the tool: frozen, the
      // list too (review 193: a model that emptied it in place changed every later request's tools).
      toolDefinitions: Object.freeze(checked.tools.map((tool) => OwnCopy.deepFreeze(tool.definition))),
      policies,
      concurrency: checked.concurrency ?? 1,
      correctionBudget: recoveryOptions.correctionBudget ?? defaultCorrectionBudget,
      recovery,
      approvals: checked.tools.some((tool) => tool.metadata.needsApproval),
      models,
      output: checked.output
    }
  }
}
