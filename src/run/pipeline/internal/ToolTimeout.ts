/**
 * The time bound of one tool attempt (R4.2): min(the tool's own timeout, what is left
 * of the step, what is left of the run), and the timeout failure of an attempt cut
 * off. Private to the runtime.
 */
import { Duration, Effect } from "effect"
import type * as Failure from "../../../failure/Failure.ts"
import * as FailureBoundary from "../../../failure/FailureBoundary.ts"
import type * as Tool from "../../../tools/Tool.ts"
import * as RunContext from "../../internal/RunContext.ts"
import { type Call, mayHaveEffects } from "./ToolCall.ts"

const ownTimeouts = new WeakMap<Tool.Any, number>()

/** A tool's own timeout in milliseconds, parsed once per tool. */
const ownTimeout = (tool: Tool.Any): number | undefined => {
  const own = tool.metadata.timeout
  if (own === undefined) return undefined
  let millis = ownTimeouts.get(tool)
  if (millis === undefined) {
    millis = Duration.toMillis(Duration.fromInputUnsafe(own))
    ownTimeouts.set(tool, millis)
  }
  return millis
}

/**
 * Bounds a handler by min(the tool's own timeout, what is left of the step, what is
 * left of the run) (R4.2), measured when each attempt starts, so a retry gets only what
 * is left. A call cut off is a timeout failure naming the layer that fired; for a tool
 * that may have had a side effect and is not idempotent it is an `UnknownOutcome`
 * (R3.8): stopping the wait does not undo the effect, and neither does a handler that
 * stopped on the signal (`settle("cancelled")` says nothing is left running, not that
 * nothing happened: an aborted request may have reached the server). When the run's
 * deadline is the tightest, the run's timer is the one that fires, and no second timer
 * is needed.
 */
export const within =
  (c: Call) =>
  <A, R>(self: Effect.Effect<A, Failure.Failure, R>): Effect.Effect<A, Failure.Failure, R> =>
    Effect.suspend(() => {
      const tool = c.tool
      const { millis, layer } = RunContext.bound(c.ctx, ownTimeout(tool), "tool")
      if (layer === "run") return self
      return Effect.timeoutOrElse(self, {
        duration: millis,
        orElse: () =>
          Effect.fail(
            FailureBoundary.actionTimeout({
              source: "tool",
              layer,
              afterMillis: millis,
              what: tool.name,
              mayHaveSideEffects: mayHaveEffects(tool),
              idempotent: tool.metadata.idempotent
            })
          )
      })
    })

/**
 * Bounds a wait inside a call that is not an attempt of its handler (its status query,
 * its postcondition) as an attempt is bounded (R4.2): min(the tool's own timeout, what is
 * left of the step, what is left of the run). `None` when the tool or step layer cut it
 * off, with that bound for the message; the run's own deadline interrupts it instead.
 */
export const withinWait =
  (c: Call) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<{ readonly value: A } | { readonly timedOut: string }, E, R> =>
    Effect.suspend(() => {
      const { millis, layer } = RunContext.bound(c.ctx, ownTimeout(c.tool), "tool")
      const answered = Effect.map(self, (value) => ({ value }))
      if (layer === "run") return answered
      return Effect.timeoutOrElse(answered, {
        duration: millis,
        orElse: () =>
          Effect.succeed({ timedOut: `the ${layer} ${layer === "step" ? "deadline" : "timeout"} of ${millis} ms` })
      })
    })
