/**
 * What `Breakers.make` checks of its options before it builds a breaker (R12, review 173): a
 * policy with no trip policy failed every model call as a defect of the model's, and an open
 * duration of `NaN` or `-1` was taken. Each problem names its option. Private to `recovery/`.
 */
import { Predicate, Schedule } from "effect"
import { CircuitBreaker } from "effect/persistence"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Durations from "../../time/Durations.ts"

/** The options as a caller without types may pass them. */
interface Given {
  readonly provider?: unknown
  readonly tool?: unknown
  readonly tools?: unknown
}

interface GivenPolicy {
  readonly tripPolicy?: unknown
  readonly openDuration?: unknown
  readonly maxOpenDuration?: unknown
}

const knownOptions: OptionKeys.Known<Given> = { provider: true, tool: true, tools: true }
const knownPolicy: OptionKeys.Known<GivenPolicy> = { tripPolicy: true, openDuration: true, maxOpenDuration: true }

/**
 * Why `trip` is no trip policy of effect's `CircuitBreaker`: checked by making it again with
 * effect's own constructors (`consecutive(n)`, `rate({…})`), whose `RangeError` says what is
 * wrong. Every field must be given: a missing one would take the constructor's default, but
 * not in the policy the breaker is given.
 */
const tripProblem = (trip: unknown): string | undefined => {
  const made = "made with CircuitBreaker.consecutive or CircuitBreaker.rate"
  if (!Predicate.isObject(trip)) return `tripPolicy must be a trip policy ${made}, got ${UserCode.shown(trip)}`
  const tag = Reflect.get(trip, "_tag")
  const fields =
    tag === "Consecutive" ? ["failures"] : tag === "Rate" ? ["threshold", "size", "minimumCalls"] : undefined
  if (fields === undefined) return `tripPolicy must be a trip policy ${made}, got one of tag ${UserCode.shown(tag)}`
  const field = (key: string) => Reflect.get(trip, key)
  const missing = fields.find((key) => !Predicate.isNumber(field(key)))
  if (missing !== undefined) return `tripPolicy's ${missing} must be a number, got ${UserCode.shown(field(missing))}`
  try {
    if (tag === "Consecutive") CircuitBreaker.consecutive(Number(field("failures")))
    else {
      const [threshold, size, minimumCalls] = fields.map((key) => Number(field(key)))
      CircuitBreaker.rate({ threshold, size, minimumCalls })
    }
    return undefined
  } catch (error) {
    return `tripPolicy: ${error instanceof Error ? error.message : UserCode.shown(error)}`
  }
}

/** Why `policy` (of option `name`) is neither `false` nor a policy; `undefined` is the default policy. */
const policyProblem = (name: string, policy: unknown): string | undefined => {
  if (policy === undefined || policy === false) return undefined
  if (!Predicate.isObject(policy)) return `${name} must be a policy or false, got ${UserCode.shown(policy)}`
  const unknown = OptionKeys.unknownOption(policy, knownPolicy)
  if (unknown !== undefined) return `${name}: ${unknown}`
  const [tripPolicy, openDuration, maxOpenDuration] = ["tripPolicy", "openDuration", "maxOpenDuration"].map((key) =>
    Reflect.get(policy, key)
  )
  const trip = tripProblem(tripPolicy)
  if (trip !== undefined) return `${name}: ${trip}`
  if (!Schedule.isSchedule(openDuration)) {
    const millis = Durations.millisOf(openDuration)
    // Infinite is open for ever: a circuit a person closes.
    if (!(millis !== undefined && millis >= 0)) {
      return `${name}: openDuration must be a duration >= 0 or a Schedule, got ${UserCode.shown(openDuration)}`
    }
  }
  if (maxOpenDuration !== undefined) {
    const millis = Durations.millisOf(maxOpenDuration)
    if (!(millis !== undefined && millis >= 0)) {
      return `${name}: maxOpenDuration must be a duration >= 0, got ${UserCode.shown(maxOpenDuration)}`
    }
  }
  return undefined
}

/** Why `options` cannot make breakers, or `undefined`. */
export const problem = (options: unknown): string | undefined => {
  try {
    return optionsProblem(options)
  } catch (defect) {
    return `the options cannot be read (${UserCode.kindOf(defect)} thrown)`
  }
}

const optionsProblem = (options: unknown): string | undefined => {
  if (options === undefined) return undefined
  if (!Predicate.isObject(options)) return `the options must be an object, got ${UserCode.shown(options)}`
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) return unknown
  const [provider, tool, tools] = ["provider", "tool", "tools"].map((key) => Reflect.get(options, key))
  const own = policyProblem("provider", provider) ?? policyProblem("tool", tool)
  if (own !== undefined) return own
  if (tools === undefined) return undefined
  if (!Predicate.isObject(tools) || Array.isArray(tools)) {
    return `tools must be an object of policies by tool name, got ${UserCode.shown(tools)}`
  }
  for (const [name, policy] of Object.entries(tools)) {
    if (policy === undefined) return `tools[${JSON.stringify(name)}] must be a policy or false, got undefined`
    const found = policyProblem(`tools[${JSON.stringify(name)}]`, policy)
    if (found !== undefined) return found
  }
  return undefined
}
