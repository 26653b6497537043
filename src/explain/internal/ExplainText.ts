/**
 * An explanation as text: the stop first, then each fact that applies, one a line, its
 * control characters written out as `Timeline.format` writes them (`\x1b`).
 * Re-exported from `Explain` as `format`. Private to `observability/`.
 */
import * as Timeline from "../../events/Timeline.ts"
import * as Text from "../../failure/Text.ts"
import type { Deadline, Explanation, Gauge, InFlight, Repetition } from "./ExplainModel.ts"

const clip = (text: string, max = 100): string => {
  const line = text.replaceAll("\n", "⏎")
  return line.length > max ? `${Text.head(line, max - 1)}…` : line
}

const json = (value: unknown): string => clip(JSON.stringify(value) ?? "undefined", 80)

const ms = (millis: number | undefined): string => (millis === undefined ? "?" : `+${millis} ms`)

const gauge = (g: Gauge): string => {
  const max = g.source === "off" ? "off (policy removed)" : g.max === undefined ? "no limit" : `${g.max} (${g.source})`
  return `  ${g.decisive ? "→" : " "} ${g.counter.padEnd(22)} ${String(g.value).padStart(6)} / ${max}   [${g.limit}]`
}

const work = (w: InFlight, start: number): string => {
  const what =
    w.kind === "model_call"
      ? `model call to ${w.name}${w.attempt !== undefined ? `, attempt ${w.attempt}` : ""}`
      : w.kind === "approval"
        ? `approval of ${w.name} [${w.callId}]`
        : w.kind === "retry"
          ? `retry of ${w.name}${w.callId !== undefined ? ` [${w.callId}]` : ""}, sleeping`
          : `${w.name} [${w.callId}]${w.attempt !== undefined ? ` attempt ${w.attempt}` : " (no attempt running)"}`
  const deadline =
    w.deadlineAt !== undefined && Number.isFinite(w.deadlineAt)
      ? `, deadline ${ms(w.deadlineAt - start)}${w.layer !== undefined ? ` (${w.layer} layer)` : ""}`
      : ""
  return `    - ${what}, since ${ms(w.sinceMillis)}${deadline}${w.became !== undefined ? ` → ${w.became}` : ""}`
}

const repetition = (r: Repetition): string => {
  switch (r._tag) {
    case "call":
      return `  the same call ${r.count} times: ${r.name}(${json(r.arguments)})  [signature ${r.signature}]`
    case "observation":
      return `  ${r.name} saw the same observation ${r.count} times with no state change (calls ${r.callIds.join(", ")}): ${clip(r.observation, 80)}`
    case "failure":
      return `  ${r.name} failed ${r.count} times with ${r.code}: ${clip(r.message, 80)} (its retry limit is ${r.maxRetries})`
  }
}

const deadline = (d: Deadline, start: number, lines: Array<string>): void => {
  lines.push(
    `Deadline: the ${d.layer} layer fired at ${ms(d.firedAtMillis)}` +
      (d.deadlineAt !== undefined && Number.isFinite(d.deadlineAt)
        ? `, its deadline ${ms(d.deadlineAt - start)}`
        : "") +
      (d.limitMillis !== undefined ? `, limit ${d.limitMillis} ms` : "") +
      (d.elapsedMillis !== undefined ? `, after ${d.elapsedMillis} ms` : "") +
      (d.state !== undefined ? `, the run was ${d.state}` : "")
  )
  if (d.inFlight.length > 0) {
    lines.push("  in flight:")
    for (const w of d.inFlight) lines.push(work(w, start))
  }
}

/**
 * An explanation as text, one fact a line.
 *
 * @category formatting
 * @since 0.3.0
 */
export const format = (e: Explanation): string => {
  // Deadlines are absolute (the run's `Clock`); shown relative to the run's start.
  const start = e.startedAt
  const lines: Array<string> = [
    e.ended
      ? `Run ${e.runId}: ${e.status} (${e.stopReason}) after ${e.elapsedMillis} ms`
      : `Run ${e.runId}: no ending after ${e.elapsedMillis} ms, last state ${e.state}`,
    `  ${e.summary}`
  ]
  if (e.decision !== undefined) {
    lines.push(`  decided by ${e.decision.policy} at ${ms(e.decision.atMillis)}: ${clip(e.decision.detail, 200)}`)
  }
  if (e.resumes > 0) lines.push(`  resumed ${e.resumes} time(s) from its journal`)
  lines.push("Counters (value / limit):")
  for (const g of e.gauges) lines.push(gauge(g))
  if (e.repetition !== undefined) lines.push("Repeated:", repetition(e.repetition))
  if (e.failure !== undefined) {
    const f = e.failure
    lines.push(
      `Failure: ${f.source === "model" ? "the model call" : `${f.name} [${f.callId}]`} ${f.classification ?? "refused"} ${f.code}: ${clip(f.hint, 120)}`
    )
  }
  if (e.deadline !== undefined) deadline(e.deadline, start, lines)
  if (e.approval !== undefined) {
    const a = e.approval
    lines.push(
      `Approval: ${a.name} [${a.callId}] ${json(a.arguments)} ${a.decision}` +
        (a.by !== undefined ? ` by ${a.by}` : "") +
        (a.reason !== undefined ? `: ${clip(a.reason, 80)}` : "") +
        ` at ${ms(a.decidedAtMillis)} (asked at ${ms(a.requestedAtMillis)}${Number.isFinite(a.expiresAt) ? `, expiring ${ms(a.expiresAt - start)}` : ""})`
    )
  }
  if (e.cancellation !== undefined) {
    const c = e.cancellation
    lines.push(
      `Cancelled at ${ms(c.atMillis)}${c.state !== undefined ? ` while ${c.state}` : ""} (the log does not say by whom)`
    )
    if (c.inFlight.length > 0) {
      lines.push("  in flight:")
      for (const w of c.inFlight) lines.push(work(w, start))
    }
  }
  if (!e.ended && e.inFlight.length > 0) {
    lines.push("In flight when the log stops:")
    for (const w of e.inFlight) lines.push(work(w, start))
  }
  if (e.pendingActions.length > 0) {
    lines.push("Pending actions (outcome unknown):")
    for (const a of e.pendingActions)
      lines.push(`    - ${a.name} [${a.callId}] key ${a.idempotencyKey}: ${clip(a.detail, 100)}`)
  }
  if (e.validation !== undefined) {
    const v = e.validation
    if (v.failed.length > 0) {
      lines.push("Failed checks:")
      // A check's detail starts with its name (`plan:write: not done`): shown once.
      for (const c of v.failed)
        lines.push(`    ✗ ${clip(c.detail.startsWith(`${c.name}:`) ? c.detail : `${c.name}: ${c.detail}`, 120)}`)
    }
    if (v.completed.length > 0) lines.push(`Completed: ${v.completed.map((i) => i.id).join(", ")}`)
    if (v.unfinished.length > 0) {
      lines.push("Unfinished:")
      for (const i of v.unfinished)
        lines.push(`    - ${i.id}${i.required ? "" : " (optional)"}: ${clip(i.detail, 120)}`)
    }
  }
  lines.push(`Next safe step (${e.next.kind}${e.next.limit !== undefined ? ` ${e.next.limit}` : ""}): ${e.next.text}`)
  // What the model, a tool or a person wrote cannot move a terminal's cursor or retitle it.
  return lines.map(Timeline.visible).join("\n")
}
