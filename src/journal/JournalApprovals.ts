/**
 * An approval gate on the journal (R7, R9.3): a call waiting for a person is a row of the
 * journal's approvals table, so any process on the same journal lists the pending calls
 * and decides them, and the run, live or recovered after a restart, finds the decision.
 *
 * - `request` puts the call on the table (again after a restart: a call still pending, or
 *   decided meanwhile, is found as it is) and waits for its decision: at once when it is
 *   decided through this gate in this process, else by reading the table every
 *   `pollInterval` on the run's `Clock` (a tenth of the call's time to decide when that
 *   is shorter, 50 ms at least). A wait that ends without a decision (expiry,
 *   cancel, the run deadline) withdraws the call from the table.
 * - `decide` writes the decision (a call not pending is `NotPending`) and wakes a run of
 *   this process that waits on it. A call this process is putting up is decided once its
 *   row is there (a second of real time at most): a decision given on the run's
 *   `approval.requested` finds it.
 * - `pending` lists the table's pending calls, from every process (`PendingUnavailable`
 *   when the store cannot be read). The calls this process is putting up are waited for
 *   first, a second of real time at most (a store that hangs on one run's call holds no
 *   run's list for longer), so that a list read on a call's `approval.requested` shows it.
 *
 * ```ts
 * const journal = Journal.layerSqlite({ filename: "runs.db" })
 * const approvals = JournalApprovals.layer().pipe(Layer.provide(journal))
 * // runs use it: Run.run(options).pipe(Effect.provide(Layer.merge(journal, approvals)))
 * // another process: (yield* Approval.ApprovalGate).decide(runId, callId, Approval.approved("ops"))
 * ```
 *
 * A store that cannot be reached is read again at the next poll; one that refuses the
 * request breaks the gate, and the run ends `internal_error` with the call never run (as
 * for any gate that fails, R12).
 *
 * @since 0.3.0
 */
import { Clock, Deferred, type Duration, Effect, Exit, Layer, Option, Predicate, Schema } from "effect"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as Text from "../failure/Text.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Model from "../model/Model.ts"
import * as Durations from "../time/Durations.ts"
import * as RealTime from "../time/RealTime.ts"
import * as Approval from "../tools/Approval.ts"
import * as Tool from "../tools/Tool.ts"
import * as Journal from "./Journal.ts"
import type * as JournalError from "./JournalError.ts"

/**
 * @category models
 * @since 0.3.0
 */
export interface Options {
  /**
   * How often a waiting run reads the table for a decision made by another process.
   * Default 1 second; a tenth of the call's time to decide when that is shorter (50 ms at least).
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * Whether a wait that ends without a decision leaves the call on the table: for a run that
   * was suspended rather than stopped (it is resumed and waits again). Read when the wait
   * ends; by default such a wait withdraws its call, unless the run hands it on
   * (`Approval.HandedOn`: the runtime says so for a run suspended or taken over).
   */
  readonly keepOnInterrupt?: (() => boolean) | undefined
  /**
   * Run once the call is on the table, before its wait begins: for a host that parks the
   * run while the call waits (the call must be on the table before the run lets go).
   */
  readonly onPutUp?: ((request: Approval.Request) => Effect.Effect<void>) | undefined
}

const isSideEffect = Schema.is(Tool.SideEffect)

/**
 * A row of the approvals table as the request a person decides.
 *
 * @category constructors
 * @since 0.3.0
 */
export const requestOf = (row: Journal.ApprovalRequest): Approval.Request => ({
  runId: row.runId,
  callId: row.callId,
  tool: row.tool,
  arguments: Predicate.isObject(row.arguments) ? row.arguments : {},
  // A row that does not say is shown as the strictest class: whoever decides assumes it acts outside.
  sideEffect: isSideEffect(row.sideEffect) ? row.sideEffect : "external",
  requestedAt: row.requestedAt,
  expiresAt: row.expiresAt
})

/** `text` cut to `max` characters, its mark of the cut included. */
const within = (text: string, max: number): string => Text.clip(text, max - 1)

const toDecision = (row: Journal.ApprovalDecision): Approval.Decision => {
  // A row decided before the journal refused what a run cannot keep stands, read as a run keeps
  // it: a blank `by` names nobody (none), a `by` or a reason too long is cut (review 182).
  const by = row.by === undefined || Model.isBlank(row.by) ? undefined : within(row.by, Approval.maxChars.by)
  return row.decision === "approve"
    ? Approval.approved(by)
    : Approval.rejected(within(row.reason ?? "rejected", Approval.maxChars.reason), by)
}

/**
 * Records `decision` on the call `callId` of the run `runId` in `journal`, at the time of
 * the `Clock`: the first decision wins; a call not pending (decided already, withdrawn,
 * never asked, or an id no row can have) is `NotPending`; a decision a handle's `approve`
 * and `reject` refuse (`Approval.checkDecision`: a blank `by`, a NUL, a text too long) is
 * `InvalidDecision`, and nothing is recorded; a store that refuses is its `JournalError`.
 *
 * @category combinators
 * @since 0.3.0
 */
