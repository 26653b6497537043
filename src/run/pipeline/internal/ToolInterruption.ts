/**
 * The `tool.interrupted` record of a call whose handler was interrupted (R3.8, R5.2):
 * what the handler said became of its action, or, without its word, what its side
 * effect class allows. Private to the runtime.
 */
import { Option } from "effect"
import * as Event from "../../../events/Event.ts"
import * as RunLog from "../../../events/RunLog.ts"
import type * as Approval from "../../../tools/Approval.ts"
import type * as Tool from "../../../tools/Tool.ts"
import * as RunContext from "../../internal/RunContext.ts"
import type { Registry } from "../Registry.ts"
import { letGo } from "./GateAnswers.ts"
import { type Call, mayActTwice, mayHaveEffects } from "./ToolCall.ts"

/**
 * The log from the last model response on: only its batch can have calls still open,
 * since every earlier batch ended before the model was asked again.
 */
const lastBatch = (ctx: RunContext.RunContext): ReadonlyArray<Event.Event> => {
  const from = ctx.events.findLastIndex((e) => e._tag === "model.responded")
  return from <= 0 ? ctx.events : ctx.events.slice(from)
}

/** The calls of the last batch as its events leave them. */
interface Calls {
  /** Each call taken up without its ending, by id, with its name. */
  readonly open: Map<string, string>
  /** The calls an attempt of whose handler started, each with the last such attempt. */
  readonly attempted: Map<string, number>
  /** The calls taken up before the run was last resumed: the process that stopped may have run them, their events lost. */
  readonly before: ReadonlySet<string>
}

/**
 * Reads the last batch. A call is open, until its result or a record of its interruption,
 * from its first event of its own; from the run's resumption, for a call the process that
 * stopped may have taken up (`RunLog.mayHaveTakenUp`: in call order, as many at a time as
 * the run's concurrency, each call that could end with nothing committed letting the next
 * one in); and, with `everyTaken`, from when the batch took it up (a call in its permission
 * check has no event of its own yet).
 */
const callsOf = (
  ctx: RunContext.RunContext,
  tools: ReadonlyMap<string, Tool.Any<unknown>>,
  everyTaken = false
): Calls => {
  const events = lastBatch(ctx)
  const asked = events[0]
  const names = new Map(
    asked?._tag === "model.responded" ? Event.callsOf(asked).map(({ callId, name }) => [callId, name]) : []
  )
  // The concurrency in force when the batch began (a resume inside it lays its own).
  const concurrency = RunLog.concurrencyOf(ctx.events.slice(0, ctx.events.length - events.length))
  const resumedAt = events.findLastIndex((e) => e._tag === "run.resumed")
  const before =
    resumedAt < 0
      ? new Set<string>()
      : RunLog.mayHaveTakenUp(events.slice(0, resumedAt), concurrency, commitsAtOnce(tools))
  const open = new Map<string, string>()
  const attempted = new Map<string, number>()
  const ended = new Set<string>()
  const openIf = (callId: string) => {
    const name = names.get(callId)
    if (name !== undefined && !ended.has(callId)) open.set(callId, name)
  }
  if (everyTaken) for (const callId of RunLog.takenUp(events, concurrency).keys()) openIf(callId)
  for (const e of events) {
    if (e._tag === "run.resumed") for (const callId of before) openIf(callId)
    const callId = Event.callIdOf(e)
    if (callId === undefined || !names.has(callId)) continue
    if (Event.isResult(e) || e._tag === "tool.interrupted") {
      open.delete(callId)
      ended.add(callId)
    } else if (e._tag === "tool.started") {
      // An attempt after an interrupted one (a timeout retried): the call is open again.
      attempted.set(callId, e.attempt)
      ended.delete(callId)
      openIf(callId)
    } else openIf(callId)
  }
  return { open, attempted, before }
}

/**
 * Whether a call could have acted with no record of it in the log: only one whose tool is
 * gone (nobody can tell what it does). A call that may change the world commits its
 * attempt before its handler runs (R9.2), so one whose attempt is not in the log never acted.
 */
const mayHaveActedUnrecorded = (tool: Tool.Any<unknown> | undefined): boolean => tool === undefined

