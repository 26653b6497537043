/**
 * What a resumed run reads back from its journal (R9) and checks before it goes on: its
 * log or its result, the code against its header, the options it started with, and the
 * calls a finished run left on the approvals table. Private to the runtime; `Run.resume`
 * and `Run.recover` are the public face.
 */
import { Effect, Exit, Option, Schema } from "effect"
import type * as Event from "../../events/Event.ts"
import type * as Journal from "../../journal/Journal.ts"
import type * as JournalError from "../../journal/JournalError.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as RunOptionsSchema from "../internal/options/RunOptionsSchema.ts"
import { ResumeError } from "../ResumeError.ts"
import { isRunId, runIdRule } from "../RunOptions.ts"
import * as RunResult from "../RunResult.ts"
import * as RunHeader from "./internal/RunHeader.ts"

const decodeResult = Schema.decodeUnknownExit(Schema.toCodecJson(RunResult.RunResult))
/**
 * A run as its journal holds it: finished (its result), or open (its log to go on from;
 * `started` is absent when the process died before the first events were committed, and
 * the run starts over under its id, from the header's goal).
 */
export type Loaded =
  | { readonly _tag: "Finished"; readonly result: RunResult.RunResult }
  | {
      readonly _tag: "Open"
      readonly runId: string
      readonly goal: string
      readonly system: string | undefined
      readonly events: ReadonlyArray<Event.Event>
      readonly started: Event.Of<"run.started"> | undefined
      /**
       * When the log has no `run.started` (the process died between creating the run's row
       * and its first commit), the one its header kept: the run starts again under its
       * options and its deadline.
       */
      readonly startedAs?: Event.Of<"run.started"> | undefined
      /** The key the run signed its sensitive tools' calls under, if its header kept one. */
      readonly secretKey?: string | undefined
    }

const resumeError = (runId: string, e: JournalError.JournalError): ResumeError =>
  new ResumeError({
    runId,
    // A store out of reach for now is `unavailable` (resuming later may work); one that refuses
    // for a reason a retry does not change (a table gone, a damaged file) is `failed` (review 88).
    reason:
      e.reason._tag === "Incompatible"
        ? "incompatible"
        : e.reason._tag === "Corrupt"
          ? "corrupt"
          : e.isRetryable
            ? "unavailable"
            : "failed",
    detail: e.message
  })

/**
 * The result of a finished run as its journal holds it, decoded, with the log put back as
 * its timeline (an empty stored timeline stands for it: every run's log has its
 * `run.started`); `undefined` while the run is not finished.
 */
export const storedResult = (stored: Journal.Stored): Exit.Exit<RunResult.RunResult, unknown> | undefined => {
  if (Option.isNone(stored.result)) return undefined
  return Exit.map(decodeResult(stored.result.value), (result) =>
    result.timeline.length === 0 ? { ...result, timeline: stored.events } : result
  )
}

/**
 * What makes a log no run's (R9.1), when something does: damage no code path writes, which a run
 * restored from it would act on. A second `run.started` (its deadline would replace the
 * run's), or a decision on an approval never requested (a call run with no person asked).
 */
const damageOf = (events: ReadonlyArray<Event.Event>): string | undefined => {
  const requested = new Set<string>()
  for (const [i, e] of events.entries()) {
    if (e._tag === "run.started" && i > 0) return `the log holds a second run.started (seq ${e.seq})`
    if (e._tag === "approval.requested") requested.add(e.callId)
    if (e._tag === "approval.decided" && !requested.has(e.callId)) {
      return `the log decides the approval of ${e.callId} (seq ${e.seq}), which it never requested`
    }
  }
  return undefined
}

/**
 * Reads a run back and checks that the code fits its log: every tool it used is there
 * with the same fingerprint, and the model is the same one. A finished run gives its
 * stored result.
 */
