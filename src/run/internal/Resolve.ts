/**
 * Run options resolved once: checked and read by their Schema (`RunOptionsSchema`),
 * then made into the tool registry, the loop's configuration, the run deadline and the
 * validation spec. Options that cannot work are an `InvalidRunOptions` naming the field.
 * Private to the runtime.
 */
import { Predicate, Result, Schema, SchemaIssue } from "effect"
import * as Failure from "../../failure/Failure.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import * as Termination from "../../termination/Termination.ts"
import * as Tool from "../../tools/Tool.ts"
import * as Validation from "../../validation/Validation.ts"
import type * as Loop from "../loop/Loop.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import * as RunOptions from "../RunOptions.ts"
import * as OwnCopy from "./OwnCopy.ts"
import * as RunOptionsSchema from "./RunOptionsSchema.ts"

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

/** The default run deadline, `"10 minutes"`. */
const defaultTimeoutMillis = 10 * 60 * 1000

/** The default `stopGrace`: past the default `Subprocess` grace (2 s) and its reaping. */
export const defaultStopGraceMillis = 5_000

/** The default correction budget (R3.5). */
const defaultCorrectionBudget = 3

/** No limits given: shared by every run that gives none. */
const noLimits: RunOptions.Limits = {}

/** One model, named `"model"`, and no fallbacks: shared by every run that sets neither. */
const defaultModels: Loop.Models = { name: "model", fallbacks: [] }

const decodeOptions = Schema.decodeUnknownResult(RunOptionsSchema.RunOptions, {
  errors: "first",
  onExcessProperty: "error"
})
const decodePolicies = Schema.decodeUnknownResult(RunOptionsSchema.Policies, { errors: "first" })

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** The value at `path` inside `root`, for a message; `undefined` when it cannot be read. */
const valueAt = (root: unknown, path: ReadonlyArray<PropertyKey>): unknown => {
  try {
    let value = root
    for (const key of path) value = Predicate.isObjectOrArray(value) ? Reflect.get(value, key) : undefined
    return value
  } catch {
    return undefined
  }
}

/** An option's value as a message shows it: a number, a boolean, a short quoted string, or its kind. */
const safeString = (value: unknown): string => {
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value)
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
  return UserCode.kindOf(value)
}

/**
 * What the first issue of a decode says, read from its structure (the path the formatter
 * follows: a check's own message first, then the first issue of a group): a key missing, a
 * key not allowed, a message of its own (`stated`, shown as it is), or what was expected
 * (`expected`, shown with what was given).
 */
type Kind = "missing" | "excess" | "stated" | "expected"

const hasMessage = (annotations: { readonly message?: unknown } | undefined): boolean =>
  typeof annotations?.message === "string"

const kindOf = (issue: SchemaIssue.Issue): Kind => {
  switch (issue._tag) {
    case "MissingKey":
      return typeof issue.annotations?.messageMissingKey === "string" ? "stated" : "missing"
    case "UnexpectedKey":
      return typeof issue.ast.annotations?.messageUnexpectedKey === "string" ? "stated" : "excess"
    case "Filter":
      return hasMessage(issue.filter.annotations) ? "stated" : kindOf(issue.issue)
    case "Encoding":
    case "Pointer":
      return kindOf(issue.issue)
    case "Composite":
      return kindOf(issue.issues[0])
    case "AnyOf": {
      const first = issue.issues[0]
      if (first !== undefined) return kindOf(first)
      return hasMessage(issue.ast.annotations) ? "stated" : "expected"
    }
    case "InvalidType":
    case "OneOf":
      return hasMessage(issue.ast.annotations) ? "stated" : "expected"
    case "InvalidValue":
      return hasMessage(issue.annotations) ? "stated" : "expected"
    case "Forbidden":
      return "stated"
  }
}

/**
 * The first issue of a decode as the typed error, its path under `prefix`: what was
 * expected, and what was given (read again from `root`, and shown safely).
 */
const invalid = (
  issue: SchemaIssue.Issue,
  root: unknown,
  prefix: ReadonlyArray<string>
): RunOptions.InvalidRunOptions => {
  const first = formatter(issue).issues[0]
  const path = (first?.path ?? []).map((p) => (typeof p === "object" ? p.key : p))
  const message = first === undefined ? "is invalid" : first.message
  const kind = first === undefined ? "stated" : kindOf(issue)
  const reason =
    kind === "missing"
      ? "field is required"
      : kind === "excess"
        ? "no such option"
        : kind === "expected"
          ? `${message}, got ${safeString(valueAt(root, path))}`
          : message
  return new RunOptions.InvalidRunOptions({
    path: [...prefix, ...path.map((key) => (typeof key === "number" ? key : String(key)))],
    reason
  })
}

