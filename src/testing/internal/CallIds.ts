/**
 * Ids for the tool calls a script leaves without one. A chat API numbers its calls across
 * a conversation; a scripted model does the same, with a counter of its own, made when the
 * model is made: two models (two tests, two runs) never share one. A call built without an
 * id is marked (a hidden property, so it travels with the call into any response built
 * from it) and carries a placeholder id, `call_<index in its response>`, until a model
 * plays it. Private to `testing/`.
 */
import { Predicate } from "effect"
import type * as Model from "../../model/Model.ts"

const unnumbered: unique symbol = Symbol("effect-agent-runtime/testing/unnumbered")

/** A tool call whose id its model will give it. */
export const unnumberedCall = (index: number, name: string, args: unknown): Model.ToolCall =>
  Object.defineProperty({ id: `call_${index}`, name, arguments: args }, unnumbered, { value: true })

const isUnnumbered = (call: Model.ToolCall): boolean => Predicate.hasProperty(call, unnumbered)

/**
 * A model's numbering: each unnumbered call of a response it plays gets the next
 * `call_<n>`, from `call_1`; other calls, and responses without unnumbered ones, pass as
 * they are.
 */
export const numbering = (): ((response: Model.Response) => Model.Response) => {
  let next = 0
  return (response) =>
    // What a user's function returned is checked by the run as every model's answer is
    // (`invalid_response`): a value that is no response is handed on as it is.
    Predicate.hasProperty(response, "toolCalls") &&
    Array.isArray(response.toolCalls) &&
    response.toolCalls.some(isUnnumbered)
      ? {
          ...response,
          toolCalls: response.toolCalls.map((call) =>
            isUnnumbered(call) ? { id: `call_${++next}`, name: call.name, arguments: call.arguments } : call
          )
        }
      : response
}
