/**
 * The cost of a response's tokens: uncached input, cached input (at its own price when
 * there is one) and output, each at its price per million tokens.
 */

import { Schema } from "effect"
import * as Failure from "../../failure/Failure.ts"

/** Prices in USD per million tokens. */
export interface Prices {
  readonly input: number
  readonly output: number
  readonly cachedInput?: number | undefined
}

/** The highest price: a million USD per million tokens. */
export const maxPricePerMillionTokens = 1_000_000

/**
 * A price in USD per million tokens: at most a million dollars, so that an answer's cost
 * stays representable (a price of 1e300 failed the first paid answer, blaming the model),
 * and never negative or NaN (which made every cost NaN or took it off the budget).
 */
const Price = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: maxPricePerMillionTokens }))

/** The prices a provider's options take, checked when the provider is made. */
export const PricesSchema = Schema.Struct({ input: Price, output: Price, cachedInput: Schema.optional(Price) })

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
