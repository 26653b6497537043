/**
 * Run options resolved once: the tool registry (checked once per tool list), the loop's
 * configuration, the run deadline and the validation spec. Private to the runtime.
 */
import { Duration, Option, Predicate } from "effect"
import * as UserCode from "../../failure/UserCode.ts"
import type * as Model from "../../model/Model.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import * as Termination from "../../termination/Termination.ts"
import * as Tool from "../../tools/Tool.ts"
import * as Validation from "../../validation/Validation.ts"
import type * as Loop from "../loop/Loop.ts"
import * as ToolExecutor from "../pipeline/ToolExecutor.ts"
import type * as RunOptions from "../RunOptions.ts"
import { policiesOf, snapshotSpec, snapshotTool, toolIssue, validationIssue } from "./RunOptionsCheck.ts"

export interface Resolved<RV, R = unknown> {
  readonly runId: string | undefined
  readonly goal: string
  readonly system: string | undefined
  readonly modelName: string
  readonly registry: ToolExecutor.Registry<R>
  readonly loop: Loop.Config<R>
  readonly timeoutMillis: number
  /** See `RunOptions.Limits.stopGrace`. */
  readonly stopGraceMillis: number
  readonly validation: Validation.Spec<RV>
}

/** The default run deadline, `"10 minutes"`, without parsing it for every run. */
const defaultTimeoutMillis = 10 * 60 * 1000

/** The default `stopGrace`: past the default `Subprocess` grace (2 s) and its reaping. */
const defaultStopGraceMillis = 5_000

/** One model, named `"model"`, and no fallbacks: shared by every run that sets neither. */
const defaultModels: Loop.Models = { name: "model", fallbacks: [] }

/** What a tool list resolves to: checked once per list (and re-checked if it changed). */
interface ToolSet {
  readonly tools: ReadonlyArray<Tool.Any>
  readonly byName: ReadonlyMap<string, Tool.Any>
  readonly definitions: ReadonlyArray<Model.ToolDefinition>
  readonly approvals: boolean
}

const toolSets = new WeakMap<ReadonlyArray<Tool.Any>, ToolSet>()

const sameTools = (a: ReadonlyArray<Tool.Any>, b: ReadonlyArray<Tool.Any>): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** The tools by name and their definitions, or why the list is invalid. */
const toolSet = (tools: ReadonlyArray<Tool.Any>): ToolSet | string => {
  const cached = toolSets.get(tools)
  if (cached !== undefined && sameTools(cached.tools, tools)) return cached
  // Each tool is read once, into a snapshot, and the snapshot is what is checked and used.
  const snapshots: Array<Tool.Any> = []
  for (let i = 0; i < tools.length; i++) {
    const value: unknown = tools[i]
    if (!Predicate.isTagged(value, "Tool")) return `tools[${i}]: it is not a tool (build tools with Tool.make)`
    const snapshot = snapshotTool(value as Tool.Any)
    const issue = toolIssue(snapshot)
    if (issue !== undefined) return `tools[${i}]: ${issue}`
    snapshots.push(snapshot)
  }
  const byName = new Map<string, Tool.Any>()
  for (const tool of snapshots) {
    if (byName.has(tool.name)) return `two tools are named "${tool.name}"; tool names must be unique`
    byName.set(tool.name, tool)
  }
  const set: ToolSet = {
    tools: tools.slice(),
    byName,
    definitions: snapshots.map(Tool.definition),
    approvals: snapshots.some((tool) => tool.metadata.needsApproval)
  }
  toolSets.set(tools, set)
  return set
}

/** A positive duration in milliseconds, `undefined` when not set, or why it is invalid. */
const positiveMillis = (name: string, input: Duration.Input | undefined): number | undefined | string => {
  if (input === undefined) return undefined
  const millis = Option.match(Duration.fromInput(input), { onNone: () => Number.NaN, onSome: Duration.toMillis })
  return millis > 0 && Number.isFinite(millis)
    ? millis
    : `${name} must be a positive, finite duration, got ${safeString(input)}`
}

