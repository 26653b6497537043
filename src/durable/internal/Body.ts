/**
 * The body of a run's workflow: drive the run from its journal until it finishes; when it
 * parks on approvals, wait durably (a `DurableDeferred` per call, a `DurableClock` at the
 * earliest expiry, the cancel) so that the workflow suspends and holds nothing, then drive
 * it again. Replays are cheap and safe: the journal, not the engine, holds what the run
 * did, and driving a run again goes on from its last commit. Private to `durable/`.
 */
import { Clock, Duration, Effect, Option, Schedule, Schema } from "effect"
import { DurableClock, DurableDeferred, WorkflowEngine } from "effect/workflow"
import * as Event from "../../events/Event.ts"
import * as Journal from "../../journal/Journal.ts"
import * as RunHost from "../../run/RunHost.ts"
import * as RunOptions from "../../run/RunOptions.ts"
import type * as Approval from "../../tools/Approval.ts"
import type * as Tool from "../../tools/Tool.ts"
import * as Names from "./Names.ts"

/** What a run's workflow is started with: the part of its options that is data. */
export interface Payload {
  readonly runId: string
  readonly goal: string
  readonly system?: string | undefined
  readonly limits?: Readonly<Record<string, number>> | undefined
  readonly tools?: ReadonlyArray<string> | undefined
  readonly time?: Readonly<Record<string, number | string>> | undefined
  /** When the run was started (milliseconds since the epoch, by the starter's clock): its deadline counts from then. */
  readonly startedAt?: number | undefined
}

/** How the body drives its runs. */
export interface Settings {
  readonly pollInterval?: RunHost.Settings["pollInterval"]
  readonly parkAfter?: RunHost.Settings["parkAfter"]
  readonly takeBackAfter?: Duration.Input | undefined
  readonly recheckAfter?: Duration.Input | undefined
}

/** How long a run another process took over may go quiet before this runner takes it back, by default. */
export const defaultTakeBackAfter = "2 minutes"

/** How often a parked run reads the approvals table again, by default. */
export const defaultRecheckAfter = "5 minutes"

/** Where in each `period` the run `runId`'s rechecks fall: spread, so parked runs do not all wake at once. */
const offsetOf = (runId: string, period: number): number => {
  let hash = 0
  for (let i = 0; i < runId.length; i++) hash = (hash * 31 + runId.charCodeAt(i)) >>> 0
  return hash % period
}

/**
 * Until when the process that drives the run may still be in what its log says it began: an
 * attempt of a call or of the model until its deadline (its handler may act until then), a
 * retry until its wait ends. Each event moves it on, or ends the attempt it names.
 */
class InFlight {
  private readonly attempts = new Map<string, number>()
  private waits = 0
  see(event: Event.Event): void {
    if (event._tag === "tool.started") this.attempts.set(event.callId, event.deadlineAt)
    else if (event._tag === "model.requested") this.attempts.set("", event.deadlineAt)
    else if (event._tag === "model.responded" || event._tag === "model.failed") this.attempts.delete("")
    else if (event._tag === "tool.interrupted" || Event.isResult(event)) this.attempts.delete(event.callId)
    else if (event._tag === "recovery.started") this.waits = Math.max(this.waits, event.at + event.delayMillis)
  }
  get until(): number {
    return Math.max(this.waits, ...this.attempts.values())
  }
}

/**
 * Waits while another process drives the run (this runner's drive was fenced off: `taken`):
 * until the run has ended, a cancel came for it, or it has been quiet for `quietMillis`: no
 * commit, no call of it waiting for a person, and nothing it began (an attempt, a retry's
 * wait) that may still be going on by its deadline: that process is gone (review 137: the run
 * was left to it for good). A slow call of a live process is not taken for its death (review
 * 139: a 3 s payment, taken back after 1 s of quiet, was sent again). The run is then driven
 * here again, which gives its ending, cancels it, or takes it up. A store out of reach
 * meanwhile is only waited out.
 */
