/**
 * A usage's parts as servers report them (R2.1). Some report a part beside its whole, not
 * within it: Gemini's gateways give thinking tokens beside the completion's, and some
 * prompts leave their cache reads out. A part larger than its whole can only be that, and is
 * counted beside it: a count never reads less than what the server reported.
 */

/** `whole` and `part` added, at most the largest count a number holds exactly (a server's absurd part included). */
export const beside = (whole: number, part: number): number => Math.min(whole + part, Number.MAX_SAFE_INTEGER)

/** `whole`, with `part` added when the part is larger (reported beside it). */
export const wholeWith = (whole: number, part: number | undefined): number =>
  part !== undefined && part > whole ? beside(whole, part) : whole
