/**
 * What an answer the provider sent cost, when this client could not use it (R2.1): a body
 * cut off part way, one past `maxResponseBytes`, one that does not decode, a stream that
 * reached `[DONE]` with a broken tool call. The provider billed it all the same, so its
 * failure carries the usage the server reported, or an estimate. Private to the providers.
 */
import { Result } from "effect"
import * as Model from "../../model/Model.ts"
import * as OpenAiWire from "../OpenAiWire.ts"
import * as WireResponse from "./WireResponse.ts"

/**
 * A whole body that made no response: the usage it reports, when it parses and reports one
 * this client can count; else an estimate from the request and the body's text (what it
 * holds beside the answer, its field names and quotes, is counted as the answer: an
 * estimate errs toward counting, so that a budget still trips).
 */
export const ofBody = (text: string, decoding: WireResponse.Decoding): Model.Usage | undefined => {
  // A body that carries an error envelope is the provider's refusal, not an answer.
  if (OpenAiWire.carriedError(text) !== undefined) return undefined
  const completion = OpenAiWire.parseCompletion(text)
  const reported = Result.isSuccess(completion) ? completion.success.usage : undefined
  const parts: WireResponse.Parts = {
    text,
    reasoning: undefined,
    calls: [],
    finishReason: undefined,
    usage: reported ?? undefined
  }
  return WireResponse.partialUsage(parts, decoding)
}

/**
 * A body cut off after `bytes` of it came: an estimate from the request and those bytes, at
 * four a token. None of it yet is an answer sent all the same (its 200 came): the prompt was
 * billed (review 162).
 */
export const ofBytes = (bytes: number, decoding: WireResponse.Decoding): Model.Usage | undefined => {
  if (decoding.request === undefined) return undefined
  const estimate = Model.estimatedUsage(decoding.request, { text: "", toolCalls: [] })
  return WireResponse.priced(
    { ...estimate, outputTokens: estimate.outputTokens + Math.ceil(bytes / 4) },
    decoding.prices
  )
}
