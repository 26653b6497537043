/**
 * A model that plays a script: the responses (or failures) it returns, one per call,
 * in order; or a function of the conversation. Tests and the demo use it to drive the
 * real loop without a network.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Predicate } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as Model from "../model/Model.ts"
import * as CallIds from "./internal/CallIds.ts"

/**
 * One scripted turn: a response, a failure to return, or a function of the request.
 *
 * @category models
 * @since 0.1.0
 */
export type Step =
  | Model.Response
  | Failure.Failure
  | ((request: Model.Request) => Model.Response | Effect.Effect<Model.Response, Failure.Failure>)

/** A response, as far as the script is concerned: the run checks its fields as it checks every model's answer. */
const isResponse = (step: unknown): boolean => typeof step === "object" && step !== null && !Array.isArray(step)

const play = (step: Step, request: Model.Request): Effect.Effect<Model.Response, Failure.Failure> => {
  if (Predicate.isFunction(step)) {
    return Effect.suspend(() => {
      const out = step(request)
      return Effect.isEffect(out) ? out : Effect.succeed(out)
    })
  }
  if (Failure.isFailure(step)) return Effect.fail(step)
  return Effect.succeed(step)
}

/** Plays steps with the numbering of one model: its tool calls without an id get `call_1`, `call_2`, … */
const player = (): ((step: Step, request: Model.Request) => Effect.Effect<Model.Response, Failure.Failure>) => {
  const number = CallIds.numbering()
  return (step, request) => Effect.map(play(step, request), number)
}

/**
 * The model service for a script. Once the script runs out, every further call fails
 * with a `Permanent` failure coded `script_exhausted`, naming the call.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (script: ReadonlyArray<Step>): Model.Model["Service"] => {
  const given: unknown = script
  if (!Array.isArray(given))
    throw new TypeError(`ScriptedModel.make: script must be an array of steps, got ${typeof given}`)
  // What is not a step is said so here, not later as the run's `invalid_response` (a hole too, which `forEach` skips).
  for (let i = 0; i < given.length; i++) {
    const step: unknown = given[i]
    if (!(Predicate.isFunction(step) || Failure.isFailure(step) || isResponse(step))) {
      throw new TypeError(
        `ScriptedModel.make: step ${i} is not a step (a Model.Response, a Failure, or a function of the request), got ${step === null ? "null" : typeof step}`
      )
    }
  }
  const playOne = player()
  let next = 0
  return {
    generate: (request) => {
      const step = script[next]
      if (step === undefined) {
        return Effect.fail(
          new Failure.Permanent({
            source: "provider",
            category: "script",
            code: "script_exhausted",
            attempts: 1,
            hint: `the scripted model has ${script.length} responses and was asked for response ${next + 1}`
          })
        )
      }
      next++
      return playOne(step, request)
    }
  }
}

/**
 * @category layers
 * @since 0.1.0
 */
export const layer = (script: ReadonlyArray<Step>): Layer.Layer<Model.Model> =>
  Layer.sync(Model.Model, () => make(script))

/**
 * A model answering every call with a function of the request. Each build of the layer
 * numbers its tool calls afresh.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerFunction = (
  respond: (request: Model.Request) => Model.Response | Effect.Effect<Model.Response, Failure.Failure>
): Layer.Layer<Model.Model> =>
  Layer.sync(Model.Model, () => {
    const playOne = player()
    return { generate: (request) => playOne(respond, request) }
  })

/**
 * A response that calls tools. Each call is `[name, arguments]` or
 * `[name, arguments, id]`; arguments that are not a string are sent as JSON text,
 * as a chat API would. A call without an id gets one from the model that plays it
 * (`call_1`, `call_2`, … across that model's answers, as a chat API numbers them),
 * whether it plays it from its script or from a function.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolCalls = (
  ...calls: ReadonlyArray<readonly [name: string, args: unknown, id?: string]>
): Model.Response =>
  Model.response({
    toolCalls: calls.map(([name, args, id], index) => {
      const text = Predicate.isString(args) ? args : JSON.stringify(args)
      return id === undefined ? CallIds.unnumberedCall(index, name, text) : { id, name, arguments: text }
    })
  })

/**
 * A response that calls one tool.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolCall = (name: string, args: unknown, id?: string): Model.Response =>
  id === undefined ? toolCalls([name, args]) : toolCalls([name, args, id])

/**
 * A final answer: text and no tool calls.
 *
 * @category constructors
 * @since 0.1.0
 */
export const finalAnswer = (text: string): Model.Response => Model.response({ text })

/**
 * An answer the output token limit cut off (`finishReason: "length"`): the run asks the
 * model to finish it, shorter, and never takes it as a final answer (R11).
 *
 * @category constructors
 * @since 0.1.0
 */
export const cutOff = (text: string): Model.Response => Model.response({ text, finishReason: "length" })

/**
 * An answer the provider's content filter withheld (`finishReason: "content_filter"`):
 * a permanent `content_filtered` failure, never an answer (R11).
 *
 * @category constructors
 * @since 0.1.0
 */
export const filtered: Model.Response = Model.response({ finishReason: "content_filter" })