const whileTheirs = <R>(runId: string, quietMillis: number, cancelled: Effect.Effect<boolean, never, R>) =>
  Effect.gen(function* () {
    const journal = yield* Journal.Journal
    const every = Math.min(5_000, Math.max(50, quietMillis / 10))
    const inFlight = new InFlight()
    let seq = 0
    let movedAt = yield* Clock.currentTimeMillis
    while (true) {
      yield* Effect.sleep(every)
      if (yield* cancelled) return
      const now = yield* Clock.currentTimeMillis
      const read = yield* Effect.option(journal.read(runId, { fromSeq: seq }))
      if (Option.isNone(read)) continue
      if (Option.isNone(read.value) || Option.isSome(read.value.value.result)) return
      const pending = yield* Effect.option(journal.pendingApprovals({ runId }))
      const asksSomeone = Option.isSome(pending) && pending.value.some((request) => request.expiresAt > now)
      const fresh = read.value.value.events.filter((event) => event.seq >= seq)
      for (const event of fresh) inFlight.see(event)
      seq = Math.max(seq, read.value.value.nextSeq)
      if (fresh.length > 0 || asksSomeone) movedAt = now
      else if (now - Math.max(movedAt, inFlight.until) >= quietMillis) return
    }
  })

/** The first of `names` that no tool of `tools` has, as the invalid option it is; `undefined` when all are there. */
export const unregistered = (
  tools: ReadonlyArray<Tool.Any>,
  names: ReadonlyArray<string> | undefined,
  where = ""
): RunOptions.InvalidRunOptions | undefined => {
  const registered = new Set(tools.map((tool) => tool.name))
  const index = (names ?? []).findIndex((name) => !registered.has(name))
  return index === -1
    ? undefined
    : new RunOptions.InvalidRunOptions({
        path: ["tools", index],
        reason: `no tool named ${JSON.stringify(names?.[index])} is registered${where}`
      })
}

/** The run's options: the registered code, the started run's data over its defaults. */
export const optionsOf = <T extends Tool.Any, RV, O>(
  definitions: Omit<RunOptions.Options<T, RV, O>, "goal" | "system" | "runId">,
  payload: Payload
): Omit<RunOptions.Options<T, RV, O>, "runId"> => ({
  ...definitions,
  // A start may narrow the registered tools to some of them, by name.
  tools:
    payload.tools === undefined ? definitions.tools : definitions.tools.filter((t) => payload.tools?.includes(t.name)),
  goal: payload.goal,
  ...(payload.system === undefined ? {} : { system: payload.system }),
  limits: { ...definitions.limits, ...payload.limits },
  // The payload's time limits were checked as `Run.Options.time` when the run was started.
  time: { ...definitions.time, ...payload.time } as RunOptions.Time
})

