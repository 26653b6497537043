/**
 * Crash a generated scenario at a commit barrier and resume it (R9, R3.8), for
 * `test/run/ResumeProperty.test.ts`: `observed` runs a case once on a journal and keeps
 * its commits, `barriersOf` and `sample` pick where to crash, `crashAndResume` kills the
 * run there and resumes it, and checks the result.
 *
 * What a resumed run is held to:
 *
 * (a) It ends in the status class the uncrashed run ended in: `ended` (completed,
 *     partial or failed: how far it got depends on time, which redoing lost work
 *     spends), `unknown_outcome`, or `cancelled`. A crash may turn an ended run into
 *     `unknown_outcome` only through a pending call the dead process had begun that the
 *     restart could not settle: in doubt with a tool that may act twice and has no
 *     decisive status query, or never taken up again (an idempotent write, which has no
 *     intent record, stopped before it ran again). And the runs may go apart after the
 *     restart (the world moved on in the dead process: a busy service's failures were
 *     spent there; lost work spends time again): then one may end `unknown_outcome` on
 *     a call the other never left in doubt (never started, or settled).
 * (b) Each ledgered side effect happened at most once; exactly once when the timeline
 *     says it succeeded; never when the timeline says it failed or never ran; and a call
 *     of unknown outcome is among the pending actions. A call of a tool that is not
 *     idempotent and has no status query was sent at most once in all.
 * (c) Its counters are `Counters.fold` of its timeline, and every request the restarted
 *     model got carried `RunLog.messages` of the fold of the timeline up to it.
 * (d) `Properties.checkScenario` holds on the resumed timeline, with the gate's records
 *     of both processes, except the invariants `relaxed` names (each with why).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Counters from "../../src/events/Counters.ts"
import * as Event from "../../src/events/Event.ts"
import * as RunLog from "../../src/events/RunLog.ts"
import * as Journal from "../../src/journal/Journal.ts"
import type * as Model from "../../src/model/Model.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as Properties from "../../src/testing/Properties.ts"
import { diesIn } from "./restart.ts"

/** What a commit held: its kind is that of the barrier that made it. */
export type Kind = "first" | "response" | "intent" | "result" | "approval" | "iteration" | "final"

export interface Barrier {
  readonly commit: number
  readonly when: "before" | "after"
  readonly kind: Kind
}

/** The scenario's tools that may act twice: their results are committed at once. */
const acting: ReadonlySet<string> = new Set(["submit", "pay", "pay_checked", "pay_undecidable", "wire"])

const kindOf = (events: ReadonlyArray<Event.Event>, n: number): Kind => {
  const last = events[events.length - 1]
  if (events.some((e) => e._tag === "run.finished")) return "final"
  if (n === 1) return "first"
  if (last?._tag === "tool.started") return "intent"
  if ((last?._tag === "tool.succeeded" || last?._tag === "tool.failed") && acting.has(last.name)) return "result"
  if (events.some((e) => e._tag === "approval.requested" || e._tag === "approval.decided")) return "approval"
  return last?._tag === "model.responded" ? "response" : "iteration"
}

/** A fresh in-memory journal, and one that records each commit's events on the way. */
const freshJournal = Effect.provide(Effect.service(Journal.Journal), Journal.layerMemory)

/** Runs a case once on a journal: its scenario, its result and the events of each commit. */
export const observed = (c: Properties.Case) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(0)
    const store = yield* freshJournal
    const batches: Array<ReadonlyArray<Event.Event>> = []
    const recording: Journal.Service = {
      ...store,
      append: (runId, batch) => {
        batches.push(batch.events)
        return store.append(runId, batch)
      }
    }
    const scenario = Properties.toScenario(c)
    const result = yield* Properties.runScenario(scenario).pipe(Effect.provideService(Journal.Journal, recording))
    return { scenario, result, batches }
  })

/** Every barrier of a run's commits, each before and after its commit. */
export const barriersOf = (batches: ReadonlyArray<ReadonlyArray<Event.Event>>): ReadonlyArray<Barrier> =>
  batches.flatMap((events, i) => {
    const kind = kindOf(events, i + 1)
    return [
      { commit: i + 1, when: "before", kind },
      { commit: i + 1, when: "after", kind }
    ]
  })

/** A small deterministic generator (mulberry32), seeded from the case. */
const generator = (seed: number) => {
  let a = seed >>> 0
  return (below: number): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below)
  }
}

/**
 * `n` barriers of `all`: the first from a kind drawn evenly among the kinds the run has
 * (so intents, results and approvals are crashed at as often as responses), the rest at
 * random; all of them when there are no more than `n`.
 */
