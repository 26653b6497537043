/**
 * The operations of `DurableRuns` over the journal and the workflow engine. Private to
 * `durable/`.
 */
import { Clock, Duration, Effect, Exit, Option, Schedule, Schema, Stream } from "effect"
import { EntityAddress, EntityId, EntityType, MessageStorage, Sharding } from "effect/cluster"
import { DurableDeferred, WorkflowEngine } from "effect/workflow"
import * as UserCode from "../../failure/UserCode.ts"
import * as Journal from "../../journal/Journal.ts"
import * as JournalApprovals from "../../journal/JournalApprovals.ts"
import * as JournalLoad from "../../run/journal/JournalLoad.ts"
import * as RunOptions from "../../run/RunOptions.ts"
import * as RunResult from "../../run/RunResult.ts"
import * as Approval from "../../tools/Approval.ts"
import { DurableRunError, type Service, type StartOptions } from "../DurableRuns.ts"
import { answered, patiently, storeError, storeUnavailable } from "./Answers.ts"
import * as Names from "./Names.ts"
import { executionOf, payloadOf, RunWorkflow, suspendedOnFailure } from "./Workflow.ts"

const decodeResult = Schema.decodeUnknownExit(Schema.toCodecJson(RunResult.RunResult))

/** What a run that has begun keeps of its start in the journal's header: its goal and system prompt. */
const decodeBegun = Schema.decodeUnknownOption(
  Schema.Struct({ goal: Schema.String, system: Schema.optional(Schema.String) })
)

const isId = RunOptions.isRunId

/** A group of the options as its own copy: each of its fields read once. */
const copied = (value: unknown): unknown =>
  Array.isArray(value) ? [...value] : typeof value === "object" && value !== null ? { ...value } : value

/**
 * The start options as the run's own plain data, each field read once (R12): a getter that
 * throws is an `InvalidRunOptions`, and one that answers a checked value then another
 * cannot start a run under an id no check saw (review 89: the run id was read four times).
 */
const plainStartOptions = (options: StartOptions): Effect.Effect<StartOptions, RunOptions.InvalidRunOptions> =>
  Effect.suspend(() => {
    // What is no object at all is said so by the check of the options.
    if (typeof options !== "object" || options === null) return Effect.succeed(options)
    try {
      const { goal, system, runId, limits, tools, time } = options
      // Boundary: the copies are what was given, still unchecked; `validate` checks them next.
      const plain = { goal, system, runId, limits: copied(limits), tools: copied(tools), time: copied(time) }
      return Effect.succeed(
        Object.fromEntries(Object.entries(plain).filter(([, value]) => value !== undefined)) as unknown as StartOptions
      )
    } catch (defect) {
      const reason = `cannot be read (${UserCode.kindOf(defect)} thrown)`
      return Effect.fail(new RunOptions.InvalidRunOptions({ path: [], reason }))
    }
  })

/** An id no run can have (see `RunOptions.RunId`) is no run's: refused before any store is asked. */
const known = (runId: string) =>
  isId(runId)
    ? Effect.void
    : Effect.fail(
        new DurableRunError({
          // A caller without types may give whatever: what is no string is shown as what it is.
          runId: typeof runId === "string" ? runId : `(${typeof runId})`,
          reason: "not_found",
          detail: `no run can have this id (${RunOptions.runIdRule})`
        })
      )

/** What the operations run on: the journal, the engine, and the engine's storage. */
export interface Services {
  readonly journal: Journal.Service
  readonly engine: WorkflowEngine.WorkflowEngine["Service"]
  readonly sharding: Sharding.Sharding["Service"]
  readonly storage: MessageStorage.MessageStorage["Service"]
}

/** The services of {@link Services}, from the context. */
export const services = Effect.all({
  journal: Effect.service(Journal.Journal),
  engine: Effect.service(WorkflowEngine.WorkflowEngine),
  sharding: Effect.service(Sharding.Sharding),
  storage: Effect.service(MessageStorage.MessageStorage)
})

