/**
 * Run options resolved once: the tool registry (checked once per tool list), the loop's
 * configuration, the run deadline and the validation spec. Private to the runtime.
 */
import { Duration, Option } from "effect"
import type * as Loop from "../Loop.ts"
import type * as Model from "../Model.ts"
import * as Recovery from "../Recovery.ts"
import type * as Run from "../Run.ts"
import * as Termination from "../Termination.ts"
import * as Tool from "../Tool.ts"
import * as ToolExecutor from "../ToolExecutor.ts"
import * as Validation from "../Validation.ts"

export interface Resolved<RV> {
  readonly registry: ToolExecutor.Registry
  readonly loop: Loop.Config
  readonly timeoutMillis: number
  readonly validation: Validation.Spec<RV>
}

/** The default run deadline, `"10 minutes"`, without parsing it for every run. */
const defaultTimeoutMillis = 10 * 60 * 1000

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
  const byName = new Map<string, Tool.Any>()
  for (const tool of tools) {
    if (byName.has(tool.name)) return `two tools are named "${tool.name}"; tool names must be unique`
    byName.set(tool.name, tool)
  }
  const set: ToolSet = {
    tools: tools.slice(),
    byName,
    definitions: tools.map(Tool.definition),
    approvals: tools.some((tool) => tool.metadata.needsApproval)
  }
  toolSets.set(tools, set)
  return set
}

/** A positive duration in milliseconds, `undefined` when not set, or why it is invalid. */
const positiveMillis = (name: string, input: Duration.Input | undefined): number | undefined | string => {
  if (input === undefined) return undefined
  const millis = Option.match(Duration.fromInput(input), { onNone: () => Number.NaN, onSome: Duration.toMillis })
  return millis > 0 ? millis : `${name} must be a positive duration, got ${String(input)}`
}

/** The step, attempt and approval layers (R4.1), or why one of them is invalid. */
const timeLimits = (limits: Run.Limits): ToolExecutor.TimeLimits | string => {
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

/** The name of the model in use and the fallback chain after it, or why they are invalid. */
const modelChain = (options: Run.Options<Tool.Any, unknown>): Loop.Models | string => {
  if (options.modelName === undefined && (options.fallbackModels?.length ?? 0) === 0) return defaultModels
  const name = options.modelName ?? "model"
  const fallbacks = options.fallbackModels ?? []
  const seen = new Set<string>([name])
  if (name.trim() === "") return "modelName must not be empty"
  for (const fallback of fallbacks) {
    if (typeof fallback?.model?.generate !== "function") {
      return `fallbackModels: "${String(fallback?.name)}" has no model service (build one with Model.fallback(name, layer))`
    }
    if (seen.has(fallback.name))
      return `fallbackModels: the name "${fallback.name}" is used twice; model names must be unique`
    seen.add(fallback.name)
  }
  return { name, fallbacks }
}

export const resolve = <RV>(options: Run.Options<Tool.Any, RV>): Resolved<RV> | string => {
  const tools = toolSet(options.tools)
  if (typeof tools === "string") return tools
  const models = modelChain(options)
  if (typeof models === "string") return models
  const limits = options.limits ?? {}
  const concurrency = options.concurrency ?? 1
  if (!Number.isInteger(concurrency) || concurrency < 1)
    return `concurrency must be an integer >= 1, got ${concurrency}`
  const correctionBudget = limits.correctionBudget ?? 3
  if (!Number.isInteger(correctionBudget) || correctionBudget < 0) {
    return `correctionBudget must be an integer >= 0, got ${correctionBudget}`
  }
  const timeoutMillis = positiveMillis("runTimeout", limits.runTimeout) ?? defaultTimeoutMillis
  if (typeof timeoutMillis === "string") return timeoutMillis
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
    return error instanceof Error ? error.message : String(error)
  }
  const maxRecoveries = limits.maxRecoveries ?? Recovery.defaults.maxRecoveries
  if (!Number.isInteger(maxRecoveries) || maxRecoveries < 0) {
    return `maxRecoveries must be an integer >= 0, got ${maxRecoveries}`
  }
  const recovery: Recovery.Settings =
    options.recovery === undefined && maxRecoveries === Recovery.defaults.maxRecoveries
      ? Recovery.defaults
      : { schedule: options.recovery ?? Recovery.defaults.schedule, maxRecoveries }
  const maxArgumentChars = limits.maxArgumentChars ?? ToolExecutor.defaultLimits.maxArgumentChars
  const maxObservationChars = limits.maxObservationChars ?? ToolExecutor.defaultLimits.maxObservationChars
  const registry: ToolExecutor.Registry = {
    tools: tools.byName,
    limits:
      maxArgumentChars === ToolExecutor.defaultLimits.maxArgumentChars &&
      maxObservationChars === ToolExecutor.defaultLimits.maxObservationChars
        ? ToolExecutor.defaultLimits
        : { maxArgumentChars, maxObservationChars },
    recovery,
    time
  }
  return {
    registry,
    timeoutMillis,
    validation: options.validation ?? Validation.empty,
    loop: {
      registry,
      toolDefinitions: tools.definitions,
      policies,
      concurrency,
      correctionBudget,
      recovery,
      approvals: tools.approvals,
      models
    }
  }
}