export const sample = (all: ReadonlyArray<Barrier>, seed: number, n: number): ReadonlyArray<Barrier> => {
  if (all.length <= n) return all
  const random = generator(seed)
  const kinds = [...new Set(all.map((b) => b.kind))]
  const kind = kinds[random(kinds.length)]
  const ofKind = all.filter((b) => b.kind === kind)
  const chosen = new Set<Barrier>([ofKind[random(ofKind.length)] as Barrier])
  while (chosen.size < n) chosen.add(all[random(all.length)] as Barrier)
  return [...chosen]
}

/** The status classes of (a). */
const classOf = (status: RunResult.RunResult["status"]) =>
  status === "unknown_outcome" ? "unknown_outcome" : status === "cancelled" ? "cancelled" : "ended"

/** Tools that may act twice and cannot tell afterwards whether they did: a call in doubt stays unknown. */
const undecidable: ReadonlySet<string> = new Set(["pay", "pay_undecidable", "submit", "wire"])

/**
 * The invariants of `checkScenario` a resumed timeline is not held to, and why:
 *
 * - `R7 approvals` "approved, and its handler never ran": a call approved whose intent
 *   was committed when the process died is in doubt after the restart; without a status
 *   query it is never sent again (R3.8), and is pending instead (checked here).
 * - `R7 approvals` "the gate got N requests, the timeline has M": a request committed
 *   just before the process died may never have reached its gate, and the restarted
 *   run may end its wait (expired, or withdrawn as the batch stopped) before it puts it
 *   back; M - N must be those requests, each ended without a gate's decision.
 * - `R2.1 paid`: the restarted model answered only the restarted process, and an answer
 *   the dead process was given but had not committed is not on the timeline (the
 *   provider billed it; the log cannot know). `checkPaidPerProcess` bounds it instead.
 */
const relaxed = (v: Properties.Violation, pending: ReadonlySet<string>, unseen: number): boolean =>
  v.invariant === "R2.1 paid" ||
  (v.invariant === "R7 approvals" &&
    (([, gate, logged]) => Number(logged) - Number(gate) === unseen)(
      /^the gate got (\d+) requests, the timeline has (\d+)$/.exec(v.detail) ?? []
    )) ||
  (v.invariant === "R7 approvals" &&
    /^(\S+) was approved at \S+, and its handler never ran$/.test(v.detail) &&
    pending.has(v.detail.split(" ")[0] ?? ""))

/** What a model was paid for, in tokens. */
const paidBy = (scenario: Properties.Scenario) =>
  scenario.model.paid.reduce((sum, u) => sum + u.inputTokens + u.outputTokens, 0)

/**
 * R2.1 across the restart: the resumed timeline records every answer the restarted
 * process was given, and no answer that neither process was given.
 */
const checkPaidPerProcess = (
  first: Properties.Scenario,
  second: Properties.Scenario,
  resumed: RunResult.RunResult,
  label: string
) => {
  const recorded = resumed.timeline.reduce(
    (sum, e) =>
      sum +
      (e._tag === "model.responded" || e._tag === "model.failed"
        ? (e.usage?.inputTokens ?? 0) + (e.usage?.outputTokens ?? 0)
        : 0),
    0
  )
  assert.isAtLeast(recorded, paidBy(second), `${label}: the restarted process's answers are not all recorded`)
  assert.isAtMost(recorded, paidBy(first) + paidBy(second), `${label}: the timeline records answers never given`)
}

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

/** (b): what the world's ledgers and handlers saw, against the resumed timeline. */
const checkSideEffects = (scenario: Properties.Scenario, resumed: RunResult.RunResult, label: string) => {
  const { tools } = scenario
  const timeline = resumed.timeline
  const pending = new Set(resumed.pendingActions.map((p) => p.callId))
  const known = new Set(ofTag(timeline, "model.responded").flatMap((e) => e.callIds))
  const succeeded = new Set(ofTag(timeline, "tool.succeeded").map((e) => e.callId))
  // Ended without acting: failed, blocked, or stopped while no attempt of it was running.
  const ended = new Set(
    [
      ...ofTag(timeline, "tool.failed"),
      ...ofTag(timeline, "tool.blocked"),
      ...ofTag(timeline, "tool.interrupted").filter((e) => e.settlement === "cancelled")
    ].map((e) => e.callId)
  )
  for (const ledgered of [tools.submit, tools.pay, tools.payChecked, tools.payUndecidable]) {
    const name = ledgered.tool.name
    for (const entry of ledgered.ledger.entries) {
      assert.isTrue(
        known.has(entry.callId),
        `${label}: ${name} ${entry.callId} applied, and the timeline has no such call`
      )
    }
    for (const key of ledgered.calls.keys) {
      const callId = ledgered.calls.forKey(key)[0]?.callId ?? ""
      const applied = ledgered.ledger.count(key)
      assert.isAtMost(applied, 1, `${label}: ${name} ${key} applied ${applied} times`)
      if (succeeded.has(callId))
        assert.strictEqual(applied, 1, `${label}: ${name} ${callId} succeeded, applied ${applied} times`)
      else if (!pending.has(callId) && ended.has(callId)) {
        assert.strictEqual(applied, 0, `${label}: ${name} ${callId} failed, and was applied`)
      } else if (!pending.has(callId)) {
        assert.fail(`${label}: ${name} ${callId} neither ended nor is pending (the run ended ${resumed.stopReason})`)
      }
    }
  }
  for (const calls of [tools.submit.calls, tools.pay.calls, tools.wire.calls]) {
    for (const key of calls.keys)
      assert.strictEqual(calls.forKey(key).length, 1, `${label}: ${key} sent more than once`)
  }
}

