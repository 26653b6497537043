/**
 * The options of the chat-completions client checked once and resolved, every default
 * filled in: what cannot work fails with a typed `InvalidOptions` naming the field.
 */
import { type Duration, Effect, Predicate, Redacted, Result, Schema } from "effect"
import * as UserCode from "../../failure/UserCode.ts"
import * as Durations from "../../time/Durations.ts"
import * as OpenAiOptions from "../OpenAiOptions.ts"
import * as Cost from "./Cost.ts"
import * as Redact from "./Redact.ts"

const AtLeastOne = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** A field `resolve` checks itself, named here so that the struct knows every option. */
const CheckedApart = Schema.optional(Schema.Unknown)

const checkFields = UserCode.check(
  Schema.Struct({
    apiKey: CheckedApart,
    timeouts: Schema.optional(
      Schema.Struct({ connect: CheckedApart, firstByte: CheckedApart, idleRead: CheckedApart })
    ),
    baseUrl: Schema.String,
    model: Schema.NonEmptyString,
    dialect: Schema.optional(OpenAiOptions.Dialect),
    stream: Schema.optional(Schema.Boolean),
    costPerMillionTokens: Schema.optional(Cost.PricesSchema),
    temperature: Schema.optional(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 2 }))),
    maxOutputTokens: Schema.optional(AtLeastOne),
    toolChoice: Schema.optional(OpenAiOptions.ToolChoice),
    parallelToolCalls: Schema.optional(Schema.Boolean),
    strict: Schema.optional(Schema.Boolean),
    reasoning: Schema.optional(OpenAiOptions.Reasoning),
    maxResponseBytes: Schema.optional(AtLeastOne)
  }),
  "the options",
  { exact: true }
)

/** The options as the client uses them, every default filled in. */
export interface Resolved {
  readonly url: string
  readonly model: string
  readonly apiKey: Redacted.Redacted<string>
  readonly dialect: OpenAiOptions.Dialect
  readonly stream: boolean
  readonly connectMillis: number
  readonly firstByteMillis: number
  readonly idleMillis: number
  readonly prices: OpenAiOptions.Prices | undefined
  readonly maxBytes: number
  readonly temperature: number | undefined
  readonly maxOutputTokens: number | undefined
  readonly toolChoice: OpenAiOptions.ToolChoice | undefined
  readonly parallelToolCalls: boolean | undefined
  readonly strict: boolean
  readonly reasoning: OpenAiOptions.Reasoning | undefined
}

const millis = (name: string, input: Duration.Input | undefined, fallback: number): Result.Result<number, string> => {
  if (input === undefined) return Result.succeed(fallback)
  const ms = Durations.millisOf(input)
  if (ms === undefined) return Result.fail(`timeouts.${name} is not a duration`)
  // 0, or a fraction of a millisecond (`1 nanos`), would fail every request at once.
  return ms >= 1 ? Result.succeed(ms) : Result.fail(`timeouts.${name} must be at least 1 millisecond`)
}

/**
 * Why an API key cannot go in the `Authorization` header, or `undefined`: a key is printable
 * ASCII, and one that is not (a byte-order mark from a file, a pasted typographic dash, a
 * letter of another alphabet, a control character) fails every request in the HTTP client,
 * before it is sent. Never quotes the key: it says what stands where.
 */
export const keyIssue = (key: string): string | undefined => {
  if (/[\r\n\0]/.test(key)) {
    return "apiKey holds a line break or a NUL, which no HTTP header can carry (a key read from a file keeps its last newline: trim it)"
  }
  const at = key.search(/[^\x20-\x7e]|^ | $/)
  if (at < 0) return undefined
  const code = key.charCodeAt(at)
  const what =
    code === 0xfeff
      ? "a byte-order mark (U+FEFF, which a file saved with one starts with)"
      : code === 0x20
        ? "a space at its start or end, which HTTP drops"
        : code < 0x20 || (code >= 0x7f && code <= 0x9f)
          ? "a control character"
          : "a character outside ASCII (a pasted typographic dash or quote, a letter of another alphabet)"
  return `apiKey holds ${what} at character ${at + 1}; an HTTP header cannot carry it as it is, so no request could be sent (an API key is printable ASCII)`
}