/**
 * Whether a call's last attempt is one whose handler waits for its intent record (its tool
 * `mayAct`, in a run with a journal) and that record is not in the journal yet (R9.2): its
 * handler has not started, whatever holds the commit (a store that does not answer).
 */
const intentUncommitted = (ctx: RunContext.RunContext, callId: string, mayAct: boolean): boolean => {
  if (ctx.journal === undefined || !mayAct) return false
  const started = ctx.events.findLast((e) => e._tag === "tool.started" && e.callId === callId)
  return started !== undefined && started.seq >= ctx.committed
}

/** Whether a call of the named tool commits its attempt before its handler and its ending at once (R9.2): it may act twice. */
const commitsAtOnce =
  (tools: ReadonlyMap<string, Tool.Any<unknown>>) =>
  (name: string): boolean => {
    const tool = tools.get(name)
    return tool !== undefined && mayActTwice(tool)
  }

/** What a call the process that stopped may have run with no record comes to. */
const ranBeforeDetail = "the process that stopped may have run it: its action may or may not have taken effect"

/** Appends the `tool.interrupted` record of `call`: what became of `attempt` (0: none was running). */
const record = (
  ctx: RunContext.RunContext,
  call: { readonly id: string; readonly name: string },
  attempt: number,
  settlement: Tool.Settlement,
  detail: string,
  /** The tool's side-effect class, when its action took place (`completed`). */
  sideEffect?: Tool.SideEffect
): void => {
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "tool.interrupted",
    callId: call.id,
    name: call.name,
    attempt,
    settlement,
    detail,
    ...(sideEffect === undefined ? {} : { sideEffect }),
    runId,
    seq,
    at
  }))
}

/** Without a handler's own word, an interrupted call that could change the world may have. */
export const recordInterrupt = (c: Call<unknown>): void => {
  const tool = c.tool
  const effects = mayHaveEffects(tool)
  const { settlement, detail } = c.settled ?? {
    settlement: effects ? "outcome_unknown" : "cancelled",
    detail: effects
      ? `interrupted; ${tool.metadata.sideEffect === "external" ? "an external" : "a write"} action may or may not have taken effect`
      : `interrupted; a ${tool.metadata.sideEffect === "none" ? "pure" : "read-only"} call leaves nothing behind`
  }
  record(
    c.ctx,
    c.call,
    c.attempt,
    settlement,
    detail,
    settlement === "completed" ? tool.metadata.sideEffect : undefined
  )
}

/**
 * The record of a call interrupted between its steps, where none of its own handlers records
 * it (R5.2, R3.8): right after its `tool.started`, after its handler returned, after its
 * retries gave up, or after its status query answered, and before its result was recorded.
 * A call with its result, or whose last attempt has its record (its interruption, its
 * timeout, a retry's wait), is left as it is, but for a status query's answer given since.
 */
export const recordIfOpen = (c: Call<unknown>): void => {
  const events = c.ctx.events
  const started = events.findLastIndex((e) => e._tag === "tool.started" && e.callId === c.call.id)
  const attempt = events[started]
  if (attempt?._tag !== "tool.started") return
  let last: Event.Event = attempt
  let recorded = false
  for (const e of events.slice(started + 1)) {
    if (!("callId" in e) || e.callId !== c.call.id) continue
    if (e._tag === "tool.succeeded" || e._tag === "tool.failed" || e._tag === "tool.blocked") return
    if (e._tag === "tool.interrupted") recorded = true
    last = e
  }
  if (last._tag === "tool.reconciled") recordInterruptedReconcile(c)
  else if (recorded) return
  else if (attempt.attempt === c.attempt) recordInterrupt(c)
  else record(c.ctx, c.call, attempt.attempt, "cancelled", "interrupted before its handler started; it never ran")
}

/**
 * The record of an attempt a resumed run found in doubt (R9): the process running it
 * stopped before the attempt's end was committed.
 */
export const recordStopped = (
  ctx: RunContext.RunContext,
  call: { readonly id: string; readonly name: string },
  attempt: number,
  mayHaveActed: boolean
): void => {
  const detail = `the process running the run stopped during this attempt${
    mayHaveActed ? "; its action may or may not have taken effect" : ""
  }`
  record(ctx, call, attempt, mayHaveActed ? "outcome_unknown" : "cancelled", detail)
}

