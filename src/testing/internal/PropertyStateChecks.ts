/**
 * The state-machine invariants of a finished run (R1.2, R1.3): `checkStates`, part of
 * `check`.
 * Private to the testing kit; `Properties` is the public face.
 */

import * as RunState from "../../events/RunState.ts"
import type * as RunResult from "../../run/RunResult.ts"
import type { Violate } from "./PropertyViolation.ts"

/**
 * R1: every move is an edge of `RunState.table` from the state the run was in; it ends
 * terminal. R1.3: the state shows the phase: `awaiting_approval` exactly while a call
 * waits for a decision, and `recovering` (or `awaiting_approval`) when a retry starts.
 */
export const checkStates = (result: RunResult.RunResult, violate: Violate): void => {
  let state: RunState.State = "created"
  const waiting = new Set<string>()
  for (const e of result.timeline) {
    if (e._tag === "approval.requested") waiting.add(e.callId)
    if (e._tag === "approval.decided") waiting.delete(e.callId)
    if (e._tag === "state.changed") {
      if (e.from !== state) {
        violate("R1.2 state machine", `state.changed (seq ${e.seq}) moves from ${e.from}, but the run was ${state}`)
      }
      if (!RunState.canTransition(e.from, e.to)) {
        violate("R1.2 state machine", `state.changed (seq ${e.seq}) ${e.from} → ${e.to} is not an edge of the table`)
      }
      state = e.to
      continue
    }
    // A decision is recorded just before the run leaves the phase (a withdrawn call also records its interruption).
    if (e._tag === "approval.decided" || e._tag === "tool.interrupted" || RunState.isTerminal(state)) continue
    if ((state === "awaiting_approval") !== waiting.size > 0) {
      violate(
        "R1.3 phase",
        `the run is ${state} at ${e._tag} (seq ${e.seq}) while ${waiting.size} calls wait for approval`
      )
    }
    if (e._tag === "recovery.started" && state !== "recovering" && state !== "awaiting_approval") {
      violate("R1.3 phase", `recovery.started (seq ${e.seq}) while the run is ${state}`)
    }
  }
  if (!RunState.isTerminal(state)) violate("R1.2 state machine", `the run ended in ${state}, not a terminal status`)
  else if (state !== result.status) {
    violate("R1.2 state machine", `the last state is ${state}, the result says ${result.status}`)
  }
}
