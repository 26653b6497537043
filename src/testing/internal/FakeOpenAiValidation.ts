/**
 * The request checks of `FakeOpenAiServer`, made as the real APIs make them, with their
 * 400 answer (`{ error: { message, type: "invalid_request_error", param, code } }`), so a
 * client that passes against the fake does not fail against the API for a malformed
 * request: the body is a JSON object with a model and messages; every role is known; a
 * `tool` message answers a `tool_call_id` of the assistant turn before it, and every call
 * of that turn is answered before the conversation goes on; tools are functions with a
 * valid name and object parameters (in strict form when `strict: true`); the options that
 * need tools, or a stream, come with them; the temperature is a number within 0 to 2; at
 * OpenAI, every parameter is one the API has, and a list of tools is not empty. In DeepSeek's
 * thinking mode (its default), every assistant turn between two user messages where the
 * model called a tool must carry its `reasoning_content` back.
 */
import * as ToolJsonSchema from "../../tools/ToolJsonSchema.ts"

/**
 * Which API the server plays.
 *
 * @category models
 * @since 0.1.0
 */
export type Api = "openai" | "deepseek"

/** A 400 answer: the API's error envelope. */
export interface Invalid {
  readonly message: string
  readonly param: string | null
  readonly code: string | null
}

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const roles: Record<Api, ReadonlyArray<string>> = {
  openai: ["system", "developer", "user", "assistant", "tool", "function"],
  deepseek: ["system", "user", "assistant", "tool"]
}

const functionName = /^[a-zA-Z0-9_-]{1,64}$/

/** The parameters of OpenAI's chat completions: a parameter not listed is refused (`Unrecognized request argument`). */
const openAiParameters: ReadonlySet<string> = new Set([
  "model",
  "messages",
  "audio",
  "frequency_penalty",
  "function_call",
  "functions",
  "logit_bias",
  "logprobs",
  "max_completion_tokens",
  "max_tokens",
  "metadata",
  "modalities",
  "n",
  "parallel_tool_calls",
  "prediction",
  "presence_penalty",
  "prompt_cache_key",
  "reasoning_effort",
  "response_format",
  "safety_identifier",
  "seed",
  "service_tier",
  "stop",
  "store",
  "stream",
  "stream_options",
  "temperature",
  "tool_choice",
  "tools",
  "top_logprobs",
  "top_p",
  "user",
  "verbosity",
  "web_search_options"
])

const invalid = (message: string, param: string | null = null, code: string | null = null): Invalid => ({
  message,
  param,
  code
})

/** Whether DeepSeek would run this request in thinking mode: its default, unless turned off or the model is the non-thinking alias. */
export const thinkingMode = (body: Json): boolean => {
  const thinking = isObject(body.thinking) ? body.thinking.type : undefined
  if (thinking === "disabled") return false
  if (thinking === "enabled") return true
  return body.model !== "deepseek-chat"
}

const toolCallIds = (message: Json): Array<string> =>
  Array.isArray(message.tool_calls)
    ? message.tool_calls.flatMap((call) => (isObject(call) && typeof call.id === "string" ? [call.id] : []))
    : []

/**
 * Whether an assistant turn that DeepSeek's thinking mode needs the reasoning of goes without
 * its `reasoning_content`: every assistant turn between two user messages where the model
 * called a tool (the text-only ones too, such as an answer cut off after a tool's result).
 */
const reasoningMissing = (messages: ReadonlyArray<unknown>): boolean => {
  let called = false
  let missing = false
  for (const message of messages) {
    if (!isObject(message)) continue
    if (message.role === "user") {
      if (called && missing) return true
      called = false
      missing = false
    } else if (message.role === "assistant") {
      if (toolCallIds(message).length > 0) called = true
      if (typeof message.reasoning_content !== "string") missing = true
    }
  }
  return called && missing
}

