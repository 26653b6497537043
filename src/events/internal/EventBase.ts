/** The fields every event has. */
import { Schema } from "effect"

export const base = {
  runId: Schema.String,
  seq: Schema.Int,
  /** Milliseconds since the epoch, from Effect's `Clock` (so `TestClock` in tests). */
  at: Schema.Finite
}