export const record = (
  journal: Journal.Service,
  runId: string,
  callId: string,
  decision: Approval.Decision
): Effect.Effect<void, Approval.InvalidDecision | Approval.NotPending | JournalError.JournalError> =>
  Effect.suspend(() => {
    // What a run waiting on the call would refuse to read (it would end internal_error) is not written.
    const invalid = Approval.checkDecision(runId, callId, decision)
    return invalid === undefined ? Effect.void : Effect.fail(invalid)
  }).pipe(
    Effect.andThen(Clock.currentTimeMillis),
    Effect.flatMap((at) =>
      journal
        .decide({
          runId,
          callId,
          decision: decision._tag === "Approved" ? "approve" : "reject",
          ...(decision._tag === "Rejected" ? { reason: decision.reason } : {}),
          ...(decision.by === undefined ? {} : { by: decision.by }),
          at
        })
        .pipe(
          Effect.catchReason("JournalError", "NotPending", () =>
            Effect.fail(new Approval.NotPending({ runId, callId }))
          )
        )
    )
  )

/** How long a list of the pending calls, or a decision, waits in real time for the calls this process is putting up. */
const putUpWaitMillis = 1_000

const broken = (what: string) => (e: JournalError.JournalError) =>
  Effect.die(new Error(`the journal's approval gate could not ${what}: ${e.message}`))

/** Every option: one the gate does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options> = { pollInterval: true, keepOnInterrupt: true, onPutUp: true }

/** The poll interval in milliseconds: a positive, finite duration, or a `RangeError` naming it. */
const pollMillisOf = (input: Duration.Input | undefined): number => {
  if (input === undefined) return 1000
  const millis = Durations.millisOf(input) ?? Number.NaN
  if (!(millis > 0 && Number.isFinite(millis))) {
    throw new RangeError(
      `JournalApprovals.make: pollInterval must be a positive, finite duration, got ${UserCode.shown(input)}`
    )
  }
  return millis
}

/**
 * The requests of `rows` a decision can be made on now: one past its expiry is listed no more,
 * as a decision on it is refused (review 170). What `pending` lists, here and in `DurableRuns`.
 *
 * @category getters
 * @since 0.3.0
 */
export const listed = (rows: ReadonlyArray<Journal.ApprovalRequest>): Effect.Effect<ReadonlyArray<Approval.Request>> =>
  Effect.map(Clock.currentTimeMillis, (now) => rows.filter((row) => row.expiresAt > now).map(requestOf))

/**
 * A gate over `journal`. Throws a `RangeError` for a `pollInterval` that is not a
 * positive, finite duration (a gate is built at start-up; 0 would read the store in a loop),
 * or an option it does not know.
 *
 * @category constructors
 * @since 0.3.0
 */
