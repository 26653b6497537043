/**
 * The `tool.interrupted` record of a call whose handler was interrupted (R3.8, R5.2):
 * what the handler said became of its action, or, without its word, what its side
 * effect class allows. Private to the runtime.
 */
import * as RunContext from "./RunContext.ts"
import { type Call, mayHaveEffects } from "./ToolCall.ts"

/** Without a handler's own word, an interrupted call that could change the world may have. */
export const recordInterrupt = (c: Call): void => {
  const tool = c.tool
  const effects = mayHaveEffects(tool)
  const { settlement, detail } = c.settled ?? {
    settlement: effects ? "outcome_unknown" : "cancelled",
    detail: effects
      ? `interrupted; a ${tool.metadata.sideEffect} action may or may not have taken effect`
      : `interrupted; a ${tool.metadata.sideEffect === "none" ? "pure" : "read-only"} call leaves nothing behind`
  }
  RunContext.emit(c.ctx, {
    _tag: "tool.interrupted",
    callId: c.call.id,
    name: c.call.name,
    attempt: c.attempt,
    settlement,
    detail
  })
}

/**
 * The record of a call interrupted between its attempts, while it waited to retry: no
 * attempt was running, and the last one failed retryably (only a safe call is retried),
 * or was found not applied; so nothing is left behind.
 */
export const recordInterruptedWait = (c: Call): void => {
  RunContext.emit(c.ctx, {
    _tag: "tool.interrupted",
    callId: c.call.id,
    name: c.call.name,
    attempt: 0,
    settlement: "cancelled",
    detail: "interrupted while waiting to retry; no attempt was running"
  })
}

/**
 * The record of a call interrupted while its status query ran (R3.8): its outcome was
 * unknown and stays so.
 */
export const recordInterruptedReconcile = (c: Call): void => {
  RunContext.emit(c.ctx, {
    _tag: "tool.interrupted",
    callId: c.call.id,
    name: c.call.name,
    attempt: 0,
    settlement: "outcome_unknown",
    detail: "interrupted while its status query ran; whether it took effect is still unknown"
  })
}

/** The record of a call whose handler never started: the run deadline had passed (R3.11). */
export const recordNotStarted = (c: Call): void => {
  RunContext.emit(c.ctx, {
    _tag: "tool.interrupted",
    callId: c.call.id,
    name: c.call.name,
    attempt: 0,
    settlement: "cancelled",
    detail: "the run deadline had passed before its handler started; it never ran"
  })
}