/** What the API says of the first tool call of an assistant turn it would refuse (no id, no `type: "function"`, arguments that are not text). */
const toolCallIssue = (message: Json, at: string): Invalid | undefined => {
  if (message.tool_calls === undefined || message.tool_calls === null) return undefined
  if (!Array.isArray(message.tool_calls)) {
    return invalid(`Invalid type for '${at}.tool_calls': expected an array.`, `${at}.tool_calls`, "invalid_type")
  }
  for (let j = 0; j < message.tool_calls.length; j++) {
    const call: unknown = message.tool_calls[j]
    const where = `${at}.tool_calls.[${j}]`
    const missing = (field: string) =>
      invalid(`Missing required parameter: '${where}.${field}'.`, `${where}.${field}`, "missing_required_parameter")
    if (!isObject(call)) return invalid(`Invalid type for '${where}': expected an object.`, where, "invalid_type")
    if (typeof call.id !== "string") return missing("id")
    if (call.type === undefined) return missing("type")
    if (call.type !== "function") {
      return invalid(`Invalid value for '${where}.type': expected 'function'.`, `${where}.type`, "invalid_value")
    }
    if (!isObject(call.function)) return missing("function")
    if (typeof call.function.name !== "string") return missing("function.name")
    if (typeof call.function.arguments !== "string") {
      return invalid(
        `Invalid type for '${where}.function.arguments': expected a string, but got ${call.function.arguments === undefined ? "nothing" : typeof call.function.arguments} instead.`,
        `${where}.function.arguments`,
        "invalid_type"
      )
    }
  }
  return undefined
}

/** The conversation's order: each tool message answers the assistant turn before it, and every call is answered. */
const conversationIssue = (messages: ReadonlyArray<unknown>, api: Api): Invalid | undefined => {
  let pending: Set<string> | undefined
  let pendingAt = -1
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    const at = `messages.[${i}]`
    if (!isObject(message)) return invalid(`Invalid type for '${at}': expected an object.`, at, "invalid_type")
    const role = message.role
    if (typeof role !== "string" || !roles[api].includes(role)) {
      return invalid(
        `Invalid value: '${String(role)}'. Supported values are: ${roles[api].map((r) => `'${r}'`).join(", ")}.`,
        `${at}.role`,
        "invalid_value"
      )
    }
    if (role === "tool") {
      const id = message.tool_call_id
      if (pending === undefined || typeof id !== "string" || !pending.has(id)) {
        return invalid(
          "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          `${at}.role`
        )
      }
      pending.delete(id)
      if (typeof message.content !== "string" && !Array.isArray(message.content)) {
        return invalid(`Missing required parameter: '${at}.content'.`, `${at}.content`, "missing_required_parameter")
      }
      continue
    }
    if (pending !== undefined && pending.size > 0) {
      return invalid(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(", ")}`,
        `messages.[${pendingAt}].role`
      )
    }
    pending = undefined
    if (role === "assistant") {
      const callIssue = toolCallIssue(message, at)
      if (callIssue !== undefined) return callIssue
      const ids = toolCallIds(message)
      if (ids.length === 0 && typeof message.content !== "string" && !Array.isArray(message.content)) {
        return invalid(
          `Invalid value for '${at}.content': expected a string or array, got null.`,
          `${at}.content`,
          "invalid_value"
        )
      }
      if (ids.length > 0) {
        pending = new Set(ids)
        pendingAt = i
      }
    } else if (typeof message.content !== "string" && !Array.isArray(message.content)) {
      return invalid(`Missing required parameter: '${at}.content'.`, `${at}.content`, "missing_required_parameter")
    }
  }
  if (pending !== undefined && pending.size > 0) {
    return invalid(
      `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(", ")}`,
      `messages.[${pendingAt}].role`
    )
  }
  return undefined
}

const toolsIssue = (tools: unknown): Invalid | undefined => {
  if (!Array.isArray(tools)) return invalid("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
  for (let i = 0; i < tools.length; i++) {
    const tool = tools[i]
    const at = `tools[${i}]`
    if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
      return invalid(`Invalid value for '${at}.type': expected 'function'.`, `${at}.type`, "invalid_value")
    }
    const fn = tool.function
    const name = typeof fn.name === "string" ? fn.name : ""
    if (!functionName.test(name)) {
      return invalid(
        `Invalid '${at}.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
        `${at}.function.name`,
        "invalid_value"
      )
    }
    if (fn.parameters !== undefined && !(isObject(fn.parameters) && fn.parameters.type === "object")) {
      return invalid(
        `Invalid schema for function '${name}': schema must be a JSON Schema of 'type: "object"', got 'type: "${String(isObject(fn.parameters) ? fn.parameters.type : "None")}"'.`,
        `${at}.function.parameters`,
        "invalid_function_parameters"
      )
    }
    if (fn.strict === true) {
      const issue = ToolJsonSchema.strictIssue(fn.parameters)
      if (issue !== undefined) {
        return invalid(
          `Invalid schema for function '${name}': ${issue}.`,
          `${at}.function.parameters`,
          "invalid_function_parameters"
        )
      }
    }
  }
  return undefined
}

