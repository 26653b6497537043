/**
 * The usage of an effect/ai answer as the run counts it (R2.1), private to
 * `LanguageModelAdapter`: each side's total, else the sum of the parts the provider gave
 * (`uncached`, `cacheRead`, `cacheWrite`; `text`, `reasoning`); a side it gave nothing of is
 * estimated, and the usage marked so.
 */
import type * as Response from "effect/ai/Response"
import type * as Model from "../../model/Model.ts"
import * as UsageParts from "../../model/UsageParts.ts"

/** The sum of the counts given, at most the largest count a number holds exactly; `undefined` when none is. */
const sumOf = (...counts: ReadonlyArray<number | undefined>): number | undefined =>
  counts.every((count) => count === undefined)
    ? undefined
    : counts.reduce<number>((sum, count) => UsageParts.beside(sum, count ?? 0), 0)

/** The usage, priced by `priced`; or why it is none (a negative count; effect/ai refuses one past the safe integers). */
export const usageOf = (
  usage: Response.Usage,
  priced: (usage: Model.Usage) => Model.Usage,
  estimate: () => Model.Usage
): Model.Usage | string => {
  const { inputTokens: input, outputTokens: output } = usage
  // Each count as the provider gave it: a negative one is no count, whatever it is added to
  // (review 146: a total of -5 beside 10 cache reads came out as 5 input tokens, at a negative cost).
  const given = {
    input: input.total,
    uncached: input.uncached,
    cacheRead: input.cacheRead,
    cacheWrite: input.cacheWrite,
    output: output.total,
    text: output.text,
    reasoning: output.reasoning
  }
  const negative = Object.entries(given).filter(([, count]) => count !== undefined && count < 0)
  if (negative.length > 0) {
    return `the usage has a negative token count (${negative.map(([part, count]) => `${part} ${count}`).join(", ")})`
  }
  const reportedInput = input.total ?? sumOf(input.uncached, input.cacheRead, input.cacheWrite)
  const reportedOutput = output.total ?? sumOf(output.text, output.reasoning)
  const estimated = reportedInput === undefined || reportedOutput === undefined ? estimate() : undefined
  const cached = input.cacheRead
  const reasoning = output.reasoning ?? (reportedOutput === undefined ? estimated?.reasoningTokens : undefined)
  // A part larger than its whole was reported beside it: counted so, never as less.
  const inputTokens = UsageParts.wholeWith(reportedInput ?? estimated?.inputTokens ?? 0, cached)
  const outputTokens = UsageParts.wholeWith(reportedOutput ?? estimated?.outputTokens ?? 0, reasoning)
  return priced({
    inputTokens,
    outputTokens,
    ...(cached === undefined ? {} : { cachedInputTokens: cached }),
    ...(reasoning === undefined ? {} : { reasoningTokens: reasoning }),
    ...(estimated === undefined ? {} : { estimated: true })
  })
}
