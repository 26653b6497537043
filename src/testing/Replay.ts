/**
 * Replay: a recorded run drives a new one, for regression tests of agents and their
 * policies. The recording (a `RunResult.timeline`, or the events `Recording.read` gives)
 * supplies the model's answers (`model.responded`: text, tool calls, usage; `model.failed`:
 * the failure) and the tools' results (each attempt of each call: the output of
 * `tool.succeeded`, the failure of `tool.failed`, the retried failure a
 * `recovery.started` names, or an attempt cut off, which the playback's handler settles
 * as the `tool.interrupted` says; one that held its step past its deadline, or that the run
 * left behind after its stop grace, cannot be interrupted in the playback either, so the
 * replay holds and leaves it as the recording did, after the same stop grace in real time),
 * played back in order at the times they were recorded, on a
 * `TestClock` of the replay's own that starts where the recording started. Approvals are
 * decided as recorded. The rest comes from the caller, as for `Run.run`: the tools (by
 * name, their schemas and metadata; their handlers, status queries and postconditions are
 * replaced by the playback), the policies, limits, time and recovery (the fallback models
 * by name: the playback answers for them too, none is called), so that a changed policy
 * shows its effect. The model's name is the recording's unless given. A replay writes to no
 * journal, decides its approvals on a gate of its own and has breakers of its own (with
 * the policies `breakers` gives, else none), whatever the caller's context holds: it never
 * touches the caller's store or circuits.
 *
 * The report is `Matched`, or `Diverged` at the first event whose tag or compared fields
 * differ. Compared: every field of every event but `runId`, `seq`, `at`, `deadlineAt`,
 * `expiresAt` and `delayMillis` (the clock's and the backoff's) and the times a given-up
 * retry's cause names; of `run.started`, also not
 * `limits`, `policies`, `permission` and `unguardedTools` (what a replay varies on purpose).
 * A model asked more often than the recording answered, or asked with another conversation
 * than the recorded one, is refused and the run stops: a divergence, never a hang. A
 * recording made with `content: false` cannot be replayed (its content is not in it), nor a
 * resumed run's (a replay runs one process from the start: there is no crash nor journal to
 * go on from). A cancel the recording holds (`run.stopping` by `cancel`) is made again at
 * its time, once the replay has come to the event before it.
 *
 * @since 0.3.0
 */
