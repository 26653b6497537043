/** The loop benchmark's settings: its command-line options and its targets (issue 10). */

const argValue = (name: string): string | undefined => {
  const prefix = `--${name}=`
  return process.argv.find((a) => a.startsWith(prefix))?.slice(prefix.length)
}

/** `--only=steps|memory|slope`: one part only. */
export const only = argValue("only")
/** `--rounds=N`: measured rounds of the step benchmark. */
export const ROUNDS = Number(argValue("rounds") ?? 12)
/** Time spent per case and round; cases are interleaved round by round against drift. */
export const SLICE_MS = 125
export const WARMUP_MS = 500
export const KS = [10, 200] as const
export const SUSPENDED = 10_000
export const SLOPE_RUNS = 2_000

/** Per step at K=200, median, on these machines (issue 10); the ratio to the minimal loop is printed beside it. */
export const TARGET_STEP_MS = 0.02
/** Growth per completed step: 1 KB, plus the step's payload once (measured beside it: `stepPayloadBench`). */
export const TARGET_SLOPE_BYTES = 1024
export const TARGET_GROWTH = 1.25
export const TARGET_BYTES = 10 * 1024
