/**
 * The waits a run makes in real time on purpose, off Effect's `Clock`: the stop grace, an
 * aborted promise's grace, a subprocess's grace. Each is short and bounded, and lives in
 * real time so that a `TestClock` that is never moved cannot stall it. A test-clock driver
 * (`TestClockDriver.drive`) provides {@link Waits} and holds the `TestClock` still while one
 * is pending, so that a test's timeline does not race ahead of what it waits for.
 *
 * @since 0.3.0
 */
import { Context, Effect } from "effect"

/**
 * Told of each wait in real time as it begins; `begin` gives the function that ends it.
 * `held` is set for a region of {@link held}, which ends when its work does, not by a timer.
 *
 * @category models
 * @since 0.3.0
 */
export interface Waits {
  readonly begin: (held?: boolean) => () => void
}

const noWait = () => {}

/**
 * The waits of the current fiber; by default nobody is told.
 *
 * @category references
 * @since 0.3.0
 */
export const Waits = Context.Reference<Waits>("effect-agent-runtime/RealTime/Waits", {
  defaultValue: () => ({ begin: () => noWait })
})

/**
 * A count of the waits pending, for a driver of the `TestClock`.
 *
 * @category constructors
 * @since 0.3.0
 */
export const counted = (): Waits & { readonly pending: () => number } => {
  let pending = 0
  return {
    begin: () => {
      pending++
      let ended = false
      return () => {
        if (ended) return
        ended = true
        pending--
      }
    },
    pending: () => pending
  }
}

/**
 * `setTimeout` as a wait in real time of `waits`: `f` runs after `millis`; the function
 * returned cancels it. Both end the wait.
 *
 * @category constructors
 * @since 0.3.0
 */
export const timer = (waits: Waits, millis: number, f: () => void): (() => void) => {
  const end = waits.begin()
  // A `setTimeout` longer than its limit fires at once: a longer wait is made of several.
  let handle: ReturnType<typeof setTimeout>
  const arm = (left: number) => {
    handle = setTimeout(
      () => {
        if (left > maxTimerMillis) return arm(left - maxTimerMillis)
        end()
        f()
      },
      Math.min(left, maxTimerMillis)
    )
  }
  arm(millis)
  return () => {
    end()
    clearTimeout(handle)
  }
}

/** The longest wait one `setTimeout` makes. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * Sleeps `millis` of real time, told to the fiber's {@link Waits}.
 *
 * @category constructors
 * @since 0.3.0
 */
export const sleep = (millis: number): Effect.Effect<void> =>
  Effect.withFiber((fiber) =>
    Effect.callback<void>((resume) => {
      const cancel = timer(fiber.getRef(Waits), millis, () => resume(Effect.void))
      return Effect.sync(cancel)
    })
  )

/**
 * Runs `self` as one wait in real time of the fiber's {@link Waits}, from its start to its
 * end: for work made of several real waits and what lies between them (a subprocess's grace,
 * its polls and its reads of `/proc`), so that a test-clock driver holds its clock still for
 * the whole of it, not only during each wait. Held work should wait in real time
 * ({@link sleep}), never on the `Clock`, which the driver holds still: once its `heldUpTo`
 * (2 s by default) passes with no wait in real time begun or ended, the driver moves the
 * clock again.
 *
 * @category combinators
 * @since 0.3.0
 */
export const held = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    const end = fiber.getRef(Waits).begin(true)
    return Effect.ensuring(self, Effect.sync(end))
  })