export const load = Effect.fnUntraced(function* (
  journal: Journal.Service,
  runId: string,
  tools: Iterable<Tool.Any<unknown>>,
  modelName: string | undefined,
  /** Whether the tools and the model must be those the run used; a run only ended (a cancel) needs neither. */
  check = true
) {
  const fail = (reason: ResumeError["reason"], detail: string) =>
    Effect.fail(new ResumeError({ runId, reason, detail }))
  // An id no run can have is no run's: refused before the store is asked (which would say it cannot read it).
  if (!isRunId(runId)) {
    return yield* fail("not_found", `no run can have this id (${runIdRule})`)
  }
  const found = yield* Effect.mapError(journal.read(runId), (e) => resumeError(runId, e))
  if (Option.isNone(found)) return yield* fail("not_found", "the journal has no run of this id")
  const stored = found.value
  const finished = storedResult(stored)
  if (finished !== undefined) {
    if (Exit.isFailure(finished)) return yield* fail("corrupt", "the stored result does not decode")
    const loaded: Loaded = { _tag: "Finished", result: finished.value }
    return loaded
  }
  const started = stored.events[0]
  if (started !== undefined && started._tag !== "run.started") {
    return yield* fail("corrupt", "the log does not begin with run.started")
  }
  // A run's ending is committed with its result (R9): a log that ends, or holds an ending, with
  // no result is damaged, and a run restored from it could record nothing more.
  const ending = stored.events.findIndex((e) => e._tag === "run.finished")
  if (ending >= 0) {
    return yield* fail("corrupt", `the log holds run.finished (seq ${stored.events[ending]?.seq}) but no result`)
  }
  const damaged = damageOf(stored.events)
  if (damaged !== undefined) return yield* fail("corrupt", damaged)
  const header = RunHeader.decode(stored.header)
  if (Exit.isFailure(header)) return yield* fail("corrupt", "the run's header does not decode")
  const now = RunHeader.fingerprints(tools)
  for (const [name, print] of check ? Object.entries(header.value.tools) : []) {
    const current = now.get(name)
    if (current === undefined) {
      return yield* fail("incompatible", `the run was started with the tool "${name}", which is not given`)
    }
    if (current !== print) {
      return yield* fail(
        "incompatible",
        `the tool "${name}" changed (its input schema, its side-effect class or whether it needs approval)`
      )
    }
  }
  const model = header.value.model
  if (check && modelName !== undefined && model !== "" && modelName !== model) {
    return yield* fail("incompatible", `the run used the model ${model}, not ${modelName}`)
  }
  const loaded: Loaded = {
    _tag: "Open",
    runId,
    goal: header.value.goal,
    system: header.value.system,
    events: stored.events,
    started,
    ...(started === undefined ? { startedAs: RunHeader.startedIn(header.value) } : {}),
    secretKey: RunHeader.secretKeyIn(header.value)
  }
  return loaded
})
const timeNames = [
  ["step", "stepTimeoutMillis"],
  ["attempt", "attemptTimeoutMillis"],
  ["approval", "approvalTimeoutMillis"],
  ["stopGrace", "stopGraceMillis"]
] as const

/** `recorded`'s entries under `names`, where `given` does not set them. */
const fill = (
  given: object | undefined,
  recorded: Readonly<Record<string, number>>,
  names: ReadonlyArray<readonly [string, string]>
): Record<string, unknown> => {
  const filled: Record<string, unknown> = { ...given }
  for (const [name, key] of names) {
    const value = recorded[key]
    if (filled[name] === undefined && value !== undefined) filled[name] = value
  }
  return filled
}

const recoveryNames = [
  ["maxRecoveries", "maxRecoveries"],
  ["correctionBudget", "correctionBudget"]
] as const

/**
 * The options of a resumed run: what the caller gave, and where it is silent, the limits,
 * step, attempt and approval time limits, recovery counts and concurrency the run started
 * with (its `run.started`), so that a run resumed with only its tools goes on as it began.
 * The run deadline is the log's already (absolute).
 */
export const startedWith = <
  Options extends {
    readonly policies?: unknown
    readonly limits?: object | undefined
    readonly time?: object | undefined
    readonly recovery?: object | undefined
    readonly concurrency?: number | undefined
  }
>(
  options: Options,
  started: Event.Of<"run.started"> | undefined
): Options => {
  const recorded = started?.limits
  if (recorded === undefined) return options
  return {
    ...options,
    // A list of policies given carries its own limits: the recorded ones of the policies
    // the run started with are not theirs.
    limits: fill(
      options.limits,
      recorded,
      (Array.isArray(options.policies) ? RunOptionsSchema.pipelineLimitNames : RunOptionsSchema.limitNames).map(
        (name) => [name, name] as const
      )
    ),
    time: fill(options.time, recorded, timeNames),
    recovery: fill(options.recovery, recorded, recoveryNames),
    concurrency: options.concurrency ?? recorded.concurrency
  }
}
