/**
 * The cost of a response's tokens: uncached input, cached input (at its own price when
 * there is one) and output, each at its price per million tokens.
 */

import * as Failure from "../../failure/Failure.ts"

/** Prices in USD per million tokens. */
export interface Prices {
  readonly input: number
  readonly output: number
  readonly cachedInput?: number | undefined
}

/** USD for `inputTokens` (of which `cachedInputTokens` were read from a cache) and `outputTokens`. */
export const costUsd = (
  prices: Prices,
  usage: {
    readonly inputTokens: number
    readonly outputTokens: number
    readonly cachedInputTokens?: number | undefined
  }
): number => {
  const cached = usage.cachedInputTokens ?? 0
  const uncached = usage.inputTokens - cached
  const cost =
    (uncached * prices.input + cached * (prices.cachedInput ?? prices.input) + usage.outputTokens * prices.output) /
    1_000_000
  // Past every budget already: held at the largest cost a usage carries, not refused as no usage.
  return Math.min(cost, Failure.maxCostUsd)
}
