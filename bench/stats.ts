// Order statistics shared by the loop and cancellation benchmarks.

/** The median; the mean of the two middle values for an even count. */
export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length === 0
    ? Number.NaN
    : s.length % 2 === 1
      ? (s[mid] ?? Number.NaN)
      : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2
}

/** The `q` quantile, by the nearest rank below. */
export const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.floor(q * (s.length - 1))))] ?? Number.NaN
}
