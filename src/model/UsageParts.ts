/**
 * A usage's parts as servers and models report them (R2.1). Some report a part beside its
 * whole, not within it: Gemini's gateways give thinking tokens beside the completion's, and
 * some prompts leave their cache reads out. A part larger than its whole can only be that, and
 * is counted beside it: a count never reads less than what was reported. The built-in
 * providers count so before they price a usage; the run counts every model's usage so.
 */
import type * as Failure from "../failure/Failure.ts"

/** `whole` and `part` added, at most the largest count a number holds exactly (a server's absurd part included). */
export const beside = (whole: number, part: number): number => Math.min(whole + part, Number.MAX_SAFE_INTEGER)

/** `whole`, with `part` added when the part is larger (reported beside it). */
export const wholeWith = (whole: number, part: number | undefined): number =>
  part !== undefined && part > whole ? beside(whole, part) : whole

/**
 * `usage` as the run counts it: `inputTokens` with its cached part, `outputTokens` with its
 * reasoning part, each added when the part is larger (reported beside its whole).
 */
export const whole = (usage: typeof Failure.Usage.Type): typeof Failure.Usage.Type => {
  const inputTokens = wholeWith(usage.inputTokens, usage.cachedInputTokens)
  const outputTokens = wholeWith(usage.outputTokens, usage.reasoningTokens)
  return inputTokens === usage.inputTokens && outputTokens === usage.outputTokens
    ? usage
    : { ...usage, inputTokens, outputTokens }
}
