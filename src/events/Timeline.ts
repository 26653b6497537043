/**
 * Reading a run's timeline as people do: one line per event, relative time first.
 *
 * The timeline itself is the list of typed events (`Event.Event`); this module only
 * renders it. Use it for logs, a terminal UI, or the demo's printout.
 *
 * @since 0.1.0
 */

import * as Text from "../failure/Text.ts"
import type * as Event from "./Event.ts"

const clip = (text: string, max = 80): string => {
  const line = text.replaceAll("\n", "⏎")
  return line.length > max ? `${Text.head(line, max - 1)}…` : line
}

const callOf = (event: { readonly callId?: string | undefined }): string =>
  event.callId === undefined ? "" : ` [${event.callId}]`

/** The deadline an attempt was given, relative to its start. */
const within = (event: { readonly at: number; readonly deadlineAt: number; readonly layer: string }): string =>
  Number.isFinite(event.deadlineAt) ? `, ${event.layer} deadline in ${event.deadlineAt - event.at} ms` : ""

/**
 * What one event says, without its time.
 *
 * @category formatting
 * @since 0.1.0
 */
export const describe = (event: Event.Event): string => {
  switch (event._tag) {
    case "run.started":
      return (
        `goal: ${clip(event.goal)} (tools: ${event.tools.join(", ")})` +
        ((event.unguardedTools?.length ?? 0) > 0
          ? `; no permission policy: ${event.unguardedTools?.join(", ")} can write or act unchecked`
          : "")
      )
    case "state.changed":
      return `${event.from} → ${event.to}`
    case "run.stopping":
      return `${event.by === "deadline" ? "the run deadline passed" : "cancelled"} while ${event.state}`
    case "run.resumed":
      return `from event ${event.fromSeq} (${event.reason})${
        event.inDoubt.length > 0 ? `; in doubt: ${event.inDoubt.join(", ")}` : ""
      }`
    case "plan.set":
      return event.steps.map((s) => s.id).join(", ")
    case "model.requested":
      return `iteration ${event.iteration}${event.attempt > 1 ? ` attempt ${event.attempt}` : ""}${within(event)}`
    case "model.responded":
      return event.toolCalls.length > 0
        ? event.toolCalls.map((c) => `${c.name}(${clip(String(c.arguments), 60)})`).join(", ")
        : event.finishReason === "length"
          ? `cut off at the output token limit: ${clip(event.text)}`
          : `final answer: ${clip(event.text)}`
    case "model.failed":
      return `${event.failure.classification} ${event.failure.code}: ${event.failure.hint}`
    case "model.fallback":
      return `${event.from} → ${event.to} after ${event.failure.code}: ${clip(event.failure.hint, 80)}`
    case "circuit.changed":
      return `${event.key} ${event.from} → ${event.to}${
        event.retryAfterMillis !== undefined ? ` for ${event.retryAfterMillis} ms` : ""
      }`
    case "tool.started":
      return `${event.name} [${event.callId}] attempt ${event.attempt}${within(event)}`
    case "tool.succeeded":
      return `${event.name} [${event.callId}] → ${clip(JSON.stringify(event.output) ?? "", 60)}`
    case "tool.failed":
    case "tool.blocked":
      return `${event.name} [${event.callId}] ${event.error.code}: ${clip(event.error.message, 100)}`
    case "tool.interrupted":
      return `${event.name} [${event.callId}] ${event.settlement}: ${clip(event.detail, 100)}`
    case "tool.reconciled":
      return `${event.name} [${event.callId}] ${event.verdict}: ${clip(event.detail, 100)}`
    case "approval.requested":
      return `${event.name} [${event.callId}] ${clip(JSON.stringify(event.arguments) ?? "", 60)}, expires at +${
        event.expiresAt - event.at
      } ms`
    case "approval.decided":
      return `${event.name} [${event.callId}] ${event.decision}${event.by !== undefined ? ` by ${event.by}` : ""}${
        event.reason !== undefined ? `: ${clip(event.reason, 80)}` : ""
      }${event.layer !== undefined ? ` (${event.layer} layer)` : ""}`
    case "recovery.started":
      return `${event.kind}${callOf(event)} attempt ${event.attempt} after ${event.delayMillis} ms (cause: ${event.cause})`
    case "recovery.completed":
      return `${event.kind}${callOf(event)} attempt ${event.attempt}`
    case "recovery.failed":
      return `${event.kind}${callOf(event)} after ${event.attempts} attempts (cause: ${event.cause})`
    case "reminder.injected":
      return `${event.kind}: ${clip(event.text)}`
    case "termination.decided":
      return `${event.reason} by ${event.policy}: ${clip(event.detail, 100)}`
    case "validation.checked":
      return `${event.check.passed ? "pass" : "FAIL"} ${clip(event.check.detail, 100)}`
    case "run.finished":
      return `${event.status} (${event.stopReason})`
  }
}

/**
 * One line: time since the run started, the event's tag, what it says (control
 * characters written out).
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatEvent = (event: Event.Event, startedAt: number): string =>
  `${`+${event.at - startedAt}ms`.padStart(9)}  ${event._tag.padEnd(19)} ${visible(describe(event))}`

/**
 * The marks and overrides of bidirectional text, as a regular expression's character class
 * holds them (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069): what shows text in
 * another order than it is read.
 *
 * @category formatting
 * @since 0.3.0
 */
export const bidiClass = "\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069"

// The C0 and C1 controls, the marks of bidirectional text, and the line and paragraph separators.
const controls = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029${bidiClass}]`, "g")

/**
 * The text with its control characters written out (`\x1b`, `\u202e`): what the model, a
 * tool or a goal says cannot move a terminal's cursor, retitle it or clear it, nor show its
 * text in another order than it is read (a right-to-left override).
 *
 * @category formatting
 * @since 0.3.0
 */
export const visible = (text: string): string =>
  text.replace(controls, (c) => {
    const code = c.charCodeAt(0)
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
  })

/**
 * The whole timeline, one event a line.
 *
 * @category formatting
 * @since 0.1.0
 */
export const format = (timeline: ReadonlyArray<Event.Event>): string => {
  const startedAt = timeline[0]?.at ?? 0
  return timeline.map((event) => formatEvent(event, startedAt)).join("\n")
}