/**
 * What a throw of the policies function says: the library's own configuration errors
 * (a `RangeError` from a combinator given a name that is not in the list) are shown
 * whole; anything else is described safely.
 */
const threwMessage = (error: unknown): string => {
  try {
    if (error instanceof RangeError || error instanceof Tool.InvalidToolDefinition) return error.message
  } catch {
    // A hostile value: described below.
  }
  return UserCode.threw("the function", error).safeMessage
}

const pipelineLimits: ReadonlySet<string> = new Set(RunOptionsSchema.pipelineLimitNames)

/**
 * The first limit given that the policies in force do not enforce as given (a list given
 * with its own policies, a function that removed one), as the typed error naming it:
 * it would be ignored, and `run.started` would record other limits than the caller's.
 */
const unenforced = (
  limits: RunOptions.Limits,
  policies: ReadonlyArray<Termination.Policy>
): RunOptions.InvalidRunOptions | undefined => {
  const enforced: Record<string, number | undefined> = Object.assign({}, ...policies.map((p) => p.limits ?? {}))
  for (const [name, given] of Object.entries(limits)) {
    if (given === undefined || pipelineLimits.has(name) || enforced[name] === given) continue
    const held = enforced[name]
    return new RunOptions.InvalidRunOptions({
      path: ["limits", name],
      reason:
        (held === undefined
          ? "no policy in force enforces it (it would be ignored)"
          : `the policies in force enforce ${held} (${given} would be ignored)`) +
        ": pass policies as a function of the defaults, which are built from the limits, or build the list with Termination.defaults(limits)"
    })
  }
  return undefined
}

/**
 * The policies of the run: the defaults, the list given, or what the function given made
 * of the defaults; for a fresh run, only if they enforce the limits given. A resumed run's
 * limits are filled from its `run.started` (`Durable.startedWith`), for its defaults to be
 * built from: policies given to the resume may replace them.
 */
const policiesOf = (
  given: RunOptionsSchema.Checked["policies"],
  limits: RunOptions.Limits,
  from: From
): Result.Result<ReadonlyArray<Termination.Policy>, RunOptions.InvalidRunOptions> =>
  Result.flatMap(chosenPolicies(given, limits), (policies) => {
    const issue = from === "resumed" ? undefined : unenforced(limits, policies)
    return issue === undefined ? Result.succeed(policies) : Result.fail(issue)
  })

const chosenPolicies = (
  given: RunOptionsSchema.Checked["policies"],
  limits: RunOptions.Limits
): Result.Result<ReadonlyArray<Termination.Policy>, RunOptions.InvalidRunOptions> => {
  const defaults = Termination.defaults(limits)
  if (given === undefined) return Result.succeed(defaults)
  if (!Predicate.isFunction(given)) return Result.succeed(given)
  let returned: unknown
  try {
    returned = given(defaults)
  } catch (error) {
    return Result.fail(new RunOptions.InvalidRunOptions({ path: ["policies"], reason: threwMessage(error) }))
  }
  return Result.mapError(decodePolicies(returned), (error) => {
    const inner = invalid(error.issue, returned, ["policies"])
    return new RunOptions.InvalidRunOptions({
      path: inner.path,
      reason: `the function returned an invalid list: ${inner.reason}`
    })
  })
}

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
 * The field whose reading throws, looking into the options and their groups (`limits`,
 * `time`, `recovery`); `[]` when it is the options themselves, or none is found.
 */
const unreadableAt = (value: unknown, depth = 1): ReadonlyArray<string> | undefined => {
  let keys: ReadonlyArray<string | symbol>
  try {
    keys = Reflect.ownKeys(value as object)
  } catch {
    return []
  }
  for (const key of keys) {
    if (typeof key !== "string") continue
    let item: unknown
    try {
      item = (value as Record<string, unknown>)[key]
    } catch {
      return [key]
    }
    let inner: ReadonlyArray<string> | undefined
    try {
      // A revoked Proxy throws even when asked whether it is an array.
      inner = depth > 0 && Predicate.isObject(item) && !Array.isArray(item) ? unreadableAt(item, depth - 1) : undefined
    } catch {
      inner = []
    }
    if (inner !== undefined) return [key, ...inner]
  }
  return undefined
}

/** The options read and checked, or the first field that cannot work. Never throws. */
const check = (options: unknown): Result.Result<RunOptionsSchema.Checked, RunOptions.InvalidRunOptions> => {
  try {
    return Result.mapError(decodeOptions(options), (error) => invalid(error.issue, options, []))
  } catch (error) {
    // Options built by hostile or broken code: a getter that throws, a Proxy.
    return Result.fail(
      new RunOptions.InvalidRunOptions({
        path: unreadableAt(options) ?? [],
        reason: `cannot be read (${Failure.safeDescription(error)})`
      })
    )
  }
}

