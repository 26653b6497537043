/**
 * A run one process drives and another takes over (R9.4): the first process's second model
 * call is slow, and meanwhile the second process resumes the run from the journal.
 */
import { Effect, Schema } from "effect"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"

/** A read that is safe to repeat. */
export const look = Tool.make({
  name: "look",
  description: "Looks.",
  input: Schema.Struct({}),
  output: Schema.String,
  sideEffect: "read",
  idempotent: true,
  handler: () => Effect.succeed("seen")
})

/**
 * The model both processes ask: `look` (call `c1`) first; the first second question is slow
 * (300 ms) and answered "the first process's answer", a later one asks to pay 5 (call `c2`,
 * which waits for approval when `pay` needs it); then "paid". `secondAsked()` counts the second
 * questions: the first process has asked its own once it is 1.
 */
export const takeoverModel = () => {
  let second = 0
  const layer = ScriptedModel.layerFunction((request) => {
    if (request.iteration === 1) return ScriptedModel.toolCall("look", {}, "c1")
    if (request.iteration === 2) {
      second++
      return second === 1
        ? Effect.as(Effect.sleep("300 millis"), ScriptedModel.finalAnswer("the first process's answer"))
        : ScriptedModel.toolCall("pay", { amount: 5 }, "c2")
    }
    return ScriptedModel.finalAnswer("paid")
  })
  return { layer, secondAsked: () => second }
}