export const make = (journal: Journal.Service, options: Options = {}): Approval.Gate => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) throw new RangeError(`JournalApprovals.make: ${unknown}`)
  const pollMillis = pollMillisOf(options.pollInterval)
  // The runs of this process that wait, so that a decision made here wakes them at once.
  const waiting = new Map<string, Deferred.Deferred<Approval.Decision>>()
  // The calls of this process being put on the table: a decision made here meanwhile (on the
  // run's `approval.requested`, which comes out as the call is put up) waits for its row.
  const puttingUp = new Map<string, Deferred.Deferred<void>>()
  const keyOf = (runId: string, callId: string) => `${runId}\u0000${callId}`

  const putUp = (request: Approval.Request) => {
    const row = {
      runId: request.runId,
      callId: request.callId,
      tool: request.tool,
      // The run checked the arguments against the tool's schema: they are JSON.
      arguments: request.arguments as Schema.Json,
      sideEffect: request.sideEffect,
      requestedAt: request.requestedAt,
      expiresAt: request.expiresAt
    }
    // Put up already, and still pending with another expiry: the run asks afresh (its process
    // died after putting the call up, before its log said so, or a resume brought its deadline
    // closer), and its log is what the row follows. The built-in stores give the row the new
    // times in one step; a journal of your own that says `Conflict` instead has it withdrawn and
    // put up again with the times the run waits by.
    const renewed = Effect.gen(function* () {
      const pending = yield* journal.pendingApprovals({ runId: request.runId })
      const found = pending.find((p) => p.callId === request.callId)
      // The expiry is what the run waits by (a resumed run's request time is its event's, a hair later).
      if (found === undefined || found.expiresAt === row.expiresAt) return
      yield* journal.withdraw(request.runId, request.callId, request.requestedAt)
      // Decided in between: the decision stands, and the run reads it.
      yield* Effect.catchReason(journal.requestApproval(row), "JournalError", "Conflict", () => Effect.void)
    })
    return journal.requestApproval(row).pipe(
      // Put up already: a run resumed after a restart finds it pending, or decided.
      Effect.catchReason("JournalError", "Conflict", () => renewed),
      Effect.retry({ times: 3, while: (e) => e.isRetryable }),
      Effect.catch(broken("put the call up for approval"))
    )
  }

  // A store out of reach is read again at the next poll.
  const decisionOf = (runId: string, callId: string) =>
    journal
      .decision(runId, callId)
      .pipe(Effect.catch((e) => (e.isRetryable ? Effect.succeed(Option.none()) : broken("read the decision")(e))))

  // A short approval is read more often: a tenth of its time to decide, 50 ms at least, so
  // that a decision made elsewhere within it is found before it expires.
  const polled = (request: Approval.Request) =>
    Effect.gen(function* () {
      const { runId, callId } = request
      const every = Math.min(pollMillis, Math.max(50, (request.expiresAt - request.requestedAt) / 10))
      while (true) {
        yield* Effect.sleep(every)
        const found = yield* decisionOf(runId, callId)
        if (Option.isSome(found)) return toDecision(found.value)
      }
    })

  return {
    request: (request) =>
      Effect.gen(function* () {
        const key = keyOf(request.runId, request.callId)
        const here = Deferred.makeUnsafe<Approval.Decision>()
        waiting.set(key, here)
        const put = Deferred.makeUnsafe<void>()
        puttingUp.set(key, put)
        // Interrupted from the put-up on (a store's insert may land after it), the call is withdrawn.
        return yield* Effect.gen(function* () {
          yield* putUp(request).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                if (puttingUp.get(key) === put) puttingUp.delete(key)
                Deferred.doneUnsafe(put, Exit.void)
              })
            )
          )
          // Decided already (a run going on after its call was decided): no wait.
          const found = yield* decisionOf(request.runId, request.callId)
          if (Option.isSome(found)) return toDecision(found.value)
          if (options.onPutUp !== undefined) yield* options.onPutUp(request)
          return yield* Effect.raceFirst(Deferred.await(here), polled(request))
        }).pipe(
          Effect.onInterrupt(() =>
            Effect.flatMap(Effect.service(Approval.HandedOn), (handedOn) =>
              options.keepOnInterrupt?.() === true || handedOn()
                ? Effect.void
                : Effect.flatMap(Clock.currentTimeMillis, (at) =>
                    Effect.ignore(journal.withdraw(request.runId, request.callId, at))
                  )
            )
          )
        )
      }).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            waiting.delete(keyOf(request.runId, request.callId))
          })
        )
      ),
    decide: (runId, callId, decision) =>
      Effect.gen(function* () {
        // What the table would not give back as given (a NUL, half of a surrogate pair) is refused first.
        const invalid = Approval.checkDecision(runId, callId, decision)
        if (invalid !== undefined) return yield* invalid
        // Its row awaited, a second of real time at most: a store that hangs on it holds no decision for good.
        const put = puttingUp.get(keyOf(runId, callId))
        if (put !== undefined) yield* Effect.raceFirst(Deferred.await(put), RealTime.sleep(putUpWaitMillis))
        yield* record(journal, runId, callId, decision).pipe(
          Effect.catchTag("JournalError", (e) =>
            // Out of reach: nothing was decided, the call still waits, the caller may try again.
            e.isRetryable
              ? Effect.fail(new Approval.Unavailable({ runId, callId, detail: e.message }))
              : broken("record the decision")(e)
          )
        )
        const here = waiting.get(keyOf(runId, callId))
        if (here !== undefined) yield* Deferred.succeed(here, decision)
      }),
    // Read once the calls being put up are on the table: a list read on their `approval.requested`
    // shows them. A second of real time at most: a store that hangs on one run's call holds no
    // run's list for good (review 112), and a TestClock nobody moves does not stall it.
    pending: Effect.suspend(() => {
      const puts = Array.from(puttingUp.values())
      if (puts.length === 0) return Effect.void
      return Effect.raceFirst(Effect.forEach(puts, Deferred.await, { discard: true }), RealTime.sleep(putUpWaitMillis))
    }).pipe(
      Effect.andThen(journal.pendingApprovals()),
      Effect.retry({ times: 3, while: (e) => e.isRetryable }),
      Effect.mapError((e) => new Approval.PendingUnavailable({ detail: e.message })),
      Effect.flatMap(listed)
    ),
    // The row is withdrawn first, then read: a decision recorded before (or one being recorded,
    // which the withdrawal waits for) is found; one after finds the call withdrawn (`NotPending`).
    // An id no row can have names no call: nothing to close, no decision (review 88: a defect).
    expire: (runId, callId) =>
      !Text.isId(runId) || !Text.isId(callId)
        ? Effect.succeed(Option.none())
        : Clock.currentTimeMillis.pipe(
            Effect.flatMap((at) => journal.withdraw(runId, callId, at)),
            Effect.andThen(journal.decision(runId, callId)),
            Effect.map(Option.map(toDecision)),
            Effect.catch((e) =>
              e.isRetryable
                ? Effect.fail(new Approval.Unavailable({ runId, callId, detail: e.message }))
                : broken("close the call at its expiry")(e)
            )
          )
  }
}

/**
 * The gate on the `Journal` in context, as the runs' `Approval.ApprovalGate`.
 *
 * @category layers
 * @since 0.3.0
 */
export const layer = (options?: Options): Layer.Layer<never, never, Journal.Journal> =>
  Layer.effect(
    Approval.ApprovalGate,
    Effect.map(Effect.service(Journal.Journal), (journal) => make(journal, options))
  )
