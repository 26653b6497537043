/**
 * The default retry schedule of a recovery episode. Re-exported from `Recovery`.
 */
import { Duration, Effect, Schedule } from "effect"
import type * as Failure from "../../failure/Failure.ts"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as Durations from "../../time/Durations.ts"

/**
 * The delays of one recovery episode, one per retry. The input is the failure being
 * retried, so a schedule can look at its code or category.
 *
 * @category models
 * @since 0.1.0
 */
export type Backoff = Schedule.Schedule<unknown, Failure.Retryable>

/** A delay option: a duration of at least 0 (finite unless `infinite` may be), or a `RangeError` naming it. */
const delayOf = (name: string, input: Duration.Input, infinite: boolean): Duration.Duration => {
  const millis = Durations.millisOf(input)
  if (millis !== undefined && millis >= 0 && (infinite || Number.isFinite(millis))) return Duration.millis(millis)
  throw new RangeError(
    `Recovery.backoff: ${name} must be a ${infinite ? "" : "finite "}duration >= 0, got ${String(input)}`
  )
}

/** Every option of {@link backoff}: one it does not know is refused (review 173: `retry: 5` was let go). */
const knownOptions: OptionKeys.Known<NonNullable<Parameters<typeof backoff>[0]>> = {
  base: true,
  factor: true,
  retries: true,
  cap: true,
  jitter: true
}

/**
 * Exponential backoff: `base × factor^n` for the n-th completed retry (by default
 * 0.05 s, then 0.10 s: two retries), jittered ×0.8–1.2 unless `jitter: false`, each
 * delay capped at `cap` (default 5 s; infinite for no cap). Throws a `RangeError` for a
 * `base` that is not a finite duration >= 0, a negative `cap`, a `factor` under 1 or
 * `retries` not an integer >= 0, a `jitter` that is no boolean, or an option it does not know.
 *
 * @category constructors
 * @since 0.1.0
 */
export const backoff = (
  options: {
    readonly base?: Duration.Input | undefined
    readonly factor?: number | undefined
    readonly retries?: number | undefined
    readonly cap?: Duration.Input | undefined
    readonly jitter?: boolean | undefined
  } = {}
): Backoff => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) throw new RangeError(`Recovery.backoff: ${unknown}`)
  if (options.jitter !== undefined && typeof options.jitter !== "boolean") {
    throw new RangeError(`Recovery.backoff: jitter must be a boolean, got ${typeof options.jitter}`)
  }
  const retries = options.retries ?? 2
  if (!Number.isInteger(retries) || retries < 0) {
    throw new RangeError(`Recovery.backoff: retries must be an integer >= 0, got ${retries}`)
  }
  const factor = options.factor ?? 2
  if (!(factor >= 1)) throw new RangeError(`Recovery.backoff: factor must be >= 1, got ${factor}`)
  const base = delayOf("base", options.base ?? "50 millis", false)
  const cap = delayOf("cap", options.cap ?? "5 seconds", true)
  const exponential = Schedule.exponential(base, factor)
  const jittered = options.jitter === false ? exponential : Schedule.jittered(exponential)
  return jittered.pipe(
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, cap))),
    Schedule.upTo({ times: retries }),
    Schedule.setInputType<Failure.Retryable>()
  )
}
