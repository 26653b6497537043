/** How the benchmarks print: units, verdicts, aligned tables, and the errors they met. */

export const us = (ms: number): string => `${(ms * 1000).toFixed(2)} µs`
export const kb = (bytes: number): string => `${(bytes / 1024).toFixed(2)} KB`
export const verdict = (ok: boolean): string => (ok ? "PASS" : "MISS")

/** Where a benchmark reports a problem: printed at once, counted for the summary. */
export interface Errors {
  readonly error: (message: string) => void
  readonly count: () => number
}

export const makeErrors = (): Errors => {
  let count = 0
  return {
    error: (message) => {
      count++
      console.log(`ERROR: ${message}`)
    },
    count: () => count
  }
}

const pad = (s: string, n: number): string => (s.length >= n ? s : s + " ".repeat(n - s.length))
const lpad = (s: string, n: number): string => (s.length >= n ? s : " ".repeat(n - s.length) + s)

/** Prints rows as a table, the first row as its header. */
export const table = (rows: ReadonlyArray<ReadonlyArray<string>>): void => {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? []
  rows.forEach((row, r) => {
    console.log(row.map((cell, i) => (i === 0 ? pad(cell, widths[i] ?? 0) : lpad(cell, widths[i] ?? 0))).join("  "))
    if (r === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "))
  })
}
