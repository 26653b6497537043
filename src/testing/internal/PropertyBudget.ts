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