/** The step, attempt and approval layers (R4.1), or why one of them is invalid. */
const timeLimits = (limits: RunOptions.Limits): ToolExecutor.TimeLimits | string => {
  const stepMillis = positiveMillis("stepTimeout", limits.stepTimeout)
  if (typeof stepMillis === "string") return stepMillis
  const attemptMillis = positiveMillis("attemptTimeout", limits.attemptTimeout)
  if (typeof attemptMillis === "string") return attemptMillis
  const approvalMillis = positiveMillis("approvalTimeout", limits.approvalTimeout)
  if (typeof approvalMillis === "string") return approvalMillis
  if (stepMillis === undefined && attemptMillis === undefined && approvalMillis === undefined) {
    return ToolExecutor.noTimeLimits
  }
  return { stepMillis, attemptMillis, approvalMillis }
}

/** An option's value as a message shows it: a number, a boolean, a short quoted string, or its kind. */
const safeString = (value: unknown): string => {
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value)
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
  return UserCode.kindOf(value)
}

/**
 * What a throw while resolving the options says: the library's own configuration
 * errors (a `RangeError` from a policy's constructor) are shown whole; anything else
 * thrown by user code is described safely.
 */
const configurationError = (where: string, error: unknown): string => {
  try {
    if (error instanceof RangeError || error instanceof Tool.InvalidToolDefinition) return error.message
  } catch {
    // A hostile value: described below.
  }
  return UserCode.threw(where, error).safeMessage
}

/** A positive integer limit, its default when not set, or why it is invalid. */
const positiveInteger = (name: string, value: number | undefined, fallback: number): number | string => {
  if (value === undefined) return fallback
  return Number.isSafeInteger(value) && value > 0 ? value : `${name} must be an integer >= 1, got ${safeString(value)}`
}

/** The limits on what the model sends and sees (R3.5), or why one is invalid. */
const toolLimits = (limits: RunOptions.Limits): ToolExecutor.Limits | string => {
  const defaults = ToolExecutor.defaultLimits
  const maxArgumentChars = positiveInteger("maxArgumentChars", limits.maxArgumentChars, defaults.maxArgumentChars)
  if (typeof maxArgumentChars === "string") return maxArgumentChars
  const maxObservationChars = positiveInteger(
    "maxObservationChars",
    limits.maxObservationChars,
    defaults.maxObservationChars
  )
  if (typeof maxObservationChars === "string") return maxObservationChars
  const maxArgumentDepth = positiveInteger("maxArgumentDepth", limits.maxArgumentDepth, defaults.maxArgumentDepth)
  if (typeof maxArgumentDepth === "string") return maxArgumentDepth
  return maxArgumentChars === defaults.maxArgumentChars &&
    maxObservationChars === defaults.maxObservationChars &&
    maxArgumentDepth === defaults.maxArgumentDepth
    ? defaults
    : { maxArgumentChars, maxObservationChars, maxArgumentDepth }
}

/** The name of the model in use and the fallback chain after it, or why they are invalid. */
const modelChain = (options: RunOptions.Options<Tool.Any, unknown>): Loop.Models | string => {
  if (options.modelName === undefined && (options.fallbackModels?.length ?? 0) === 0) return defaultModels
  const name = options.modelName ?? "model"
  const fallbacks = options.fallbackModels ?? []
  if (!Array.isArray(fallbacks)) return `fallbackModels must be an array, got ${safeString(fallbacks)}`
  const seen = new Set<string>([name])
  if (name.trim() === "") return "modelName must not be empty"
  for (const fallback of fallbacks) {
    if (!Predicate.isString(fallback?.name) || fallback.name.trim() === "") {
      return `fallbackModels: every fallback needs a name, got ${safeString(fallback?.name)}`
    }
    if (typeof fallback?.model?.generate !== "function") {
      return `fallbackModels: ${safeString(fallback?.name)} has no model service (build one with Model.fallback(name, layer))`
    }
    if (seen.has(fallback.name))
      return `fallbackModels: the name "${fallback.name}" is used twice; model names must be unique`
    seen.add(fallback.name)
  }
  return { name, fallbacks }
}

/**
 * The options resolved once, or why they are invalid. Never throws: options built by
 * hostile or broken code (a getter that throws, a Proxy) are invalid options.
 */
