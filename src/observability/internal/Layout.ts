/**
 * The viewer's picture of a run, from its events alone: one group of rows per iteration
 * (the model's attempts and backoffs, then one row per tool call with its attempts,
 * backoffs and approval wait), the phases on a row of their own, the time layers as
 * marks (the run deadline across the chart, each step's, each attempt's and approval's
 * on its row), and the budgets consumed beside their limits (the limits `run.started`
 * recorded; the run deadline and time limit as a resume brought them closer). Private to
 * `observability/`.
 */
import * as Event from "../../events/Event.ts"
import * as RunLog from "../../events/RunLog.ts"
import * as Explain from "../../explain/Explain.ts"

/** What a bar stands for; its colour in the page. */
export type BarKind =
  | "phase"
  | "model"
  | "model_failed"
  | "tool"
  | "tool_failed"
  | "tool_blocked"
  | "interrupted"
  | "backoff"
  | "approval"

/** A span of time on a row; `seq` is the event that opened it (its details on click). */
export interface Bar {
  readonly kind: BarKind
  readonly label: string
  readonly from: number
  readonly to: number
  readonly seq: number
  /** Still going when the log ends. */
  readonly open: boolean
}

/** A deadline: when a time layer would fire (`run`, `step`, `attempt`, `tool`, `approval`). */
export interface Mark {
  readonly layer: string
  readonly at: number
  readonly seq: number
}

export interface Row {
  readonly label: string
  readonly bars: ReadonlyArray<Bar>
  readonly marks: ReadonlyArray<Mark>
}

export interface Group {
  /** 0 for what is not in an iteration (the phases). */
  readonly iteration: number
  readonly rows: ReadonlyArray<Row>
}

export interface Budget {
  readonly name: string
  readonly used: number
  readonly limit: number | undefined
  readonly unit: "count" | "tokens" | "usd" | "ms"
}

export interface Stop {
  readonly finished: boolean
  readonly status: string
  readonly stopReason: string | undefined
  readonly policy: string | undefined
  readonly detail: string | undefined
  /** The event that decided the stop (its details on click). */
  readonly seq: number | undefined
}

export interface Layout {
  readonly startedAt: number
  /** The last event's time. */
  readonly endedAt: number
  /** Where the chart ends: the last event, or a deadline soon after it (within the run's length again). */
  readonly chartEndAt: number
  readonly groups: ReadonlyArray<Group>
  /** The run deadline, across the chart. */
  readonly runDeadline: Mark | undefined
  readonly budgets: ReadonlyArray<Budget>
  readonly stop: Stop
}

interface MutableRow {
  readonly label: string
  readonly bars: Array<Bar>
  readonly marks: Array<Mark>
}

const row = (label: string): MutableRow => ({ label, bars: [], marks: [] })

/** The call's events that end what its last attempt, backoff or wait began. */
const callEnds = new Set<Event.Event["_tag"]>([
  "tool.started",
  "tool.succeeded",
  "tool.failed",
  "tool.blocked",
  "tool.interrupted",
  "tool.reconciled",
  "recovery.started",
  "approval.requested",
  "approval.decided"
])

/** The latest of `from` and `times`, by a loop: spread into `Math.max`, a long run's times overflow the stack. */
const latest = (from: number, times: ReadonlyArray<number>): number => {
  let at = from
  for (const t of times) at = Math.max(at, t)
  return at
}

