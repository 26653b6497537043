/**
 * What a run was given, for `check`: the `Budget` of its limits and the failure codes
 * a retry must never follow (`neverRetriedCodes`, the default of `Budget.neverRetried`).
 * Private to the testing kit; `Properties` is the public face.
 */

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
  /** `limits.maxTokens`: once the answers paid for used more, nothing more is asked or run (R2.1). */
  readonly maxTokens?: number | undefined
  /** Each tool's `maxRetries`, by name. */
  readonly toolMaxRetries?: Readonly<Record<string, number>> | undefined
  /** Failure codes that are permanent or of unknown outcome: a retry caused by one is a violation. */
  readonly neverRetried?: ReadonlyArray<string> | undefined
  /** `time.step` in milliseconds; `undefined`: the run has no step layer. */
  readonly stepTimeoutMillis?: number | undefined
  /** `time.attempt` in milliseconds; `undefined`: the run has no attempt layer. */
  readonly attemptTimeoutMillis?: number | undefined
  /** `time.approval` in milliseconds; `undefined`: the run has no approval layer. */
  readonly approvalTimeoutMillis?: number | undefined
  /** Each tool's own timeout in milliseconds, by name, for the tools that have one. */
  readonly toolTimeoutMillis?: Readonly<Record<string, number>> | undefined
  /**
   * The tools whose calls may not be sent twice (`write` or `external`, not idempotent), by
   * name: a run that ends while one is pending has status `unknown_outcome`, and only then
   * (R3.8), and none of their calls is retried unless its status query found it not applied
   * (R3.7: a tool wrongly declared idempotent is caught so). Without it, a call pending of
   * whatever tool allows that status.
   */
  readonly mayActTwice?: ReadonlyArray<string> | undefined
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

const isCount = (value: unknown): boolean => typeof value === "number" && Number.isInteger(value) && value >= 0
// Finite: an infinite limit would pass every comparison, as NaN would.
const isMillis = (value: unknown): boolean => typeof value === "number" && value > 0 && Number.isFinite(value)

/**
 * Why `budget` cannot be checked against, or `undefined`: a test's budget (of whatever type, a
 * value computed wrongly) whose `NaN`, infinite or missing limit would let every comparison pass.
 */
export const budgetProblem = (budget: unknown): string | undefined => {
  if (typeof budget !== "object" || budget === null) return "the budget must be an object"
  // Boundary: an object of whatever type, its fields read by name and each checked below.
  const b = budget as Record<string, unknown>
  const fields: ReadonlyArray<readonly [string, (value: unknown) => boolean, string, boolean]> = [
    ["runTimeoutMillis", isMillis, "a finite number of milliseconds > 0", true],
    ["maxRecoveries", isCount, "an integer >= 0", true],
    ["scheduleRetries", isCount, "an integer >= 0", true],
    ["correctionBudget", isCount, "an integer >= 0", false],
    ["maxIterations", isCount, "an integer >= 0", false],
    ["maxToolCalls", isCount, "an integer >= 0", false],
    ["maxTokens", isCount, "an integer >= 0", false],
    ["stepTimeoutMillis", isMillis, "a finite number of milliseconds > 0", false],
    ["attemptTimeoutMillis", isMillis, "a finite number of milliseconds > 0", false],
    ["approvalTimeoutMillis", isMillis, "a finite number of milliseconds > 0", false]
  ]
  for (const [name, valid, expected, required] of fields) {
    const value = b[name]
    if ((value !== undefined || required) && !valid(value)) return `${name} must be ${expected}, got ${String(value)}`
  }
  for (const [name, valid] of [
    ["toolMaxRetries", isCount],
    ["toolTimeoutMillis", isMillis]
  ] as const) {
    const record = b[name]
    if (record === undefined) continue
    if (typeof record !== "object" || record === null || !Object.values(record).every(valid)) {
      return `${name} must map tool names to ${name === "toolMaxRetries" ? "integers >= 0" : "finite milliseconds > 0"}`
    }
  }
  const codes = b.neverRetried
  if (codes !== undefined && !(Array.isArray(codes) && codes.every((c) => typeof c === "string"))) {
    return "neverRetried must be an array of failure codes"
  }
  const names = b.mayActTwice
  if (names !== undefined && !(Array.isArray(names) && names.every((n) => typeof n === "string"))) {
    return "mayActTwice must be an array of tool names"
  }
  return undefined
}
