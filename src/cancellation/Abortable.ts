/**
 * In-process tools that cooperate with cancellation (R5.1): {@link handler} turns a
 * promise-returning function into a tool handler that receives an `AbortSignal`, so
 * that its own work (a `fetch`, a stream, a loop that checks `signal.aborted`) stops
 * when the call is cancelled. It is the in-process counterpart of `Subprocess`.
 *
 * When the running effect is interrupted (a cancelled run, the run deadline, the tool's
 * own timeout), its cleanup, which cannot itself be interrupted:
 *
 * 1. aborts the signal with a `DOMException` named `AbortError` that names the call,
 * 2. waits up to `grace` (default 100 ms, real time) for the promise to settle,
 * 3. tells the call's `settle` what became of the action: `completed` (the promise had
 *    already settled, or resolved anyway), `cancelled` (it rejected after the abort: it
 *    stopped on the signal) or `outcome_unknown` (it ignored the signal for the whole
 *    grace period: it may still be running in this process).
 *
 * A promise that stopped on the signal has left nothing running, but a `write` or
 * `external` action it had begun may have taken effect all the same: an aborted `fetch`
 * stops waiting, not the server that took the request. For such a tool (the call's
 * `sideEffect`), or a rejection that is an `UnknownOutcome`, the call is `outcome_unknown`,
 * listed in the run's `pendingActions`. What the function itself tells `context.settle`
 * (it knows its service) stands instead, unless the promise ignored the signal.
 *
 * The interruption completes only after that decision, so the run's `tool.interrupted`
 * event carries it, and never waits longer than the grace period. The grace period is
 * measured in real time, not on Effect's `Clock`: the promise lives in real time, and a
 * `TestClock` that is never advanced must not stall a cancellation.
 *
 * A promise is never left without a rejection handler: one is attached when it starts,
 * so a promise that rejects after the grace period (or after any interruption) is
 * ignored, never an unhandled rejection.
 *
 * @since 0.1.0
 */
import { type Duration, Effect } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as Durations from "../time/Durations.ts"
import * as RealTime from "../time/RealTime.ts"
import * as Tool from "../tools/Tool.ts"
import { guarded } from "./internal/GuardedSignal.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /**
   * How long to wait, after aborting, for the promise to settle before giving up on it
   * (real time). Default {@link defaultGraceMillis}. `0` waits one turn of the event loop.
   */
  readonly grace?: Duration.Input | undefined
  /**
   * Turns a rejection (or a synchronous throw) that is not already a {@link Failure.Failure}
   * into one. Default {@link defaultClassify}. A `Failure` passes through unchanged.
   */
  readonly classify?: ((error: unknown) => Failure.Failure) | undefined
}

/**
 * The default grace period, in milliseconds. Code that honours an `AbortSignal` settles
 * within a few milliseconds (an aborted `fetch` rejects at once), so the grace period
 * only bounds the wait for code that ignores the signal; and every millisecond of it is
 * added to the run's deadline overshoot (R4) and its cancellation latency (R5.1). 100 ms
 * leaves room for an abort handler that awaits a short cleanup, and stays well below what
 * a user notices. A subprocess gets more (2 s) because a process must flush and exit.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaultGraceMillis = 100

/** The longest delay `setTimeout` accepts; a longer one fires at once. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * The default `classify`: a {@link Failure.Permanent} with code `tool_failed` (category
 * `defect`), whose hint names only the error's class and first line.
 *
 * @category constructors
 * @since 0.1.0
 */
export const defaultClassify = (error: unknown): Failure.Failure => Failure.fromDefect("tool", error, "tool_failed")

/**
 * The reason a cancelled call's signal is aborted with: a `DOMException` named
 * `AbortError`, as `fetch` and `node:` APIs expect.
 *
 * @category constructors
 * @since 0.1.0
 */
export const abortReason = (context: Tool.CallContext): DOMException =>
  new DOMException(
    `tool call ${context.callId} was cancelled (the run was cancelled, or a deadline or timeout passed)`,
    "AbortError"
  )

