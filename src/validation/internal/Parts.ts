/**
 * What each check of a validation contributes to its report: the `validation.checked`
 * event, whether its failure fails the validation, and the evidence behind it. Private
 * to `validation/`.
 */
import { Schema } from "effect"
import type * as Event from "../../events/Event.ts"
import * as Failure from "../../failure/Failure.ts"

/** One entry of the evidence index (`Validation.Evidence`). */
export const Evidence = Schema.Struct({
  item: Schema.String,
  kind: Schema.Literals(["tool_result", "artifact", "stop_hook"]),
  ref: Schema.String,
  detail: Schema.String
})

export type Evidence = typeof Evidence.Type

export interface Part {
  readonly check: Event.Check
  /** Whether a failure of this check fails the validation. */
  readonly blocking: boolean
  readonly evidence: ReadonlyArray<Evidence>
}

/** A check whose detail starts with its name. */
export const part = (name: string, kind: Event.Check["kind"], passed: boolean, clause: string): Event.Check => ({
  name,
  kind,
  passed,
  detail: `${name}: ${clause}`
})

// A defect's message may carry private data: only its type, code and safe message are shown (R3.1).
export const describeDefect = (defect: unknown): string => Failure.safeDescription(defect)
