/**
 * A live view of runs in a terminal: each run's phase, iteration, budgets (each counter
 * beside the limit its `run.started` recorded), the run's deadline counting down, and the
 * calls in flight. On a TTY the frames of the runs going on are redrawn in place, one block
 * for all of them (ANSI: cursor up, clear down), a run's last frame left above it,
 * as events come but at most once per 100 ms (a frame is drawn from the whole log), and
 * every `refresh` (default 1 s) for the countdowns; a run's last frame is written at once when
 * it ends. The block fits the terminal's height (less a row); when the output
 * is not a TTY (CI, a pipe), it prints one plain line per event instead, and the frame once
 * the run has ended. A resumed run is shown from its resume on.
 *
 * Attach it to every run with {@link layer} (a `RunObserver`), or to one started run with
 * {@link watch}. What it draws are pure functions of the events and the time
 * ({@link frame}, {@link line}), tested as such.
 *
 * @since 0.3.0
 */
import { Clock, Effect, Fiber, type Layer, Schema, Stream } from "effect"
import type * as Event from "../events/Event.ts"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as UserCode from "../failure/UserCode.ts"
import type * as Run from "../run/Run.ts"
import * as RunObserver from "../run/RunObserver.ts"
import { frame, type Given, line } from "./internal/LiveFrame.ts"
import { fitToRow } from "./internal/Terminal.ts"

export {
  /**
   * The frame at `now`, one string a line: the run and its phase, iteration, elapsed time
   * and deadline countdown; the budgets beside their limits; what is in flight; the ending.
   *
   * @category rendering
   * @since 0.3.0
   */
  frame,
  /**
   * The plain line for one event (its time since `startedAt`, its tag, what it says).
   *
   * @category rendering
   * @since 0.3.0
   */
  line
}

/**
 * Where the view writes, and how: `write` (default `process.stdout.write`), `tty` (default:
 * whether stdout is a TTY), `refresh` the redraw interval on a TTY in milliseconds (100 to a
 * day; default 1 s), `columns` the terminal's width (default stdout's), to which each line of
 * a frame is cut so that none wraps and the frame is redrawn in place, and `rows` its height
 * (default stdout's), which the block of runs going fits, less a row (then "… N more runs").
 *
 * @category models
 * @since 0.3.0
 */
export interface Options {
  readonly write?: ((text: string) => void) | undefined
  readonly tty?: boolean | undefined
  readonly refresh?: number | undefined
  readonly columns?: number | undefined
  readonly rows?: number | undefined
}

/**
 * Options the view cannot work with: a `refresh` that is no number of milliseconds from
 * the frame interval (100) to a day, or an option it does not know.
 *
 * @category errors
 * @since 0.3.0
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>()("InvalidOptions", {
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid LiveView options: ${this.reason}`
  }
}

const day = 86_400_000

/** Every option: one the view does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options> = { write: true, tty: true, refresh: true, columns: true, rows: true }

/** The options as given, or why they cannot work (R12: a `refresh` of 0 redrew 60,000 times a second). */
const checked = (options: Options): Effect.Effect<Options, InvalidOptions> => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) return Effect.fail(new InvalidOptions({ reason: unknown }))
  const { refresh } = options
  return refresh === undefined || (typeof refresh === "number" && refresh >= frameInterval && refresh <= day)
    ? Effect.succeed(options)
    : Effect.fail(
        new InvalidOptions({
          reason: `refresh must be a number of milliseconds from ${frameInterval} to ${day}, got ${UserCode.shown(refresh)}`
        })
      )
}

/**
 * The ANSI text that replaces a frame of `previous` lines with `next`: cursor up to the
 * first line of the old frame, clear to the end of the screen, the new frame.
 *
 * @category rendering
 * @since 0.3.0
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
 * How many times the last frame's cost passes before the next: a frame of a long log (about
 * 0.3 s at 120,000 events) is drawn on the run's own time, so the view takes a tenth of it
 * at most, however long the log; with frames drawn every 100 ms, a run that ended in 4 s
 * alone ran into its 60 s deadline (review 44).
 */