/** Builds the picture of a timeline (or of a prefix of one: a run still going has open bars). */
export const layout = (events: ReadonlyArray<Event.Event>): Layout => {
  const first = events[0]
  const started = events.find((e) => e._tag === "run.started")
  const startedAt = started?.at ?? first?.at ?? 0
  const endedAt = latest(
    startedAt,
    events.map((e) => e.at)
  )
  const groups = new Map<number, Array<MutableRow>>()
  const phases = row("phase")
  const modelRows = new Map<number, MutableRow>()
  const callRows = new Map<string, MutableRow>()
  /** What is open on a call's row: the bar waiting for the call's next event. */
  const openOnCall = new Map<string, { kind: BarKind; label: string; from: number; seq: number }>()
  const openModel = new Map<number, { label: string; from: number; seq: number }>()
  /**
   * The backoffs still sleeping, by owner (a call's id, `""` for the model's): each ends at
   * its planned end, or sooner at the event that cut it short (see `wakeUp`).
   */
  const sleeping = new Map<string, { row: MutableRow; bar: Omit<Bar, "to">; plannedEnd: number }>()
  let iteration = 0
  let phase: { name: string; from: number; seq: number } | undefined

  const groupOf = (i: number): Array<MutableRow> => {
    let rows = groups.get(i)
    if (rows === undefined) {
      rows = []
      groups.set(i, rows)
    }
    return rows
  }
  const modelRow = (i: number): MutableRow => {
    let r = modelRows.get(i)
    if (r === undefined) {
      r = row("model")
      modelRows.set(i, r)
      groupOf(i).unshift(r)
    }
    return r
  }
  const closeCall = (callId: string, at: number, kind?: BarKind) => {
    const open = openOnCall.get(callId)
    const r = callRows.get(callId)
    if (open === undefined || r === undefined) return
    openOnCall.delete(callId)
    r.bars.push({ ...open, kind: kind ?? open.kind, to: at, open: false })
  }
  const finite = (at: number) => Number.isFinite(at)
  const endSleep = (owner: string, at: number) => {
    const backoff = sleeping.get(owner)
    if (backoff === undefined) return
    sleeping.delete(owner)
    backoff.row.bars.push({ ...backoff.bar, to: Math.min(at, backoff.plannedEnd) })
  }
  /**
   * A backoff ends with the next event of what slept: the model's with the run's next event
   * (nothing else runs while the model's call waits), a call's with that call's next event
   * (the other calls of its batch go on meanwhile); every one with the run's stop (a cancel
   * or the deadline cuts the wait short). Never later than it was planned to.
   */
  const wakeUp = (e: Event.Event) => {
    if (e._tag === "run.stopping" || e._tag === "run.finished") {
      for (const owner of [...sleeping.keys()]) endSleep(owner, e.at)
      return
    }
    endSleep("", e.at)
    if ("callId" in e && typeof e.callId === "string") endSleep(e.callId, e.at)
  }

  for (const e of events) {
    wakeUp(e)
    if ("callId" in e && typeof e.callId === "string" && callEnds.has(e._tag)) {
      const open = openOnCall.get(e.callId)
      const failedAttempt =
        open?.kind === "tool" &&
        (e._tag === "tool.failed" || e._tag === "recovery.started" || e._tag === "tool.reconciled")
      const interrupted = open?.kind === "tool" && e._tag === "tool.interrupted"
      closeCall(e.callId, e.at, failedAttempt ? "tool_failed" : interrupted ? "interrupted" : undefined)
    }
    switch (e._tag) {
      case "state.changed":
        if (phase !== undefined)
          phases.bars.push({
            kind: "phase",
            label: phase.name,
            from: phase.from,
            to: e.at,
            seq: phase.seq,
            open: false
          })
        phase = { name: e.to, from: e.at, seq: e.seq }
        break
      case "model.requested": {
        iteration = e.iteration
        const r = modelRow(e.iteration)
        openModel.set(e.iteration, { label: `attempt ${e.attempt}`, from: e.at, seq: e.seq })
        if (finite(e.deadlineAt)) r.marks.push({ layer: e.layer, at: e.deadlineAt, seq: e.seq })
        break
      }
      case "model.responded":
      case "model.failed": {
        // Each call the model asked for has its row, in call order.
        if (e._tag === "model.responded")
          for (const { callId, name } of Event.callsOf(e)) {
            const r = row(`${name} [${callId}]`)
            callRows.set(callId, r)
            groupOf(e.iteration).push(r)
          }
        const open = openModel.get(e.iteration)
        if (open !== undefined) {
          openModel.delete(e.iteration)
          const kind = e._tag === "model.failed" ? "model_failed" : "model"
          const label = e._tag === "model.failed" ? `${open.label}: ${e.failure.code}` : open.label
          modelRow(e.iteration).bars.push({ ...open, kind, label, to: e.at, open: false })
        }
        break
      }
      case "tool.started": {
        openOnCall.set(e.callId, { kind: "tool", label: `attempt ${e.attempt}`, from: e.at, seq: e.seq })
        if (finite(e.deadlineAt)) callRows.get(e.callId)?.marks.push({ layer: e.layer, at: e.deadlineAt, seq: e.seq })
        break
      }
      case "tool.blocked":
        callRows
          .get(e.callId)
          ?.bars.push({ kind: "tool_blocked", label: e.error.code, from: e.at, to: e.at, seq: e.seq, open: false })
        break
      case "approval.requested":
        openOnCall.set(e.callId, { kind: "approval", label: "awaiting approval", from: e.at, seq: e.seq })
        if (finite(e.expiresAt))
          callRows.get(e.callId)?.marks.push({ layer: e.layer ?? "approval", at: e.expiresAt, seq: e.seq })
        break
      case "recovery.started": {
        const row = e.callId === undefined ? modelRow(iteration) : callRows.get(e.callId)
        if (row === undefined) break
        const label = `backoff ${Math.round(e.delayMillis)} ms (${e.cause})`
        sleeping.set(e.callId ?? "", {
          row,
          bar: { kind: "backoff", label, from: e.at, seq: e.seq, open: false },
          plannedEnd: e.at + e.delayMillis
        })
        break
      }
      default:
        break
    }
  }
  // What the log leaves open runs to its end; it is still going only if the run is.
  const going = !events.some((e) => e._tag === "run.finished")
  if (phase !== undefined)
    phases.bars.push({ kind: "phase", label: phase.name, from: phase.from, to: endedAt, seq: phase.seq, open: going })
  for (const [i, open] of openModel) modelRow(i).bars.push({ ...open, kind: "model", to: endedAt, open: going })
  for (const [callId, open] of openOnCall) callRows.get(callId)?.bars.push({ ...open, to: endedAt, open: going })
  // A backoff the log leaves sleeping is drawn as it was planned.
  for (const { row, bar, plannedEnd } of sleeping.values()) row.bars.push({ ...bar, to: plannedEnd })

  // The run's deadline in force: its start's, or the closer one a resume set (as Explain
  // says it); the run's time limit with it, from the start to that deadline.
  const deadlineAt = RunLog.deadlineOf(events)
  const closer = started?._tag === "run.started" && deadlineAt < started.deadlineAt
  const limits = RunLog.limitsOf(events) ?? {}
  // The step layer, when the run has one: each iteration's deadline from its first request.
  const stepMillis = limits.stepTimeoutMillis
  if (stepMillis !== undefined) {
    for (const e of events) {
      if (e._tag === "model.requested" && e.attempt === 1)
        modelRows.get(e.iteration)?.marks.push({ layer: "step", at: e.at + stepMillis, seq: e.seq })
    }
  }
  const setBy = closer ? events.findLast((e) => e._tag === "run.resumed" && e.deadlineAt === deadlineAt) : started
  const runDeadline =
    setBy !== undefined && finite(deadlineAt) ? { layer: "run", at: deadlineAt, seq: setBy.seq } : undefined
  const reach = endedAt + Math.max(1, endedAt - startedAt)
  const marks = [...groups.values()].flatMap((rows) => rows.flatMap((r) => r.marks.map((m) => m.at)))
  const chartEndAt = latest(
    endedAt,
    [...marks, runDeadline?.at ?? endedAt].filter((at) => at <= reach)
  )
  const ordered = [...groups.entries()].sort(([a], [b]) => a - b).map(([i, rows]) => ({ iteration: i, rows }))
  return {
    startedAt,
    endedAt,
    chartEndAt,
    groups: phases.bars.length > 0 ? [{ iteration: 0, rows: [phases] }, ...ordered] : ordered,
    runDeadline,
    budgets: budgets(events, limits),
    stop: stopOf(events)
  }
}