/** What the dialect does not have, or `undefined`. */
const dialectIssue = (dialect: OpenAiOptions.Dialect, options: OpenAiOptions.Options): string | undefined => {
  const effort = options.reasoning?.effort
  if (dialect === "openai") {
    if (options.reasoning?.thinking !== undefined) {
      return "reasoning.thinking is DeepSeek's thinking mode switch: OpenAI's API has no such option (use reasoning.effort)"
    }
    if (effort !== undefined && !OpenAiOptions.openAiEfforts.some((known) => known === effort)) {
      return `reasoning.effort "${effort}" is not one of OpenAI's: ${OpenAiOptions.openAiEfforts.join(", ")}`
    }
    return undefined
  }
  if (options.parallelToolCalls !== undefined) {
    return "parallelToolCalls: DeepSeek's API has no parallel_tool_calls"
  }
  if (effort !== undefined && !OpenAiOptions.deepSeekEfforts.some((known) => known === effort)) {
    return `reasoning.effort "${effort}" is not one of DeepSeek's: ${OpenAiOptions.deepSeekEfforts.join(", ")}`
  }
  return undefined
}

/** The options checked and resolved, or why they cannot work. */
export const resolve = (options: OpenAiOptions.Options): Effect.Effect<Resolved, OpenAiOptions.InvalidOptions> =>
  Effect.suspend(() => {
    const fail = (reason: string) => Effect.fail(new OpenAiOptions.InvalidOptions({ reason }))
    if (!Predicate.isObject(options)) return fail("the options must be an object")
    const checked = checkFields(options)
    if (Result.isFailure(checked)) return fail(checked.failure.replace(/^the options is invalid: /, ""))
    if (!Redacted.isRedacted(options.apiKey)) return fail("apiKey must be a Redacted value (Redacted.make(key))")
    // Never quoted: it is the key. A header cannot carry these, so no request could be sent.
    const badKey = keyIssue(String(Redacted.value(options.apiKey)))
    if (badKey !== undefined) return fail(badKey)
    let url: URL
    try {
      url = new URL(options.baseUrl)
    } catch {
      return fail(`baseUrl "${Redact.clip(String(options.baseUrl), 200)}" is not a URL`)
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return fail("baseUrl must be an http or https URL")
    // Neither quoted: a password, a query's key.
    if (url.username !== "" || url.password !== "") {
      return fail("baseUrl must not hold a user name or password (the key goes in apiKey)")
    }
    // The text, not the parsed URL: an empty query or fragment (`…/v1?`, `…/v1#`) parses as
    // none, yet kept in the text it turned `/chat/completions` into a query or a fragment.
    if (/[?#]/.test(options.baseUrl)) {
      return fail(
        "baseUrl must not have a query or a fragment, not even an empty `?` or `#`: /chat/completions is appended to its path"
      )
    }
    const dialect = options.dialect ?? "openai"
    const issue = dialectIssue(dialect, options)
    if (issue !== undefined) return fail(issue)
    const timeouts = options.timeouts ?? {}
    const connect = millis("connect", timeouts.connect, 10_000)
    const firstByte = millis("firstByte", timeouts.firstByte, 300_000)
    const idle = millis("idleRead", timeouts.idleRead, 60_000)
    for (const phase of [connect, firstByte, idle]) if (Result.isFailure(phase)) return fail(phase.failure)
    const maxBytes = options.maxResponseBytes ?? OpenAiOptions.defaultMaxResponseBytes
    if (!Number.isSafeInteger(maxBytes)) return fail("maxResponseBytes must be a safe integer")
    return Effect.succeed({
      // From the parsed URL: the text may have spaces around it, which the URL drops.
      url: `${url.href.replace(/\/+$/, "")}/chat/completions`,
      model: options.model,
      apiKey: options.apiKey,
      dialect,
      stream: options.stream ?? false,
      connectMillis: Result.getOrThrow(connect),
      firstByteMillis: Result.getOrThrow(firstByte),
      idleMillis: Result.getOrThrow(idle),
      prices: options.costPerMillionTokens,
      maxBytes,
      temperature: options.temperature,
      maxOutputTokens: options.maxOutputTokens,
      toolChoice: options.toolChoice,
      parallelToolCalls: options.parallelToolCalls,
      strict: options.strict ?? false,
      reasoning: options.reasoning
    })
  })