/** (c): the counters and every conversation the restarted model was sent are folds of the timeline. */
const checkFolds = (resumed: RunResult.RunResult, sent: ReadonlyArray<string>) => {
  const timeline = resumed.timeline
  assert.deepStrictEqual(resumed.counters, Counters.snapshot(Counters.fold(timeline)), "the counters")
  const from = timeline.findIndex((e) => e._tag === "run.resumed")
  const requests = timeline.flatMap((e, i) => (e._tag === "model.requested" && i > from ? [i] : []))
  assert.strictEqual(requests.length, sent.length, "one model.requested per request the model got")
  requests.forEach((at, i) => {
    assert.strictEqual(sent[i], JSON.stringify(RunLog.messages(RunLog.fold(timeline.slice(0, at + 1)))), "sent")
  })
}

/** The gate's records of both processes, as one scenario's (a request lost with the process never reached the log). */
const bothGates = (first: Properties.Scenario, second: Properties.Scenario, timeline: ReadonlyArray<Event.Event>) => {
  const logged = new Set(ofTag(timeline, "approval.requested").map((e) => e.callId))
  const again = new Set(second.approvals.requests.map((r) => r.callId))
  const requests = [
    ...first.approvals.requests.filter((r) => logged.has(r.callId) && !again.has(r.callId)),
    ...second.approvals.requests
  ]
  const approvals: Properties.Approvals = {
    gate: second.approvals.gate,
    requests,
    delivered: [...first.approvals.delivered, ...second.approvals.delivered],
    withdrawn: [...first.approvals.withdrawn, ...second.approvals.withdrawn],
    pending: [...first.approvals.pending, ...second.approvals.pending]
  }
  return { ...second, approvals }
}

/**
 * Kills a case's run at `barrier` and resumes it from the journal, from the instant it
 * died, with the model and gate made anew; checks (a) to (d) against `uncrashed`.
 */