export const make = (
  { journal, engine, sharding, storage }: Services,
  validate: (options: StartOptions) => Effect.Effect<void, RunOptions.InvalidRunOptions>
): Service => {
  const provide = <A, E>(effect: Effect.Effect<A, E, WorkflowEngine.WorkflowEngine>) =>
    Effect.provideService(effect, WorkflowEngine.WorkflowEngine, engine)

  /**
   * Whether the run was started: its workflow's `run` request is in the engine's storage
   * (it is there from `start` on, before any runner took it up).
   */
  const started = (runId: string) =>
    Effect.flatMap(executionOf(runId), (executionId) => {
      const entityId = EntityId.make(executionId)
      const address = EntityAddress.make({
        entityType: EntityType.make(`Workflow/${RunWorkflow._tag}`),
        entityId,
        shardId: sharding.getShardId(entityId, "default")
      })
      return Effect.mapBothEager(storage.requestIdForPrimaryKey({ address, tag: "run", id: "" }), {
        onSuccess: Option.isSome,
        onFailure: (e) => new DurableRunError({ runId, reason: "unavailable", detail: e.message })
      })
    })

  /**
   * The run as its journal holds it, its events from `fromSeq` on (all by default);
   * `undefined` for a run started that has committed nothing yet.
   */
  const stored = (runId: string, fromSeq = 0) =>
    Effect.flatMap(
      Effect.andThen(
        known(runId),
        answered(runId)(Effect.mapError(journal.read(runId, { fromSeq }), storeError(runId)))
      ),
      (found) =>
        Option.isSome(found)
          ? Effect.succeed(found.value)
          : Effect.flatMap(answered(runId)(started(runId)), (exists) =>
              exists
                ? Effect.succeed(undefined)
                : Effect.fail(new DurableRunError({ runId, reason: "not_found", detail: "no run of this id" }))
            )
    )

  /**
   * The runs suspended on a failure this process has looked at: the log's length then, and why
   * no runner can go on with it, if none can. Looked at again only once the log has moved on
   * (review 184: each poll read the whole log), and let go once the run is no longer suspended.
   */
  const suspended = new Map<string, { readonly nextSeq: number; readonly unreadable: DurableRunError | undefined }>()

  /**
   * Not finished: so says a run that goes on, or that waits for a runner that can go on with
   * it (a rolling upgrade). A run whose runner could not go on with it because its log is
   * damaged (a row that does not decode, a header or a log that is no run's) is `corrupt`: no
   * runner ever will, and a `result` waited for it forever (reviews 180, 184).
   */
  const unfinished = (runId: string, nextSeq: number) =>
    Effect.gen(function* () {
      const stuck = yield* answered(runId)(provide(Effect.flatMap(executionOf(runId), suspendedOnFailure)))
      if (!stuck) {
        suspended.delete(runId)
        return Option.none<RunResult.RunResult>()
      }
      let seen = suspended.get(runId)
      if (seen?.nextSeq !== nextSeq) {
        // The log read as a runner reads it, without the code it needs: a runner with other code may go on with it.
        const loaded = yield* Effect.result(answered(runId)(JournalLoad.load(journal, runId, [], undefined, false)))
        const failed = loaded._tag === "Failure" ? loaded.failure : undefined
        if (failed?._tag === "DurableRunError") return yield* Effect.fail(failed)
        if (failed?.reason === "unavailable") return yield* Effect.fail(storeUnavailable(runId, failed.detail))
        const unreadable =
          failed?.reason === "corrupt"
            ? new DurableRunError({ runId, reason: "corrupt", detail: failed.detail })
            : undefined
        seen = { nextSeq, unreadable }
        suspended.set(runId, seen)
      }
      if (seen.unreadable !== undefined) return yield* Effect.fail(seen.unreadable)
      return Option.none<RunResult.RunResult>()
    })

  const poll = (runId: string) =>
    // The run's last commit alone, until it holds the result: a poll does not read the whole log.
    Effect.flatMap(stored(runId, Number.MAX_SAFE_INTEGER), (run) => {
      if (run === undefined || Option.isNone(run.result)) return unfinished(runId, run?.nextSeq ?? 0)
      // Ended: nothing more to remember of a suspension it went through (review 186).
      suspended.delete(runId)
      const decoded = decodeResult(run.result.value)
      if (Exit.isFailure(decoded)) {
        return Effect.fail(
          new DurableRunError({ runId, reason: "corrupt", detail: "the stored result does not decode" })
        )
      }
      const result = decoded.value
      if (result.timeline.length > 0) return Effect.succeed(Option.some(result))
      // A result stored without its timeline takes the log's.
      return Effect.map(stored(runId), (whole) => Option.some({ ...result, timeline: whole?.events ?? [] }))
    })

  /**
   * Completes the run's `deferred` (a decision, the cancel), which wakes the run on its
   * owner. A run suspended on a failure (a runner that could not go on with it) is not
   * woken by that, the engine keeps such runs for an explicit resume: it is resumed, so
   * that a runner that can go on with it now finds the decision or the cancel.
   */
  const complete = (runId: string, deferred: typeof Names.cancel) =>
    answered(runId)(
      provide(
        Effect.gen(function* () {
          const executionId = yield* executionOf(runId)
          yield* DurableDeferred.done(deferred, {
            token: DurableDeferred.tokenFromExecutionId(deferred, { workflow: RunWorkflow, executionId }),
            exit: Exit.void
          })
          if (yield* suspendedOnFailure(executionId)) yield* RunWorkflow.resume(executionId)
        })
      )
    )

  /** Wakes the run on the call `callId`, whose decision is on the table. */
  const wake = (runId: string, callId: string) => complete(runId, Names.approval(callId))

  const decide = (runId: string, callId: string, decision: Approval.Decision) =>
    Effect.gen(function* () {
      yield* known(runId)
      const invalid = Approval.checkDecision(runId, callId, decision)
      if (invalid !== undefined) return yield* Effect.fail(invalid)
      if (!isId(callId)) return yield* Effect.fail(new Approval.NotPending({ runId, callId }))
      // Decided on the table first (the first decision wins), then the run is woken: a wake
      // that finds no decision would only park the run again.
      const decided = yield* Effect.result(
        answered(runId)(
          Effect.mapError(JournalApprovals.record(journal, runId, callId, decision), (e) =>
            e._tag === "JournalError" ? storeError(runId)(e) : e
          )
        )
      )
      if (decided._tag === "Success") return yield* wake(runId, callId)
      if (decided.failure._tag === "DurableRunError") return yield* Effect.fail(decided.failure)
      // Not pending: decided already (a retry whose wake may have been lost is woken again), or never asked.
      const earlier = yield* answered(runId)(Effect.mapError(journal.decision(runId, callId), storeError(runId)))
      if (Option.isSome(earlier)) yield* wake(runId, callId)
      // Never asked, of a run that does not exist: the run is unknown (`not_found`), not the call.
      else yield* stored(runId)
      return yield* Effect.fail(decided.failure)
    })

  /**
   * A start under the id of a run that has begun (its journal holds its goal) asks for that
   * run: another goal or system prompt is refused `invalid`, as it would start nothing (review
   * 180: the second start was told it succeeded). A run that has not begun yet (waiting for a
   * runner) cannot be compared: the start starts nothing.
   */
  const sameStart = (runId: string, options: StartOptions) =>
    Effect.gen(function* () {
      const found = yield* answered(runId)(
        Effect.mapError(journal.read(runId, { fromSeq: Number.MAX_SAFE_INTEGER }), storeError(runId))
      )
      const begun = Option.flatMap(found, (run) => decodeBegun(run.header))
      if (Option.isNone(begun)) return
      const { goal, system } = begun.value
      const other =
        goal !== options.goal
          ? "goal"
          : options.system !== undefined && system !== options.system
            ? "system prompt"
            : undefined
      if (other === undefined) return
      const detail = `a run of this id was started with another ${other}: a start under an id starts once; start under another id`
      return yield* new DurableRunError({ runId, reason: "invalid", detail })
    })

  return {
    start: (given) =>
      Effect.gen(function* () {
        const options = yield* plainStartOptions(given)
        yield* validate(options)
        const runId = options.runId ?? crypto.randomUUID()
        if (options.runId !== undefined) yield* sameStart(runId, options)
        // The run's deadline counts from now, however long it waits for a runner (R4.1).
        const startedAt = yield* Clock.currentTimeMillis
        yield* answered(runId)(provide(RunWorkflow.execute(payloadOf(options, runId, startedAt), { discard: true })))
        return runId
      }),
    poll,
    result: (runId) =>
      Effect.flatMap(
        Effect.repeat(patiently(poll(runId)), {
          until: Option.isSome,
          schedule: Schedule.min([Schedule.exponential("200 millis", 1.5), Schedule.spaced("5 seconds")])
        }),
        (found) =>
          Option.isSome(found)
            ? Effect.succeed(found.value)
            : Effect.fail(new DurableRunError({ runId, reason: "unavailable", detail: "no result" }))
      ),
    events: (runId) => Effect.map(stored(runId), (run) => run?.events ?? []),
    watch: (runId, options) => {
      const refused = (detail: string) => Stream.fail(new DurableRunError({ runId, reason: "invalid", detail }))
      // Read once, here: options of code without types may hold a getter that throws.
      let given: { readonly fromSeq: unknown; readonly pollInterval: unknown }
      try {
        given = { fromSeq: options?.fromSeq ?? 0, pollInterval: options?.pollInterval ?? "500 millis" }
      } catch (defect) {
        return refused(`its options cannot be read (${UserCode.kindOf(defect)} thrown)`)
      }
      const { fromSeq, pollInterval } = given
      // A NaN start read the whole log again at every poll; a poll of no time spins.
      if (typeof fromSeq !== "number" || Number.isNaN(fromSeq)) {
        return refused(`fromSeq must be a number, not ${UserCode.shown(fromSeq)}`)
      }
      // Boundary: whatever was given; `fromInput` says none for what is no duration.
      const poll = Duration.fromInput(pollInterval as Duration.Input)
      const pollMillis = Option.isSome(poll) ? Duration.toMillis(poll.value) : Number.NaN
      if (!(pollMillis > 0))
        return refused(`pollInterval must be a positive duration, not ${UserCode.shown(pollInterval)}`)
      const start = { from: Math.min(Math.max(0, Math.trunc(fromSeq)), Number.MAX_SAFE_INTEGER), wait: false }
      return Stream.paginate(start, ({ from, wait }) =>
        Effect.gen(function* () {
          if (wait) yield* Effect.sleep(pollMillis)
          // From where the last read ended: a watcher reads what is new, not the whole log again.
          const run = yield* patiently(stored(runId, from))
          // Filtered again: a journal service of the user's that passes no `fromSeq` on gives the whole log.
          const fresh = (run?.events ?? []).filter((event) => event.seq >= from)
          // The result is committed with the log's last event (`run.finished`): nothing comes after it.
          const finished = run !== undefined && Option.isSome(run.result)
          // A read that brought nothing new waits before the next; one that did reads again at once.
          const next = { from: from + fresh.length, wait: fresh.length === 0 }
          return [fresh, finished ? Option.none() : Option.some(next)] as const
        })
      )
    },
    approve: (runId, callId, options) =>
      Effect.flatMap(Approval.byOf(runId, callId, options), (by) => decide(runId, callId, Approval.approved(by))),
    reject: (runId, callId, reason, options) =>
      Effect.flatMap(Approval.byOf(runId, callId, options), (by) =>
        decide(runId, callId, Approval.rejected(reason, by))
      ),
    cancel: (runId) =>
      Effect.flatMap(stored(runId), (run) =>
        run !== undefined && Option.isSome(run.result) ? Effect.void : complete(runId, Names.cancel)
      ),
    pending: (runId) =>
      Effect.gen(function* () {
        const rows = yield* answered(runId ?? "*")(
          Effect.mapError(
            journal.pendingApprovals(runId === undefined ? undefined : { runId }),
            storeError(runId ?? "*")
          )
        )
        // None waiting, for a run that does not exist: the run is unknown (`not_found`).
        if (rows.length === 0 && runId !== undefined) yield* stored(runId)
        return yield* JournalApprovals.listed(rows)
      })
  }
}
