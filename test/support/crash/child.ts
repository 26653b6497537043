/**
 * The process the real-crash suite kills (R9): it runs agents on a real journal (SQLite
 * file or PostgreSQL) with payment tools whose ledger is a SQLite file of its own, and
 * prints a marker line on stdout at each point a crash matters. Run with the pinned node
 * (the suite runs it bundled, see harness.ts):
 *
 *   node_modules/.bin/node --disable-warning=ExperimentalWarning test/support/crash/child.ts '<Config as JSON>'
 *
 * Markers, one a line: `ready`; `before-intent <run> <call>` (the intent record is about
 * to be committed), `intent-committed <run> <call>`, `paying <run> <call>`, `paid <run>
 * <call>` (the ledger has the payment, its result is not committed yet), `awaiting-approval
 * <run> <call>` (the request is in the journal's approvals table), `result-committed <run>`,
 * `decided <run> <call>`; `result <json>` for each run's result, then `done`.
 *
 * `hold` (a marker line) stops the whole process right after that marker, its event loop
 * blocked, so that nothing more happens before the parent's `kill -9` lands.
 *
 * A run's id says what its model does: `pay<N>-…` pays N invoices one by one, `blind<N>-…`
 * the same with a tool without a status query, `approve-…` pays one invoice and then
 * makes a transfer that needs a person's approval. The model takes `modelMillis` to answer.
 */
import { Deferred, Effect, Layer, Option, type Schema } from "effect"
import * as Journal from "../../../src/journal/Journal.ts"
import * as Run from "../../../src/run/Run.ts"
import type * as RunResult from "../../../src/run/RunResult.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as Approval from "../../../src/tools/Approval.ts"
import { type Config, journalLayer } from "./config.ts"
import * as Ledger from "./ledger.ts"
import { marker, payment } from "./payment.ts"

const config: Config = JSON.parse(process.argv[2] ?? "{}")
const mark = marker(config.hold)

const ledger = Ledger.open(config.ledger)

const millis = { payMillis: config.payMillis ?? 5, answerMillis: config.payMillis ?? 5 }
const tools = [
  payment("pay", { ledger, mark, reconcile: true, ...millis }),
  payment("pay_blind", { ledger, mark, reconcile: false, ...millis }),
  payment("transfer", { ledger, mark, reconcile: true, needsApproval: true, ...millis })
]

/** The model: each run's id is its plan. */
const model = ScriptedModel.layerFunction((request) => {
  const [, kind = "", count = "1"] = /^(pay|blind|approve)(\d*)-/.exec(request.runId) ?? []
  const i = request.iteration
  const invoice = { invoice: `inv-${i}`, amount: 10 * i }
  const answer =
    kind === "approve"
      ? i === 1
        ? ScriptedModel.toolCall("pay", invoice, `c${i}`)
        : i === 2
          ? ScriptedModel.toolCall("transfer", invoice, `c${i}`)
          : ScriptedModel.finalAnswer("paid and transferred")
      : i <= Number(count)
        ? ScriptedModel.toolCall(kind === "blind" ? "pay_blind" : "pay", invoice, `c${i}`)
        : ScriptedModel.finalAnswer(`paid ${count} invoices`)
  return Effect.as(Effect.sleep(config.modelMillis ?? 10), answer)
})

/** The journal, printing the markers of its commits; `listed` is done once the unfinished runs are listed. */
const marked = (journal: Journal.Service, listed: Deferred.Deferred<void>): Journal.Service => ({
  ...journal,
  unfinished: Effect.tap(journal.unfinished, () => Deferred.succeed(listed, undefined)),
  append: (runId, append) => {
    const intents = append.events.flatMap((e) => (e._tag === "tool.started" ? [e.callId] : []))
    return Effect.suspend(() => {
      for (const callId of intents) mark("before-intent", runId, callId)
      return journal.append(runId, append)
    }).pipe(
      Effect.tap(() =>
        Effect.sync(() => {
          for (const callId of intents) mark("intent-committed", runId, callId)
          if (append.result !== undefined) mark("result-committed", runId)
        })
      )
    )
  }
})

/**
 * An approval gate on the journal's approvals table, so that a person in another process
 * decides (R7): a request is put there (again, after a restart: it may be there already),
 * then its decision is polled for. The person lists and decides through the journal itself
 * (the `decide` mode), so this gate's own `decide` and `pending` are never used.
 */
const journalGate = (journal: Journal.Service): Approval.Gate => ({
  request: (request) =>
    Effect.gen(function* () {
      const { runId, callId } = request
      yield* journal
        .requestApproval({
          runId,
          callId,
          tool: request.tool,
          arguments: request.arguments as Schema.Json,
          requestedAt: request.requestedAt,
          expiresAt: request.expiresAt
        })
        .pipe(Effect.catchReason("JournalError", "Conflict", () => Effect.void))
      mark("awaiting-approval", runId, callId)
      while (true) {
        const decision = yield* journal.decision(runId, callId)
        if (Option.isSome(decision)) {
          const { by, reason } = decision.value
          return decision.value.decision === "approve"
            ? Approval.approved(by)
            : Approval.rejected(reason ?? "rejected", by)
        }
        yield* Effect.sleep(20)
      }
    }).pipe(Effect.orDie),
  decide: () => Effect.die("decided through the journal"),
  pending: Effect.succeed([])
})

const printResult = (result: RunResult.RunResult) =>
  mark(
    "result",
    JSON.stringify({
      runId: result.runId,
      status: result.status,
      stopReason: result.stopReason,
      pending: result.pendingActions.map((p) => p.callId),
      tags: result.timeline.map((e) => e._tag)
    })
  )

const options = { tools, time: { run: "2 minutes", approval: "1 minute" } } as const

const decideAll = (journal: Journal.Service, expect: number) =>
  Effect.gen(function* () {
    let pending = yield* journal.pendingApprovals()
    while (pending.length < expect) {
      yield* Effect.sleep(20)
      pending = yield* journal.pendingApprovals()
    }
    for (const { runId, callId } of pending) {
      yield* journal.decide({ runId, callId, decision: "approve", by: "ops", at: Date.now() })
      mark("decided", runId, callId)
    }
  })

const program = Effect.gen(function* () {
  // New runs start once the recovery has listed the unfinished ones, so that it leaves them to this process's own runs.
  const listed = yield* Deferred.make<void>()
  const journal = marked(yield* Journal.Journal, listed)
  mark("ready")
  if (config.decide !== undefined) return yield* decideAll(journal, config.decide.expect)
  const durable = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(
      Effect.provideService(Journal.Journal, journal),
      Effect.provideService(Approval.ApprovalGate, journalGate(journal))
    )
  const recovery =
    config.recover === true
      ? Effect.map(durable(Run.recover(options)), (all) => {
          for (const each of all) {
            if (each._tag === "Success") printResult(each.success)
            else mark("resume-error", JSON.stringify(each.failure))
          }
        })
      : Deferred.succeed(listed, undefined)
  const fresh = Effect.andThen(
    Deferred.await(listed),
    Effect.forEach(
      config.runs ?? [],
      (runId) => Effect.map(durable(Run.run({ ...options, goal: `run ${runId}`, runId })), printResult),
      { concurrency: "unbounded" }
    )
  )
  yield* Effect.all([recovery, fresh], { concurrency: 2, discard: true })
  mark("done")
})

Effect.runPromise(program.pipe(Effect.provide(Layer.merge(journalLayer(config.journal), model)))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
