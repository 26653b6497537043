/**
 * A success criterion: a question asked of the run's timeline, "was this observed?"
 * (R6.1). Plan steps list the criteria that must all hold for the step to count as
 * done; `Validation.validate` asks them when the model says it has finished.
 *
 * A criterion answers with an `Observation`: a detail for people and, when the
 * answer rests on a tool result, the `callId` of that `tool.succeeded` event. Only
 * observations that cite a call become evidence (R6.2): a criterion that holds
 * without citing one is an unbacked claim, and the evidence index says so.
 *
 * Criteria are pure functions of the timeline. A criterion that throws is treated by
 * validation as not observed, never as a crash.
 *
 * @since 0.1.0
 */
import { Option } from "effect"
import { dual } from "effect/Function"
import * as Event from "../events/Event.ts"
import * as UserCode from "../failure/UserCode.ts"

/**
 * What a criterion saw. `callId`, when present, names the `tool.succeeded` event
 * that backs the observation.
 *
 * @category models
 * @since 0.1.0
 */
export interface Observation {
  readonly detail: string
  readonly callId?: string | undefined
}

/**
 * @category models
 * @since 0.1.0
 */
export interface Criterion {
  /** What must be observed, phrased so that "not observed: <description>" reads well. */
  readonly description: string
  readonly observe: (timeline: ReadonlyArray<Event.Event>) => Option.Option<Observation>
}

/**
 * What a `custom` criterion may answer: nothing (not observed), a detail (observed,
 * but backed by no tool result) or a full `Observation`.
 *
 * @category models
 * @since 0.1.0
 */
export type Finding = string | Observation

const nonEmpty = (where: string, what: string, value: string): void => {
  if (value.trim() === "") {
    throw new RangeError(`${where}: ${what} must be a non-empty string, got ${JSON.stringify(value)}`)
  }
}

/**
 * Holds when some `tool.succeeded` event of the tool `name` has an input and output
 * accepted by `match` (every success when `match` is omitted). `input` is the arguments
 * as the model sent them (JSON, before the tool's schema decoded them; secrets masked) and
 * `output` the encoded output the event carries. The observation cites the latest matching
 * call, since it reflects the most recent state of the world.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toolSucceeded = (name: string, match?: (input: unknown, output: unknown) => boolean): Criterion => {
  nonEmpty("Criterion.toolSucceeded", "name", name)
  const qualifier = match === undefined ? "" : " with matching input/output"
  return {
    description: `tool ${JSON.stringify(name)} succeeded${qualifier}`,
    observe: (timeline) => {
      for (let i = timeline.length - 1; i >= 0; i--) {
        const event = timeline[i]
        if (event?._tag !== "tool.succeeded" || event.name !== name) continue
        // Only `true` is a match: what an `async` match gives (a Promise) is none, its rejection handled.
        if (match !== undefined && UserCode.letGo(match(Event.inputOf(timeline, event), event.output)) !== true)
          continue
        return Option.some({ detail: `${name} succeeded${qualifier} (call ${event.callId})`, callId: event.callId })
      }
      return Option.none()
    }
  }
}

/**
 * A criterion decided by your own function. Return `undefined` or `Option.none()`
 * when it was not observed. To count as evidence, return an `Observation` with the
 * `callId` of the `tool.succeeded` event it rests on; a bare string means "holds,
 * but I cite nothing": the step's check passes, the evidence index fails, and the step
 * is listed unfinished, not completed (only a step done with evidence is, R6.3).
 * `decide` is synchronous: one that returns a Promise (an `async` function) is not
 * observed, and the step's reason says it returned a Promise. A finding's `detail` is cut
 * to 4,096 characters.
 *
 * @category constructors
 * @since 0.1.0
 */
export const custom = (
  description: string,
  decide: (timeline: ReadonlyArray<Event.Event>) => Option.Option<Finding> | Finding | undefined
): Criterion => {
  nonEmpty("Criterion.custom", "description", description)
  return {
    description,
    observe: (timeline) => {
      const answer = UserCode.letGo(decide(timeline))
      // Criteria are synchronous: an `async` function's Promise is refused as such, its
      // rejection let go, not left to end the process (R12, review 118).
      if (UserCode.isThenable(answer)) {
        throw new UserCode.UserCodeDefect(
          `its function returned ${UserCode.kindOf(answer)}: criteria are synchronous, so it cannot be async`
        )
      }
      const finding = Option.isOption(answer) ? Option.getOrUndefined(answer) : answer
      if (finding === undefined) return Option.none()
      return Option.some(typeof finding === "string" ? { detail: finding } : finding)
    }
  }
}

/**
 * Replaces a criterion's description, so that reasons name it in your words.
 *
 * @category combinators
 * @since 0.1.0
 */
export const describedAs: {
  (description: string): (self: Criterion) => Criterion
  (self: Criterion, description: string): Criterion
} = dual(2, (self: Criterion, description: string): Criterion => {
  nonEmpty("Criterion.describedAs", "description", description)
  return { description, observe: self.observe }
})
