/**
 * A run as a file: the JSONL recording the `Recorder` writes (one event a line, appended
 * as the run goes) or a `RunResult` as JSON (its `timeline`). {@link decode} reads either;
 * a recording's last line torn by a crash (or still being written) is skipped and counted,
 * any other line that is not an event is an error. A run resumed after a crash goes on
 * from its last commit, under the sequence numbers the dead process had used past it: the
 * later events replace those (what was never committed), and are counted.
 *
 * @since 0.3.0
 */
import { Effect, FileSystem, Result, Schema } from "effect"
import * as Event from "../events/Event.ts"
import * as RunResult from "../run/RunResult.ts"

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
 * Why a file cannot be read as a run: it is not there (`missing`) or cannot be read
 * (`unreadable`), it is not JSON (`bad_json`), or it is JSON but no run (`not_a_run`).
 *
 * @category errors
 * @since 0.3.0
 */
export class RecordingError extends Schema.TaggedError<RecordingError>()("RecordingError", {
  path: Schema.String,
  reason: Schema.Literals(["missing", "unreadable", "bad_json", "not_a_run"]),
  detail: Schema.String
}) {
  override get message(): string {
    const what = {
      missing: "no such file",
      unreadable: "cannot be read",
      bad_json: "not JSON",
      not_a_run: "not a run"
    }[this.reason]
    return `${this.path}: ${what}: ${this.detail}`
  }
}

const EventJson = Schema.toCodecJson(Event.Event)
const ResultJson = Schema.toCodecJson(RunResult.RunResult)
const decodeEvent = Schema.decodeUnknownResult(EventJson)
const decodeResult = Schema.decodeUnknownResult(ResultJson)
const encodeEvent = Schema.encodeUnknownResult(EventJson)

/**
 * One event as a line of a recording: its JSON encoding and a line break, or `undefined`
 * when it does not encode.
 *
 * @category encoding
 * @since 0.3.0
 */
export const line = (event: Event.Event): string | undefined => {
  const encoded = encodeEvent(event)
  return Result.isSuccess(encoded) ? `${JSON.stringify(encoded.success)}\n` : undefined
}

const parse = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(error instanceof Error ? error.message : String(error))
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const notARun = (path: string, detail: string) => new RecordingError({ path, reason: "not_a_run", detail })

const expected =
  "expected a RunResult as JSON (with its timeline) or a JSONL recording (one event a line, the first run.started)"

/** The first issue of a failed decode, on one line. */
const firstIssue = (issue: unknown): string => String(issue).split("\n").slice(0, 3).join(" ")

const fromResult = (path: string, value: Record<string, unknown>): Result.Result<Recording, RecordingError> => {
  const decoded = decodeResult(value)
  if (Result.isFailure(decoded))
    return Result.fail(notARun(path, `a RunResult that does not decode: ${firstIssue(decoded.failure)}`))
  return Result.succeed({ events: decoded.success.timeline, result: decoded.success, torn: false, replaced: 0 })
}

const fromLines = (path: string, text: string): Result.Result<Recording, RecordingError> => {
  const lines = text.split("\n")
  // A recording ends with a line break; what follows the last one is a line still being written, or torn.
  const tail = lines.pop() ?? ""
  const events: Array<Event.Event> = []
  for (const [index, raw] of lines.entries()) {
    if (raw.trim() === "") continue
    const json = parse(raw)
    if (Result.isFailure(json))
      return Result.fail(new RecordingError({ path, reason: "bad_json", detail: `line ${index + 1}: ${json.failure}` }))
    const event = decodeEvent(json.success)
    if (Result.isFailure(event))
      return Result.fail(notARun(path, `line ${index + 1} is not an event: ${firstIssue(event.failure)}`))
    events.push(event.success)
  }
  let torn = false
  if (tail.trim() !== "") {
    const json = parse(tail)
    const event = Result.isSuccess(json) ? decodeEvent(json.success) : undefined
    if (event !== undefined && Result.isSuccess(event)) events.push(event.success)
    else torn = true
  }
  if (events.length === 0) return Result.fail(notARun(path, `no event in it; ${expected}`))
  const kept = latest(events)
  return Result.succeed({ events: kept, torn, replaced: events.length - kept.length })
}

/**
 * The events as the journal holds them: a `run.resumed` (a resume going on from its last
 * commit) replaces every event recorded before it from its `seq` on.
 */
const latest = (events: ReadonlyArray<Event.Event>): ReadonlyArray<Event.Event> => {
  const kept: Array<Event.Event> = []
  for (const event of events) {
    if (event._tag === "run.resumed") {
      while (kept.length > 0 && (kept.at(-1)?.seq ?? -1) >= event.seq) kept.pop()
    }
    kept.push(event)
  }
  return kept
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
    if (isObject(value) && Array.isArray(value.timeline)) return fromResult(path, value)
    if (!(isObject(value) && typeof value._tag === "string")) return Result.fail(notARun(path, expected))
  } else if (!text.includes("\n") || text.trimStart().startsWith("[")) {
    return Result.fail(new RecordingError({ path, reason: "bad_json", detail: whole.failure }))
  }
  return fromLines(path, text)
}

/**
 * Reads a run from a file, as {@link decode} does; the file may still be being written.
 *
 * @category decoding
 * @since 0.3.0
 */
export const read = (path: string): Effect.Effect<Recording, RecordingError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* Effect.mapError(
      fs.readFileString(path),
      (error) =>
        new RecordingError({
          path,
          reason: error.reason._tag === "NotFound" ? "missing" : "unreadable",
          detail: error.message
        })
    )
    return yield* Effect.fromResult(decode(text, path))
  })