/** What the API answers 400 to in this body, or `undefined`. */
export const check = (body: unknown, api: Api): Invalid | undefined => {
  if (!isObject(body)) {
    return invalid(
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
    )
  }
  if (typeof body.model !== "string" || body.model === "") {
    return invalid("you must provide a model parameter", "model", "missing_required_parameter")
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return invalid(
      Array.isArray(body.messages) ? "[] is too short - 'messages'" : "Missing required parameter: 'messages'.",
      "messages",
      Array.isArray(body.messages) ? "empty_array" : "missing_required_parameter"
    )
  }
  if (api === "openai") {
    const unknown = Object.keys(body).find((key) => !openAiParameters.has(key))
    if (unknown !== undefined) return invalid(`Unrecognized request argument supplied: ${unknown}`)
    if (Array.isArray(body.tools) && body.tools.length === 0) {
      return invalid("[] is too short - 'tools'", "tools", "empty_array")
    }
  }
  const conversation = conversationIssue(body.messages, api)
  if (conversation !== undefined) return conversation
  if (body.tools !== undefined) {
    const tools = toolsIssue(body.tools)
    if (tools !== undefined) return tools
  }
  const hasTools = Array.isArray(body.tools) && body.tools.length > 0
  for (const option of ["tool_choice", "parallel_tool_calls"]) {
    if (body[option] !== undefined && !hasTools) {
      return invalid(
        `Invalid value for '${option}': '${option}' is only allowed when 'tools' are specified.`,
        option,
        "invalid_value"
      )
    }
  }
  if (body.stream_options !== undefined && body.stream !== true) {
    return invalid(
      "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
      "stream_options",
      "invalid_value"
    )
  }
  const temperature = body.temperature
  if (temperature !== undefined && typeof temperature !== "number") {
    return invalid(
      `Invalid type for 'temperature': expected a decimal, but got ${typeof temperature === "string" ? "a string" : "another type"} instead.`,
      "temperature",
      "invalid_type"
    )
  }
  if (typeof temperature === "number" && temperature < 0) {
    return invalid(
      `Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got ${temperature} instead.`,
      "temperature",
      "decimal_below_min_value"
    )
  }
  if (typeof temperature === "number" && temperature > 2) {
    return invalid(
      `Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got ${temperature} instead.`,
      "temperature",
      "decimal_above_max_value"
    )
  }
  if (api === "deepseek" && thinkingMode(body)) {
    if (reasoningMissing(body.messages)) {
      return invalid(
        "The `reasoning_content` in the thinking mode must be passed back to the API.",
        null,
        "invalid_request_error"
      )
    }
  }
  return undefined
}
