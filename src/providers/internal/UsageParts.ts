/**
 * A usage's parts as servers report them (R2.1). Some report a part beside its whole, not
 * within it: Gemini's gateways give thinking tokens beside the completion's, and some
 * prompts leave their cache reads out. A part larger than its whole can only be that, and is
 * counted beside it: a count never reads less than what the server reported.
 */

/** `whole`, with `part` added when the part is larger (reported beside it). */
export const wholeWith = (whole: number, part: number | undefined): number =>
  part !== undefined && part > whole ? whole + part : whole
