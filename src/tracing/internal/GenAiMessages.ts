/**
 * The conversation as the OpenTelemetry GenAI conventions write it on a `chat` span
 * (`gen_ai.input.messages`, `gen_ai.output.messages`): each message a `role` and its
 * `parts` (`text`, `reasoning`, `tool_call`, `tool_call_response`), so that a GenAI backend
 * can show it (review 187: the runtime's own message shape was written).
 *
 * @internal
 */
import type * as Model from "../../model/Model.ts"
import * as ToolArguments from "../../tools/ToolArguments.ts"

type Part =
  | { readonly type: "text"; readonly content: string }
  | { readonly type: "reasoning"; readonly content: string }
  | { readonly type: "tool_call"; readonly id: string; readonly name: string; readonly arguments: unknown }
  | { readonly type: "tool_call_response"; readonly id: string; readonly response: string }

/** A call's arguments: the object the run reads them as, else as the model wrote them. */
const argumentsOf = (value: unknown): unknown => {
  const parsed = ToolArguments.parseArguments(value)
  return parsed._tag === "Ok" ? parsed.value : value
}

const assistantParts = (
  text: string,
  reasoning: string | undefined,
  calls: ReadonlyArray<Model.ToolCall>
): ReadonlyArray<Part> => [
  ...(reasoning === undefined || reasoning === "" ? [] : [{ type: "reasoning" as const, content: reasoning }]),
  ...(text === "" ? [] : [{ type: "text" as const, content: text }]),
  ...calls.map((call) => ({
    type: "tool_call" as const,
    id: call.id,
    name: call.name,
    arguments: argumentsOf(call.arguments)
  }))
]

interface Message {
  readonly role: Model.Message["_tag"]
  readonly parts: ReadonlyArray<Part>
}

const messageOf = (message: Model.Message): Message => {
  switch (message._tag) {
    case "system":
    case "user":
      return { role: message._tag, parts: [{ type: "text", content: message.content }] }
    case "assistant":
      return { role: "assistant", parts: assistantParts(message.content, message.reasoning, message.toolCalls) }
    case "tool":
      return {
        role: "tool",
        parts: [{ type: "tool_call_response", id: message.toolCallId, response: message.content }]
      }
  }
}

/** The messages the model was sent. */
export const input = (messages: ReadonlyArray<Model.Message>): ReadonlyArray<Message> => messages.map(messageOf)

/** Why an answer ended, in the conventions' words (`tool_call`, not the wire's `tool_calls`). */
const finishReasonOf = (response: Model.Response): string => {
  const reason = response.finishReason ?? (response.toolCalls.length > 0 ? "tool_calls" : "stop")
  return reason === "tool_calls" ? "tool_call" : reason
}

/** The model's answer, with why it ended (by its calls when the provider did not say). */
export const output = (response: Model.Response) => [
  {
    role: "assistant",
    parts: assistantParts(response.text, response.reasoning, response.toolCalls),
    finish_reason: finishReasonOf(response)
  }
]