/** The run's body: its status once it has finished. */
export const body = <T extends Tool.Any, RV, O>(
  definitions: Omit<RunOptions.Options<T, RV, O>, "goal" | "system" | "runId">,
  settings: Settings,
  payload: Payload
) =>
  Effect.gen(function* () {
    const engine = yield* WorkflowEngine.WorkflowEngine
    const instance = yield* WorkflowEngine.WorkflowInstance
    // A cancel preempts the body wherever it is: the engine interrupts a run that waits on a
    // deferred once that deferred completes, and the body then starts over and finds it.
    instance.awaitedDeferreds.set(Names.cancel.name, (instance.awaitedDeferreds.get(Names.cancel.name) ?? 0) + 1)
    const cancelled = Effect.map(engine.deferredResult(Names.cancel), Option.isSome)
    const options = optionsOf(definitions, payload)
    // A start from a process that hosts no runs names tools it cannot check: one this runner has not ends the run.
    const refused = unregistered(definitions.tools, payload.tools, " on this runner")
    // A store out of reach is waited for; a journal this runner cannot go on with fails the
    // body, which suspends the workflow (`SuspendOnFailure`) for a runner that can.
    const driveWith = (
      given: typeof options,
      cancel: boolean,
      parkAfter: Duration.Input,
      why: RunOptions.InvalidRunOptions | undefined
    ) =>
      RunHost.drive(payload.runId, given, {
        cancel,
        // The engine interrupts the body for a cancel: the run is cancelled where it stands (review 159).
        cancelling: Effect.provideService(cancelled, WorkflowEngine.WorkflowInstance, instance),
        pollInterval: settings.pollInterval,
        parkAfter,
        startedAt: payload.startedAt,
        refused: why
      })
    const drive = (cancel: boolean, parkAfter: Duration.Input) =>
      Effect.retry(
        driveWith(options, cancel, parkAfter, refused).pipe(
          // A start this runner's code refuses (limits its policies would ignore), from a client that
          // could not check it: the run starts under the runner's own options and ends at once, recorded,
          // naming the field, as for a tool it has not; it hung, suspended, before (review 136). Only a
          // run the journal does not hold yet gets here: a resume's options fail as a `ResumeError`.
          Effect.catchTag("InvalidRunOptions", (e) =>
            driveWith(optionsOf(definitions, { ...payload, limits: undefined, time: undefined }), cancel, parkAfter, e)
          ),
          // The settings were checked when the layer was built (`DurableRun.layer`), and so were its own options.
          Effect.catchTag("InvalidRunOptions", (e) => Effect.die(e))
        ),
        {
          // `running`: this process's drive before this one has not stopped yet (a handler that ignores interruption).
          // Not `taken`: another process owns the run now, and a drive again at once would take it back (review 134).
          while: (e) => e.reason === "unavailable" || e.reason === "running",
          schedule: Schedule.min([Schedule.exponential("200 millis", 2), Schedule.spaced("30 seconds")])
        }
      )
    const parkAfter = Duration.toMillis(Duration.fromInputUnsafe(settings.parkAfter ?? "1 second"))
    const takeBackAfter = Duration.toMillis(Duration.fromInputUnsafe(settings.takeBackAfter ?? defaultTakeBackAfter))
    // The parks of this execution. One seen twice was a wake that changed nothing: a
    // durable clock that fired by the storage's time while this machine's clock says the
    // approval has not expired yet. The next drive then waits in the process for the calls
    // that expire by then (deciding them still works), and parks again on later ones.
    const seen = new Set<string>()
    // A parked run reads the table again every `recheckAfter` (review 157): a decision whose
    // wake was lost (the process that recorded it died before it woke the run, or the store
    // answered after the caller gave up) is found then, not at the approval's expiry. Rounds
    // are counted on the clock, so that a replay goes on from the current one.
    const recheckMillis = Duration.toMillis(Duration.fromInputUnsafe(settings.recheckAfter ?? defaultRecheckAfter))
    const offset = offsetOf(payload.runId, recheckMillis)
    let lastRound = Number.NEGATIVE_INFINITY
    let waitHereFor = parkAfter
    while (true) {
      const outcome = yield* drive(yield* cancelled, waitHereFor).pipe(
        // Another process took the run over and has not ended it: it is theirs while they drive it.
        Effect.catchIf(
          (e) => e.reason === "taken",
          () => Effect.as(whileTheirs(payload.runId, takeBackAfter, cancelled), undefined)
        )
      )
      if (outcome === undefined) continue
      waitHereFor = parkAfter
      if (outcome._tag === "Finished") return outcome.result.status
      const first = outcome.approvals.reduce((a, b) => (b.expiresAt < a.expiresAt ? b : a))
      // A park on the same calls with a closer expiry (a resume's deadline) is another park.
      const name = `${Names.parked(outcome.approvals)}@${first.expiresAt}`
      const now = yield* Clock.currentTimeMillis
      if (seen.has(name)) {
        waitHereFor = Math.max(parkAfter, first.expiresAt - now + 1)
        continue
      }
      seen.add(name)
      const round = Math.max(lastRound + 1, Math.floor((now - offset) / recheckMillis))
      lastRound = round
      const woke = yield* parkedRound(name, round, outcome.approvals, first, now, (round + 1) * recheckMillis + offset)
      // The round ended with nothing woken: the same park next is one more round, not a clock that
      // fired early. The drive finds a decision on the table, or parks the run again as it is.
      if (woke === "recheck") seen.delete(name)
    }
  })

/**
 * One round of a park: the first of a decision's wake, the cancel, the earliest expiry
 * (`first`'s), and the round's end (`wakeAt`), which is `"recheck"`.
 */
const parkedRound = (
  name: string,
  round: number,
  approvals: ReadonlyArray<Approval.Request>,
  first: Approval.Request,
  now: number,
  wakeAt: number
) =>
  DurableDeferred.raceAll({
    name: `${name}@${round}`,
    success: Schema.Literals(["woken", "recheck"]),
    error: Schema.Never,
    effects: [
      Effect.as(DurableDeferred.await(Names.cancel), "woken" as const),
      Effect.as(
        DurableClock.sleep({
          name: Names.expiry(first.callId, first.expiresAt),
          duration: Math.max(0, first.expiresAt - now),
          inMemoryThreshold: 0
        }),
        "woken" as const
      ),
      Effect.as(
        DurableClock.sleep({
          name: Names.recheck(name, round),
          duration: Math.max(0, wakeAt - now),
          inMemoryThreshold: 0
        }),
        "recheck" as const
      ),
      ...approvals.map((a) => Effect.as(DurableDeferred.await(Names.approval(a.callId)), "woken" as const))
    ]
  })
