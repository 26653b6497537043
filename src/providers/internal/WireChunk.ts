/**
 * The hand check of a streamed chunk's common shape, for `OpenAiWire.parseChunk`: it
 * says yes only to what the `Chunk` schema accepts (and decodes to the same value), and
 * leaves everything else to the schema.
 */

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const absent = (value: unknown): boolean => value === undefined || value === null

const optionalString = (value: unknown): boolean => absent(value) || typeof value === "string"

const optionalInt = (value: unknown): boolean => absent(value) || Number.isSafeInteger(value)

/** A count as the schema's `Natural`: a safe integer, not negative. */
const count = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value) && value >= 0

const optionalCount = (value: unknown): boolean => absent(value) || count(value)

const optionalDetails = (value: unknown, key: string): boolean =>
  absent(value) || (isObject(value) && optionalCount(value[key]))

const plainUsage = (usage: unknown): boolean =>
  absent(usage) ||
  (isObject(usage) &&
    optionalCount(usage.prompt_tokens) &&
    optionalCount(usage.completion_tokens) &&
    optionalDetails(usage.prompt_tokens_details, "cached_tokens") &&
    optionalDetails(usage.completion_tokens_details, "reasoning_tokens") &&
    optionalCount(usage.prompt_cache_hit_tokens))

/** A tool call's index as the schema's `CallIndex`: an integer within 32 bits. */
const optionalCallIndex = (value: unknown): boolean =>
  absent(value) || (typeof value === "number" && Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31)

const plainCall = (call: unknown): boolean =>
  isObject(call) &&
  optionalCallIndex(call.index) &&
  optionalString(call.id) &&
  (absent(call.function) ||
    (isObject(call.function) && optionalString(call.function.name) && optionalString(call.function.arguments)))

const plainDelta = (delta: unknown): boolean =>
  absent(delta) ||
  (isObject(delta) &&
    optionalString(delta.content) &&
    optionalString(delta.reasoning_content) &&
    (absent(delta.tool_calls) || (Array.isArray(delta.tool_calls) && delta.tool_calls.every(plainCall))))

const plainChoice = (choice: unknown): boolean =>
  isObject(choice) && optionalInt(choice.index) && plainDelta(choice.delta) && optionalString(choice.finish_reason)

/** Whether the chunk is of the common shape (and so one the schema accepts as it is). */
export const isPlain = (value: unknown): boolean =>
  isObject(value) &&
  (absent(value.choices) || (Array.isArray(value.choices) && value.choices.every(plainChoice))) &&
  plainUsage(value.usage)
