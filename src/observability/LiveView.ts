/**
 * A live view of runs in a terminal: each run's phase, iteration, budgets (each counter
 * beside the limit its `run.started` recorded), the run's deadline counting down, and the
 * calls in flight. On a TTY the frame is redrawn in place (ANSI: cursor up, clear down),
 * as events come but at most once per 100 ms (a frame is drawn from the whole log), at once
 * when the run ends, and every `refresh` (default 1 s) for the countdowns; when the output
 * is not a TTY (CI, a pipe), it prints one plain line per event instead, and the frame once
 * the run has ended. A resumed run is shown from its resume on.
 *
 * Attach it to every run with {@link layer} (a `RunObserver`), or to one started run with
 * {@link watch}. What it draws are pure functions of the events and the time
 * ({@link frame}, {@link line}), tested as such.
 *
 * @since 0.6.0
 */
import { Clock, Effect, Fiber, type Layer, Stream } from "effect"
import type * as Event from "../events/Event.ts"
import type * as Run from "../run/Run.ts"
import * as RunObserver from "../run/RunObserver.ts"
import { frame, line } from "./internal/LiveFrame.ts"

export {
  /**
   * The frame at `now`, one string a line: the run and its phase, iteration, elapsed time
   * and deadline countdown; the budgets beside their limits; what is in flight; the ending.
   *
   * @category rendering
   * @since 0.6.0
   */
  frame,
  /**
   * The plain line for one event (its time since `startedAt`, its tag, what it says).
   *
   * @category rendering
   * @since 0.6.0
   */
  line
}

/**
 * Where the view writes, and how: `write` (default `process.stdout.write`), `tty` (default:
 * whether stdout is a TTY), `refresh` the redraw interval on a TTY in milliseconds.
 *
 * @category models
 * @since 0.6.0
 */
export interface Options {
  readonly write?: ((text: string) => void) | undefined
  readonly tty?: boolean | undefined
  readonly refresh?: number | undefined
}

/**
 * The ANSI text that replaces a frame of `previous` lines with `next`: cursor up to the
 * first line of the old frame, clear to the end of the screen, the new frame.
 *
 * @category rendering
 * @since 0.6.0
 */
export const redraw = (previous: number, next: ReadonlyArray<string>): string =>
  `${previous > 0 ? `\x1b[${previous}F\x1b[J` : ""}${next.join("\n")}\n`

/**
 * The least time between two frames on a TTY, in milliseconds. A frame is drawn from the
 * whole log (its explanation): drawn on each event, a run's cost would grow with the square
 * of its length; a terminal needs no more than a few frames a second.
 */
const frameInterval = 100

/**
 * One run's view: `event` as the run appends, `tick` on a timer (every {@link frameInterval}
 * at most), `flush` once it settled. On a TTY an event draws the frame when the last one is
 * at least `frameInterval` old, and `run.finished` at once (the last frame shows the
 * ending); a frame held back is drawn by the next tick, and a tick redraws the countdowns
 * once `refresh` has passed.
 */
const view = (options: Options, now: () => number) => {
  const write = options.write ?? ((text: string) => void process.stdout.write(text))
  const tty = options.tty ?? process.stdout.isTTY === true
  const refresh = options.refresh ?? 1000
  const events: Array<Event.Event> = []
  let drawn = 0
  let drawnAt = Number.NEGATIVE_INFINITY
  let heldBack = false
  const draw = () => {
    drawnAt = now()
    heldBack = false
    const next = frame(events, drawnAt)
    write(redraw(drawn, next))
    drawn = next.length
  }
  const ended = () => events[events.length - 1]?._tag === "run.finished"
  return {
    tty,
    tickEvery: Math.min(frameInterval, refresh),
    event: (event: Event.Event) => {
      events.push(event)
      if (tty) {
        if (event._tag === "run.finished" || now() - drawnAt >= frameInterval) draw()
        else heldBack = true
        return
      }
      write(`${line(event, events[0]?.at ?? event.at)}\n`)
      if (event._tag === "run.finished") write(`${frame(events, now()).join("\n")}\n`)
    },
    tick: () => {
      if (tty && (heldBack || (events.length > 0 && !ended() && now() - drawnAt >= refresh))) draw()
    },
    flush: () => {
      if (tty && heldBack) draw()
    }
  }
}

/**
 * The live view as an observer of every run (see `RunObserver`). The countdowns are
 * redrawn on the wall clock's timer (`setInterval`, not keeping the process alive).
 *
 * @category constructors
 * @since 0.6.0
 */
export const observer = (options: Options = {}): RunObserver.Observer => ({
  attach: () => {
    const one = view(options, Date.now)
    // A raw timer: `attach` is synchronous, with no fiber to sleep in; a terminal's countdown is wall-clock time.
    const timer = one.tty ? setInterval(one.tick, one.tickEvery) : undefined
    timer?.unref?.()
    return {
      event: one.event,
      settled: Effect.sync(() => {
        if (timer !== undefined) clearInterval(timer)
        one.flush()
      })
    }
  }
})

/**
 * Shows every run under this layer live.
 *
 * @category layers
 * @since 0.6.0
 */
export const layer = (options: Options = {}): Layer.Layer<never> => RunObserver.layer(Effect.succeed(observer(options)))

/**
 * Shows one started run live until it ends, by the Effect clock (`TestClock` in tests):
 * its events as they come, and on a TTY a redraw every `refresh`.
 *
 * @category combinators
 * @since 0.6.0
 */
export const watch = <O>(handle: Run.Handle<O>, options: Options = {}): Effect.Effect<void> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const one = view(options, () => clock.currentTimeMillisUnsafe())
    const ticking = yield* Effect.forkChild(
      Effect.forever(Effect.andThen(Effect.sleep(one.tickEvery), Effect.sync(one.tick)))
    )
    yield* Stream.runForEach(handle.events, (event) => Effect.sync(() => one.event(event)))
    yield* Fiber.interrupt(ticking)
    yield* Effect.sync(one.flush)
  })