export const resolve = <T extends Tool.Any, RV>(
  options: RunOptions.Options<T, RV>
): Resolved<RV, Tool.Requirements<T>> | string => {
  try {
    // Erased boundary: the registry holds snapshots of `options.tools`, which need `Tool.Requirements<T>`.
    return resolveUnsafe(options) as Resolved<RV, Tool.Requirements<T>> | string
  } catch (error) {
    return configurationError("reading the run options", error)
  }
}

const resolveUnsafe = <RV>(options: RunOptions.Options<Tool.Any, RV>): Resolved<RV> | string => {
  if (!Predicate.isObject(options)) return `the run options must be an object, got ${safeString(options)}`
  if (!Predicate.isString(options.goal)) return `goal must be a string, got ${safeString(options.goal)}`
  if (options.system !== undefined && !Predicate.isString(options.system)) {
    return `system must be a string, got ${safeString(options.system)}`
  }
  if (options.runId !== undefined && (!Predicate.isString(options.runId) || options.runId === "")) {
    return `runId must be a non-empty string, got ${safeString(options.runId)}`
  }
  if (options.modelName !== undefined && !Predicate.isString(options.modelName)) {
    return `modelName must be a string, got ${safeString(options.modelName)}`
  }
  if (!Array.isArray(options.tools)) return `tools must be an array of tools, got ${safeString(options.tools)}`
  const tools = toolSet(options.tools)
  if (typeof tools === "string") return tools
  const models = modelChain(options)
  if (typeof models === "string") return models
  const limits = options.limits ?? {}
  const concurrency = options.concurrency ?? 1
  if (!Number.isInteger(concurrency) || concurrency < 1)
    return `concurrency must be an integer >= 1, got ${safeString(concurrency)}`
  const correctionBudget = limits.correctionBudget ?? 3
  if (!Number.isInteger(correctionBudget) || correctionBudget < 0) {
    return `correctionBudget must be an integer >= 0, got ${safeString(correctionBudget)}`
  }
  const timeoutMillis = positiveMillis("runTimeout", limits.runTimeout) ?? defaultTimeoutMillis
  if (typeof timeoutMillis === "string") return timeoutMillis
  const stopGraceMillis = positiveMillis("stopGrace", limits.stopGrace) ?? defaultStopGraceMillis
  if (typeof stopGraceMillis === "string") return stopGraceMillis
  const time = timeLimits(limits)
  if (typeof time === "string") return time
  let policies: ReadonlyArray<Termination.Policy>
  try {
    const defaults = Termination.defaults(limits)
    policies =
      options.policies === undefined
        ? defaults
        : typeof options.policies === "function"
          ? options.policies(defaults)
          : options.policies
  } catch (error) {
    return configurationError("the policies function", error)
  }
  if (!Array.isArray(policies)) return `policies must be an array of policies, got ${safeString(policies)}`
  const kept = policiesOf(policies)
  if ("issue" in kept) return kept.issue
  const validation = snapshotSpec(options.validation ?? Validation.empty)
  const invalid = validationIssue(validation)
  if (invalid !== undefined) return invalid
  const maxRecoveries = limits.maxRecoveries ?? Recovery.defaults.maxRecoveries
  if (!Number.isInteger(maxRecoveries) || maxRecoveries < 0) {
    return `maxRecoveries must be an integer >= 0, got ${safeString(maxRecoveries)}`
  }
  const recovery: Recovery.Settings =
    options.recovery === undefined && maxRecoveries === Recovery.defaults.maxRecoveries
      ? Recovery.defaults
      : { ...Recovery.defaults, schedule: options.recovery ?? Recovery.defaults.schedule, maxRecoveries }
  const argumentLimits = toolLimits(limits)
  if (typeof argumentLimits === "string") return argumentLimits
  const registry: ToolExecutor.Registry = {
    tools: tools.byName,
    limits: argumentLimits,
    recovery,
    time
  }
  return {
    runId: options.runId,
    goal: options.goal,
    system: options.system,
    modelName: models.name,
    registry,
    timeoutMillis,
    stopGraceMillis,
    validation,
    loop: {
      registry,
      toolDefinitions: tools.definitions,
      policies: kept.policies,
      concurrency,
      correctionBudget,
      recovery,
      approvals: tools.approvals,
      models
    }
  }
}
