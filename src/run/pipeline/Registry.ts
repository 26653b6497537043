/**
 * What the tool pipeline needs to know about the run it serves (its tools, limits,
 * recovery settings and time layers), and what running a call fails with. Private to the runtime.
 */
import type * as RunState from "../../events/RunState.ts"
import type * as Failure from "../../failure/Failure.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as ToolArguments from "../../tools/ToolArguments.ts"
import type * as ApprovalStop from "./ApprovalStop.ts"

/**
 * What the executor needs to know about the run it serves.
 *
 * @category models
 * @since 0.1.0
 */
export interface Registry<out R = unknown> {
  readonly tools: ReadonlyMap<string, Tool.Any<R>>
  readonly limits: ToolArguments.Limits
  readonly recovery: Recovery.Settings
  readonly time: TimeLimits
  /**
   * A random key of the run's own (256 bits), never in its log: the signatures of a sensitive
   * tool's calls are HMACs under it, so that calls with different secrets differ (R2.3)
   * while the log cannot be searched for a guessed secret (R12). A journal keeps it beside
   * the log (the run's header), so that a resumed run signs as it did.
   */
  readonly secretKey: string
}

/**
 * A new random {@link Registry.secretKey}.
 *
 * @category constructors
 * @since 0.3.0
 */
export const randomSecretKey = (): string =>
  Array.from(crypto.getRandomValues(new Uint8Array(32)), (n) => n.toString(16).padStart(2, "0")).join("")

/**
 * The time layers below the run deadline (R4.1), in milliseconds; `undefined` when a
 * layer is not set. A tool's own timeout is in its metadata.
 *
 * @category models
 * @since 0.1.0
 */
export interface TimeLimits {
  readonly stepMillis: number | undefined
  readonly attemptMillis: number | undefined
  readonly approvalMillis: number | undefined
}

/**
 * No layer below the run deadline.
 *
 * @category constructors
 * @since 0.1.0
 */
export const noTimeLimits: TimeLimits = Object.freeze({
  stepMillis: undefined,
  attemptMillis: undefined,
  approvalMillis: undefined
})

/**
 * @category constructors
 * @since 0.1.0
 */
export const registry = <R>(
  tools: ReadonlyArray<Tool.Any<R>>,
  limits: ToolArguments.Limits = ToolArguments.defaultLimits,
  recovery: Recovery.Settings = Recovery.defaults,
  time: TimeLimits = noTimeLimits
): Registry<R> => ({
  tools: new Map(tools.map((tool) => [tool.name, tool])),
  limits,
  recovery,
  time,
  secretKey: randomSecretKey()
})

/**
 * What running a call fails with: only an interruption, a broken invariant, or a stop
 * the run must take (an approval that was rejected or expired, R7).
 *
 * @category models
 * @since 0.1.0
 */
export type ExecutionError = Failure.Failure | RunState.IllegalTransition | Recovery.Exhausted | ApprovalStop.Stop