/**
 * The record of a call interrupted between its attempts, while it waited to retry: no
 * attempt was running, and the last one failed retryably (only a safe call is retried),
 * or was found not applied; so nothing is left behind.
 */
export const recordInterruptedWait = (c: Call<unknown>): void => {
  record(c.ctx, c.call, 0, "cancelled", "interrupted while waiting to retry; no attempt was running")
}

/**
 * The record of a call interrupted while its status query ran (R3.8): its outcome was
 * unknown and stays so, unless the query had answered, which the record then keeps.
 */
export const recordInterruptedReconcile = (c: Call<unknown>): void => {
  const last = c.ctx.events.findLast((e) => "callId" in e && e.callId === c.call.id)
  const verdict = last?._tag === "tool.reconciled" ? last.verdict : "undecidable"
  if (verdict === "applied") {
    const detail = "its status query found it applied; the run stopped before its result was recorded"
    record(c.ctx, c.call, 0, "completed", detail, c.tool.metadata.sideEffect)
  } else if (verdict === "not_applied") {
    record(c.ctx, c.call, 0, "cancelled", "its status query found it not applied; it was not sent again")
  } else {
    const detail = "interrupted while its status query ran; whether it took effect is still unknown"
    record(c.ctx, c.call, 0, "outcome_unknown", detail)
  }
}

/**
 * The record of a call interrupted while its postcondition ran (R6.4): its handler had
 * finished (or its status query found it applied), so its action is done; only the
 * confirmation is missing.
 */
export const recordInterruptedCheck = (c: Call<unknown>): void => {
  record(
    c.ctx,
    c.call,
    0,
    "completed",
    "interrupted before its postcondition answered; its action had taken place, unconfirmed",
    c.tool.metadata.sideEffect
  )
}

/**
 * The record of a call interrupted before its handler ever ran (while the permission
 * policy decided, or found past the run deadline, R3.11): nothing is left behind.
 */
export const recordNeverRan = (
  ctx: RunContext.RunContext,
  call: { readonly id: string; readonly name: string },
  detail: string
): void => {
  record(ctx, call, 0, "cancelled", detail)
}

/**
 * The record of an attempt interrupted while its intent record waited for the journal
 * (R5.2, R9.2): its handler never started.
 */
export const recordIntentInterrupted = (c: Call<unknown>, attempt: number): void => {
  record(
    c.ctx,
    c.call,
    attempt,
    "cancelled",
    "interrupted while its intent record waited for the journal; it never ran"
  )
}

/**
 * The record of an attempt whose handler did not start after its intent record: the run's
 * deadline, or all of the attempt's time, had passed meanwhile (R3.11, R4.2).
 */
export const recordNotStarted = (c: Call<unknown>, attempt: number, detail: string): void => {
  record(c.ctx, c.call, attempt, "cancelled", detail)
}

/** What a call found past the run deadline before its handler ran says (R3.11). */
export const lateDetail = "the run deadline had passed before its handler started; it never ran"

/** A request for approval the run no longer waits for: the decision the gate held for it, else withdrawn (R7). */
const letGoOf = (
  ctx: RunContext.RunContext,
  callId: string,
  name: string,
  held: Approval.Decision | undefined = undefined
): void => {
  RunContext.emit(ctx, letGo({ id: callId, name }, Option.fromUndefinedOr(held)))
}

/**
 * The records of the calls still in flight when the run's fiber ended outright (a value
 * that was not an Effect deep inside user code, which ends a fiber without running its
 * finalizers): nobody saw what became of them, so a call that could change the world
 * may have (R3.8, R5.2).
 */
