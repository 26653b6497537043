/**
 * A run as a file: the JSONL recording the `Recorder` writes (one event a line, appended
 * as the run goes) or a `RunResult` as JSON (its `timeline`). {@link decode} reads either;
 * a recording's last line torn by a crash (or still being written) is skipped and counted,
 * every other line that is not an event is an error, and so is an event at a time no `Date`
 * holds. A run resumed after a crash goes on from its last commit, under the sequence
 * numbers the dead process had used past it: the later events replace those (what was
 * never committed), and are counted; so are the late lines of a process a resume took the run
 * from while it was still writing, told apart by the writer each line is stamped with.
 *
 * @since 0.3.0
 */
import { Effect, FileSystem, type PlatformError, Result, Schema } from "effect"
import * as Event from "../events/Event.ts"
import * as RunState from "../events/RunState.ts"
import * as StopReason from "../events/StopReason.ts"
import * as Timeline from "../events/Timeline.ts"
import * as Text from "../failure/Text.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as RunResult from "../run/RunResult.ts"
import * as ToolArguments from "../tools/ToolArguments.ts"
import * as Writers from "./internal/Writers.ts"

/**
 * What a file holds of a run: its events, in order; the result when the file was one;
 * `torn` when the recording's last line was cut short (skipped); `replaced`, how many
 * events a resume replaced (recorded by a process that died before it committed them).
 *
 * @category models
 * @since 0.3.0
 */
export interface Recording {
  readonly events: ReadonlyArray<Event.Event>
  readonly result?: RunResult.RunResult | undefined
  readonly torn: boolean
  readonly replaced: number
}

/**
 * Why a file cannot be read as a run: it is not there (`missing`), cannot be read
 * (`unreadable`: a directory, a FIFO, a device, bytes that are no UTF-8) or is larger than
 * the read allows (`too_large`), it is not JSON (`bad_json`), or it is JSON but no run
 * (`not_a_run`: no event, events of two runs, values nested deeper than a run makes them),
 * or the read was asked wrongly (`invalid_options`: a `maxBytes` that is no positive integer).
 *
 * @category errors
 * @since 0.3.0
 */
export class RecordingError extends Schema.TaggedError<RecordingError>()("RecordingError", {
  path: Schema.String,
  reason: Schema.Literals(["missing", "unreadable", "too_large", "bad_json", "not_a_run", "invalid_options"]),
  detail: Schema.String
}) {
  override get message(): string {
    const what = {
      missing: "no such file",
      unreadable: "cannot be read",
      too_large: "too large",
      bad_json: "not JSON",
      not_a_run: "not a run",
      invalid_options: "invalid options"
    }[this.reason]
    // The detail may quote the file (a parser's message does): its control characters are written out.
    return Timeline.visible(`${this.path}: ${what}: ${this.detail}`)
  }
}

const EventJson = Schema.toCodecJson(Event.Event)
const ResultJson = Schema.toCodecJson(RunResult.RunResult)
const decodeEvent = Schema.decodeUnknownResult(EventJson)
const decodeResult = Schema.decodeUnknownResult(ResultJson)
const encodeEvent = Schema.encodeUnknownResult(EventJson)

/**
 * One event as a line of a recording: its JSON encoding and a line break, or `undefined`
 * when it does not encode. `writer`, when given, is stamped on the line (`recordedBy`): the
 * `Recorder` gives each run in each process its own, so that {@link decode} tells the lines
 * of a process a resume took the run from (fenced off, it may write on into the file until
 * its next commit) from the resumed run's. Lines with no stamp are read as one writer's.
 *
 * @category encoding
 * @since 0.3.0
 */
export const line = (event: Event.Event, writer?: string): string | undefined => {
  const encoded = encodeEvent(event)
  if (Result.isFailure(encoded)) return undefined
  const json =
    writer === undefined || !isObject(encoded.success) ? encoded.success : { ...encoded.success, recordedBy: writer }
  return `${JSON.stringify(json)}\n`
}

/**
 * As deep as a run nests what it records: the arguments the tool pipeline lets through.
 * Deeper is no run's (a file made by hand, or damaged), and drawing it would overflow the stack.
 */
const deepest = ToolArguments.deepestArguments + 8

/** Whether a JSON value nests deeper than `deepest` (walked without recursion). */
const tooDeep = (value: unknown): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [item, depth] = stack.pop() ?? [undefined, 0]
    if (typeof item !== "object" || item === null) continue
    if (depth > deepest) return true
    for (const child of Object.values(item))
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
  }
  return false
}

const parse = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(error instanceof Error ? error.message : String(error))
  }
}

const nestedTooDeep = `values nested more than ${deepest} levels deep, as no run records them`

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const notARun = (path: string, detail: string) => new RecordingError({ path, reason: "not_a_run", detail })

const expected =
  "expected a RunResult as JSON (with its timeline) or a JSONL recording (one event a line, the first run.started)"

/** The first issue of a failed decode, on one line. */
const firstIssue = (issue: unknown): string => String(issue).split("\n").slice(0, 3).join(" ")

