/**
 * The numbers a caller gives `Deadline` for a time, checked (R12): one that is no time is
 * refused naming it, not taken as a bound of nothing or of everything. Private to `time/`.
 */
import * as UserCode from "../../failure/UserCode.ts"

/**
 * Why a number a caller gave is no time (R12): `NaN` or no number at all (a caller without
 * types) would bound nothing, or everything, silently. `undefined` when it is one. An
 * instant may be in the past (it has passed), a step's length 0 or less (nothing of it is
 * left); a wait's own limit may not be below 0. Infinity is none.
 */
export const noTime = (
  name: string,
  value: unknown,
  kind: "instant" | "length" | "limit",
  optional = true
): string | undefined => {
  if (value === undefined && optional) return undefined
  if (typeof value === "number" && !Number.isNaN(value) && (kind !== "limit" || value >= 0)) return undefined
  const what =
    kind === "instant"
      ? "a time in epoch milliseconds"
      : kind === "length"
        ? "a number of milliseconds"
        : "a number of milliseconds >= 0"
  return `${name} must be ${what}${optional ? " (or undefined for none)" : ""}, got ${UserCode.shown(value)}`
}

/** The first of `reasons` as a defect of `fn`'s caller (a `RangeError`), or `undefined` when there is none. */
export const refused = (fn: string, ...reasons: ReadonlyArray<string | undefined>): RangeError | undefined => {
  const reason = reasons.find((r) => r !== undefined)
  return reason === undefined ? undefined : new RangeError(`Deadline.${fn}: ${reason}`)
}
