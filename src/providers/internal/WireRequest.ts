/**
 * The body of a chat-completions request (R11): the conversation, the tools (in their
 * strict form when asked and they have one) and the per-model options, each under the
 * name the endpoint's dialect gives it. Re-exported by `OpenAiWire` as `requestBody`.
 *
 * Where OpenAI and DeepSeek differ: the output cap is `max_completion_tokens` for OpenAI
 * and `max_tokens` for DeepSeek; `thinking` goes to DeepSeek only (the options check
 * refuses it for OpenAI, and `parallelToolCalls` for DeepSeek); every assistant turn
 * between two user messages where the model called a tool carries its `reasoning_content`
 * to DeepSeek (`""` if it has none) unless thinking is off. The README's table lists every option.
 */
import type * as Model from "../../model/Model.ts"
import type * as OpenAiOptions from "../OpenAiOptions.ts"

/** What a request is built from, besides the conversation. Re-exported by `OpenAiWire`. */
export interface RequestOptions {
  readonly model: string
  readonly stream: boolean
  readonly dialect?: OpenAiOptions.Dialect | undefined
  readonly temperature?: number | undefined
  readonly maxOutputTokens?: number | undefined
  readonly toolChoice?: OpenAiOptions.ToolChoice | undefined
  readonly parallelToolCalls?: boolean | undefined
  readonly strict?: boolean | undefined
  readonly reasoning?: OpenAiOptions.Reasoning | undefined
}

/** Arguments as the wire carries them: JSON text. */
export const argumentText = (args: unknown): string => (typeof args === "string" ? args : JSON.stringify(args ?? {}))

/** A tool call as the wire carries it. */
export const wireToolCall = (call: Model.ToolCall) => ({
  id: call.id,
  type: "function",
  function: { name: call.name, arguments: argumentText(call.arguments) }
})

/**
 * DeepSeek's thinking mode needs the `reasoning_content` of every assistant turn between
 * two user messages where the model called a tool sent back, in every later request: the
 * turns that called, and the text-only ones among them too (an answer cut off after a
 * tool's result, before the run's reminder); it answers 400 otherwise. A turn whose
 * reasoning is unknown (another model's, say) sends an empty one. Elsewhere DeepSeek
 * ignores it, so it is not sent.
 */
const sendsReasoning = (options: RequestOptions): boolean =>
  options.dialect === "deepseek" && options.reasoning?.thinking !== false

/** For each message, whether it is in a stretch between two user messages where the model called a tool. */
const inToolStretch = (messages: ReadonlyArray<Model.Message>): ReadonlyArray<boolean> => {
  const marks = new Array<boolean>(messages.length).fill(false)
  let start = 0
  const close = (end: number) => {
    const called = messages.slice(start, end).some((m) => m._tag === "assistant" && m.toolCalls.length > 0)
    if (called) marks.fill(true, start, end)
    start = end + 1
  }
  messages.forEach((message, index) => {
    if (message._tag === "user") close(index)
  })
  close(messages.length)
  return marks
}

const wireMessage = (message: Model.Message, reasoning: boolean): object => {
  switch (message._tag) {
    case "system":
    case "user":
      return { role: message._tag, content: message.content }
    case "assistant":
      return message.toolCalls.length === 0
        ? {
            role: "assistant",
            content: message.content,
            ...(reasoning ? { reasoning_content: message.reasoning ?? "" } : {})
          }
        : {
            role: "assistant",
            content: message.content === "" ? null : message.content,
            ...(reasoning ? { reasoning_content: message.reasoning ?? "" } : {}),
            tool_calls: message.toolCalls.map(wireToolCall)
          }
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content }
  }
}

const wireTool = (tool: Model.ToolDefinition, strict: boolean) => ({
  type: "function",
  function:
    strict && tool.strict !== undefined
      ? { name: tool.name, description: tool.description, parameters: tool.strict.parameters, strict: true }
      : { name: tool.name, description: tool.description, parameters: tool.parameters }
})

const toolChoice = (choice: NonNullable<RequestOptions["toolChoice"]>) =>
  typeof choice === "string" ? choice : { type: "function", function: { name: choice.tool } }

/** The options that only mean something with tools: sent only when the request has tools (OpenAI refuses them otherwise). */
const toolOptions = (options: RequestOptions, request: Model.Request): object => {
  if (request.tools.length === 0) return {}
  return {
    tools: request.tools.map((tool) => wireTool(tool, options.strict === true)),
    ...(options.toolChoice === undefined ? {} : { tool_choice: toolChoice(options.toolChoice) }),
    ...(options.parallelToolCalls === undefined ? {} : { parallel_tool_calls: options.parallelToolCalls })
  }
}

const reasoningOptions = (options: RequestOptions): object => {
  const reasoning = options.reasoning
  if (reasoning === undefined) return {}
  return {
    ...(reasoning.effort === undefined ? {} : { reasoning_effort: reasoning.effort }),
    ...(reasoning.thinking === undefined || options.dialect !== "deepseek"
      ? {}
      : { thinking: { type: reasoning.thinking ? "enabled" : "disabled" } })
  }
}

/** The JSON body of a chat-completions request. */
export const body = (options: RequestOptions, request: Model.Request): object => {
  const stretches = sendsReasoning(options) ? inToolStretch(request.messages) : undefined
  const maxTokensField = options.dialect === "deepseek" ? "max_tokens" : "max_completion_tokens"
  return {
    model: options.model,
    messages: request.messages.map((message, index) => wireMessage(message, stretches?.[index] === true)),
    ...toolOptions(options, request),
    ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
    ...(options.maxOutputTokens === undefined ? {} : { [maxTokensField]: options.maxOutputTokens }),
    ...reasoningOptions(options),
    ...(options.stream ? { stream: true, stream_options: { include_usage: true } } : {})
  }
}