/** Why a line is no event: a kind this version does not know (a newer version's), or its first issue. */
const notAnEvent = (json: unknown, issue: unknown): string => {
  const tag = isObject(json) ? json._tag : undefined
  return typeof tag === "string" && !Event.kinds.has(tag)
    ? `an event of a kind this version does not know (${JSON.stringify(Text.head(tag, 80))}): written by a newer version of effect-agent-runtime?`
    : `it is not an event: ${firstIssue(issue)}`
}

/**
 * A `Date` holds times up to 8.64e15 ms either side of 1970 (ECMA-262); no clock gives
 * another. An event at a time beyond is no run's, and would break every reader that dates it.
 */
const dateLimit = 8.64e15

/** Why the event's time is no run's, or `undefined` when a `Date` holds it. */
const undatable = (event: Event.Event): string | undefined =>
  Math.abs(event.at) <= dateLimit
    ? undefined
    : `its "at" (${event.at}) is no time a date can hold (at most ${dateLimit} ms either side of 1970)`

/** Names a field of a newer version's RunResult, or `undefined`: a kind of event, a status or a stop reason this one does not know. */
const newerResult = (value: Record<string, unknown>): string | undefined => {
  const timeline = Array.isArray(value.timeline) ? value.timeline : []
  const unknown = timeline.findIndex((e) => isObject(e) && typeof e._tag === "string" && !Event.kinds.has(e._tag))
  if (unknown >= 0) return `event ${unknown + 1} of its timeline: ${notAnEvent(timeline[unknown], undefined)}`
  const unknownOf = (field: string, known: ReadonlyArray<string>) => {
    const given = value[field]
    return typeof given === "string" && !known.includes(given)
      ? `a ${field} this version does not know (${JSON.stringify(Text.head(given, 80))}): written by a newer version of effect-agent-runtime?`
      : undefined
  }
  return unknownOf("status", RunState.Status.literals) ?? unknownOf("stopReason", StopReason.all)
}

const fromResult = (path: string, value: Record<string, unknown>): Result.Result<Recording, RecordingError> => {
  // Said as the lines of a recording say it, not as every literal the schema expected (review 187).
  const newer = newerResult(value)
  if (newer !== undefined) return Result.fail(notARun(path, newer))
  const decoded = decodeResult(value)
  if (Result.isFailure(decoded))
    return Result.fail(notARun(path, `a RunResult that does not decode: ${firstIssue(decoded.failure)}`))
  const { timeline } = decoded.success
  if (timeline.length === 0) return Result.fail(notARun(path, "a RunResult whose timeline has no event"))
  for (const [index, event] of timeline.entries()) {
    const undated = undatable(event)
    if (undated !== undefined) return Result.fail(notARun(path, `event ${index + 1} of its timeline: ${undated}`))
  }
  const mixed = otherRun(timeline)
  if (mixed !== undefined) return Result.fail(notARun(path, mixed))
  return Result.succeed({ events: timeline, result: decoded.success, torn: false, replaced: 0 })
}

/**
 * Line `line`: an event of this version's, at a time a `Date` holds, and the writer that
 * stamped it (`recordedBy`, see {@link line}).
 */
const lineOf = (path: string, json: unknown, line: number): Result.Result<Writers.Line, RecordingError> => {
  const event = decodeEvent(json)
  if (Result.isFailure(event)) return Result.fail(notARun(path, `line ${line}: ${notAnEvent(json, event.failure)}`))
  const undated = undatable(event.success)
  if (undated !== undefined) return Result.fail(notARun(path, `line ${line}: ${undated}`))
  const writer = isObject(json) && typeof json.recordedBy === "string" ? json.recordedBy : undefined
  return Result.succeed({ event: event.success, writer })
}

const fromLines = (path: string, text: string): Result.Result<Recording, RecordingError> => {
  const lines = text.split("\n")
  // A recording ends with a line break; what follows the last one is a line still being written, or torn.
  const tail = lines.pop() ?? ""
  const events: Array<Writers.Line> = []
  for (const [index, raw] of lines.entries()) {
    if (raw.trim() === "") continue
    const json = parse(raw)
    if (Result.isFailure(json))
      return Result.fail(new RecordingError({ path, reason: "bad_json", detail: `line ${index + 1}: ${json.failure}` }))
    if (tooDeep(json.success)) return Result.fail(notARun(path, `line ${index + 1}: ${nestedTooDeep}`))
    const read = lineOf(path, json.success, index + 1)
    if (Result.isFailure(read)) return Result.fail(read.failure)
    events.push(read.success)
  }
  let torn = false
  if (tail.trim() !== "") {
    // A line cut by a crash is no whole JSON value; one that is, and is no event, is said so as every other is.
    const json = parse(tail)
    if (Result.isFailure(json) || tooDeep(json.success)) torn = true
    else {
      const read = lineOf(path, json.success, lines.length + 1)
      if (Result.isFailure(read)) return Result.fail(read.failure)
      events.push(read.success)
    }
  }
  if (events.length === 0) return Result.fail(notARun(path, `no event in it; ${expected}`))
  const mixed = otherRun(events.map((line) => line.event))
  if (mixed !== undefined) return Result.fail(notARun(path, mixed))
  const kept = Writers.runEvents(events)
  // One writer's lines come by rising `seq` (a batch its recorder lost leaves a gap); two runs of one
  // id recorded at once go back.
  if (Result.isFailure(kept)) return Result.fail(notARun(path, kept.failure))
  return Result.succeed({ events: kept.success, torn, replaced: events.length - kept.success.length })
}