const framesApart = 9

/** One run on a screen: its events as it appends them, `settled` once it is over. */
interface RunView {
  /** With `given`, a `run.finished` is drawn with the ending its run's caller was given. */
  readonly event: (event: Event.Event, given?: Given) => void
  readonly settled: () => void
}

/**
 * What the terminal shows of the runs under one view. On a TTY the frames of the runs still
 * going are one block, redrawn together in place: an event draws it when the last drawing is
 * at least `frameInterval` old (else it is held back for the next `tick`), and a tick redraws
 * the countdowns once `refresh` has passed. A run's last frame (`run.finished`, or a run
 * taken away) is written once above the block and stays there. Not a TTY: one plain line per
 * event, and a run's frame once it has ended.
 */
const screen = (options: Options, now: () => number) => {
  const given = options.write
  // A write that throws is dropped, and an `async` write's Promise let go, its rejection handled:
  // a view never takes the process down (its countdown's timer has nobody to catch it, review 120).
  const write = (text: string) => {
    try {
      if (given === undefined) process.stdout.write(text)
      else UserCode.letGo(given(text))
    } catch {
      // Dropped: the view goes on.
    }
  }
  const tty = options.tty ?? process.stdout.isTTY === true
  const refresh = options.refresh ?? 1000
  const live: Array<Array<Event.Event>> = []
  let drawn = 0
  let drawnAt = Number.NEGATIVE_INFINITY
  /** When the next frame may be drawn: `frameInterval` after the last, or `framesApart` times its cost. */
  let nextAt = Number.NEGATIVE_INFINITY
  let heldBack = false
  /** Redraws the block of the runs still going, below the last frame of `ended`, if given. */
  // A line that wrapped would take two rows, and the cursor moves up one a line (review 44).
  const rows = (events: ReadonlyArray<Event.Event>, at: number, given?: Given) =>
    frame(events, at, given).map((text) => fitToRow(text, options.columns ?? process.stdout.columns))
  // The block fits the screen, less a row for the cursor: the cursor moves up no further than
  // the screen's top, so a taller block could not be redrawn in place (review 187). Whole
  // frames, then how many runs are not shown.
  const onScreen = (frames: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> => {
    const height = options.rows ?? process.stdout.rows
    // As for the width, a height that is no number of 3 rows or more sets no bound.
    const room = height !== undefined && Number.isFinite(height) && height >= 3 ? Math.floor(height) - 1 : Infinity
    if (frames.reduce((sum, lines) => sum + lines.length, 0) <= room) return frames.flat()
    const shown: Array<string> = []
    let count = 0
    for (const lines of frames) {
      if (shown.length + lines.length > room - 1) break
      shown.push(...lines)
      count++
    }
    const more = frames.length - count
    return [
      ...shown,
      fitToRow(`… ${more} more run${more === 1 ? "" : "s"} going`, options.columns ?? process.stdout.columns)
    ]
  }
  const draw = (ended?: ReadonlyArray<Event.Event>, given?: Given) => {
    const at = now()
    const ending = ended === undefined ? [] : rows(ended, at, given)
    // A run's end writes its last frame at once, but the block of the others only when it is
    // due: redrawn at every end, 300 runs ending together cost the square of their number,
    // on their own time (review 187: 277 of them ran into their deadline). Till then the block
    // is cleared, and drawn by the next tick.
    if (at < nextAt) {
      heldBack = live.length > 0
      if (ended === undefined) return
      write(redraw(drawn, ending))
      drawn = 0
      return
    }
    drawnAt = at
    heldBack = false
    const block = onScreen(live.map((events) => rows(events, drawnAt)))
    write(redraw(drawn, [...ending, ...block]))
    drawn = block.length
    const done = now()
    nextAt = done + Math.max(frameInterval - (done - drawnAt), framesApart * (done - drawnAt))
  }
  const attach = (): RunView => {
    const events: Array<Event.Event> = []
    live.push(events)
    const leave = () => {
      const at = live.indexOf(events)
      if (at < 0) return false
      live.splice(at, 1)
      return true
    }
    return {
      event: (event, given) => {
        events.push(event)
        if (!tty) {
          write(`${line(event, events[0]?.at ?? event.at)}\n`)
          if (event._tag === "run.finished" && leave()) write(`${frame(events, now(), given).join("\n")}\n`)
          return
        }
        if (event._tag === "run.finished") {
          if (leave()) draw(events, given)
        } else if (now() >= nextAt) draw()
        else heldBack = true
      },
      // A run taken away (no `run.finished`) leaves its last frame too (on a TTY). In every mode the
      // view lets the run go: kept, its events would grow a long-lived view without bound (review 130).
      settled: () => {
        if (!tty) {
          leave()
          return
        }
        if (leave() && events.length > 0) draw(events)
        else if (heldBack && live.length > 0) draw()
      }
    }
  }
  return {
    tty,
    tickEvery: Math.min(frameInterval, refresh),
    attach,
    /** How many runs are on the screen. */
    runs: () => live.length,
    tick: () => {
      const at = now()
      if (tty && live.length > 0 && at >= nextAt && (heldBack || at - drawnAt >= refresh)) draw()
    }
  }
}

/**
 * The live view as an observer of every run (see `RunObserver`): the runs under it share one
 * screen (on a TTY, one block of frames). The countdowns are redrawn on the wall clock's
 * timer (`setInterval`, not keeping the process alive), which runs while a run is on it.
 *
 * @category constructors
 * @since 0.3.0
 */
export const observer = (options: Options = {}): Effect.Effect<RunObserver.Observer, InvalidOptions> =>
  Effect.map(checked(options), observerOf)

const observerOf = (options: Options): RunObserver.Observer => {
  const shown = screen(options, Date.now)
  let timer: ReturnType<typeof setInterval> | undefined
  return {
    attach: () => {
      const one = shown.attach()
      // A raw timer: `attach` is synchronous, with no fiber to sleep in; a terminal's countdown is wall-clock time.
      if (shown.tty && timer === undefined) {
        timer = setInterval(shown.tick, shown.tickEvery)
        timer.unref?.()
      }
      return {
        event: one.event,
        settled: Effect.sync(() => {
          one.settled()
          if (timer !== undefined && shown.runs() === 0) {
            clearInterval(timer)
            timer = undefined
          }
        })
      }
    }
  }
}

/**
 * Shows every run under this layer live.
 *
 * @category layers
 * @since 0.3.0
 */
export const layer = (options: Options = {}): Layer.Layer<never, InvalidOptions> => RunObserver.layer(observer(options))

/**
 * Shows one started run live until it ends, by the Effect clock (`TestClock` in tests):
 * its events as they come, and on a TTY a redraw every `refresh`.
 *
 * @category combinators
 * @since 0.3.0
 */
export const watch = <O>(handle: Run.Handle<O>, options: Options = {}): Effect.Effect<void, InvalidOptions> =>
  Effect.gen(function* () {
    yield* checked(options)
    const clock = yield* Clock.Clock
    const shown = screen(options, () => clock.currentTimeMillisUnsafe())
    const one = shown.attach()
    const ticking = yield* Effect.forkChild(
      Effect.forever(Effect.andThen(Effect.sleep(shown.tickEvery), Effect.sync(shown.tick)))
    )
    // The last frame says the ending the handle gives: where its log's differs (a run another
    // process took over ends `internal_error`, review 166), its `run.finished` is drawn with it.
    let finished: Event.Event | undefined
    yield* Stream.runForEach(handle.events, (event) =>
      Effect.sync(() => {
        if (event._tag === "run.finished") finished = event
        else one.event(event)
      })
    )
    if (finished !== undefined) {
      const { status, stopReason } = yield* handle.result
      one.event(finished, { status, stopReason })
    }
    yield* Fiber.interrupt(ticking)
    yield* Effect.sync(one.settled)
  })