import { Context, Effect, Result, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Event from "../events/Event.ts"
import * as SchemaIssues from "../failure/SchemaIssues.ts"
import * as Journal from "../journal/Journal.ts"
import * as Model from "../model/Model.ts"
import * as Breakers from "../recovery/Breakers.ts"
import * as Run from "../run/Run.ts"
import * as RunResult from "../run/RunResult.ts"
import * as Approval from "../tools/Approval.ts"
import type * as Tool from "../tools/Tool.ts"
import { firstParting } from "./internal/ReplayCompare.ts"
import * as Playback from "./internal/ReplayPlayback.ts"
import * as TestClockDriver from "./TestClockDriver.ts"

/**
 * The replay did the same as the recording, event for event.
 *
 * @category models
 * @since 0.3.0
 */
export interface Matched {
  readonly _tag: "Matched"
  readonly result: RunResult.RunResult
}

/**
 * The replay parted from the recording at `seq`: `expected` is the recorded event there,
 * `actual` the replay's (either absent when one timeline ended first), `detail` what differs.
 *
 * @category models
 * @since 0.3.0
 */
export interface Diverged {
  readonly _tag: "Diverged"
  readonly seq: number
  readonly expected: Event.Event | undefined
  readonly actual: Event.Event | undefined
  readonly detail: string
  readonly result: RunResult.RunResult
}

/**
 * @category models
 * @since 0.3.0
 */
export type Report = Matched | Diverged

/**
 * The options of a replay: a run's, with the goal and system prompt taken from the
 * recording unless given.
 *
 * @category models
 * @since 0.3.0
 */
export type Options<T extends Tool.Any = Tool.Any, RV = never, O = never> = Omit<
  Run.Options<T, RV, O>,
  "goal" | "system"
> & {
  readonly goal?: string | undefined
  readonly system?: string | undefined
  /**
   * The policies of the circuit breakers the recorded run ran behind: the replay has
   * breakers of its own with them, fresh. Without, it runs without breakers. The caller's
   * breakers are never used: their state is not the recording's, and a replay would trip them.
   */
  readonly breakers?: Breakers.Options | undefined
}

/**
 * The recording cannot be replayed: it does not hold a run (no `run.started` first), it
 * was recorded without its message content, or it is a resumed run's.
 *
 * @category errors
 * @since 0.3.0
 */
export class NotARecording extends Schema.TaggedError<NotARecording>()("NotARecording", { detail: Schema.String }) {
  override get message(): string {
    return `cannot replay: ${this.detail}`
  }
}

/**
 * Replays `recorded` with `options` and reports where the new run diverges. Runs on a
 * `TestClock` of its own, so a recorded minute takes milliseconds; a replay still running
 * once the clock has moved the recording's length and ten minutes more is cancelled, and
 * reported where it parted.
 *
 * @category combinators
 * @since 0.3.0
 */
export const replay = <T extends Tool.Any, RV = never, O = never>(
  recorded: ReadonlyArray<Event.Event>,
  options: Options<T, RV, O>
): Effect.Effect<Report, NotARecording, Exclude<Run.Requirements<T, RV>, Model.Model>> =>
  Effect.gen(function* () {
    // A recording read from a file, or made by hand, is checked whole first: an event that is none is named.
    const checked = checkEvents(recorded)
    if (Result.isFailure(checked)) {
      return yield* new NotARecording({
        detail: `it is not a list of run events: ${SchemaIssues.describe(checked.failure.issue, "recording").message}`
      })
    }
    const started = recorded[0]
    if (started?._tag !== "run.started") {
      return yield* new NotARecording({ detail: `its first event is ${started?._tag ?? "missing"}, not run.started` })
    }
    if (Event.contentLeftOut(recorded)) {
      return yield* new NotARecording({
        detail: "it was recorded without its message content (content: false), which a replay plays back"
      })
    }
    const resumed = recorded.find((e) => e._tag === "run.resumed")
    if (resumed !== undefined) {
      return yield* new NotARecording({
        detail: `it is a resumed run's (run.resumed at seq ${resumed.seq}): a replay plays a run from its start in one process, and has no crash nor journal to resume from`
      })
    }
    const { breakers, ...runOptions } = options
    const refusals: Array<Playback.Refusal> = []
    // The latest time the recording reached, not its last event's: a wall clock that stepped back
    // (or a hand edit) may put that before run.started, and a span under 0 is no duration (review 130).
    let span = 0
    for (const e of recorded) span = Math.max(span, e.at - started.at)
    // One playback answers every model the run asks, its fallbacks too: none is ever called.
    const played = Playback.model(recorded, refusals)
    const fallbackModels = options.recovery?.fallbackModels?.map(({ name }) => ({ name, model: played }))
    // The run is started by the driven effect, so that the driver sees when it computes (it moves
    // the clock only while the run waits; review 147: a run that never slept ran out of time).
    const playing = Effect.gen(function* () {
      const handle = yield* Run.start({
        ...runOptions,
        goal: options.goal ?? started.goal,
        system: options.system ?? started.system,
        runId: options.runId ?? started.runId,
        modelName: options.modelName ?? started.model,
        ...(fallbackModels === undefined ? {} : { recovery: { ...options.recovery, fallbackModels } }),
        tools: Playback.tools(recorded, options.tools, refusals)
      })
      yield* Effect.forkScoped(cancelAsRecorded(recorded, handle))
      return yield* Effect.timeoutOrElse(handle.result, {
        duration: span + replayAfterMillis,
        orElse: () => handle.cancel
      })
    })
    const result = yield* Effect.gen(function* () {
      yield* TestClock.setTime(started.at)
      // `upTo`: a cancel ends within its stop grace, in real time, which holds the clock, so the bound
      // past it is never reached. `busyUpTo`: a replay plays recorded outcomes, never a tool that
      // spins, and a long one computes for long without waiting; a hook that never waits meets its deadline.
      return yield* TestClockDriver.drive(Effect.scoped(playing), {
        upTo: span + 2 * replayAfterMillis,
        busyUpTo: replayBusyMillis
      }).pipe(Effect.orDie)
    }).pipe(
      Effect.provideService(Model.Model, played),
      Effect.provide(TestClock.layer()),
      // A replay is no run of the caller's: it journals nothing, its approvals go through a gate
      // of its own, which decides as the recording did, and the breakers it has, when given their
      // policies, are its own.
      Effect.provideService(Approval.ApprovalGate, recordedGate(recorded)),
      breakers === undefined
        ? Effect.provideService(Breakers.Breakers, undefined)
        : Effect.provide(Breakers.layerMemory(breakers)),
      withoutJournal
    )
    const parting = firstParting(recorded, result.timeline)
    if (parting === undefined) return { _tag: "Matched", result } satisfies Matched
    const found = refusals.map((r) => r.detail)
    const detail = found.length === 0 ? parting.detail : `${parting.detail}; ${found.join("; ")}`
    return { _tag: "Diverged", ...parting, detail, result } satisfies Diverged
  })

/** How long past the recording's length a replay may run before it is cancelled. */
const replayAfterMillis = 600_000

/** How long a replay may compute without a pause before it is taken for waiting (see `TestClockDriver`'s `busyUpTo`). */
const replayBusyMillis = 60_000

const checkEvents = Schema.decodeUnknownResult(Schema.Array(Event.Event))

/** `effect` with no `Journal` in its context: a run journals only when its context has one. */
const withoutJournal = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.updateContext(
    effect,
    // Boundary: a run reads the Journal when it is there and never requires it, so the requirements stay as they are.
    (context: Context.Context<R>) => Context.omit(Journal.Journal)(context) as Context.Context<R>
  )

/**
 * The replay's approval gate: it answers each call the recording decided as it was decided, at
 * the recorded time, itself (review 175: decided through the run's handle once its request
 * was seen, a decision made the instant it was asked came a few steps late, after a sibling's
 * start); a call the recording left undecided waits, as on a gate nobody answers.
 */
const recordedGate = (recorded: ReadonlyArray<Event.Event>): Approval.Gate => {
  const memory = Approval.makeMemory()
  // The first decision of each call, found once: a recording may hold thousands.
  const decisions = new Map<string, Approval.Decision & { readonly at: number }>()
  for (const e of recorded) {
    if (e._tag !== "approval.decided" || decisions.has(e.callId)) continue
    // A blank `by`, which a recording made before it was refused may hold, names nobody: left out.
    const by = e.by === undefined || Model.isBlank(e.by) ? undefined : e.by
    if (e.decision === "approved") decisions.set(e.callId, { ...Approval.approved(by), at: e.at })
    if (e.decision === "rejected")
      decisions.set(e.callId, { ...Approval.rejected(e.reason ?? "rejected", by), at: e.at })
  }
  return {
    ...memory,
    request: (request) => {
      const found = decisions.get(request.callId)
      if (found === undefined) return memory.request(request)
      const { at, ...decision } = found
      // One a gate would refuse (a recording edited by hand) is no decision: the call waits.
      if (Approval.checkDecision(request.runId, request.callId, decision) !== undefined) return memory.request(request)
      return Effect.as(Playback.until(at), decision)
    }
  }
}

/**
 * Cancels the replay as the recording was cancelled (its `run.stopping` by `cancel`): once
 * the replay has come as far as the event before it, at the time it was recorded.
 */
const cancelAsRecorded = (recorded: ReadonlyArray<Event.Event>, handle: Run.Handle<unknown>) => {
  const cancel = recorded.find((e) => e._tag === "run.stopping" && e.by === "cancel")
  if (cancel === undefined) return Effect.void
  return Stream.runHead(Stream.filter(handle.events, (e) => e.seq >= cancel.seq - 1)).pipe(
    Effect.andThen(Playback.until(cancel.at)),
    Effect.andThen(handle.cancel)
  )
}

/**
 * {@link replay}, failing with the report unless it matched: for a regression test.
 *
 * @category combinators
 * @since 0.3.0
 */
export const expectMatch = <T extends Tool.Any, RV = never, O = never>(
  recorded: ReadonlyArray<Event.Event>,
  options: Options<T, RV, O>
): Effect.Effect<Matched, NotARecording | ReplayDiverged, Exclude<Run.Requirements<T, RV>, Model.Model>> =>
  Effect.flatMap(replay(recorded, options), (report) =>
    report._tag === "Matched" ? Effect.succeed(report) : Effect.fail(new ReplayDiverged({ report }))
  )

/**
 * A replay that was expected to match diverged; `report` says where.
 *
 * @category errors
 * @since 0.3.0
 */
export class ReplayDiverged extends Schema.TaggedError<ReplayDiverged>()("ReplayDiverged", {
  report: Schema.Struct({
    _tag: Schema.Literal("Diverged"),
    seq: Schema.Int,
    expected: Schema.UndefinedOr(Event.Event),
    actual: Schema.UndefinedOr(Event.Event),
    detail: Schema.String,
    result: RunResult.RunResult
  })
}) {
  override get message(): string {
    return `the replay diverged at seq ${this.report.seq}: ${this.report.detail}`
  }
}
