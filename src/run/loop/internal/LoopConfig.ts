/**
 * What the loop is configured with and what it ends with. Re-exported from `Loop`.
 */

import type { Schema } from "effect"
import type * as StopReason from "../../../events/StopReason.ts"
import type * as Model from "../../../model/Model.ts"
import type * as Recovery from "../../../recovery/Recovery.ts"
import type * as Termination from "../../../termination/Termination.ts"
import type * as Registry from "../../pipeline/Registry.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Config<out R = unknown> {
  /** The tools and their limits; `R` is what their handlers, checks and queries need. */
  readonly registry: Registry.Registry<R>
  readonly toolDefinitions: ReadonlyArray<Model.ToolDefinition>
  readonly policies: ReadonlyArray<Termination.Policy>
  /** How many calls of one batch run at once. Default 1 (sequential); results keep call order. */
  readonly concurrency: number
  /** How many argument corrections the model gets in one run (R3.5). */
  readonly correctionBudget: number
  readonly recovery: Recovery.Settings
  /** Whether any tool needs approval (R7): only then can a batch end in an approval's stop. */
  readonly approvals: boolean
  readonly models: Models
  /** The schema the final answer must decode with, if the run has a typed output. */
  readonly output: Schema.Codec<unknown, unknown> | undefined
}

/**
 * The model a run starts with, by name, and the fallbacks after it (R3.9).
 *
 * @category models
 * @since 0.1.0
 */
export interface Models {
  readonly name: string
  readonly fallbacks: ReadonlyArray<Model.Fallback>
}

/**
 * Why the loop stopped.
 *
 * @category models
 * @since 0.1.0
 */
export interface Outcome {
  readonly reason: StopReason.StopReason
  /** The policy that decided, or `runtime` for a hard stop the loop itself took. */
  readonly policy: string
  readonly detail: string
  readonly finalAnswer: string | undefined
  /** The policy that decided is the user's own (see `Termination.Verdict`). */
  readonly own?: boolean | undefined
  /**
   * The final answer as the run's output schema decoded it, when the loop decoded it: the
   * answer the loop took is the one judged, never decoded again.
   */
  readonly output?: { readonly value: unknown } | undefined
}