/** Each counter a limit bounds, beside its limit (absent: not limited). */
const budgets = (events: ReadonlyArray<Event.Event>, limits: Readonly<Record<string, number>>): Array<Budget> => {
  const c = RunLog.fold(events).counters
  return [
    { name: "iterations", used: c.iterations, limit: limits.maxIterations, unit: "count" },
    { name: "tool calls", used: c.toolCalls, limit: limits.maxToolCalls, unit: "count" },
    { name: "tool errors", used: c.toolErrors, limit: limits.maxToolErrors, unit: "count" },
    { name: "empty outputs", used: c.emptyOutputs, limit: limits.maxEmptyOutputs, unit: "count" },
    { name: "tokens", used: c.inputTokens + c.outputTokens, limit: limits.maxTokens, unit: "tokens" },
    { name: "cost", used: c.costUsd, limit: limits.maxCostUsd, unit: "usd" },
    // Corrections spend their own budget, not the retries' (R3.4, R3.5).
    {
      name: "retries",
      used: c.recoveryAttempts - c.toolCorrectionAttempts,
      limit: limits.maxRecoveries,
      unit: "count"
    },
    { name: "corrections", used: c.toolCorrectionAttempts, limit: limits.correctionBudget, unit: "count" },
    { name: "run time", used: c.elapsedMillis, limit: limits.runTimeoutMillis, unit: "ms" }
  ]
}

/**
 * How the run stopped: by its `run.finished` and the decision `Explain` reads for that reason
 * (a refuted answer's is validation's, naming the checks that failed: review 166), or, not
 * finished yet, the last `termination.decided`.
 */
const stopOf = (events: ReadonlyArray<Event.Event>): Stop => {
  const finished = events.findLast((e) => e._tag === "run.finished")
  const state = RunLog.fold(events).counters.state
  if (finished?._tag === "run.finished") {
    const decision = Explain.explain(events).decision
    return {
      finished: true,
      status: finished.status,
      stopReason: finished.stopReason,
      policy: decision?.policy,
      detail: decision?.detail,
      seq: decision?.seq ?? finished.seq
    }
  }
  const decided = events.findLast((e) => e._tag === "termination.decided")
  return {
    finished: false,
    status: `running (${state})`,
    stopReason: decided?._tag === "termination.decided" ? decided.reason : undefined,
    policy: decided?._tag === "termination.decided" ? decided.policy : undefined,
    detail: decided?._tag === "termination.decided" ? decided.detail : undefined,
    seq: decided?.seq
  }
}
