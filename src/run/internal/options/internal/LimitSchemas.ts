/**
 * The schemas of the limits a run knows by name: the termination policies' (the defaults
 * are built from them) and the tool pipeline's. The `limits` option is checked by them, and
 * so is a limit of one of these names that a policy of the user's declares: a resumed run
 * reads it back from its `run.started` as its `limits`. Private to `options/`.
 */
import { Schema } from "effect"
import * as ToolArguments from "../../../../tools/ToolArguments.ts"
import { Count } from "./Readers.ts"

/** The limits of the termination policies. */
export const policyLimits = {
  maxIterations: Count(1),
  maxToolCalls: Count(1),
  repeatedToolCall: Count(2),
  maxToolErrors: Count(0),
  maxEmptyOutputs: Count(0),
  loopThreshold: Count(1),
  sameClassErrors: Count(1),
  maxTokens: Count(0),
  maxCostUsd: Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))
}

/** The limits the tool pipeline enforces itself. */
export const pipelineLimits = {
  maxArgumentChars: Count(1),
  maxArgumentDepth: Count(1).check(Schema.isLessThanOrEqualTo(ToolArguments.deepestArguments)),
  maxObservationChars: Count(1)
}

/** Every limit known by name, and its schema. */
export const knownLimits: Readonly<Record<string, Schema.Top>> = { ...policyLimits, ...pipelineLimits }