export const recordAbandoned = (
  ctx: RunContext.RunContext,
  tools: ReadonlyMap<string, Tool.Any<unknown>>,
  /** Why nobody saw the calls end; with `stillRunning`, they may still be running. */
  why = "the run ended on a defect while the call was in flight",
  stillRunning = false
): void => {
  // Said of a call whose handler may be running; one that never started did not stop its checks
  // or its wait for a person (review 144: "still running; its handler had not started").
  const mayRun = stillRunning ? `still running: ${why}` : why
  // Every call the batch took up is accounted for: one whose handler never started never ran.
  // An attempt that recorded its interruption has stopped: it is not left running.
  const { open, attempted, before } = callsOf(ctx, tools, true)
  let withdrew = false
  for (const [callId, name] of open) {
    const tool = tools.get(name)
    // A request still waiting for a person is withdrawn, as a wait the run stopped is (R7).
    if (ctx.log.approvals.includes(callId)) {
      withdrew = true
      letGoOf(ctx, callId, name)
    }
    // A call whose handler never started did nothing, whatever of its checks still runs,
    // unless the process that stopped may have run it with no record (R9).
    if (!attempted.has(callId)) {
      if (before.has(callId) && mayHaveActedUnrecorded(tool))
        record(ctx, { id: callId, name }, 0, "outcome_unknown", `${mayRun}; ${ranBeforeDetail}`)
      else record(ctx, { id: callId, name }, 0, "cancelled", `${why}; its handler had not started: it never ran`)
      continue
    }
    if (intentUncommitted(ctx, callId, tool !== undefined && mayHaveEffects(tool))) {
      const detail = `${why}; its intent record was not yet in the journal, so its handler had not started: it never ran`
      record(ctx, { id: callId, name }, attempted.get(callId) ?? 0, "cancelled", detail)
      continue
    }
    const effects = stillRunning || (tool !== undefined && mayHaveEffects(tool))
    const detail = `${mayRun}${effects ? "; its action may or may not have taken effect" : ""}`
    // The attempt that was running, and may still be (review 86: it said 0, "none running").
    record(ctx, { id: callId, name }, attempted.get(callId) ?? 0, effects ? "outcome_unknown" : "cancelled", detail)
  }
  // Its waits for a person ended so: the run leaves their phase, as a wait that ends does (R1.3).
  if (withdrew && RunContext.state(ctx) === "awaiting_approval") {
    RunContext.moveNow(ctx, RunLog.phaseOf(ctx.log, "tool_executing"))
  }
}

const noDecisions: ReadonlyMap<string, Approval.Decision> = new Map()

/**
 * The records of the calls a run ends without having taken up (R5.2, R7, R3.8): started,
 * neither ended nor recorded interrupted, and not running (never sent to their handler,
 * or waiting to retry), as a resumed run's log leaves a call that was checked, waiting
 * for approval or waiting to retry when the process stopped, if the run (or its batch)
 * ends before the call goes on. A request still waiting is withdrawn: the call never
 * ran. A call the process that stopped may have taken up whose tool is gone may have
 * acted: its outcome is unknown. Every other call that may act commits its attempt first.
 * Whether a wait was ended so (the run's phase is then to follow).
 */
export const recordUntaken = (
  ctx: RunContext.RunContext,
  tools: Registry["tools"],
  /** The decisions the gate held for calls waiting for one (see `GateAnswers.heldOnGate`). */
  held: ReadonlyMap<string, Approval.Decision> = noDecisions
): boolean => {
  let waited = false
  const { open, attempted, before } = callsOf(ctx, tools)
  for (const [callId, name] of open) {
    const call = { id: callId, name }
    const tool = tools.get(name)
    if (ctx.log.approvals.includes(callId)) {
      waited = true
      const decision = held.get(callId)
      letGoOf(ctx, callId, name, decision)
      recordNeverRan(
        ctx,
        call,
        decision === undefined
          ? "withdrawn: the run ended before the call went on; it never ran"
          : `${decision._tag === "Approved" ? "approved" : "rejected"} as the run ended, before the call went on; it never ran`
      )
    } else if (ctx.log.retries.includes(callId)) {
      waited = true
      if (before.has(callId) && mayHaveActedUnrecorded(tool))
        record(
          ctx,
          call,
          0,
          "outcome_unknown",
          "the process that stopped may have retried it, and the run ended before it went on; its action may or may not have taken effect"
        )
      else record(ctx, call, 0, "cancelled", "the run ended while the call waited to retry; no attempt was running")
    } else if (attempted.has(callId)) {
    } else if (before.has(callId) && mayHaveActedUnrecorded(tool)) {
      record(ctx, call, 0, "outcome_unknown", `the run ended before it went on; ${ranBeforeDetail}`)
    } else if (before.has(callId)) {
      recordNeverRan(
        ctx,
        call,
        "the run ended before the call went on; whatever the process that stopped began of it left nothing behind"
      )
    } else {
      recordNeverRan(ctx, call, "the run ended before the call went on; it never ran")
    }
  }
  return waited
}