/** Why the events are not one run's: the first event of another run id, and where. */
const otherRun = (events: ReadonlyArray<Event.Event>): string | undefined => {
  const runId = events[0]?.runId
  const other = events.findIndex((e) => e.runId !== runId)
  return other < 0
    ? undefined
    : `events of two runs: event ${other + 1} is of run ${JSON.stringify(Text.head(events[other]?.runId ?? "", 80))}, the first of ${JSON.stringify(Text.head(runId ?? "", 80))} (one file a run)`
}

/**
 * Reads a run from a file's text (`path` only names it in errors): a `RunResult` as JSON,
 * or a JSONL recording.
 *
 * @category decoding
 * @since 0.3.0
 */
export const decode = (text: string, path = "<input>"): Result.Result<Recording, RecordingError> => {
  if (text.trim() === "")
    return Result.fail(
      notARun(
        path,
        "the file is empty: no event was written to it yet (a process that died before its first event leaves it so)"
      )
    )
  const whole = parse(text)
  if (Result.isSuccess(whole)) {
    const value = whole.success
    if (tooDeep(value)) return Result.fail(notARun(path, nestedTooDeep))
    if (isObject(value) && Array.isArray(value.timeline)) return fromResult(path, value)
    if (!(isObject(value) && typeof value._tag === "string")) return Result.fail(notARun(path, expected))
  } else if (!text.includes("\n") || text.trimStart().startsWith("[")) {
    return Result.fail(new RecordingError({ path, reason: "bad_json", detail: whole.failure }))
  }
  return fromLines(path, text)
}

/**
 * The most bytes {@link read} reads by default: 256 MiB. Reading and drawing a recording
 * takes about ten times its size in memory.
 *
 * @category constants
 * @since 0.3.0
 */
export const defaultMaxBytes = 256 * 1024 * 1024

/**
 * The file's text; throws on bytes that are no UTF-8, but for a character its end cuts short:
 * a crash (or a write still going on) may tear the last line in the middle of one. That
 * character is read as U+FFFD, so that the torn line is no JSON and is skipped as every torn
 * line is (a character of more than one byte is only ever inside a JSON string).
 */
const utf8 = (bytes: Uint8Array): string => {
  const decoder = new TextDecoder("utf-8", { fatal: true })
  // Streaming, the decoder keeps a character the bytes end inside of for later, and throws on every other fault.
  const text = decoder.decode(bytes, { stream: true })
  try {
    decoder.decode()
    return text
  } catch {
    return `${text}\uFFFD`
  }
}

/**
 * Reads a run from a file, as {@link decode} does; the file may still be being written. Only
 * a regular file is read (a FIFO would be waited on for good, a device read without end),
 * of at most `maxBytes` (default {@link defaultMaxBytes}), and only as UTF-8 (a torn last
 * line may end inside a character: it is skipped).
 *
 * @category decoding
 * @since 0.3.0
 */
export const read = (
  path: string,
  options: { readonly maxBytes?: number | undefined } = {}
): Effect.Effect<Recording, RecordingError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const maxBytes = options.maxBytes ?? defaultMaxBytes
    // No comparison with NaN holds: such a bound read every file whole (review 187).
    if (!(Number.isInteger(maxBytes) && maxBytes > 0)) {
      return yield* new RecordingError({
        path,
        reason: "invalid_options",
        detail: `maxBytes must be a whole number of bytes above 0, got ${UserCode.shown(maxBytes)}`
      })
    }
    const failed = (error: PlatformError.PlatformError) =>
      new RecordingError({
        path,
        reason: error.reason._tag === "NotFound" ? "missing" : "unreadable",
        detail: error.message
      })
    const info = yield* Effect.mapError(fs.stat(path), failed)
    if (info.type !== "File") {
      return yield* new RecordingError({
        path,
        reason: "unreadable",
        detail: `not a regular file (a ${info.type === "Directory" ? "directory" : info.type.toLowerCase()})`
      })
    }
    if (Number(info.size) > maxBytes) {
      return yield* new RecordingError({
        path,
        reason: "too_large",
        detail: `${Number(info.size)} bytes, more than the ${maxBytes} a read allows (maxBytes)`
      })
    }
    const bytes = yield* Effect.mapError(fs.readFile(path), failed)
    // Still being written: grown past the bound since its size was read.
    if (bytes.length > maxBytes) {
      return yield* new RecordingError({
        path,
        reason: "too_large",
        detail: `more than the ${maxBytes} bytes a read allows (maxBytes)`
      })
    }
    const text = yield* Effect.try({
      try: () => utf8(bytes),
      catch: () => new RecordingError({ path, reason: "unreadable", detail: "bytes that are no UTF-8 text" })
    })
    return yield* Effect.fromResult(decode(text, path))
  })