export const crashAndResume = (
  c: Properties.Case,
  barrier: Barrier,
  uncrashed: RunResult.RunResult,
  /** Sees the resumed result before it is checked (to print it while debugging). */
  inspect?: (resumed: RunResult.RunResult) => void
) =>
  Effect.gen(function* () {
    const where = `crashed ${barrier.when} commit ${barrier.commit} (${barrier.kind})`
    // Every run of the case starts at the same instant (the driver of the one before moved the clock on).
    yield* TestClock.setTime(0)
    const store = yield* freshJournal
    const first = Properties.toScenario(c)
    const faulty = FaultyJournal.make(store, { crashAt: { commit: barrier.commit, when: barrier.when } })
    // The process dies there: its run gives no result.
    yield* diesIn(faulty, Properties.runScenario(first).pipe(Effect.provideService(Journal.Journal, faulty.journal)))
    // The restarted process starts when the first one died: its driver had moved the clock on.
    yield* TestClock.setTime(faulty.crashedAt() ?? 0)
    const restarted = Properties.restart(first)
    const sent: Array<string> = []
    const service: Model.Model["Service"] = {
      generate: (request) => {
        sent.push(JSON.stringify(request.messages))
        return restarted.model.service.generate(request)
      }
    }
    const second = { ...restarted, model: { ...restarted.model, service } }
    const resumed = yield* Properties.resumeScenario(second).pipe(Effect.provideService(Journal.Journal, store))
    inspect?.(resumed)
    if (barrier.kind === "final" && barrier.when === "after") {
      // The result was committed: resuming gives it back, and it is the run's, as if nothing had died.
      assert.deepStrictEqual(resumed, uncrashed, `${where}: the stored result`)
      return { status: resumed.status, inDoubt: false }
    }
    const label = `${where}; uncrashed ${uncrashed.status}/${uncrashed.stopReason}, resumed ${resumed.status}/${resumed.stopReason}`

    // (a) the status class.
    const back = ofTag(resumed.timeline, "run.resumed")[0]
    const doubts = new Set(back?.inDoubt ?? [])
    const names = new Map(
      ofTag(resumed.timeline, "model.responded").flatMap((e) => Event.callsOf(e).map((c) => [c.callId, c.name]))
    )
    // A call the dead process began that the restart could not settle: in doubt with no decisive
    // status query, or never taken up again (an idempotent write without an intent record).
    const resumedAt = resumed.timeline.findIndex((e) => e._tag === "run.resumed")
    // Begun: an event of its own (an approval, an attempt) before the restart.
    const startedBefore = new Set(
      resumed.timeline.slice(0, Math.max(0, resumedAt)).flatMap((e) => Event.callIdOf(e) ?? [])
    )
    const attemptedAfter = new Set(
      resumed.timeline.slice(resumedAt + 1).flatMap((e) => (e._tag === "tool.started" ? [e.callId] : []))
    )
    const unknownByCrash = resumed.pendingActions.some(
      (p) =>
        (doubts.has(p.callId) && undecidable.has(names.get(p.callId) ?? "")) ||
        (startedBefore.has(p.callId) && !attemptedAfter.has(p.callId))
    )
    // The runs went apart (the world moved on in the dead process, time was spent again):
    // one of them met a call of unknown outcome the other never left in doubt.
    const startedIn = (r: RunResult.RunResult) =>
      new Set(ofTag(r.timeline, "model.responded").flatMap((e) => e.callIds))
    const pendingIn = (r: RunResult.RunResult) => new Set(r.pendingActions.map((p) => p.callId))
    const unreachedBy = (r: RunResult.RunResult, callIds: ReadonlySet<string>) => {
      const started = startedIn(r)
      const pending = pendingIn(r)
      return [...callIds].some((id) => !started.has(id) || !pending.has(id))
    }
    const same = classOf(resumed.status) === classOf(uncrashed.status)
    // Or the restarted run spent again the time the dead one had spent (a call in doubt run
    // again), and its deadline, a hard stop (R3.11), came before the unknown outcome could end
    // it; what is unknown is still pending (checked with the invariants below).
    const deadlineFirst = uncrashed.status === "unknown_outcome" && resumed.stopReason === "run_timeout"
    const allowed =
      (resumed.status === "unknown_outcome" && (unknownByCrash || unreachedBy(uncrashed, pendingIn(resumed)))) ||
      (uncrashed.status === "unknown_outcome" && unreachedBy(resumed, pendingIn(uncrashed))) ||
      deadlineFirst
    assert.isTrue(same || allowed, `${label}: another status class`)
    // A final answer the log kept ends the run as it did: the model is not asked again.
    const answered = resumed.timeline.findIndex(
      (e) => e._tag === "model.responded" && e.toolCalls.length === 0 && e.text !== ""
    )
    assert.isFalse(
      answered >= 0 && resumed.timeline.slice(answered).some((e) => e._tag === "model.requested"),
      `${label}: the model was asked again after its final answer`
    )
    if (resumed.status === "unknown_outcome") {
      assert.isAbove(resumed.pendingActions.length, 0, `${label}: unknown_outcome with nothing pending`)
    }

    // (b) side effects, (c) folds, (d) the invariants.
    checkSideEffects(first, resumed, label)
    checkFolds(resumed, sent)
    checkPaidPerProcess(first, second, resumed, label)
    const seen = new Set([...first.approvals.requests, ...second.approvals.requests].map((r) => r.callId))
    const unseen = ofTag(resumed.timeline, "approval.requested").filter((e) => !seen.has(e.callId))
    for (const request of unseen) {
      const decision = ofTag(resumed.timeline, "approval.decided").find((e) => e.callId === request.callId)
      assert.include(["withdrawn", "expired"], decision?.decision, `${label}: ${request.callId} decided with no gate`)
    }
    const violations = Properties.checkScenario(bothGates(first, second, resumed.timeline), resumed).filter(
      (v) => !relaxed(v, new Set(resumed.pendingActions.map((p) => p.callId)), unseen.length)
    )
    assert.deepStrictEqual(violations, [], `${label}: ${JSON.stringify(violations)}`)
    return { status: resumed.status, inDoubt: doubts.size > 0 }
  })
