/**
 * What sees every run's events as they happen, for all the runs of a program: a recorder,
 * a log, a dashboard. Install observers with {@link layer} (or `Effect.provideService`
 * of {@link RunObservers}); each run, fresh or resumed, attaches to each of them when it
 * sets off, before its first event.
 *
 * @since 0.3.0
 */
import { Context, Effect, Layer, type Scope } from "effect"
import type * as Event from "../events/Event.ts"

/**
 * One run's attachment to an observer: `event` is called synchronously, in the run's
 * fiber, with each event the run appends (an exception it throws is swallowed, and the
 * run goes on); `settled` is awaited once the run has its result, before its caller gets
 * it (a recorder waits there until `run.finished` is written), for the run's stop grace
 * (at least 5 seconds) at most; its failure is let go. An `attach` that throws or gives no attachment leaves
 * its observer out of that run, with a warning logged.
 *
 * @category models
 * @since 0.3.0
 */
export interface Attached {
  readonly event: (event: Event.Event) => void
  readonly settled: Effect.Effect<void>
}

/**
 * Something that sees runs: `attach` is called once per run, with its id.
 *
 * @category models
 * @since 0.3.0
 */
export interface Observer {
  readonly attach: (runId: string) => Attached
}

/**
 * The observers every run attaches to; none by default.
 *
 * @category services
 * @since 0.3.0
 */
export const RunObservers = Context.Reference<ReadonlyArray<Observer>>("effect-agent-runtime/RunObservers", {
  defaultValue: () => []
})

/**
 * Adds an observer to those the runs under this layer attach to; the observer is built in
 * the layer's scope (a recorder's writer lives as long as the layer). Observer layers stack
 * when provided in turn (`Effect.provide` twice, `Layer.provideMerge`); merged
 * (`Layer.mergeAll`), each reads the observers around it and one of them wins, as
 * effect's `Logger.layer` does.
 *
 * @category layers
 * @since 0.3.0
 */
export const layer = <E, R>(observer: Effect.Effect<Observer, E, R>): Layer.Layer<never, E, Exclude<R, Scope.Scope>> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const added = yield* observer
      const existing = yield* RunObservers
      return Context.make(RunObservers, [...existing, added])
    })
  )