/** Whether the options are a fresh run's, or a resumed one's filled from its record. */
export type From = "fresh" | "resumed"

/**
 * The options resolved once, or the first field that cannot work. Never throws:
 * options built by hostile or broken code (a getter that throws, a Proxy) are invalid
 * options.
 */
export const resolve = <T extends Tool.Any, RV, O = never>(
  options: RunOptions.Options<T, RV, O>,
  from: From = "fresh"
): Result.Result<Resolved<RV, Tool.Requirements<T>>, RunOptions.InvalidRunOptions> =>
  Result.flatMap(check(options), (checked) => {
    const limits = checked.limits ?? noLimits
    // Erased boundary: the Schema reads the tools and hooks of `options` as `unknown`; the
    // registry holds them, and they need `Tool.Requirements<T>` and `RV`.
    return Result.map(
      policiesOf(checked.policies, limits, from),
      (policies) => build(checked, limits, policies) as Resolved<RV, Tool.Requirements<T>>
    )
  })

const build = (
  checked: RunOptionsSchema.Checked,
  limits: RunOptions.Limits,
  policies: ReadonlyArray<Termination.Policy>
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
    time: timeLimits(time)
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
      // Handed to the model with every request, and shared by every run of the tool: frozen.
      toolDefinitions: checked.tools.map((tool) => OwnCopy.deepFreeze(tool.definition)),
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

/** The limits of a run by name, as `run.started` records them: those of its policies, then its own. */
const limitsRecord = (
  policies: ReadonlyArray<Termination.Policy>,
  own: Record<string, number | undefined>
): Readonly<Record<string, number>> => {
  const all: Record<string, number | undefined> = {
    // The limits of the policies in force, defaults included (a limit given for a policy removed is not).
    ...Object.assign({}, ...policies.map((policy) => policy.limits ?? {})),
    ...own
  }
  const limits: Record<string, number> = {}
  for (const [name, value] of Object.entries(all))
    if (value !== undefined && Number.isFinite(value)) limits[name] = value
  return limits
}

/** A run's own limits, by the names `run.started` gives them. */
const ownLimits = (
  timeoutMillis: number,
  time: ToolExecutor.TimeLimits,
  stopGraceMillis: number,
  loop: { readonly concurrency: number; readonly correctionBudget: number; readonly maxRecoveries: number },
  tools: ToolExecutor.Limits
): Record<string, number | undefined> => ({
  runTimeoutMillis: timeoutMillis,
  stepTimeoutMillis: time.stepMillis,
  attemptTimeoutMillis: time.attemptMillis,
  approvalTimeoutMillis: time.approvalMillis,
  stopGraceMillis,
  concurrency: loop.concurrency,
  correctionBudget: loop.correctionBudget,
  maxRecoveries: loop.maxRecoveries,
  maxArgumentChars: tools.maxArgumentChars,
  maxArgumentDepth: tools.maxArgumentDepth,
  maxObservationChars: tools.maxObservationChars
})

/** The record of a run that sets no limit, time or recovery option: made once, shared by every such run. */
const standardLimits = Object.freeze(
  limitsRecord(
    Termination.defaults(),
    ownLimits(
      defaultTimeoutMillis,
      ToolExecutor.noTimeLimits,
      defaultStopGraceMillis,
      { concurrency: 1, correctionBudget: defaultCorrectionBudget, maxRecoveries: Recovery.defaults.maxRecoveries },
      ToolExecutor.defaultLimits
    )
  )
)

/**
 * The limits a run resolved to, by name, as `run.started` records them (R4.2): the
 * policies' limits, then the run's own time layers, concurrency, recovery budgets and the
 * limits on what the model sends and sees; an infinite one is left out.
 */
export const recordedLimits = <RV, R>(valid: Resolved<RV, R>): Readonly<Record<string, number>> => {
  const { registry, loop } = valid
  const standard =
    loop.policies === Termination.defaults() &&
    valid.timeoutMillis === defaultTimeoutMillis &&
    registry.time === ToolExecutor.noTimeLimits &&
    valid.stopGraceMillis === defaultStopGraceMillis &&
    loop.concurrency === 1 &&
    loop.correctionBudget === defaultCorrectionBudget &&
    loop.recovery.maxRecoveries === Recovery.defaults.maxRecoveries &&
    registry.limits === ToolExecutor.defaultLimits
  if (standard) return standardLimits
  return limitsRecord(
    loop.policies,
    ownLimits(
      valid.timeoutMillis,
      registry.time,
      valid.stopGraceMillis,
      { ...loop, maxRecoveries: loop.recovery.maxRecoveries },
      registry.limits
    )
  )
}