/** Every option of {@link handler}: one it does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options> = { grace: true, classify: true }

const graceMillisOf = (grace: Duration.Input | undefined): number => {
  if (grace === undefined) return defaultGraceMillis
  const millis = Durations.millisOf(grace)
  if (millis === undefined || !(millis >= 0 && millis <= maxTimerMillis)) {
    throw new RangeError(`Abortable.handler: grace must be a finite duration >= 0, got ${String(grace)}`)
  }
  return millis
}

// A rejection's name is shown only as `Failure.describeDefect` vets it: never raw text, never a throw.
const nameOf = (error: unknown): string => Failure.describeDefect(error).type

/**
 * A tool handler from a function that returns a promise and honours `signal`.
 *
 * Not interrupted: a resolution is the call's output; a rejection, or a synchronous
 * throw from `f`, is a typed failure (`classify`). Interrupted: the signal is aborted
 * and the call settled as the module doc says, before the interruption completes.
 *
 * Throws a `RangeError` for a `grace` that is not a finite duration >= 0, or an option it
 * does not know: like a tool
 * definition, a handler is built at start-up.
 *
 * @example
 * ```ts
 * const fetchPage = Tool.make({
 *   name: "fetch_page",
 *   description: "Fetches a web page",
 *   input: Schema.Struct({ url: Schema.String }),
 *   output: Schema.String,
 *   sideEffect: "read",
 *   handler: Abortable.handler(({ url }, signal) => fetch(url, { signal }).then((r) => r.text()))
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const handler = <I, O>(
  f: (input: I, signal: AbortSignal, context: Tool.CallContext) => Promise<O>,
  options: Options = {}
): ((input: I, context: Tool.CallContext) => Effect.Effect<O, Failure.Failure>) => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) throw new RangeError(`Abortable.handler: ${unknown}`)
  const graceMillis = graceMillisOf(options.grace)
  const classify = options.classify ?? defaultClassify
  // Runs in the fiber (not in a promise callback), so a `classify` that throws is a
  // defect of the call rather than an unhandled rejection.
  const failWith = (error: unknown): Effect.Effect<never, Failure.Failure> =>
    Effect.suspend(() => Effect.fail(Failure.isFailure(error) ? error : classify(error)))

  return (input, context) =>
    Effect.callback<O, Failure.Failure>((resume) => {
      const controller = new AbortController()
      // A listener of the function's that throws as the signal aborts is logged, never the process's end.
      let thrown: { readonly error: unknown } | undefined
      const signal = guarded(controller.signal, (error) => {
        thrown ??= { error }
      })
      // Whether the function told `settle` itself: its word stands over what is guessed here.
      let spoke = false
      const own: Tool.CallContext = {
        ...context,
        settle: (settlement, detail) => {
          spoke = true
          context.settle(settlement, detail)
        }
      }
      let promise: Promise<O>
      try {
        promise = Promise.resolve(f(input, signal, own))
      } catch (error) {
        resume(failWith(error))
        return
      }
      let outcome: { readonly ok: boolean; readonly error?: unknown } | undefined
      let onSettle: (() => void) | undefined
      // Both handlers are attached now, whatever happens later: no rejection goes unhandled.
      promise.then(
        (value) => {
          outcome = { ok: true }
          onSettle?.()
          resume(Effect.succeed(value))
        },
        (error: unknown) => {
          outcome = { ok: false, error }
          onSettle?.()
          resume(failWith(error))
        }
      )
      // The cleanup on interruption; the fiber runs it uninterruptibly and completes the
      // interruption only once it resumes.
      return Effect.withFiber((fiber) =>
        Effect.callback<void>((done) => {
          if (outcome !== undefined) {
            if (!spoke)
              context.settle(
                "completed",
                outcome.ok
                  ? "the promise had already resolved when the call was interrupted"
                  : `the promise had already rejected (${nameOf(outcome.error)}) when the call was interrupted`
              )
            return done(Effect.void)
          }
          const aborted = performance.now()
          const decide = () => {
            cancel()
            onSettle = undefined
            const after = `${Math.round(performance.now() - aborted)} ms after the abort`
            if (outcome === undefined) {
              context.settle(
                "outcome_unknown",
                `the promise ignored the abort signal for the ${graceMillis} ms grace period: it may still be ` +
                  "running in this process, and its effect must be reclaimed or reconciled"
              )
            } else if (spoke) {
              // The function said what became of its action.
            } else if (outcome.ok) {
              context.settle("completed", `the promise resolved ${after}: it finished anyway`)
            } else {
              const stopped = `the promise stopped on the abort signal (${nameOf(outcome.error)}) ${after}`
              const { sideEffect } = context
              if (sideEffect === undefined || Tool.mayChangeWorld(sideEffect)) {
                context.settle(
                  "outcome_unknown",
                  `${stopped}: nothing is left running, but the ${sideEffect ?? "write or external"} action ` +
                    "it had begun may or may not have taken effect"
                )
              } else if (Failure.isFailure(outcome.error) && outcome.error.classification === "unknown") {
                context.settle("outcome_unknown", `${stopped}, with a failure of unknown outcome`)
              } else context.settle("cancelled", stopped)
            }
            done(
              thrown === undefined
                ? Effect.void
                : Effect.logWarning(`an abort listener of ${context.callId} threw ${nameOf(thrown.error)}: caught`)
            )
          }
          // In real time, told to a test-clock driver, which holds its clock still meanwhile.
          const cancel = RealTime.timer(fiber.getRef(RealTime.Waits), graceMillis, decide)
          onSettle = decide
          controller.abort(abortReason(context))
        })
      )
    })
}
