/**
 * The limits a run resolved to, by name, as `run.started` records them (R4.2), so that
 * the log says the limits in force. Private to the runtime.
 */
import * as Recovery from "../../../recovery/Recovery.ts"
import * as Termination from "../../../termination/Termination.ts"
import * as ToolExecutor from "../../pipeline/ToolExecutor.ts"
import { defaultCorrectionBudget, defaultStopGraceMillis, defaultTimeoutMillis } from "./internal/Defaults.ts"
import type { Resolved } from "./Resolve.ts"

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

/**
 * Whether two records of limits, as `run.started` and `run.resumed` give them, agree, the
 * run's time limit aside: a resume's deadline is weighed apart (`run.resumed`'s `deadlineAt`).
 */
export const sameLimits = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): boolean => {
  const { runTimeoutMillis: _, ...given } = a
  const { runTimeoutMillis: __, ...logged } = b
  const keys = Object.keys(given)
  return keys.length === Object.keys(logged).length && keys.every((key) => given[key] === logged[key])
}
